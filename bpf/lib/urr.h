/* Usage reporting in the datapath: only what cannot wait for the daemon. The daemon reads
 * the PDRs' counters and decides every report itself (thresholds, periods, time); the
 * datapath enforces volume quotas, because a quota polled from user space would overrun by
 * whatever arrives between two polls. A PDR with one quota reads it directly; one with
 * several (free5GC's URRs before and after QoS) reads their list, and stops at the first
 * used up. */
#ifndef XUPF_URR_H
#define XUPF_URR_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "rules.h"

#ifndef XUPF_MAX_QUOTAS
#define XUPF_MAX_QUOTAS XUPF_MAX_PDRS
#endif

/* Volume quotas, one per URR with a quota; the daemon allocates the slots per session, so
 * every PDR naming the URR spends the one budget. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_QUOTAS);
	__type(key, __u32);
	__type(value, struct quota);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_quotas SEC(".maps");

/* The quota lists of PDRs with several quotas (PDR_U_QUOTAS), in slots the daemon takes
 * from the quota slots' numbering (so sized alike). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_QUOTAS);
	__type(key, __u32);
	__type(value, struct quota_list);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_quota_lists SEC(".maps");

static __always_inline struct quota *quota_of(const struct pdr *pdr)
{
	__u32 slot = pdr->quota;

	return bpf_map_lookup_elem(&xupf_quotas, &slot);
}

static __always_inline const struct quota_list *quota_list_of(const struct pdr *pdr)
{
	__u32 slot = pdr->quota;

	return bpf_map_lookup_elem(&xupf_quota_lists, &slot);
}

/* quota_used_up reports whether q leaves nothing for a packet in direction dir: its
 * direction's volume or the total is at its limit. It reads without a lock and the packet is
 * charged later (quota_charge), so each CPU may pass one packet more than the quota holds:
 * the overrun is below one packet per CPU. */
static __always_inline int quota_used_up(const struct quota *q, enum direction dir)
{
	/* volatile: read each once, as other CPUs add to them */
	__u64 ul = *(volatile const __u64 *)&q->used[QUOTA_UL];
	__u64 dl = *(volatile const __u64 *)&q->used[QUOTA_DL];

	if (dir == DIR_UPLINK ? ul >= q->limit[QUOTA_UL] : dl >= q->limit[QUOTA_DL])
		return 1;
	return ul + dl >= q->limit[QUOTA_TOTAL];
}

/* quota_charge spends len bytes of q in direction dir: an atomic add, since every CPU spends
 * the one budget. */
static __always_inline void quota_charge(struct quota *q, enum direction dir, __u32 len)
{
	__sync_fetch_and_add(&q->used[dir == DIR_UPLINK ? QUOTA_UL : QUOTA_DL], len);
}

/* quota_list_used_up is quota_used_up for a PDR with several quotas: whether any leaves
 * nothing for the packet (a missing slot counts as used up: nothing passes unbudgeted).
 * Each quota overruns as a single one does. */
static __always_inline int quota_list_used_up(const struct quota_list *l, enum direction dir)
{
	__u32 i;

	for (i = 0; i < PDR_MAX_QUOTAS && i < l->n; i++) {
		__u32 slot = l->slots[i];
		struct quota *q = bpf_map_lookup_elem(&xupf_quotas, &slot);

		if (!q || quota_used_up(q, dir))
			return 1;
	}
	return 0;
}

/* quota_list_charge spends len bytes of each quota of l. */
static __always_inline void quota_list_charge(const struct quota_list *l, enum direction dir, __u32 len)
{
	__u32 i;

	for (i = 0; i < PDR_MAX_QUOTAS && i < l->n; i++) {
		__u32 slot = l->slots[i];
		struct quota *q = bpf_map_lookup_elem(&xupf_quotas, &slot);

		if (q)
			quota_charge(q, dir, len);
	}
}

#endif
