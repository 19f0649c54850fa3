/* Uplink (N3 -> N6, or N9): GTP-U to a local address -> rules of the TEID -> remove the outer
 * headers -> route the inner packet, or with outer header creation push a new outer
 * IPv4/UDP/GTP-U toward the FAR's peer (another UPF, the SMF) and route that. Also answers
 * GTP-U Echo Requests and hands Error Indications to the kernel, for xupfd. */
#ifndef XUPF_UPLINK_H
#define XUPF_UPLINK_H

#include "parse.h"
#include "gtpu.h"
#include "encap.h"
#include "pipeline.h"
#include "route.h"
#include "stats.h"
#include "errind.h"
#include "flowcache.h"

static __always_inline int handle_gpdu(struct xdp_md *ctx, struct ethhdr *eth,
				       struct gtpu_hdr *gtp, void *data_end)
{
	struct pkt p = { .ctx = ctx, .eth = eth, .data_end = data_end, .dir = DIR_UPLINK };
	struct stats *st = stats_here();
	const struct rule_ref *ref;
	struct gtpu_gpdu g;
	struct iphdr *inner;
	const struct pdr *pdr = NULL;
	const struct far *far = NULL;
	int rc, verdict;

	stats_add(st, STAT_UL_RX);
	rc = gtpu_parse_gpdu(gtp, data_end, &g);
	if (rc)
		return drop(rc);

	inner = g.payload;
	if ((void *)inner + 1 > data_end)
		return drop(DROP_MALFORMED_INNER);
	if (inner->version != 4)
		return drop(DROP_INNER_NOT_IPV4);
	if ((void *)(inner + 1) > data_end)
		return drop(DROP_MALFORMED_INNER);
	p.len = bpf_ntohs(inner->tot_len);
	if (inner->ihl < 5 || p.len < inner->ihl * 4 || p.len > (__u32)(data_end - (void *)inner))
		return drop(DROP_MALFORMED_INNER);
	p.ip = inner;
	p.ihl_len = inner->ihl * 4;
	p.psc = g.psc;

	ref = ul_ref(gtp->teid);
	if (!ref) {
		errind_event(ctx, gtp->teid);
		return drop(DROP_UNKNOWN_TEID);
	}
	/* A UE may only send as itself: a spoofed source would reach the data network in the
	 * session's name (and be billed to it). */
	if (ref->ue_addr && inner->saddr != ref->ue_addr)
		return drop(DROP_SPOOFED_SOURCE);
	verdict = apply_pdr(&p, ref, &pdr, &far);
	if (verdict == PKT_BUFFER)
		return pdr ? buffer_packet(ctx, pdr->counter, p.len) : drop(DROP_INTERNAL);
	if (verdict > 0)
		return drop(verdict);

	rc = decap_gpdu(ctx, eth, g.payload);
	if (rc)
		return drop(rc);
	/* With a tunnel the packet leaves in it, without a PDU Session Container (the incoming
	 * one, if any, went with the outer headers). An expiring packet takes the route below
	 * instead: route_ipv4 hands it to the kernel decapsulated, which answers ICMP Time
	 * Exceeded to the UE, as for any uplink packet. */
	if (verdict == 0 && far && (far->flags & FAR_F_OHC))
		return tunnel_ipv4(ctx, far, QFI_NONE, st, STAT_UL_TX, STAT_UL_KERNEL);
	/* The kernel treats the traffic of the FAR's network instance on N6 (NAT, filtering):
	 * the flow cache forwards what it has learnt of it, the kernel the rest. An override of
	 * the default is on the FAR's line, read just above. */
	if (cfg_flowcache == FLOWCACHE_KERNEL_N6 && verdict == 0 && far && far_kernel_n6(far))
		return flow_from_ue(ctx, st);
	return route_ipv4(ctx, ROUTE_FROM_UE, NULL, st, STAT_UL_TX, STAT_UL_KERNEL);
}

/* refuse_gtpu takes an IPv4/UDP packet to a local GTP-U address that arrived on an interface
 * without the n3 role (the data network, say): GTP-U is dropped, never decapsulated; anything
 * else (PFCP, fragments the kernel reassembles) is the kernel's, as on N3. */
static __always_inline int refuse_gtpu(struct iphdr *ip, void *data_end)
{
	__u32 ihl_len = ipv4_hdr_len(ip, data_end);
	struct udphdr *udp = (void *)ip + ihl_len;

	if (ihl_len && !(ip->frag_off & bpf_htons(IPV4_OFFSET)) && (void *)(udp + 1) <= data_end &&
	    udp->dest == bpf_htons(GTPU_PORT))
		return drop(DROP_GTPU_NOT_N3);
	count_stat(STAT_PASS);
	return XDP_PASS;
}

/* handle_gtpu takes an IPv4/UDP packet addressed to a local GTP-U address. */
static __always_inline int handle_gtpu(struct xdp_md *ctx, struct ethhdr *eth,
				       struct iphdr *ip, void *data_end)
{
	struct gtpu_hdr *gtp;
	__u32 ihl_len;
	int reason;

	reason = gtpu_header(ip, data_end, &ihl_len, &gtp);
	if (reason == GTPU_NOT_OURS) {
		count_stat(STAT_PASS);
		return XDP_PASS;
	}
	if (reason)
		return drop(reason);

	switch (gtp->type) {
	case GTPU_G_PDU:
		return handle_gpdu(ctx, eth, gtp, data_end);
	case GTPU_ECHO_REQUEST:
		return gtpu_echo_reply(ctx, ihl_len);
	case GTPU_ERROR_INDICATION:
		/* xupfd reads it from its GTP-U socket and reports it to the SMF (ERIR): rare, and
		 * checked against the session's tunnels there. */
		count_stat(STAT_PASS);
		return XDP_PASS;
	default:
		return drop(DROP_GTP_MSG_TYPE);
	}
}

#endif
