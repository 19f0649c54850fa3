package keytable

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

func newTable(t *testing.T, bits uint) *Table {
	t.Helper()
	tb, err := New(make([]uint64, BucketSlots<<bits), bits, NewSeed())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestBits(t *testing.T) {
	for _, c := range []struct {
		keys int
		bits uint
	}{{0, 1}, {1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 3}, {100000, 15}, {8388608, 21}} {
		got, err := Bits(c.keys)
		if err != nil || got != c.bits {
			t.Errorf("Bits(%d) = %d, %v; want %d", c.keys, got, err, c.bits)
		}
		if slots := BucketSlots << got; 2*c.keys > slots {
			t.Errorf("Bits(%d): %d slots, load above 50%%", c.keys, slots)
		}
	}
	if _, err := Bits(1 << 40); err == nil {
		t.Error("Bits(2^40) took a table too big for u32 bucket indexes")
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New(make([]uint64, 8), 1, NewSeed()); err == nil {
		t.Error("New took 8 words for 2 buckets")
	}
	if _, err := New(make([]uint64, 16), 1, Seed{}); err == nil {
		t.Error("New took the zero seed")
	}
}

// TestSeed: seeds differ from one call to the next and place keys differently, so a key set
// that fills two buckets under one seed (chosen by someone who learnt it) does not under another.
func TestSeed(t *testing.T) {
	a, b := NewSeed(), NewSeed()
	if a == b || !a.Valid() || !b.Valid() {
		t.Fatalf("seeds %+v and %+v", a, b)
	}
	ta, _ := New(make([]uint64, BucketSlots<<16), 16, a)
	tb, _ := New(make([]uint64, BucketSlots<<16), 16, b)
	same := 0
	for k := uint32(1); k <= 1000; k++ {
		a1, _ := ta.Buckets(k)
		b1, _ := tb.Buckets(k)
		if a1 == b1 {
			same++
		}
	}
	if same > 10 {
		t.Errorf("%d of 1000 keys have the same first bucket under two seeds", same)
	}
}

func TestPutLookupDelete(t *testing.T) {
	tb := newTable(t, 4)
	for k := uint32(1); k <= 40; k++ {
		if err := tb.Put(k, k*10); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.Put(7, 99); err != nil { // replaces in place
		t.Fatal(err)
	}
	n := 0
	for k, ref := range tb.All() {
		n++
		if want := k * 10; k == 7 && ref != 99 || k != 7 && ref != want {
			t.Errorf("All: key %d ref %d", k, ref)
		}
	}
	if n != 40 {
		t.Errorf("All yields %d keys, want 40", n)
	}
	if ref, ok := tb.Lookup(7); !ok || ref != 99 {
		t.Errorf("Lookup(7) = %d, %v", ref, ok)
	}
	if !tb.Delete(7) || tb.Delete(7) {
		t.Error("Delete(7) twice: want true then false")
	}
	if _, ok := tb.Lookup(7); ok {
		t.Error("deleted key found")
	}
	if _, ok := tb.Lookup(41); ok {
		t.Error("absent key found")
	}
	if _, ok := tb.Lookup(0); ok {
		t.Error("key 0 found in free slots")
	}
	if err := tb.Put(0, 1); err == nil {
		t.Error("Put(0) accepted")
	}
}

// keysIn returns the first n keys whose two buckets match.
func keysIn(tb *Table, n int, match func(h1, h2 uint32) bool) []uint32 {
	var out []uint32
	for k := uint32(1); len(out) < n; k++ {
		if match(tb.Buckets(k)) {
			out = append(out, k)
		}
	}
	return out
}

// TestPlacement: a key goes to its first bucket until that holds SpillAt keys, then to the
// emptier; a key whose two buckets are full is refused with ErrFull, and fits again once one
// of them has room.
func TestPlacement(t *testing.T) {
	tb := newTable(t, 6)
	// Keys sharing both buckets, with distinct ones: x's first bucket is a, second b.
	var a, b uint32
	for k := uint32(1); ; k++ {
		if a, b = tb.Buckets(k); a != b {
			break
		}
	}
	same := keysIn(tb, 2*BucketSlots+1, func(h1, h2 uint32) bool { return h1 == a && h2 == b })
	for i, k := range same[:2*BucketSlots] {
		if err := tb.Put(k, uint32(i)); err != nil {
			t.Fatalf("key %d of %d: %v", i+1, 2*BucketSlots, err)
		}
		_, inA := tb.free(a)
		_, inB := tb.free(b)
		switch {
		case i < SpillAt && (inA != i+1 || inB != 0):
			t.Errorf("after %d keys: %d in the first bucket, %d in the second", i+1, inA, inB)
		case i == 2*BucketSlots-1 && (inA != BucketSlots || inB != BucketSlots):
			t.Errorf("after %d keys: %d and %d", i+1, inA, inB)
		}
	}
	for i, k := range same[:2*BucketSlots] {
		if ref, ok := tb.Lookup(k); !ok || ref != uint32(i) {
			t.Errorf("key %d: Lookup = %d, %v", i, ref, ok)
		}
	}
	last := same[2*BucketSlots]
	if err := tb.Put(last, 1); !errors.Is(err, ErrFull) {
		t.Errorf("third bucketful: %v, want ErrFull", err)
	}
	tb.Delete(same[0])
	if err := tb.Put(last, 1); err != nil {
		t.Errorf("after a delete: %v", err)
	}
}

// TestLoad fills a table to the load Bits sizes for with random keys: none is refused.
func TestLoad(t *testing.T) {
	const keys = 1 << 17
	bits, _ := Bits(keys)
	tb := newTable(t, bits)
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[uint32]bool{}
	for len(seen) < keys {
		k := r.Uint32()
		if k == 0 || seen[k] {
			continue
		}
		seen[k] = true
		if err := tb.Put(k, 1); err != nil {
			t.Fatalf("after %d keys: %v", len(seen), err)
		}
	}
}

// Keys an SMF or an address pool hands out are not random: sequential TEIDs, and UE addresses
// from a pool, which the table sees in network byte order. Whatever the seed, such sets fill
// a table to its designed load (Bits) without a full pair of buckets.
func TestStructuredKeys(t *testing.T) {
	const n = 100_000
	sets := map[string]func(i uint32) uint32{
		"sequential TEIDs": func(i uint32) uint32 { return 0x10000 + i },
		"a pool's UE addresses": func(i uint32) uint32 {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], 10<<24|60<<16+i)
			return binary.LittleEndian.Uint32(b[:])
		},
		"TEIDs in steps of 256": func(i uint32) uint32 { return (i + 1) << 8 },
	}
	for name, key := range sets {
		for seed := range 20 {
			bits, err := Bits(n)
			if err != nil {
				t.Fatal(err)
			}
			tb, err := New(make([]uint64, BucketSlots<<bits), bits, NewSeed())
			if err != nil {
				t.Fatal(err)
			}
			for i := range uint32(n) {
				if err := tb.Put(key(i), i); err != nil {
					t.Fatalf("%s, seed %d: key %d of %d: %v", name, seed, i, n, err)
				}
			}
		}
	}
}
