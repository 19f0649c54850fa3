/* Per-CPU counters: what happened to packets (enum stat) and why they were dropped
 * (enum drop_reason). Go sums the CPUs and reads the names from BTF, as for drop reasons. */
#ifndef XUPF_STATS_H
#define XUPF_STATS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "drop_reasons.h"

enum stat {
	STAT_UL_RX = 0,      /* G-PDUs to a local GTP-U address */
	STAT_UL_TX,          /* uplink packets decapsulated (tunnelled again with OHC), redirected */
	STAT_UL_KERNEL,      /* uplink packets decapsulated (tunnelled again with OHC), to the kernel */
	STAT_DL_RX,          /* IPv4 packets to a known UE */
	STAT_DL_TX,          /* downlink packets forwarded (encapsulated with OHC), redirected */
	STAT_DL_KERNEL,      /* downlink packets forwarded (encapsulated with OHC), to the kernel */
	STAT_ECHO_REPLIED,   /* GTP-U Echo Requests answered from the datapath */
	STAT_PASS,           /* packets that are not ours, handed to the kernel untouched */
	STAT_FIB_NO_NEIGH,   /* of the *_KERNEL ones: next hop not resolved yet */
	STAT_FIB_TTL,        /* of the *_KERNEL ones: TTL expired, the kernel answers ICMP */
	STAT_CLS_HIT,        /* packets the traffic classifier put in a class */
	STAT_CLS_MISS,       /* packets it found no class for */
	STAT_FLOW_HIT,       /* packets of a cached flow, forwarded by the flow cache (flowcache.h) */
	STAT_FLOW_MISS,      /* IPv4 TCP and UDP packets of no cached flow, handed to the kernel (also pass) */
	STAT_FLOW_LEARNED,   /* flows the learner added to the cache */
	STAT_FLOW_FULL,      /* flows the learner could not add: the cache is full; the kernel keeps them */
	STAT_FLOW_TRACKED,   /* flows the learner left to the kernel because conntrack tracks them */
	STAT_UL_SPREAD,      /* G-PDUs sent to another CPU (spread.h); ul_rx counts them there */
	STAT_BUFFERED,       /* packets a buffering FAR handed to xupfd (dropped here, kept there) */
	STAT_REPLAYED,       /* buffered packets xupfd ran through again to forward them (counted again as *_rx) */
	STAT_FLOW_STALE,     /* flows the learner dropped: the kernel decided before a change xupfd processed */
	STAT_FLOW_ENDED,     /* cached flows a TCP FIN or RST removed */
	STAT_FLOW_VOIDED,    /* cached flows of an earlier epoch (a kernel change) a packet removed */
	STAT_MAX,
};

/* A CPU's counters, all in one element: a forwarded packet is counted twice (received, then
 * sent), and with one element the packet looks its CPU's counters up once (stats_here) and
 * touches one cache line for both, where an element per counter took a lookup each. */
struct stats {
	__u64 n[STAT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_drops SEC(".maps");

/* stats_here returns this CPU's counters (NULL only if the map were empty), for a packet
 * that counts more than once (stats_add). */
static __always_inline struct stats *stats_here(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&xupf_stats, &zero);
}

/* stats_add counts s in st, this CPU's counters (stats_here). */
static __always_inline void stats_add(struct stats *st, enum stat s)
{
	if (st && s < STAT_MAX)
		st->n[s] += 1; /* per-CPU: no atomic needed */
}

/* count_stat counts s, for a packet that counts once. */
static __always_inline void count_stat(enum stat s)
{
	stats_add(stats_here(), s);
}

/* drop counts reason and returns XDP_DROP, so call sites read "return drop(...)". A
 * subprogram, not inlined: some thirty-five sites call it, each off the path of a forwarded packet,
 * and inlined they put a lookup apiece between the forwarding code's instructions, which then
 * spread over more cache lines (the common case's program is some 600 instructions and 3 KB
 * of JIT image longer with it inlined). */
static __noinline int drop(enum drop_reason reason)
{
	__u32 key = reason;
	__u64 *v = bpf_map_lookup_elem(&xupf_drops, &key);

	if (v)
		*v += 1;
	return XDP_DROP;
}

#endif
