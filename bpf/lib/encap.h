/* GTP-U tunnel ends. Outer header creation: a FAR with FAR_F_OHC puts the packet into a
 * GTP-U tunnel, downlink toward a gNB and uplink toward another UPF (N9) or the SMF. Both
 * directions use this one encapsulation, so source ports, ToS and header layout are the same
 * on every tunnel. Outer header removal: decap_gpdu takes an uplink G-PDU out of its tunnel. */
#ifndef XUPF_ENCAP_H
#define XUPF_ENCAP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parse.h"
#include "csum.h"
#include "eth.h"
#include "gtpu.h"
#include "types.h"
#include "route.h"
#include "stats.h"

/* Outer UDP source ports are drawn from the dynamic range so that a receiver's RSS spreads
 * the flows of one tunnel over its queues (TS 29.281 5.1 allows any source port). */
#define GTPU_SPORT_BASE 0xC000
#define GTPU_SPORT_MASK 0x3FFF

#define IPV4_TOS_ECN 0x03  /* the ECN bits of the ToS octet (RFC 3168); the rest is DSCP */

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
 * is not zero) in front of the inner IPv4 packet of inner_len bytes. The outer ToS is the
 * inner one (inner_tos), or with FAR_F_TLM the FAR's DSCP over the inner ECN bits. */
static __always_inline int encap_gpdu(struct xdp_md *ctx, const struct far *far, __u8 qfi,
				      __u8 inner_tos, __u16 sport, __u32 inner_len)
{
	__u32 ext_len = qfi ? sizeof(struct gtpu_opt) + sizeof(struct gtpu_psc) : 0;
	__u32 encap_len = sizeof(struct iphdr) + sizeof(struct udphdr) +
			  sizeof(struct gtpu_hdr) + ext_len;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct eth_words eth_hdr;
	struct gtpu_hdr *gtp;
	struct udphdr *udp;
	struct iphdr *ip;
	__u8 tos = inner_tos;  /* uniform model: the outer header carries the inner DSCP/ECN */

	if (far->flags & FAR_F_TLM)
		tos = (far->tos & ~IPV4_TOS_ECN) | (inner_tos & IPV4_TOS_ECN);

	if ((void *)(eth + 1) > data_end)
		return DROP_INTERNAL;  /* the caller checked the inner header after it */
	eth_hdr = eth_load(eth);
	if (bpf_xdp_adjust_head(ctx, -(int)encap_len))
		return DROP_HEADROOM;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;

	eth = data;
	ip = (void *)(eth + 1);
	udp = (void *)(ip + 1);
	gtp = (void *)(udp + 1);
	if ((void *)(gtp + 1) > data_end)
		return DROP_INTERNAL;  /* encap_len bytes were just added before the inner header */
	eth_store(eth, eth_hdr);

	ipv4_set_ver_tos(ip, tos);
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
			return DROP_INTERNAL;  /* encap_len counts the container */
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

/* decap_gpdu removes everything between the Ethernet header and payload, keeping the
 * Ethernet header (route_ipv4 rewrites its addresses). Returns 0 or a drop reason. */
static __always_inline int decap_gpdu(struct xdp_md *ctx, struct ethhdr *eth, void *payload)
{
	struct eth_words eth_hdr = eth_load(eth);
	int hdr_len = payload - (void *)(eth + 1);
	void *data, *data_end;

	if (bpf_xdp_adjust_head(ctx, hdr_len))
		return DROP_HEADROOM;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return DROP_INTERNAL;  /* the inner IPv4 header (checked) follows */
	eth_store(eth, eth_hdr);
	return 0;
}

/* tunnel_ipv4 forwards the IPv4 packet that follows the Ethernet header at the start of ctx
 * into far's tunnel: the UPF is an IP hop for the UE's traffic, so the inner TTL drops by one
 * (the caller has checked it is above 1, and the header's length); the outer source port
 * hashes the inner flow. Then it routes the outer packet, whose TTL is its own. st, tx_stat
 * and kernel_stat are route_ipv4's. Returns the XDP action. */
static __always_inline int tunnel_ipv4(struct xdp_md *ctx, const struct far *far, __u8 qfi,
				       struct stats *st, enum stat tx_stat, enum stat kernel_stat)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u32 ports, inner_len;
	__u16 sport;
	__u8 tos;
	int reason;

	if ((void *)(ip + 1) > data_end)
		return drop(DROP_INTERNAL);  /* the caller checked this header */
	ports = l4_ports(ip, ip->ihl * 4, data_end);
	sport = GTPU_SPORT_BASE |
		(flow_hash(ip->saddr, ip->daddr, ip->protocol, ports) & GTPU_SPORT_MASK);
	ipv4_decrease_ttl(ip);
	tos = ip->tos;
	inner_len = bpf_ntohs(ip->tot_len);

	reason = encap_gpdu(ctx, far, qfi, tos, sport, inner_len);
	if (reason)
		return drop(reason);
	return route_ipv4(ctx, ROUTE_BUILT, far, st, tx_stat, kernel_stat);
}

#endif
