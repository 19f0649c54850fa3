/* The policer: a contract per traffic class (the classifier's class id), PASS, DROP or LIMIT
 * (a meter with rate and burst), and a default contract under class id 0 for packets with no
 * class or a class without a contract. It needs no QER: it polices whatever the classifier
 * classifies (session traffic that matched a PDR, while classes exist).
 *
 * The packet finds its contract through its class entry (classifier.h: cls_class.contract,
 * the buffer's no-class entry for the default), so a contract costs array lookups, no hash.
 * A contract is never changed in place: a new one is written to a fresh xupf_contracts slot
 * and the class entries that point to it come with the next classifier buffer, swapped in
 * whole, so a reader sees the old contract or the new one, never a LIMIT without its rate. */
#ifndef XUPF_POLICER_H
#define XUPF_POLICER_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "meter.h"
#include "qos.h"
#include "drop_reasons.h"
#include "classifier.h"

#ifndef XUPF_MAX_CONTRACTS
#define XUPF_MAX_CONTRACTS 10241  /* every class (XUPF_MAX_CLASSES) and the default */
#endif
/* Contract slots beyond one per contract: a replaced contract's slot rests behind these
 * before another contract gets it, while packets of the old buffer may still use it. */
#ifndef XUPF_CONTRACT_SPARES
#define XUPF_CONTRACT_SPARES 1024
#endif

enum police_action {
	POLICE_PASS = 0,
	POLICE_DROP = 1,
	POLICE_LIMIT = 2,
};

/* Load-time switch: the daemon loads the policer only while a contract exists and classes do
 * (the class ids come from the classifier); off, the verifier drops it, and packets of a
 * classifier without contracts cost no contract lookups. */
volatile const __u32 cfg_policer = 0;

/* Contracts by slot: a fresh slot, written whole, for every new or changed contract. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_CONTRACTS + XUPF_CONTRACT_SPARES);
	__type(key, __u32);
	__type(value, struct meter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_contracts SEC(".maps");

/* Each CPU's credit of each LIMIT contract's token bucket, by the contract's slot. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XUPF_MAX_CONTRACTS + XUPF_CONTRACT_SPARES);
	__type(key, __u32);
	__type(value, struct meter_credit);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_contract_credits SEC(".maps");

/* What each contract let through and dropped, per CPU, by a slot the daemon gives the
 * class's contract for its life (kept when the contract changes; zeroed with a new one). */
struct police_counters {
	__u64 passed_packets;
	__u64 passed_bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XUPF_MAX_CONTRACTS + XUPF_CONTRACT_SPARES);
	__type(key, __u32);
	__type(value, struct police_counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_police_stats SEC(".maps");

/* police applies the contract of class cls (NULL: no class) to a packet of len bytes at the
 * packet's clock *now (meter_time): 0 to go on, else DROP_POLICER. Without any contract (not
 * even a default one) everything passes. */
static __always_inline int police(const struct cls_class *cls, __u32 len, __u64 *now)
{
	struct meter_credit *credit = NULL;
	struct police_counters *c;
	struct meter *m;
	__u32 key;
	int pass = 1;

	if (!cls || !cls->contract)
		cls = cls_no_class();
	if (!cls || !cls->contract)
		return 0;
	key = cls->contract - 1;
	m = bpf_map_lookup_elem(&xupf_contracts, &key);
	if (!m)
		return 0;
	if (m->action == POLICE_DROP)
		pass = 0;
	else if (m->action == POLICE_LIMIT) {
		if (cfg_meter_algo == METER_TOKEN_BUCKET) {
			credit = bpf_map_lookup_elem(&xupf_contract_credits, &key);
			if (!credit)
				return 0;
		}
		pass = meter_pass(m, credit, len, now);
	}
	c = bpf_map_lookup_elem(&xupf_police_stats, &cls->police_slot);
	if (c) {
		if (pass) {
			c->passed_packets += 1;
			c->passed_bytes += len;
		} else {
			c->dropped_packets += 1;
			c->dropped_bytes += len;
		}
	}
	return pass ? 0 : DROP_POLICER;
}

/* qos_and_police runs a packet of len bytes, of class cls, through pdr's QERs (qos_check)
 * and, while the policer is on, its class's contract: 0 to go on, else the drop reason. The
 * policer comes last, so that only packets that will be forwarded use its tokens; one it
 * refuses gives back what the QERs charged. */
static __always_inline int qos_and_police(const struct pdr *pdr, const struct cls_class *cls, __u32 len)
{
	__u64 now = METER_NO_TIME; /* read by the first meter that needs it, if any */
	int reason = qos_check(pdr, len, &now);

	if (reason || !cfg_policer)
		return reason;
	reason = police(cls, len, &now);
	if (reason)
		qos_refund(pdr, len);
	return reason;
}

#endif
