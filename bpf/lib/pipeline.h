/* The rules a user packet goes through, whichever way it travels (apply_pdr): PDR selection,
 * the traffic class, the FAR's verdict, QERs, the policer and usage, in that order in both
 * directions. uplink.h and downlink.h keep only what differs: parsing, the key lookup,
 * decapsulation and encapsulation. */
#ifndef XUPF_PIPELINE_H
#define XUPF_PIPELINE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include "types.h"
#include "gtpu.h"
#include "rules.h"
#include "pdr_select.h"
#include "classifier.h"
#include "policer.h"
#include "qos.h"
#include "urr.h"
#include "buffer.h"

/* Where a user packet comes to the rules from. */
enum pkt_from {
	PKT_FROM_WIRE = 0,   /* an interface's (a cached reply translated back included) */
	PKT_FROM_KERNEL = 1, /* sent to a UE by the kernel, into the return device (flow_return) */
};

/* A user packet as the rules see it: the IP packet a UE sent or is sent (on the uplink the
 * inner one, still in its tunnel). */
struct pkt {
	struct xdp_md *ctx;
	struct ethhdr *eth;    /* the received frame's Ethernet header */
	struct iphdr *ip;      /* the user packet: its header and ihl_len bytes are in the frame */
	void *data_end;
	__u32 ihl_len;
	__u32 len;             /* its total length: what QERs, the policer and usage count */
	enum direction dir;
	struct psc_qfi psc;    /* uplink: the PDU Session Container's QFI; downlink PSC_NONE */
	enum pkt_from from;    /* a constant in each caller: the verifier keeps one branch */
	struct pkt_meta meta;  /* what one module learns for the ones after it */
};

/* apply_pdr's answer for a packet whose TTL runs out here: not an error, the kernel's to
 * answer (ICMP Time Exceeded), and not charged. Drop reasons are positive. */
#define PKT_EXPIRING (-1)

/* apply_pdr applies the rules of ref (a TEID's or a UE address's) to p. It returns 0 with
 * *pdrp and *farp set when the packet is to be forwarded, and has then charged it to the
 * QERs, the policer, usage and the URR's quota; PKT_BUFFER with *pdrp set when the FAR
 * buffers it (for buffer_packet, uncharged: it is charged when it is forwarded);
 * PKT_EXPIRING when its TTL runs out; otherwise the drop reason. Only a packet that will be
 * forwarded is charged: the TTL check comes before the QERs, and a packet the policer refuses
 * gets back what the QERs charged. The usage before QoS (PDR_U_BEFORE_QOS) counts what passed
 * the FAR and the quota. */
static __always_inline int apply_pdr(struct pkt *p, const struct rule_ref *ref,
				     const struct pdr **pdrp, const struct far **farp)
{
	struct quota *quota = NULL;
	const struct quota_list *quotas = NULL;
	const struct far *far = NULL;
	const struct pdr *pdr;
	int reason;

	pdr = select_pdr(ref, p->ip, p->ihl_len, p->data_end, p->dir, p->psc, &far);
	if (!pdr)
		return DROP_NO_PDR_MATCH;
	p->meta.cls = classify_packet(p->eth, p->ip, p->ihl_len, p->len, p->data_end, p->dir);
	if (!far)
		return DROP_FAR_DROP;
	if (far->action != FAR_FORWARD) {
		/* Off the fast path: a FAR that does not just forward drops, or buffers. */
		reason = far_drop_reason(far);
		if (!reason)
			reason = buffer_verdict(p->ctx, far, pdr, p->len);
		if (reason == PKT_BUFFER)
			*pdrp = pdr;
		if (reason)
			return reason;
	}
	/* The kernel routes the UEs' addresses into the return device: a packet it sent there
	 * that the FAR forwards without a tunnel would only come round again. It is dropped
	 * before it is charged: the one the downlink handed the kernel at N6 (route_ipv4) was
	 * charged there, and is charged once. */
	if (p->from == PKT_FROM_KERNEL && !(far->flags & FAR_F_OHC))
		return DROP_NO_ROUTE;
	if (p->ip->ttl <= 1)
		return PKT_EXPIRING;
	if (pdr->usage & PDR_U_QUOTA) {
		if (pdr->usage & PDR_U_QUOTAS) {
			quotas = quota_list_of(pdr);
			if (!quotas)
				return DROP_INTERNAL;
			if (quota_list_used_up(quotas, p->dir))
				return DROP_URR_QUOTA;
		} else {
			quota = quota_of(pdr);
			if (!quota)
				return DROP_INTERNAL;
			if (quota_used_up(quota, p->dir))
				return DROP_URR_QUOTA;
		}
	}
	if (pdr->usage & PDR_U_BEFORE_QOS)
		count_usage(&pdr->counter_before_qos, p->len);
	reason = qos_and_police(pdr, p->meta.cls, p->len);
	if (reason)
		return reason;
	count_usage(&pdr->counter, p->len);
	if (quota)
		quota_charge(quota, p->dir, p->len);
	else if (quotas)
		quota_list_charge(quotas, p->dir, p->len);
	*pdrp = pdr;
	*farp = far;
	return 0;
}

#endif
