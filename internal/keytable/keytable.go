// Package keytable is the datapath's exact-match table for 32-bit keys (the uplink TEID, the
// downlink UE address): a two-choice bucketized hash table laid out in the memory of a BPF
// array, which the XDP program reads (bpf/lib/keytable.h) while this package writes it.
//
// A bucket is BucketSlots 64-bit words, one cache line; a word holds a key in its low 32 bits
// and the key's ref (an index into the refs array) in its high 32 bits. A key lives in one of
// two buckets chosen by a seeded hash, so a lookup reads at most two cache lines whatever the
// number of keys, and keys chosen by someone who does not know the seed (a hostile SMF) cannot
// crowd out other keys' buckets. Key 0 marks a free slot (TEID 0 is GTP-U signalling and the
// UE address 0.0.0.0 is refused), so it is never stored. An entry never moves: every change
// is one atomic 64-bit store, and a reader sees a slot before or after it, never half of it.
//
// This package knows nothing of BPF: the datapath hands it the mapped words.
package keytable

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"sync/atomic"
)

// BucketSlots is the number of keys a bucket holds (KEY_BUCKET_SLOTS): 8 words, 64 bytes.
const BucketSlots = 8

// SpillAt is how many keys a key's first bucket holds before a new key may go to its second
// one (the emptier of the two): most lookups then stop at the first bucket, and the buckets
// stay balanced enough that, at the load Bits sizes for, a pair of full buckets does not occur
// (simulated: no failure in 10⁶ inserts at 50% and 60% load; without spilling early, a few
// hundred). The flow table places its entries by the same rule (internal/flowtable).
const SpillAt = 6

// maxBits bounds the table at 2³¹ buckets (128 GiB): the bucket index is a u32.
const maxBits = 31

// Seed is the hash's secret: bucket i of key k is (mix(k) × Mul_i + Add_i) >> (64 - bits)
// (multiply-add-shift hashing, universal for 32-bit keys when the multipliers are random and
// odd). Its layout is struct key_seed's.
type Seed struct {
	Mul1, Add1, Mul2, Add2 uint64
}

// NewSeed returns a random seed.
func NewSeed() Seed {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	return Seed{Mul1: u(0) | 1, Add1: u(1), Mul2: u(2) | 1, Add2: u(3)}
}

// Valid reports whether s can be a seed: the zero value, say, read from a map nobody has
// written, cannot (its multipliers are even).
func (s Seed) Valid() bool { return s.Mul1&1 == 1 && s.Mul2&1 == 1 }

// Bits returns log2 of the number of buckets for up to keys keys: a power of two at least two
// buckets with the load at most 50%.
func Bits(keys int) (uint, error) {
	b := HalfLoadBits(keys)
	if b > maxBits {
		return 0, fmt.Errorf("%d keys need more than 2^%d buckets; lower limits.max_sessions", keys, maxBits)
	}
	return b, nil
}

// HalfLoadBits returns log2 of the number of buckets of BucketSlots slots that hold n entries
// at a load of 50% at most: a power of two, at least two. The flow table's buckets are of as
// many slots (internal/flowtable).
func HalfLoadBits(n int) uint {
	need := max(2, (2*uint64(max(n, 0))+BucketSlots-1)/BucketSlots)
	return uint(bits.Len64(need - 1))
}

// ErrFull is returned when both buckets of a key are full.
var ErrFull = errors.New("key table full")

// Table is one key table over words, the bucket array: words[b*BucketSlots+i] is slot i of
// bucket b. Writers must be serialised by the caller; readers may run at any time.
type Table struct {
	words []uint64
	bits  uint
	seed  Seed
}

// New returns the table of 1<<bits buckets in words with seed.
func New(words []uint64, bits uint, seed Seed) (*Table, error) {
	if bits == 0 || bits > maxBits || uint64(len(words)) < uint64(BucketSlots)<<bits {
		return nil, fmt.Errorf("key table of 2^%d buckets needs %d words, got %d", bits,
			uint64(BucketSlots)<<bits, len(words))
	}
	if !seed.Valid() {
		return nil, errors.New("key table seed has an even multiplier")
	}
	return &Table{words: words[:BucketSlots<<bits], bits: bits, seed: seed}, nil
}

// mix is murmur3's 32-bit finaliser, key_mix in keytable.h: a bijection that scatters keys
// with a pattern (sequential TEIDs, a pool's addresses) before the linear hash, which alone
// maps such keys onto a lattice where both buckets of many keys coincide and fill.
func mix(k uint32) uint32 {
	k ^= k >> 16
	k *= 0x85ebca6b
	k ^= k >> 13
	k *= 0xc2b2ae35
	k ^= k >> 16
	return k
}

// Buckets returns key's two buckets.
func (t *Table) Buckets(key uint32) (uint32, uint32) {
	s, k := t.seed, uint64(mix(key))
	return uint32((k*s.Mul1 + s.Add1) >> (64 - t.bits)),
		uint32((k*s.Mul2 + s.Add2) >> (64 - t.bits))
}

func word(key, ref uint32) uint64 { return uint64(ref)<<32 | uint64(key) }

// bucket returns the slots of bucket b.
func (t *Table) bucket(b uint32) []uint64 {
	i := int(b) * BucketSlots
	return t.words[i : i+BucketSlots]
}

// find returns the slot holding key, or nil.
func (t *Table) find(key uint32) *uint64 {
	b1, b2 := t.Buckets(key)
	for _, b := range []uint32{b1, b2} {
		s := t.bucket(b)
		for i := range s {
			if uint32(atomic.LoadUint64(&s[i])) == key {
				return &s[i]
			}
		}
	}
	return nil
}

// Lookup returns key's ref.
func (t *Table) Lookup(key uint32) (uint32, bool) {
	if key == 0 {
		return 0, false
	}
	if p := t.find(key); p != nil {
		return uint32(atomic.LoadUint64(p) >> 32), true
	}
	return 0, false
}

// Put points key at ref: in place when key is there (readers see the old ref or the new),
// else in a free slot of its first bucket while that holds fewer than SpillAt keys, else of
// the emptier of its two buckets.
func (t *Table) Put(key, ref uint32) error {
	if key == 0 {
		return errors.New("key 0 cannot be stored: it marks a free slot")
	}
	if p := t.find(key); p != nil {
		atomic.StoreUint64(p, word(key, ref))
		return nil
	}
	b1, b2 := t.Buckets(key)
	free1, n1 := t.free(b1)
	free2, n2 := t.free(b2)
	p := free1
	if p == nil || (n1 >= SpillAt && free2 != nil && n2 < n1) {
		p = free2
	}
	if p == nil {
		return fmt.Errorf("%w: both buckets of key %#x hold %d keys", ErrFull, key, BucketSlots)
	}
	atomic.StoreUint64(p, word(key, ref))
	return nil
}

// free returns bucket b's first free slot (nil if none) and how many keys it holds.
func (t *Table) free(b uint32) (*uint64, int) {
	var p *uint64
	n := 0
	s := t.bucket(b)
	for i := range s {
		if uint32(atomic.LoadUint64(&s[i])) != 0 {
			n++
		} else if p == nil {
			p = &s[i]
		}
	}
	return p, n
}

// Delete removes key, reporting whether it was there.
func (t *Table) Delete(key uint32) bool {
	if key == 0 {
		return false
	}
	p := t.find(key)
	if p != nil {
		atomic.StoreUint64(p, 0)
	}
	return p != nil
}

// All yields every key and its ref.
func (t *Table) All() iter.Seq2[uint32, uint32] {
	return func(yield func(uint32, uint32) bool) {
		for i := range t.words {
			w := atomic.LoadUint64(&t.words[i])
			if uint32(w) != 0 && !yield(uint32(w), uint32(w>>32)) {
				return
			}
		}
	}
}
