/* The flow cache's table (internal/flowtable): an exact-match table of flows in an mmapable BPF
 * array whose elements are its slots, read with inlined array lookups. A BPF hash map lookup
 * is not inlined: several kernel function calls, each returning through the SRSO safe-RET
 * thunk on the test VM; this one is a few multiplies and compares, and reads at most
 * 2 x FLOW_BUCKET_SLOTS slot headers (one, and the action on the same cache line, for a
 * flow in the first slot of its bucket). With a flow's entry in the CPU's cache, a NAT hit
 * costs some 50 ns less than with the hash map; with hundreds of flows whose entries are
 * not, reading the entry from memory is most of a hit's cost whichever the table
 * (docs/architecture.md, section 7b).
 *
 * Slots come in buckets of FLOW_BUCKET_SLOTS consecutive slots; a flow lives in one of two
 * buckets chosen by a hash of its key under a secret seed, so flows chosen by someone who does
 * not know the seed (anyone on the Internet picks 5-tuples) cannot be aimed at one bucket.
 *
 * Writers are the learner (TC, on any CPU at once), the XDP program (removals) and xupfd
 * (through a mapping of the array): a slot's state word says whether it is free, being
 * written or live, and counts its incarnations. A writer claims a free slot with a
 * compare-and-swap (two writers never take one slot), writes key and flow, and publishes the
 * slot live with another; a reader reads the state, the key and the flow's action, and the
 * state again, and uses its copy only when the state has not moved (a seqlock): never a slot
 * half written, nor one removed and claimed again meanwhile. The loads are ordered as written
 * (x86-64 does not reorder loads with loads; barrier() keeps the compiler from doing so; BPF
 * has no read barrier, so xupfd refuses the flow cache elsewhere: flowCacheArch).
 * Removal is a compare-and-swap from live to free: of two removers of an entry, one only
 * succeeds and counts it. A writer that, its slot still being written, finds its key in
 * another slot live or being written frees its own without publishing it, so a key is live in
 * one slot at most at every moment, and a removal by key never misses it.
 *
 * The statistics are updated in place by every CPU forwarding the flow (atomic adds, and
 * last_seen a plain store): a reader whose slot is removed and claimed again between its
 * check and its update adds one packet to the next flow's counts, as a packet of a removed
 * hash map element did to the element's next user. */
#ifndef XUPF_FLOWTABLE_H
#define XUPF_FLOWTABLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Key of a cached flow: the IPv4 5-tuple and where its packets arrive. */
struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad;
	__u16 vlan_id;    /* the VLAN ID the packet arrived with; 0 for an untagged frame */
	__u32 ifindex;    /* the interface it arrived on; FLOW_FROM_UE for a UE's packet out of its
			   * tunnel; 0 in xupf_flow_seen's keys */
};

/* A cached flow: what to do to its packets (written by the learner before the slot is live,
 * never changed after), then its statistics. */
struct flow {
	__u32 ifindex;       /* out interface (one of the attached ones: xupf_tx_ports) */
	__u32 mtu;           /* its MTU: a longer packet goes to the kernel, which fragments or answers */
	__u8 dmac[6];
	__u8 smac[6];
	__be16 vlan_proto;   /* FLOW_VLAN_PUSH, FLOW_VLAN_REWRITE: ETH_P_8021Q or ETH_P_8021AD */
	__be16 vlan_tci;     /* FLOW_VLAN_PUSH, FLOW_VLAN_REWRITE: the tag to write */
	__u8 vlan_action;    /* enum flow_vlan_action */
	__u8 flags;          /* enum flow_flag bits */
	__u8 tos;            /* FLOW_F_DSCP: the DSCP (top six bits) to write; ECN stays the packet's */
	__u8 pad;
	__be16 nat_port;     /* FLOW_F_SNAT, FLOW_F_TO_UE: the port written */
	__u16 csum_l3;       /* ... the IPv4 header checksum's change (csum_delta32 of the address) */
	__be32 nat_addr;     /* ... the address written */
	__u16 csum_l4;       /* ... the TCP or UDP checksum's change (address and port) */
	__u16 epoch;         /* flow_epoch of the note it was learnt from: void once the epoch moves */
	__u64 packets;       /* IP packets and bytes forwarded, the first (learnt) one included */
	__u64 bytes;
	__u64 first_seen;    /* bpf_ktime_get_coarse_ns() when learnt */
	__u64 last_seen;     /* ... of the latest packet, to the flow clock's tick: aging compares it
			      * with the idle timeout */
};

/* The part of struct flow a reader copies under the seqlock: all but the statistics. */
#define FLOW_ACTION_SIZE __builtin_offsetof(struct flow, packets)

/* Room on the stack for the copy: a struct flow cut short of its statistics, which the
 * program reads and writes in the slot only. A whole struct flow would take 32 more bytes of
 * a frame the verifier bounds at 512. Read it as a struct flow (flow_act). */
struct flow_act_buf {
	__u64 w[FLOW_ACTION_SIZE / 8];
};

static __always_inline const struct flow *flow_act(const struct flow_act_buf *buf)
{
	return (const struct flow *)buf;
}

/* A slot's state word: the state in its low two bits, its incarnation above, which each claim
 * moves on. */
enum flow_slot_state {
	FLOW_SLOT_FREE = 0,    /* no entry (the key is a removed entry's, or zeros) */
	FLOW_SLOT_WRITING = 1, /* claimed: the key and flow are being written */
	FLOW_SLOT_LIVE = 2,    /* an entry */
};

#define FLOW_SLOT_STATE_MASK 3
#define FLOW_SLOT_INCARNATION 4

/* A slot of the table (96 bytes; internal/flowtable SlotSize): the key first, so that it and
 * the state word, what a lookup reads of a slot not its flow's, share a cache line. */
struct flow_slot {
	struct flow_key key;
	__u32 state;         /* enum flow_slot_state, and the incarnation */
	struct flow flow;
};

/* Slots per bucket (internal/flowtable BucketSlots). */
#define FLOW_BUCKET_SLOTS 8
/* Entries a key's first bucket holds before a new key may go to its second, the emptier of the
 * two (internal/keytable SpillAt): most lookups stop at the first. */
#define FLOW_SPILL_AT 6

/* The array's elements: the slots, then one whose first eight bytes count the entries, live or
 * being written (internal/flowtable Elements): the table holds cfg_max_flows at most, as a
 * hash map of as many entries did, whatever room its buckets have. */
#ifndef XUPF_FLOW_ELEMENTS
#define XUPF_FLOW_ELEMENTS (2 * FLOW_BUCKET_SLOTS + 1)  /* Load sizes it from flow_cache.max_flows */
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, XUPF_FLOW_ELEMENTS);
	__type(key, __u32);
	__type(value, struct flow_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_flows SEC(".maps");

/* The hash's secret (internal/flowtable Seed): a key's hash is h[0] + sum of h[j+1] * word j of
 * the key, mod 2^64, multiply-shift hashing of a vector, under which two keys collide with
 * probability 2^-32 at most; then murmur3's finaliser (flow_mix), since h is linear in each
 * word and patterned flows (a scan of ports) would have their buckets on a lattice. The first
 * bucket is the mixed hash's high half, the second its low half, each cut to cfg_flow_bits. */
struct flow_seed {
	__u64 h[6];
};

/* Set when the program is loaded: the seed kept pinned beside the table (a restarted daemon
 * reuses both) and log2 of the bucket count. */
volatile const struct flow_seed cfg_flow_seed = {};
volatile const __u32 cfg_flow_bits = 1;
volatile const __u64 cfg_max_flows = 1;  /* flow_cache.max_flows */

#ifndef barrier
#define barrier() asm volatile("" ::: "memory")
#endif

static __always_inline __u64 flow_mix(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* flow_buckets sets b1 and b2 to key's two buckets. A change here (or to FLOW_BUCKET_SLOTS,
 * FLOW_SPILL_AT) moves internal/flowtable Format on, so a pinned table is replaced. */
static __always_inline void flow_buckets(const struct flow_key *key, __u32 *b1, __u32 *b2)
{
	const __u32 *w = (const __u32 *)key;
	__u64 h = cfg_flow_seed.h[0] + cfg_flow_seed.h[1] * w[0] + cfg_flow_seed.h[2] * w[1] +
		  cfg_flow_seed.h[3] * w[2] + cfg_flow_seed.h[4] * w[3] + cfg_flow_seed.h[5] * w[4];

	h = flow_mix(h);
	*b1 = h >> (64 - cfg_flow_bits);
	*b2 = (__u32)h >> (32 - cfg_flow_bits);
}

/* flow_slot_index is the index of the i-th slot a lookup of a key with buckets b1 and b2
 * reads (i below 2 * FLOW_BUCKET_SLOTS). */
static __always_inline __u32 flow_slot_index(__u32 b1, __u32 b2, __u32 i)
{
	return i < FLOW_BUCKET_SLOTS ? b1 * FLOW_BUCKET_SLOTS + i
				     : b2 * FLOW_BUCKET_SLOTS + i - FLOW_BUCKET_SLOTS;
}

static __always_inline int flow_key_equal(const struct flow_key *a, const struct flow_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

static __always_inline __u32 flow_slot_state(const struct flow_slot *s)
{
	return *(volatile const __u32 *)&s->state;
}

/* flow_lookup returns the slot of key's live entry and sets *state to its state word, or
 * returns NULL; with act, it copies the entry's action there, read whole. Only the copy may
 * be trusted: the slot's own fields may belong to another flow by the time they are read. */
static __always_inline struct flow_slot *flow_lookup(const struct flow_key *key,
						     struct flow_act_buf *act, __u32 *state)
{
	__u32 b1, b2, i, idx, st;
	struct flow_slot *s;

	flow_buckets(key, &b1, &b2);
	for (i = 0; i < 2 * FLOW_BUCKET_SLOTS; i++) {
		idx = flow_slot_index(b1, b2, i);
		s = bpf_map_lookup_elem(&xupf_flows, &idx);
		if (!s)
			return NULL;
		st = flow_slot_state(s);
		if ((st & FLOW_SLOT_STATE_MASK) != FLOW_SLOT_LIVE)
			continue;
		barrier();
		if (!flow_key_equal(&s->key, key))
			continue;
		if (act)
			__builtin_memcpy(act, &s->flow, FLOW_ACTION_SIZE);
		barrier();
		if (flow_slot_state(s) != st)
			return NULL;  /* removed while read: a miss */
		*state = st;
		return s;
	}
	return NULL;
}

/* flow_entries returns the count of the entries (the element after the last bucket). */
static __always_inline __u64 *flow_entries(void)
{
	__u32 idx = FLOW_BUCKET_SLOTS << cfg_flow_bits;

	return bpf_map_lookup_elem(&xupf_flows, &idx);
}

/* flow_release counts an entry gone, or one reserved and not added. */
static __always_inline void flow_release(__u64 *n)
{
	__sync_fetch_and_add(n, -1);
}

/* flow_free frees s, read live in state st. Returns 0 when this call freed it, -1 when
 * another writer did first. */
static __always_inline int flow_free(struct flow_slot *s, __u32 st)
{
	__u32 free = (st & ~FLOW_SLOT_STATE_MASK) | FLOW_SLOT_FREE;
	__u64 *n;

	if (__sync_val_compare_and_swap(&s->state, st, free) != st)
		return -1;
	n = flow_entries();
	if (n)
		flow_release(n);
	return 0;
}

/* flow_delete removes key's entry. Returns 0 when this call removed it. */
static __always_inline int flow_delete(const struct flow_key *key)
{
	__u32 st;
	struct flow_slot *s = flow_lookup(key, NULL, &st);

	return s ? flow_free(s, st) : -1;
}

/* flow_bucket_used returns how many slots of bucket b are not free. */
static __always_inline __u32 flow_bucket_used(__u32 b)
{
	__u32 i, idx, n = 0;
	struct flow_slot *s;

	for (i = 0; i < FLOW_BUCKET_SLOTS; i++) {
		idx = b * FLOW_BUCKET_SLOTS + i;
		s = bpf_map_lookup_elem(&xupf_flows, &idx);
		if (s && (flow_slot_state(s) & FLOW_SLOT_STATE_MASK) != FLOW_SLOT_FREE)
			n++;
	}
	return n;
}

/* flow_elsewhere tells whether a slot of key's buckets other than own holds key, live or being
 * written (a key half written that looks like key errs on the safe side: the insert yields). */
static __always_inline int flow_elsewhere(const struct flow_key *key, __u32 own, __u32 b1, __u32 b2)
{
	__u32 i, idx;
	struct flow_slot *s;

	for (i = 0; i < 2 * FLOW_BUCKET_SLOTS; i++) {
		idx = flow_slot_index(b1, b2, i);
		if (idx == own)
			continue;
		s = bpf_map_lookup_elem(&xupf_flows, &idx);
		if (!s)
			return 0;
		if ((flow_slot_state(s) & FLOW_SLOT_STATE_MASK) == FLOW_SLOT_FREE)
			continue;
		barrier();
		if (flow_key_equal(&s->key, key))
			return 1;
	}
	return 0;
}

#define FLOW_E2BIG 7   /* what flow_table_insert returns, negated, when key's buckets are full */
#define FLOW_EEXIST 17 /* ... when key is there already */

/* flow_table_insert adds f under key: in a free slot of key's first bucket while that holds
 * fewer than FLOW_SPILL_AT entries, else of the emptier of its two buckets. Returns 0,
 * -FLOW_E2BIG when the table holds cfg_max_flows entries or that bucket has no free slot, or
 * -FLOW_EEXIST when key is there (or being added by another learner at the same time: both
 * may yield, and the flow's next packet learns it). */
static __always_inline long flow_table_insert(const struct flow_key *key, const struct flow *f)
{
	__u32 b1, b2, n1, n2, b, i, idx, st, claim;
	struct flow_slot *s;
	__u64 *n = flow_entries();

	if (!n)
		return -FLOW_E2BIG;
	if (__sync_fetch_and_add(n, 1) >= cfg_max_flows) {
		flow_release(n);
		return -FLOW_E2BIG;
	}
	flow_buckets(key, &b1, &b2);
	n1 = flow_bucket_used(b1);
	n2 = flow_bucket_used(b2);
	b = b1;
	if (n1 == FLOW_BUCKET_SLOTS || (n1 >= FLOW_SPILL_AT && n2 < n1))
		b = b2;
	for (i = 0; i < FLOW_BUCKET_SLOTS; i++) {
		idx = b * FLOW_BUCKET_SLOTS + i;
		s = bpf_map_lookup_elem(&xupf_flows, &idx);
		if (!s)
			break;
		st = flow_slot_state(s);
		if ((st & FLOW_SLOT_STATE_MASK) != FLOW_SLOT_FREE)
			continue;
		claim = st + FLOW_SLOT_INCARNATION + FLOW_SLOT_WRITING;
		if (__sync_val_compare_and_swap(&s->state, st, claim) != st)
			continue;  /* another writer took it first */
		__builtin_memcpy(&s->key, key, sizeof(*key));
		__builtin_memcpy(&s->flow, f, sizeof(*f));
		/* A locked add of nothing, a full barrier: flow_elsewhere reads the other slots
		 * only once the key is visible to the other writers, so of two learners of one key
		 * at least one sees the other's. The check comes before the slot is live, so that
		 * a duplicate is never live, not even briefly: a remover by key (a FIN, the daemon
		 * on a conntrack death) would take it and miss the other. */
		__sync_fetch_and_add(&s->state, 0);
		/* Only its claimer moves a slot being written: plain stores publish or free it
		 * (x86-64 keeps stores in order, after the key and flow's). */
		if (flow_elsewhere(key, idx, b1, b2)) {
			*(volatile __u32 *)&s->state = claim - FLOW_SLOT_WRITING + FLOW_SLOT_FREE;
			flow_release(n);
			return -FLOW_EEXIST;
		}
		*(volatile __u32 *)&s->state = claim - FLOW_SLOT_WRITING + FLOW_SLOT_LIVE;
		return 0;
	}
	flow_release(n);
	return -FLOW_E2BIG;
}

#endif
