/* Rule lookup: TEID (uplink) or UE address (downlink) -> rule_ref -> PDR slot -> FAR slot.
 * One key table lookup per packet whatever the number of sessions (keytable.h); refs, PDR and
 * FAR slots are array indexes that the daemon allocates per session. */
#ifndef XUPF_RULES_H
#define XUPF_RULES_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "types.h"
#include "keytable.h"
#include "drop_reasons.h"

/* Default table sizes; the daemon sets the real ones from its configuration at load time. */
#ifndef XUPF_MAX_SESSIONS
#define XUPF_MAX_SESSIONS 100000
#endif
#ifndef XUPF_MAX_PDRS
#define XUPF_MAX_PDRS (2 * XUPF_MAX_SESSIONS)
#endif

/* Key tables (keytable.h): the uplink TEID and the downlink UE address -> index into
 * xupf_refs. The daemon sizes them at load (a power of two, at most half full). */
struct key_table xupf_ul_keys SEC(".maps");
struct key_table xupf_dl_keys SEC(".maps");

/* What each key leads to. A key is repointed at a freshly written ref, never at one being
 * rewritten, so a packet reads a whole rule_ref. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct rule_ref);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_refs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_PDRS);
	__type(key, __u32);
	__type(value, struct pdr);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_pdrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_PDRS);
	__type(key, __u32);
	__type(value, struct far);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_fars SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XUPF_MAX_PDRS);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_usage SEC(".maps");

/* Direct-mapped caches in front of the key tables: slot key & mask holds a copy of the
 * rule_ref of one key of rule set 0 (the common case: one PDR, no classification), with the
 * key itself in the copy's pdr.far, which rule set 0 never reads (pdr_select.h takes the FAR
 * from the rule_ref). A hit reads one cache line, the slot, where the key table reads its
 * bucket and then xupf_refs. A pool's UE addresses are consecutive, a slot each; xupfd draws
 * TEIDs at random but takes one whose slot is free (pfcp allocator.prefer); a key whose
 * slot holds another (a collision, an SMF's choice) takes the key table, which stays the
 * source of truth. The daemon (internal/keytable Direct) writes a copy, then its key; it
 * clears the key before it rewrites a copy or hands the slot to another key, and waits the
 * grace in between. The reader loads the key before the copy (x86-64 keeps loads in order,
 * barrier() keeps the compiler from reordering; elsewhere xupfd writes no slot, so every
 * lookup misses). */
struct direct_cache {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rule_ref);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
};

struct direct_cache xupf_ul_direct SEC(".maps");
struct direct_cache xupf_dl_direct SEC(".maps");

/* Set at load: each cache's slot count less one (a power of two less one). */
volatile const __u32 cfg_ul_direct_mask = 0;
volatile const __u32 cfg_dl_direct_mask = 0;

/* Set per program variant: 0 compiles the caches out. A hit's pointer is into another map
 * than xupf_refs, so the verifier walks everything after the lookup twice; the variants with
 * SDF fields or traffic classes would then pass its limit of a million instructions, and off
 * x86-64 xupfd writes no slot. The caches hold rule set 0 only, so the SDF variants' sets
 * mostly miss them anyway. */
volatile const __u32 cfg_direct = 1;

#ifndef barrier
#define barrier() asm volatile("" ::: "memory")
#endif

/* direct_ref returns the copy in cache of key's rule_ref, or NULL when its slot holds
 * another key (or none). */
static __always_inline const struct rule_ref *direct_ref(void *cache, __u32 mask, __be32 key)
{
	__u32 i = bpf_ntohl(key) & mask;
	const struct rule_ref *r;

	if (!cfg_direct)
		return NULL;
	r = bpf_map_lookup_elem(cache, &i);

	/* Key 0 (never looked up: keytable.h) marks a free slot. */
	if (!r || !key || *(volatile const __be32 *)&r->pdr.far != key)
		return NULL;
	barrier();
	return r;
}

/* ref_at returns xupf_refs[ref]; KEY_NONE is past the end of the array, so NULL. */
static __always_inline const struct rule_ref *ref_at(__u32 ref)
{
	return bpf_map_lookup_elem(&xupf_refs, &ref);
}

/* ul_ref returns the rules of an uplink TEID, NULL for an unknown one. */
static __always_inline const struct rule_ref *ul_ref(__be32 teid)
{
	const struct rule_ref *r = direct_ref(&xupf_ul_direct, cfg_ul_direct_mask, teid);

	if (r)
		return r;
	return ref_at(key_lookup(&xupf_ul_keys, cfg_ul_key_bits, teid));
}

/* dl_ref returns the rules of a downlink UE address, NULL for an unknown one. */
static __always_inline const struct rule_ref *dl_ref(__be32 ue_addr)
{
	const struct rule_ref *r = direct_ref(&xupf_dl_direct, cfg_dl_direct_mask, ue_addr);

	if (r)
		return r;
	return ref_at(key_lookup(&xupf_dl_keys, cfg_dl_key_bits, ue_addr));
}

static __always_inline struct pdr *pdr_at(__u32 slot)
{
	return bpf_map_lookup_elem(&xupf_pdrs, &slot);
}

static __always_inline struct far *far_of(const struct pdr *pdr)
{
	__u32 slot = pdr->far;

	return bpf_map_lookup_elem(&xupf_fars, &slot);
}

/* far_drop_reason returns 0 when far forwards, buffers (BUFF), drains (FORW after BUFF) or
 * drops the first packet for a notification (DROP with NOCP): buffer.h decides what then; else the reason to drop: DROP or an action this datapath does
 * not know drops; a FAR toward Access without a tunnel has its own reason, so that packets the
 * control plane has no tunnel for yet are told apart from those it meant to drop. */
static __always_inline int far_drop_reason(const struct far *far)
{
	switch (far->action) {
	case FAR_FORWARD:
	case FAR_BUFFER:
	case FAR_DRAIN:
	case FAR_DROP_NOTIFY:
		return 0;
	case FAR_ACCESS_NO_TUNNEL:
		return DROP_FAR_ACCESS_NO_TUNNEL;
	default:
		return DROP_FAR_DROP;
	}
}

/* count_usage adds a packet of bytes to the usage counter in *slot (a PDR's counter or its
 * counter_before_qos). The slot is passed where it lies, in the PDR: an inlined array lookup
 * reads its key through the pointer, and a copy on the stack would put a store and a load
 * between the PDR's line and the counter's on every packet's path. */
static __always_inline void count_usage(const __u32 *slot, __u32 bytes)
{
	struct counters *c = bpf_map_lookup_elem(&xupf_usage, slot);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

#endif
