package flowtable

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xupf/xupf/internal/keytable"
)

// key and value stand in for struct flow_key and struct flow.
type key struct{ W [keyWords]uint32 }

type value struct {
	A, B uint64
	Rest [7]uint64
}

func valueOf(k key) value { return value{A: uint64(k.W[0]), B: uint64(k.W[2])<<32 | uint64(k.W[1])} }

func newTable(t testing.TB, bits uint) *Table[key, value] {
	t.Helper()
	tb, err := New[key, value](make([]byte, Elements(bits)*SlotSize), bits, NewSeed(), Slots(bits))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestBits(t *testing.T) {
	for _, c := range []struct {
		flows int
		bits  uint
	}{{0, 1}, {1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 3}, {100000, 15}, {1000000, 18}} {
		got, err := Bits(c.flows)
		if err != nil || got != c.bits {
			t.Errorf("Bits(%d) = %d, %v; want %d", c.flows, got, err, c.bits)
		}
		if slots := Slots(got); 2*c.flows > slots {
			t.Errorf("Bits(%d): %d slots, load above 50%%", c.flows, slots)
		}
	}
	if _, err := Bits(1 << 40); err == nil {
		t.Error("Bits(2^40) took a table too big for u32 slot indexes")
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New[key, value](make([]byte, SlotSize*16), 1, NewSeed(), 1); err == nil {
		t.Error("New took 16 slots for 2 buckets and the count")
	}
	if _, err := New[key, value](make([]byte, SlotSize*17), 1, Seed{}, 1); err == nil {
		t.Error("New took the zero seed")
	}
	if _, err := New[[16]byte, value](make([]byte, SlotSize*17), 1, NewSeed(), 1); err == nil {
		t.Error("New took a 16-byte key")
	}
	if _, err := New[key, [72]byte](make([]byte, SlotSize*17), 1, NewSeed(), 1); err == nil {
		t.Error("New took a value without 8-byte alignment")
	}
}

func kw(i uint32) key { return key{W: [keyWords]uint32{0x0100000a, i, 80<<16 | 1234, 6, 3}} }

func TestInsertLookupDelete(t *testing.T) {
	tb := newTable(t, 4)
	for i := uint32(1); i <= 40; i++ {
		if err := tb.Insert(kw(i), valueOf(kw(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.Insert(kw(7), value{}); !errors.Is(err, ErrExist) {
		t.Errorf("Insert of a key there: %v, want ErrExist", err)
	}
	n := 0
	for k, v := range tb.All() {
		n++
		if v != valueOf(k) {
			t.Errorf("All: key %v value %v", k, v)
		}
	}
	if n != 40 {
		t.Errorf("All yields %d entries, want 40", n)
	}
	if v, ok := tb.Lookup(kw(7)); !ok || v != valueOf(kw(7)) {
		t.Errorf("Lookup(7) = %v, %v", v, ok)
	}
	if !tb.Delete(kw(7)) || tb.Delete(kw(7)) {
		t.Error("Delete(7) twice: want true then false")
	}
	if _, ok := tb.Lookup(kw(7)); ok {
		t.Error("deleted key found")
	}
	if _, ok := tb.Lookup(kw(41)); ok {
		t.Error("absent key found")
	}
	if _, ok := tb.Lookup(key{}); ok {
		t.Error("the zero key found in free slots")
	}
	entries, err := Entries[key, value](tb.mem[:Elements(4)*SlotSize])
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for range entries {
		n++
	}
	if n != 39 {
		t.Errorf("Entries yields %d entries, want 39", n)
	}
	n = 0
	for range tb.Range(0, BucketSlots) {
		n++
	}
	if want := tb.used(0); n != want {
		t.Errorf("Range over bucket 0 yields %d entries; it holds %d", n, want)
	}
}

// keysIn returns n keys whose two buckets match.
func keysIn(tb *Table[key, value], n int, match func(b1, b2 uint32) bool) []key {
	var out []key
	for i := uint32(1); len(out) < n; i++ {
		if match(tb.Buckets(kw(i))) {
			out = append(out, kw(i))
		}
	}
	return out
}

// TestFull: a key whose buckets are full is refused with ErrFull, and fits again once one of
// them has room.
func TestFull(t *testing.T) {
	tb := newTable(t, 6)
	keys := keysIn(tb, BucketSlots+1, func(b1, b2 uint32) bool { return b1 == 5 && b2 == 5 })
	for _, k := range keys[:BucketSlots] {
		if err := tb.Insert(k, valueOf(k)); err != nil {
			t.Fatal(err)
		}
	}
	last := keys[BucketSlots]
	if err := tb.Insert(last, valueOf(last)); !errors.Is(err, ErrFull) {
		t.Fatalf("Insert into a full bucket: %v, want ErrFull", err)
	}
	if _, ok := tb.Lookup(last); ok {
		t.Error("a refused key found")
	}
	tb.Delete(keys[3])
	if err := tb.Insert(last, valueOf(last)); err != nil {
		t.Errorf("Insert after a delete: %v", err)
	}
}

// TestLimit: the table holds its max entries, whatever room its buckets have, and takes one
// more once one goes.
func TestLimit(t *testing.T) {
	tb, err := New[key, value](make([]byte, Elements(4)*SlotSize), 4, NewSeed(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint32(1); i <= 3; i++ {
		if err := tb.Insert(kw(i), valueOf(kw(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.Insert(kw(4), valueOf(kw(4))); !errors.Is(err, ErrFull) {
		t.Fatalf("a fourth entry in a table of 3: %v, want ErrFull", err)
	}
	if !tb.Delete(kw(2)) {
		t.Fatal("Delete(2) removed nothing")
	}
	if err := tb.Insert(kw(4), valueOf(kw(4))); err != nil {
		t.Errorf("Insert after a delete: %v", err)
	}
	if n := atomic.LoadUint64(tb.count); n != 3 {
		t.Errorf("count %d, want 3", n)
	}
}

// TestPlacement: a key goes to its first bucket until that holds keytable.SpillAt entries,
// then to the emptier of its two.
func TestPlacement(t *testing.T) {
	tb := newTable(t, 6)
	keys := keysIn(tb, keytable.SpillAt+1, func(b1, b2 uint32) bool { return b1 == 9 && b2 != 9 })
	for _, k := range keys {
		if err := tb.Insert(k, valueOf(k)); err != nil {
			t.Fatal(err)
		}
	}
	_, b2 := tb.Buckets(keys[keytable.SpillAt])
	if got := tb.used(9); got != keytable.SpillAt {
		t.Errorf("first bucket holds %d entries, want %d", got, keytable.SpillAt)
	}
	if got := tb.used(b2); got < 1 {
		t.Errorf("the key past SpillAt is not in its second bucket")
	}
}

// TestSeed: seeds differ from one call to the next and place keys differently, so flows that
// share a bucket under one seed (chosen by someone who learnt it) do not under another.
func TestSeed(t *testing.T) {
	a, b := NewSeed(), NewSeed()
	if a == b || !a.Valid() || !b.Valid() {
		t.Fatalf("seeds %+v and %+v", a, b)
	}
	mem := make([]byte, Elements(10)*SlotSize)
	ta, _ := New[key, value](mem, 10, a, 1)
	tb, _ := New[key, value](mem, 10, b, 1)
	// The flows an attacker who knew seed a would send to fill one bucket.
	aimed := keysIn(ta, 100, func(b1, b2 uint32) bool { return b1 == 77 })
	buckets := map[uint32]int{}
	for _, k := range aimed {
		b1, b2 := tb.Buckets(k)
		buckets[b1]++
		buckets[b2]++
	}
	for b, n := range buckets {
		if n > 8 {
			t.Errorf("%d of 100 flows aimed at one bucket under one seed share bucket %d under another", n, b)
		}
	}
}

// TestLoad: at the load Bits sizes for, flows with a pattern (a scan of ports, of addresses,
// of both, from one interface or several) all fit: the buckets of patterned keys do not pile up.
func TestLoad(t *testing.T) {
	const flows = 1 << 16
	bits, _ := Bits(flows)
	patterns := map[string]func(i uint32) key{
		"source ports": func(i uint32) key {
			return key{W: [keyWords]uint32{0x0100000a, 0x08080808, 443<<16 | i, 6, 2}}
		},
		"addresses": func(i uint32) key {
			return key{W: [keyWords]uint32{0x0000000a | i<<8, 0x08080808, 443<<16 | 4000, 17, 2}}
		},
		"addresses and ports": func(i uint32) key {
			return key{W: [keyWords]uint32{0x0000000a | (i>>4)<<8, 0x08080808, 443<<16 | (i & 15), 6, 2 + i&1}}
		},
		"VLANs and interfaces": func(i uint32) key {
			return key{W: [keyWords]uint32{0x0100000a, 0x08080808, 443<<16 | 5000, 6 | (i&4095)<<16, i >> 12}}
		},
	}
	for name, k := range patterns {
		t.Run(name, func(t *testing.T) {
			tb := newTable(t, bits)
			for i := range uint32(flows) {
				if err := tb.Insert(k(i), valueOf(k(i))); err != nil {
					t.Fatalf("flow %d of %d: %v", i, flows, err)
				}
			}
		})
	}
}

// TestDuplicateNeverLive: a writer adding a key that is there already never has it live in
// a second slot, not even for a moment: a removal by key meanwhile would free the copy and
// leave the entry. An observer scans the key's buckets while the writer keeps trying.
func TestDuplicateNeverLive(t *testing.T) {
	tb := newTable(t, 1)
	k := kw(1)
	if err := tb.Insert(k, valueOf(k)); err != nil {
		t.Fatal(err)
	}
	var done, dup atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for r := 0; r < 200000 && !dup.Load(); r++ {
			if err := tb.Insert(k, valueOf(k)); !errors.Is(err, ErrExist) {
				t.Errorf("Insert of a key there: %v, want ErrExist", err)
				return
			}
		}
	}()
	for !done.Load() && !dup.Load() {
		live := 0
		for i := range tb.Slots() {
			if sk, _, _, ok := tb.read(i); ok && sk == k {
				live++
			}
		}
		dup.Store(live > 1)
	}
	wg.Wait()
	if dup.Load() {
		t.Error("a key there already was live in two slots while added again")
	}
}

// TestConcurrent: writers adding and removing keys at once, each its own and all a shared
// one, while readers read:
//   - an Insert that succeeded is its writer's alone: the key then holds that writer's value
//     until the writer deletes it, and the delete succeeds (two writers never claim one slot);
//   - a reader gets a key's value whole and of the incarnation it read the key of (each write
//     stamps every word of its value with its writer and round, and the key's word);
//   - at the end no key is live twice, and the count is the number of entries.
func TestConcurrent(t *testing.T) {
	tb := newTable(t, 1)
	const writers, rounds = 4, 500000
	shared := kw(100)
	stamped := func(k key, stamp uint64) value {
		v := value{A: uint64(k.W[1]), B: stamp}
		for i := range v.Rest {
			v.Rest[i] = stamp
		}
		return v
	}
	whole := func(k key, v value) bool {
		for _, w := range v.Rest {
			if w != v.B {
				return false
			}
		}
		return v.A == uint64(k.W[1])
	}
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 3 {
			t.Errorf(format, args...)
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := kw(uint32(w + 1))
			for r := range rounds {
				stamp := uint64(w)<<32 | uint64(r)
				v := stamped(own, stamp)
				switch err := tb.Insert(own, v); {
				case err == nil:
					if got, ok := tb.Lookup(own); !ok || got != v {
						fail("writer %d, round %d: its key holds %v (found %v) after its insert, want its own value", w, r, got, ok)
					}
					if !tb.Delete(own) {
						fail("writer %d, round %d: the delete of its own key failed", w, r)
					}
				case errors.Is(err, ErrExist):
					// A slot being claimed that still holds the key it held before
					// (this writer's, deleted) makes an insert yield: no harm, but
					// the key must not be live.
					if _, ok := tb.Lookup(own); ok {
						fail("writer %d, round %d: its key live after its insert yielded", w, r)
					}
				case !errors.Is(err, ErrFull):
					fail("writer %d, round %d: insert of its own key: %v", w, r, err)
				}
				if r%3 == w%3 {
					tb.Delete(shared)
				} else {
					tb.Insert(shared, stamped(shared, stamp))
				}
			}
		}()
	}
	var stop atomic.Bool
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				if v, ok := tb.Lookup(shared); ok && !whole(shared, v) {
					fail("a read of %v got %v: not its key's, or torn", shared, v)
				}
				for k, v := range tb.All() {
					if !whole(k, v) {
						fail("a read of %v got %v: not its key's, or torn", k, v)
					}
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	// A scan under way may meet a key twice (removed behind it, added again ahead); once the
	// writers are done, it may not.
	seen := map[key]int{}
	for k := range tb.All() {
		seen[k]++
		if seen[k] > 1 {
			t.Errorf("key %v live twice at the end", k)
		}
	}
	if n := atomic.LoadUint64(tb.count); n != uint64(len(seen)) {
		t.Errorf("count %d at the end, %d entries live", n, len(seen))
	}
}

// BenchmarkAll: reading every live entry of a table at the load Bits sizes for, per entry (what
// a listing, an invalidation scan or an aging pass pays for each before its own work).
func BenchmarkAll(b *testing.B) {
	const flows = 1 << 16
	bits, _ := Bits(flows)
	tb := newTable(b, bits)
	for i := range uint32(flows) {
		if err := tb.Insert(kw(i), valueOf(kw(i))); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		for k, v := range tb.All() {
			if v.A != uint64(k.W[0]) {
				b.Fatal("a value not its key's")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*flows), "ns/entry")
}
