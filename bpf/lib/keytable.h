/* Exact-match tables for the per-packet keys (the uplink TEID, the downlink UE address): a
 * two-choice bucketized hash table in an mmapable BPF array, written by the daemon through
 * the mapping (internal/keytable). A BPF hash map lookup costs ~26 ns here; this one is an
 * inlined array lookup, a multiply and a few compares, and reads at most two cache lines.
 *
 * A bucket is KEY_BUCKET_SLOTS 64-bit words: the key (as on the wire) in the low half, its
 * ref (an index into xupf_refs, rules.h) in the high half. Each word is read whole, with one
 * load, because the daemon changes a slot with one atomic 64-bit store: a packet sees the
 * slot before or after a change, never a key with another key's ref. Key 0 marks a free slot,
 * so it is never looked up (TEID 0 is signalling; the UE address 0.0.0.0 is refused). */
#ifndef XUPF_KEYTABLE_H
#define XUPF_KEYTABLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Slots per bucket: 8 words, one 64-byte cache line (internal/keytable BucketSlots). */
#define KEY_BUCKET_SLOTS 8

struct key_bucket {
	__u64 slot[KEY_BUCKET_SLOTS];
};

/* A key table's map; the daemon sets max_entries (the bucket count) at load and writes the
 * buckets through an mmap of it. */
struct key_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct key_bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
};

/* The hash's secret: bucket i of key k is (key_mix(k) * mul_i + add_i) >> (64 - bits),
 * multiply-add-shift hashing with random odd multipliers. Keys an SMF chooses cannot be aimed at one bucket
 * without it, and a lookup reads two buckets at most whatever the keys. */
struct key_seed {
	__u64 mul1, add1, mul2, add2;
};

/* Set when the program is loaded: the seed kept with the pinned tables (a restarted daemon
 * reuses it) and log2 of each table's bucket count. Constants to the verifier, so hashing
 * costs two multiplies and shifts by immediates. */
volatile const struct key_seed cfg_key_seed = {};
volatile const __u32 cfg_ul_key_bits = 1;
volatile const __u32 cfg_dl_key_bits = 1;

/* KEY_NONE: no such key. A ref is an array index below it. */
#define KEY_NONE 0xffffffffu

/* key_in_bucket returns key's ref if bucket holds it, else KEY_NONE. */
static __always_inline __u32 key_in_bucket(void *table, __u32 bucket, __be32 key)
{
	const struct key_bucket *b = bpf_map_lookup_elem(table, &bucket);
	int i;

	if (!b)
		return KEY_NONE;
#pragma unroll
	for (i = 0; i < KEY_BUCKET_SLOTS; i++) {
		/* bpfel: the low half of the little-endian word is the key's four bytes. */
		__u64 w = *(volatile const __u64 *)&b->slot[i];

		if ((__u32)w == key)
			return w >> 32;
	}
	return KEY_NONE;
}

/* key_mix is murmur3's 32-bit finaliser (internal/keytable's mix): a bijection that scatters
 * keys with a pattern (sequential TEIDs, a pool's addresses) before the linear hash, which
 * alone maps such keys onto a lattice where both buckets of many keys coincide and fill. */
static __always_inline __u32 key_mix(__u32 k)
{
	k ^= k >> 16;
	k *= 0x85ebca6bu;
	k ^= k >> 13;
	k *= 0xc2b2ae35u;
	k ^= k >> 16;
	return k;
}

/* key_lookup returns the ref of key in table (a map of struct key_bucket with 1 << bits
 * buckets), or KEY_NONE. */
static __always_inline __u32 key_lookup(void *table, __u32 bits, __be32 key)
{
	__u64 k;
	__u32 ref;

	if (!key)
		return KEY_NONE;
	k = key_mix(key);
	ref = key_in_bucket(table, (k * cfg_key_seed.mul1 + cfg_key_seed.add1) >> (64 - bits), key);
	if (ref != KEY_NONE)
		return ref;
	return key_in_bucket(table, (k * cfg_key_seed.mul2 + cfg_key_seed.add2) >> (64 - bits), key);
}

#endif
