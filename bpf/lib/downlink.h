/* Downlink (N6 -> N3): IPv4 to a UE -> rules of the UE -> push outer IPv4/UDP/GTP-U (and a
 * PDU Session Container when the PDR has a QFI) -> route the outer packet toward the gNB. */
#ifndef XUPF_DOWNLINK_H
#define XUPF_DOWNLINK_H

#include "parse.h"
#include "gtpu.h"
#include "rules.h"
#include "classify.h"
#include "classifier.h"
#include "route.h"
#include "stats.h"

/* Outer UDP source ports are drawn from the dynamic range so that a receiver's RSS spreads
 * the flows of one tunnel over its queues (TS 29.281 5.1 allows any source port). */
#define GTPU_SPORT_BASE 0xC000
#define GTPU_SPORT_MASK 0x3FFF

/* flow_hash mixes the inner flow's addresses, protocol and ports (murmur3's finaliser). */
static __always_inline __u32 flow_hash(__u32 saddr, __u32 daddr, __u32 proto, __u32 ports)
{
	__u32 h = saddr ^ (daddr * 0x9E3779B1u) ^ (ports * 0x85EBCA6Bu) ^ proto;

	h ^= h >> 16;
	h *= 0x85EBCA6Bu;
	h ^= h >> 13;
	h *= 0xC2B2AE35u;
	h ^= h >> 16;
	return h;
}

/* encap_gpdu pushes outer IPv4, UDP and GTP-U headers (plus a PDU Session Container when qfi
 * is not zero) in front of the inner IPv4 packet of inner_len bytes. */
static __always_inline int encap_gpdu(struct xdp_md *ctx, const struct far *far, __u8 qfi,
				      __u8 tos, __u16 sport, __u32 inner_len)
{
	__u32 ext_len = qfi ? sizeof(struct gtpu_opt) + sizeof(struct gtpu_psc) : 0;
	__u32 encap_len = sizeof(struct iphdr) + sizeof(struct udphdr) +
			  sizeof(struct gtpu_hdr) + ext_len;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, eth_copy;
	struct gtpu_hdr *gtp;
	struct udphdr *udp;
	struct iphdr *ip;

	if ((void *)(eth + 1) > data_end)
		return DROP_HEADROOM;
	__builtin_memcpy(&eth_copy, eth, sizeof(eth_copy));
	if (bpf_xdp_adjust_head(ctx, -(int)encap_len))
		return DROP_HEADROOM;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;

	eth = data;
	ip = (void *)(eth + 1);
	udp = (void *)(ip + 1);
	gtp = (void *)(udp + 1);
	if ((void *)(gtp + 1) > data_end)
		return DROP_HEADROOM;
	__builtin_memcpy(eth, &eth_copy, sizeof(*eth));

	ip->version = 4;
	ip->ihl = 5;
	ip->tos = tos;
	ip->tot_len = bpf_htons(encap_len + inner_len);
	ip->id = 0;
	ip->frag_off = bpf_htons(IPV4_DF);
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = far->local_addr;
	ip->daddr = far->peer_addr;
	ip->check = 0;
	ip->check = ipv4_csum(ip);

	udp->source = bpf_htons(sport);
	udp->dest = bpf_htons(GTPU_PORT);
	udp->len = bpf_htons(encap_len - sizeof(struct iphdr) + inner_len);
	udp->check = 0;  /* allowed over IPv4 (RFC 768), and what GTP-U peers expect */

	gtp->flags = GTPU_FLAGS_V1_PT;
	gtp->type = GTPU_G_PDU;
	gtp->length = bpf_htons(ext_len + inner_len);
	gtp->teid = far->teid;
	if (qfi) {
		struct gtpu_opt *opt = (void *)(gtp + 1);
		struct gtpu_psc *psc = (void *)(opt + 1);

		if ((void *)(psc + 1) > data_end)
			return DROP_HEADROOM;
		gtp->flags |= GTPU_FLAG_E;
		opt->seq = 0;
		opt->npdu = 0;
		opt->next_ext = GTPU_EXT_PDU_SESSION_CONTAINER;
		psc->len = 1;
		psc->pdu_type = PDU_TYPE_DL_SESSION_INFO << 4;
		psc->qfi = qfi & PSC_QFI_MASK;
		psc->next_ext = GTPU_EXT_NONE;
	}
	return 0;
}

static __always_inline int handle_downlink(struct xdp_md *ctx, struct ethhdr *eth,
					   struct iphdr *ip, const struct rule_ref *ref,
					   void *data_end)
{
	struct pkt_meta meta = {};
	__u32 ihl_len, tot_len, ports;
	struct pdr *pdr;
	struct far *far;
	__u16 sport;
	__u8 qfi, tos;
	int reason;

	count_stat(STAT_DL_RX);
	ihl_len = ipv4_hdr_len(ip, data_end);
	if (!ihl_len)
		return drop(DROP_MALFORMED_DL_IP);
	tot_len = bpf_ntohs(ip->tot_len);
	if (tot_len < ihl_len || tot_len > (__u32)(data_end - (void *)ip))
		return drop(DROP_MALFORMED_DL_IP);

	pdr = select_pdr(ref, ip, ihl_len, data_end, 0, 0, 0);
	if (!pdr)
		return drop(DROP_NO_PDR_MATCH);
	if (cfg_cls_words) {
		struct cls_pkt cp;

		cls_pkt_fill(&cp, eth, ip, ihl_len, data_end, CLS_DIR_DOWNLINK);
		meta.class_id = classify_traffic(&cp);
		count_class(meta.class_id, tot_len);
	}
	far = far_of(pdr);
	if (!far || far->action != FAR_ENCAP)
		return drop(DROP_FAR_DROP);
	if (ip->ttl <= 1) {
		/* The kernel answers with ICMP Time Exceeded toward the sender. */
		count_stat(STAT_FIB_TTL);
		count_stat(STAT_DL_KERNEL);
		return XDP_PASS;
	}

	ports = l4_ports(ip, ihl_len, data_end);
	sport = GTPU_SPORT_BASE |
		(flow_hash(ip->saddr, ip->daddr, ip->protocol, ports) & GTPU_SPORT_MASK);
	ipv4_decrease_ttl(ip);  /* the UPF is an IP hop for the UE's traffic */
	tos = ip->tos;          /* uniform model: the outer header carries the inner DSCP/ECN */
	qfi = pdr->qfi;
	count_usage(pdr, tot_len);

	reason = encap_gpdu(ctx, far, qfi, tos, sport, tot_len);
	if (reason)
		return drop(reason);
	return route_ipv4(ctx, 0, STAT_DL_TX, STAT_DL_KERNEL);
}

#endif
