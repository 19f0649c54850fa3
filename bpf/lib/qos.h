/* QER enforcement: gate status and maximum bit rates of the PDR's QERs (TS 29.244 5.5). The
 * rate counts the inner IP packet (total length) in both directions, as usage does. */
#ifndef XUPF_QOS_H
#define XUPF_QOS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "rules.h"
#include "meter.h"
#include "drop_reasons.h"

#ifndef XUPF_MAX_METERS
#define XUPF_MAX_METERS (4 * XUPF_MAX_SESSIONS)
#endif

/* MBR meters, one per QER and direction; the daemon allocates the slots per session, so the
 * PDRs of a session that name one QER (its AMBR) share its meter. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_METERS);
	__type(key, __u32);
	__type(value, struct meter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_meters SEC(".maps");

/* Each CPU's credit of each token bucket of xupf_meters, by the same slot. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XUPF_MAX_METERS);
	__type(key, __u32);
	__type(value, struct meter_credit);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_meter_credits SEC(".maps");

/* meter_slot_charge runs meter_pass on a meter slot, with c the CPU's credit of it (token
 * bucket) and *now the packet's clock: a subprogram, so that the four meters of a PDR share
 * one copy of the algorithm. A missing slot passes. */
static __noinline int meter_slot_charge(__u32 slot, struct meter_credit *c, __u32 len, __u64 *now)
{
	struct meter *m = bpf_map_lookup_elem(&xupf_meters, &slot);

	return m ? meter_pass(m, c, len, now) : 1;
}

/* meter_slot_pass is meter_slot_charge, but a token bucket's packet that its CPU's credit
 * covers is paid inline: no call, no lookup of the shared meter. */
static __always_inline int meter_slot_pass(__u32 slot, __u32 len, __u64 *now)
{
	struct meter_credit *c = NULL;

	if (cfg_meter_algo == METER_TOKEN_BUCKET) {
		c = bpf_map_lookup_elem(&xupf_meter_credits, &slot);
		if (!c)
			return 1;
		if (meter_spend(c, len))
			return 1;
	}
	return meter_slot_charge(slot, c, len, now);
}

static __noinline void meter_slot_refund(__u32 slot, __u32 len)
{
	struct meter *m = bpf_map_lookup_elem(&xupf_meters, &slot);

	if (m)
		meter_refund(m, len);
}

/* qos_refund gives back what qos_check charged pdr's meters for a packet of len bytes that
 * is dropped after all (by the policer). */
static __always_inline void qos_refund(const struct pdr *pdr, __u32 len)
{
	__u32 n = pdr->nmeters;
	int i;

	for (i = 0; i < PDR_MAX_METERS; i++) {
		if (i >= n)
			break;
		meter_slot_refund(pdr->meters[i], len);
	}
}

/* qos_check returns 0 when the packet of len bytes passes every QER of pdr, else the drop
 * reason; *now is the packet's clock (meter_time). A packet refused by one meter is refunded
 * to those it passed before: a packet must pass them all, and only a forwarded packet is
 * charged. */
static __always_inline int qos_check(const struct pdr *pdr, __u32 len, __u64 *now)
{
	__u32 n = pdr->nmeters;
	int i, j;

	if (pdr->gate_closed)
		return DROP_QER_GATE_CLOSED;
	if (!n)
		return 0;
	for (i = 0; i < PDR_MAX_METERS; i++) {
		if (i >= n)
			break;
		if (!meter_slot_pass(pdr->meters[i], len, now)) {
			for (j = 0; j < i; j++)
				meter_slot_refund(pdr->meters[j], len);
			return DROP_QER_MBR;
		}
	}
	return 0;
}

#endif
