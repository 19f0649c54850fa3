/* Downlink (N6 -> N3): IPv4 to a UE -> rules of the UE -> with outer header creation, push
 * outer IPv4/UDP/GTP-U (and a PDU Session Container when the PDR has a QFI) and route the
 * outer packet toward the gNB; without, route the packet as it is. */
#ifndef XUPF_DOWNLINK_H
#define XUPF_DOWNLINK_H

#include "parse.h"
#include "encap.h"
#include "pipeline.h"
#include "route.h"
#include "stats.h"

static __always_inline int handle_downlink(struct xdp_md *ctx, struct ethhdr *eth,
					   struct iphdr *ip, const struct rule_ref *ref,
					   void *data_end, enum pkt_from from)
{
	struct pkt p = { .ctx = ctx, .eth = eth, .ip = ip, .data_end = data_end, .dir = DIR_DOWNLINK,
			 .psc = PSC_NONE, .from = from };
	struct stats *st = stats_here();
	const struct pdr *pdr = NULL;
	const struct far *far = NULL;
	int verdict;

	stats_add(st, STAT_DL_RX);
	p.ihl_len = ipv4_hdr_len(ip, data_end);
	if (!p.ihl_len)
		return drop(DROP_MALFORMED_DL_IP);
	p.len = bpf_ntohs(ip->tot_len);
	if (p.len < p.ihl_len || p.len > (__u32)(data_end - (void *)ip))
		return drop(DROP_MALFORMED_DL_IP);

	verdict = apply_pdr(&p, ref, &pdr, &far);
	if (verdict == PKT_EXPIRING) {
		/* The kernel answers with ICMP Time Exceeded toward the sender. */
		stats_add(st, STAT_FIB_TTL);
		stats_add(st, STAT_DL_KERNEL);
		return XDP_PASS;
	}
	if (verdict == PKT_BUFFER)
		return pdr ? buffer_packet(ctx, pdr->counter, p.len) : drop(DROP_INTERNAL);
	if (verdict)
		return drop(verdict);
	if (!pdr || !far)
		return drop(DROP_INTERNAL);  /* apply_pdr sets both when it forwards */
	if (far->flags & FAR_F_OHC)
		return tunnel_ipv4(ctx, far, pdr->qfi, st, STAT_DL_TX, STAT_DL_KERNEL);
	/* No tunnel (the UE is reached some other way, e.g. a local route): plain IP forwarding. */
	return route_ipv4(ctx, ROUTE_FORWARD, NULL, st, STAT_DL_TX, STAT_DL_KERNEL);
}

#endif
