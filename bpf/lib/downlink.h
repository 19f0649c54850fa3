/* Downlink (N6 -> N3): IPv4 to a UE -> rules of the UE -> with outer header creation, push
 * outer IPv4/UDP/GTP-U (and a PDU Session Container when the PDR has a QFI) and route the
 * outer packet toward the gNB; without, route the packet as it is. */
#ifndef XUPF_DOWNLINK_H
#define XUPF_DOWNLINK_H

#include "parse.h"
#include "encap.h"
#include "rules.h"
#include "pdr_select.h"
#include "classifier.h"
#include "policer.h"
#include "qos.h"
#include "route.h"
#include "stats.h"

static __always_inline int handle_downlink(struct xdp_md *ctx, struct ethhdr *eth,
					   struct iphdr *ip, const struct rule_ref *ref,
					   void *data_end)
{
	struct pkt_meta meta = {};
	__u32 ihl_len, tot_len;
	struct pdr *pdr;
	struct far *far;
	int reason;

	count_stat(STAT_DL_RX);
	ihl_len = ipv4_hdr_len(ip, data_end);
	if (!ihl_len)
		return drop(DROP_MALFORMED_DL_IP);
	tot_len = bpf_ntohs(ip->tot_len);
	if (tot_len < ihl_len || tot_len > (__u32)(data_end - (void *)ip))
		return drop(DROP_MALFORMED_DL_IP);

	pdr = select_pdr(ref, ip, ihl_len, data_end, DIR_DOWNLINK, PSC_NONE);
	if (!pdr)
		return drop(DROP_NO_PDR_MATCH);
	if (cfg_cls_words) {
		struct cls_pkt cp;

		cls_pkt_fill(&cp, eth, ip, ihl_len, data_end, DIR_DOWNLINK);
		meta.class_id = classify_traffic(&cp);
		count_class(meta.class_id, tot_len);
	}
	far = far_of(pdr);
	reason = far_drop_reason(far);
	if (reason)
		return drop(reason);
	if (ip->ttl <= 1) {
		/* The kernel answers with ICMP Time Exceeded toward the sender. */
		count_stat(STAT_FIB_TTL);
		count_stat(STAT_DL_KERNEL);
		return XDP_PASS;
	}
	reason = qos_check(pdr, tot_len);
	if (reason)
		return drop(reason);
	/* The policer comes last, so that only packets that will be forwarded use its tokens;
	 * one it refuses gives back what the QERs charged. */
	if (cfg_policer) {
		reason = police(meta.class_id, tot_len);
		if (reason) {
			qos_refund(pdr, tot_len);
			return drop(reason);
		}
	}
	count_usage(pdr, tot_len);
	if (far->flags & FAR_F_OHC)
		return tunnel_ipv4(ctx, far, pdr->qfi, STAT_DL_TX, STAT_DL_KERNEL);
	/* No tunnel (the UE is reached some other way, e.g. a local route): plain IP forwarding. */
	return route_ipv4(ctx, ROUTE_FORWARD, STAT_DL_TX, STAT_DL_KERNEL);
}

#endif
