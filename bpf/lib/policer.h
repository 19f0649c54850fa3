/* The policer: a contract per traffic class (the classifier's class id), PASS, DROP or LIMIT
 * (a meter with rate and burst), and a default contract under class id 0 for packets with no
 * class or a class without a contract. It needs no QER: it polices whatever the classifier
 * classifies (session traffic that matched a PDR, while classes exist). A contract is one
 * hash entry, replaced whole by one update: a reader
 * sees the old contract or the new one, never a LIMIT without its rate. */
#ifndef XUPF_POLICER_H
#define XUPF_POLICER_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "meter.h"
#include "drop_reasons.h"

#ifndef XUPF_MAX_CONTRACTS
#define XUPF_MAX_CONTRACTS 10241  /* every class (XUPF_MAX_CLASSES) and the default */
#endif

enum police_action {
	POLICE_PASS = 0,
	POLICE_DROP = 1,
	POLICE_LIMIT = 2,
};

/* The key of the default contract. */
#define POLICE_DEFAULT_CLASS 0

/* Load-time switch: the daemon loads the policer only while a contract exists and classes do
 * (the class ids come from the classifier); off, the verifier drops it, and packets of a
 * classifier without contracts cost no contract lookups. */
volatile const __u32 cfg_policer = 0;

/* Not preallocated: a replaced element is freed only after the packets that may still read it
 * are done (RCU), rather than going straight back to a free list for the next update. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_CONTRACTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct meter);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_contracts SEC(".maps");

/* What each contract let through and dropped, per CPU, by class id (the daemon creates the
 * entry with the contract). */
struct police_counters {
	__u64 passed_packets;
	__u64 passed_bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, XUPF_MAX_CONTRACTS);
	__type(key, __u32);
	__type(value, struct police_counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_police_stats SEC(".maps");

/* police applies the contract of class_id to a packet of len bytes: 0 to go on, else
 * DROP_POLICER. Without any contract (not even a default one) everything passes. */
static __always_inline int police(__u32 class_id, __u32 len)
{
	__u32 key = class_id;
	struct police_counters *c;
	struct meter *m;
	int pass = 1;

	m = bpf_map_lookup_elem(&xupf_contracts, &key);
	if (!m) {
		key = POLICE_DEFAULT_CLASS;
		m = bpf_map_lookup_elem(&xupf_contracts, &key);
		if (!m)
			return 0;
	}
	if (m->action == POLICE_DROP)
		pass = 0;
	else if (m->action == POLICE_LIMIT)
		pass = meter_pass(m, len, meter_now());
	c = bpf_map_lookup_elem(&xupf_police_stats, &key);
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

#endif
