// Package flowtable is the flow cache's table (bpf/lib/flowtable.h): an exact-match table of
// flows keyed by their 5-tuple and arrival, laid out in the memory of a BPF array whose
// elements are its slots. The XDP program reads it with inlined array lookups, the TC learner
// adds entries and the XDP program removes them; through a mapping of the array, the daemon
// reads and removes entries with this package, and tests add them as the learner would
// (Insert).
//
// A slot is a key, a state word and a value. Slots come in buckets of BucketSlots; a key lives
// in one of two buckets chosen by a seeded hash of its five 32-bit words, so a lookup reads at
// most 2×BucketSlots slot headers whatever the number of flows, and flows whose 5-tuples were
// chosen by someone who does not know the seed (anyone on the Internet) cannot be aimed at one
// bucket.
//
// The state word says whether the slot is free, being written or live, and counts the slot's
// incarnations: a writer claims a free slot with a compare-and-swap (two writers never claim
// the same slot), writes the key and value, and publishes the slot live with an atomic store;
// a reader reads the state, the key and value, and the state again, and uses the copy only
// when the state has not moved (a seqlock): it never uses a slot half written, nor one freed
// and claimed again while it read. Removal is a compare-and-swap from live to free, so of two
// removers of one entry one only succeeds and counts it. A writer that, its slot still being
// written, finds its key in another slot live or being written (two learners of one flow, or
// the flow already there) frees its own again without ever publishing it: a key is live in
// one slot at most, at every moment, so a removal by key never misses it.
//
// This package knows nothing of BPF: the datapath hands it the mapped memory.
package flowtable

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"unsafe"

	"github.com/xupf/xupf/internal/keytable"
)

// The slot layout (struct flow_slot): the key at 0, the state word after it, the value at
// ValueOffset.
const (
	KeySize     = 20 // struct flow_key: five 32-bit words
	stateOffset = KeySize
	ValueOffset = 24
	ValueSize   = 72 // struct flow
	SlotSize    = ValueOffset + ValueSize
)

// BucketSlots is the number of slots of a bucket (FLOW_BUCKET_SLOTS): as many as a key
// table's, whose placement (keytable.SpillAt) and sizing (keytable.HalfLoadBits) this table
// shares.
const BucketSlots = keytable.BucketSlots

// Format names how the table places its entries beyond its slots' layout: the hash (Buckets;
// flow_buckets in flowtable.h, version 1), the bucket size and the spill rule. A table of
// another format holds its entries where this one does not look: the datapath records Format
// with a pinned table's layout version, and replaces a table of another. Change the hash's
// version with the hash.
var Format = fmt.Sprintf("hash 1, %d-slot buckets, spill at %d", BucketSlots, keytable.SpillAt)

// maxBits bounds the table at 2²⁸ buckets, 2³¹ slots: the slot index is a u32, and each
// bucket index comes from 32 bits of the hash.
const maxBits = 31 - 3

// The state word: its low two bits are the slot's state, the rest its incarnation, which a
// claim moves on, so a reader that saw a live slot can tell a new incarnation from the one it
// read.
const (
	stateFree    = 0 // FLOW_SLOT_FREE: no entry; its key is a removed one's, or zeros
	stateWriting = 1 // FLOW_SLOT_WRITING: claimed; the key and value are being written
	stateLive    = 2 // FLOW_SLOT_LIVE: an entry
	stateMask    = 3
	incarnation  = 4 // what a claim adds
)

// keyWords is the number of 32-bit words of a key the hash reads.
const keyWords = KeySize / 4

// Seed is the hash's secret. A key's hash is h = H[0] + Σ_j H[j+1]·k_j mod 2⁶⁴, k_j its 32-bit
// words: multiply-shift hashing of a vector, under which two keys collide with probability
// 2⁻³² at most when the H are random, so flows chosen without the seed cannot be made to
// share their hash. Its bits then go through murmur3's 64-bit finaliser, mix: h is linear in
// each word, so flows with a pattern (a scan of ports or addresses) would otherwise have
// their buckets on a lattice, where both buckets of many flows coincide and fill. The first
// bucket is the mixed hash's high half, the second its low half, each cut to the table's
// bits. Its layout is struct flow_seed's.
type Seed struct {
	H [keyWords + 1]uint64
}

// NewSeed returns a random seed.
func NewSeed() Seed {
	var b [(keyWords + 1) * 8]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	var s Seed
	for i := range s.H {
		s.H[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return s
}

// Valid reports whether s can be a seed: the zero value, say, read from a map nobody has
// written, cannot.
func (s Seed) Valid() bool { return s != Seed{} }

// Bits returns log2 of the number of buckets for up to flows flows: a power of two at least
// two buckets with the load at most 50%, so the table has 2×flows to 4×flows slots.
func Bits(flows int) (uint, error) {
	b := keytable.HalfLoadBits(flows)
	if b > maxBits {
		return 0, fmt.Errorf("%d flows need more than 2^%d buckets; lower flow_cache.max_flows", flows, maxBits)
	}
	return b, nil
}

// Slots is the number of slots of a table of 1<<bits buckets.
func Slots(bits uint) int { return BucketSlots << bits }

// Elements is the array's max_entries for a table of 1<<bits buckets: its slots, then one
// element whose first eight bytes count the entries (live or being written), so that the
// table holds max flows at most, as a hash map of max entries did; being in the same array,
// the count is replaced with the table and kept with it.
func Elements(bits uint) int { return Slots(bits) + 1 }

// The errors of Insert.
var (
	ErrFull  = errors.New("flow table full")
	ErrExist = errors.New("flow table: the flow is there already")
)

// Table is the flow table over mem, the array's memory: slot i at mem[i*SlotSize:], then the
// count (Elements). K and V are the key's and value's types, of KeySize and ValueSize bytes.
// Any number of writers and readers may use it at once, here and in the datapath.
type Table[K comparable, V any] struct {
	mem   []byte
	count *uint64 // entries live or being written
	max   uint64  // entries the count allows
	bits  uint
	seed  Seed
}

// New returns the table of 1<<bits buckets in mem with seed, holding maxEntries at most.
func New[K comparable, V any](mem []byte, bits uint, seed Seed, maxEntries int) (*Table[K, V], error) {
	if err := checkTypes[K, V](); err != nil {
		return nil, err
	}
	if bits == 0 || bits > maxBits || len(mem) < Elements(bits)*SlotSize {
		return nil, fmt.Errorf("flow table of 2^%d buckets needs %d bytes, got %d", bits,
			uint64(Elements(bits))*SlotSize, len(mem))
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 {
		return nil, errors.New("flow table memory is not 8-byte aligned")
	}
	if !seed.Valid() {
		return nil, errors.New("flow table seed is zero")
	}
	return &Table[K, V]{mem: mem[:Slots(bits)*SlotSize], bits: bits, seed: seed, max: uint64(max(maxEntries, 0)),
		count: (*uint64)(unsafe.Pointer(&mem[Slots(bits)*SlotSize]))}, nil
}

func checkTypes[K comparable, V any]() error {
	var k K
	var v V
	if unsafe.Sizeof(k) != KeySize || unsafe.Sizeof(v) != ValueSize || unsafe.Alignof(v) != 8 {
		return fmt.Errorf("flow table of %T (%d bytes) and %T (%d bytes, aligned to %d): want %d "+
			"and %d bytes, the value aligned to 8", k, unsafe.Sizeof(k), v, unsafe.Sizeof(v),
			unsafe.Alignof(v), KeySize, ValueSize)
	}
	return nil
}

// mix is murmur3's 64-bit finaliser (flow_mix in flowtable.h), a bijection.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Buckets returns k's two buckets.
func (t *Table[K, V]) Buckets(k K) (uint32, uint32) {
	w := (*[keyWords]uint32)(unsafe.Pointer(&k))
	h := t.seed.H[0]
	for j, x := range w {
		h += t.seed.H[j+1] * uint64(x)
	}
	h = mix(h)
	return uint32(h >> (64 - t.bits)), uint32(h) >> (32 - t.bits)
}

// Slots is the table's number of slots.
func (t *Table[K, V]) Slots() int { return len(t.mem) / SlotSize }

func (t *Table[K, V]) state(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&t.mem[i*SlotSize+stateOffset]))
}

func (t *Table[K, V]) key(i int) *K { return (*K)(unsafe.Pointer(&t.mem[i*SlotSize])) }

func (t *Table[K, V]) value(i int) *V { return (*V)(unsafe.Pointer(&t.mem[i*SlotSize+ValueOffset])) }

// read returns slot i's entry and its state word, ok when it is live and the copy whole.
func (t *Table[K, V]) read(i int) (k K, v V, state uint32, ok bool) {
	state = atomic.LoadUint32(t.state(i))
	if state&stateMask != stateLive {
		return k, v, state, false
	}
	loadWords(unsafe.Pointer(&k), unsafe.Pointer(t.key(i)), KeySize)
	loadWords(unsafe.Pointer(&v), unsafe.Pointer(t.value(i)), ValueSize)
	return k, v, state, atomic.LoadUint32(t.state(i)) == state
}

// find returns the slot of k's live entry, its value and state word, or -1.
func (t *Table[K, V]) find(k K) (int, V, uint32) {
	b1, b2 := t.Buckets(k)
	for _, b := range [2]uint32{b1, b2} {
		for i := int(b) * BucketSlots; i < int(b+1)*BucketSlots; i++ {
			if sk, v, s, ok := t.read(i); ok && sk == k {
				return i, v, s
			}
		}
	}
	var v V
	return -1, v, 0
}

// Lookup returns k's value.
func (t *Table[K, V]) Lookup(k K) (V, bool) {
	i, v, _ := t.find(k)
	return v, i >= 0
}

// Delete removes k's entry, reporting whether this call removed it.
func (t *Table[K, V]) Delete(k K) bool {
	i, _, s := t.find(k)
	if i < 0 || !atomic.CompareAndSwapUint32(t.state(i), s, s&^stateMask|stateFree) {
		return false
	}
	t.release()
	return true
}

// reserve counts an entry about to be added, unless the table holds max already.
func (t *Table[K, V]) reserve() bool {
	if atomic.AddUint64(t.count, 1) > t.max {
		t.release()
		return false
	}
	return true
}

// release counts an entry gone (or one reserved and not added).
func (t *Table[K, V]) release() { atomic.AddUint64(t.count, ^uint64(0)) }

// Insert adds k with v: in a free slot of k's first bucket while that holds fewer than
// keytable.SpillAt entries, else of the emptier of its two buckets. It returns ErrFull when
// the table holds its max entries or that bucket has no free slot, ErrExist when k is there
// (or being added by another writer at the same time).
func (t *Table[K, V]) Insert(k K, v V) error {
	if !t.reserve() {
		return fmt.Errorf("%w (%d entries)", ErrFull, t.max)
	}
	b1, b2 := t.Buckets(k)
	n1, n2 := t.used(b1), t.used(b2)
	b := b1
	if n1 == BucketSlots || (n1 >= keytable.SpillAt && n2 < n1) {
		b = b2
	}
	for i := int(b) * BucketSlots; i < int(b+1)*BucketSlots; i++ {
		s := atomic.LoadUint32(t.state(i))
		if s&stateMask != stateFree || !atomic.CompareAndSwapUint32(t.state(i), s, s+incarnation+stateWriting) {
			continue
		}
		claim := s + incarnation + stateWriting
		storeWords(unsafe.Pointer(t.key(i)), unsafe.Pointer(&k), KeySize)
		storeWords(unsafe.Pointer(t.value(i)), unsafe.Pointer(&v), ValueSize)
		// A full barrier (a locked add of nothing): the other slots are read only once the
		// key is visible to other writers, so of two writers of one key at least one sees
		// the other's. The check comes before the slot is live, so that a duplicate is
		// never live, not even briefly: a remover by key would take it and miss the other.
		atomic.AddUint32(t.state(i), 0)
		if t.elsewhere(k, i, b1, b2) {
			// Only its claimer moves a slot being written: no remover took it meanwhile.
			atomic.StoreUint32(t.state(i), claim&^stateMask|stateFree)
			t.release()
			return ErrExist
		}
		atomic.StoreUint32(t.state(i), claim&^stateMask|stateLive)
		return nil
	}
	t.release()
	return fmt.Errorf("%w (bucket %d)", ErrFull, b)
}

// used returns how many slots of bucket b are not free.
func (t *Table[K, V]) used(b uint32) int {
	n := 0
	for i := int(b) * BucketSlots; i < int(b+1)*BucketSlots; i++ {
		if atomic.LoadUint32(t.state(i))&stateMask != stateFree {
			n++
		}
	}
	return n
}

// elsewhere tells whether a slot of buckets b1 and b2 other than own holds k, live or being
// written (a key half written that looks like k errs on the safe side: the insert yields).
func (t *Table[K, V]) elsewhere(k K, own int, b1, b2 uint32) bool {
	for _, b := range [2]uint32{b1, b2} {
		for i := int(b) * BucketSlots; i < int(b+1)*BucketSlots; i++ {
			if i == own || atomic.LoadUint32(t.state(i))&stateMask == stateFree {
				continue
			}
			var sk K
			loadWords(unsafe.Pointer(&sk), unsafe.Pointer(t.key(i)), KeySize)
			if sk == k {
				return true
			}
		}
	}
	return false
}

// loadWords copies n bytes from src, in the table's memory, to dst, a local, a word at a time:
// each an atomic load, as other CPUs write the table meanwhile (the state word's checks
// account for that), and a plain store, as nothing else sees dst (an atomic one is a locked
// instruction on amd64, eight times the cost of a copied slot). A value (n a multiple of 8,
// 8-byte aligned both sides) goes by 64-bit words, so that no read tears one of the
// statistics' counters, which the datapath adds to in place.
func loadWords(dst, src unsafe.Pointer, n uintptr) {
	if n%8 == 0 {
		for off := uintptr(0); off < n; off += 8 {
			*(*uint64)(unsafe.Add(dst, off)) = atomic.LoadUint64((*uint64)(unsafe.Add(src, off)))
		}
		return
	}
	for off := uintptr(0); off < n; off += 4 {
		*(*uint32)(unsafe.Add(dst, off)) = atomic.LoadUint32((*uint32)(unsafe.Add(src, off)))
	}
}

// storeWords copies n bytes from src, a local, to dst, in the table's memory, a word at a time
// (as loadWords): plain loads, atomic stores, which readers on other CPUs load atomically.
func storeWords(dst, src unsafe.Pointer, n uintptr) {
	if n%8 == 0 {
		for off := uintptr(0); off < n; off += 8 {
			atomic.StoreUint64((*uint64)(unsafe.Add(dst, off)), *(*uint64)(unsafe.Add(src, off)))
		}
		return
	}
	for off := uintptr(0); off < n; off += 4 {
		atomic.StoreUint32((*uint32)(unsafe.Add(dst, off)), *(*uint32)(unsafe.Add(src, off)))
	}
}

// Range yields the live entries of slots from to to-1, each read whole: aging reads the table
// a bounded number of slots at a time.
func (t *Table[K, V]) Range(from, to int) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i := max(from, 0); i < min(to, t.Slots()); i++ {
			if k, v, _, ok := t.read(i); ok && !yield(k, v) {
				return
			}
		}
	}
}

// All yields every live entry.
func (t *Table[K, V]) All() iter.Seq2[K, V] { return t.Range(0, t.Slots()) }

// Entries yields the live entries of the table in mem (its slots and the count) without its
// seed, for reading a pinned table: a reader that does not look keys up needs none.
func Entries[K comparable, V any](mem []byte) (iter.Seq2[K, V], error) {
	if err := checkTypes[K, V](); err != nil {
		return nil, err
	}
	if len(mem)%SlotSize != 0 || len(mem) < SlotSize {
		return nil, fmt.Errorf("flow table memory of %d bytes is not whole %d-byte slots", len(mem), SlotSize)
	}
	t := &Table[K, V]{mem: mem[:len(mem)-SlotSize]}
	return t.All(), nil
}
