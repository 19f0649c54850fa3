package keytable

import (
	"math/bits"
	"os"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

const testGrace = 10 * time.Millisecond

// wire is key as the datapath reads it (network order on a little-endian host).
func wire(k uint32) uint32 { return bits.ReverseBytes32(k) }

func value(tag uint64) []uint64 {
	v := make([]uint64, SlotWords)
	for i := range v {
		v[i] = tag<<8 | uint64(i)
	}
	return v
}

// cached is value(tag) as a slot holds it for key.
func cached(key uint32, tag uint64) []uint64 {
	v := value(tag)
	v[KeyWord] = v[KeyWord]&^0xffffffff | uint64(key)
	return v
}

// lookup returns the value cached for key as the readers see it (nil when they miss).
func (c *Direct) lookup(key uint32) []uint64 {
	i := c.slot(key)
	s := c.words[int(i)*SlotWords : int(i+1)*SlotWords]
	if key == 0 || uint32(atomic.LoadUint64(&s[KeyWord])) != key {
		return nil
	}
	out := make([]uint64, SlotWords)
	for j := range s {
		out[j] = atomic.LoadUint64(&s[j])
	}
	return out
}

func newTestDirect(t *testing.T, slots int, now time.Time) *Direct {
	t.Helper()
	words := make([]uint64, slots*SlotWords)
	for i := range words {
		words[i] = 0xdead // an earlier writer's leftovers
	}
	c, err := NewDirect(words, testGrace, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDirectStartsEmptyAndWaitsTheGrace(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newTestDirect(t, 16, t0)
	k := wire(5)
	if c.lookup(0xdead) != nil {
		t.Fatal("an earlier writer's key is still found")
	}
	c.Put(k, value(1), t0)
	if c.lookup(k) != nil {
		t.Fatal("written before the earlier writer's readers are done")
	}
	if d := c.Refill(t0.Add(testGrace / 2)); d != testGrace/2 {
		t.Fatalf("Refill says wait %v, want %v", d, testGrace/2)
	}
	if d := c.Refill(t0.Add(testGrace)); d != 0 || !slices.Equal(c.lookup(k), cached(k, 1)) {
		t.Fatalf("after the grace: wait %v, slot %x", d, c.lookup(k))
	}
}

func TestDirectChangeClearsThenRewritesAfterGrace(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newTestDirect(t, 16, t0.Add(-testGrace))
	k := wire(7)
	c.Put(k, value(1), t0)
	if !slices.Equal(c.lookup(k), cached(k, 1)) {
		t.Fatalf("not cached: %x", c.lookup(k))
	}
	t1 := t0.Add(time.Second)
	c.Put(k, value(2), t1)
	if c.lookup(k) != nil {
		t.Fatal("a changed key is still found in its slot before the grace")
	}
	// The old copy is intact: a reader that matched the key before the change reads it whole.
	if s := c.words[7*SlotWords : 8*SlotWords]; s[2] != value(1)[2] {
		t.Fatalf("the copy was rewritten within the grace: %x", s)
	}
	c.Refill(t1.Add(testGrace - time.Nanosecond))
	if c.lookup(k) != nil {
		t.Fatal("rewritten before the grace is over")
	}
	c.Refill(t1.Add(testGrace))
	if !slices.Equal(c.lookup(k), cached(k, 2)) {
		t.Fatalf("after the grace: %x", c.lookup(k))
	}
}

func TestDirectCollisionAndDelete(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newTestDirect(t, 16, t0.Add(-testGrace))
	a, b := wire(3), wire(3+16) // one slot
	c.Put(a, value(1), t0)
	c.Put(b, value(2), t0)
	if c.lookup(b) != nil || !slices.Equal(c.lookup(a), cached(a, 1)) {
		t.Fatal("a colliding key took the slot")
	}
	if !c.Free(a) || c.Free(b) || !c.Free(wire(4)) {
		t.Errorf("Free: a %v (holds its slot), b %v (a holds it), 4 %v (empty)", c.Free(a), c.Free(b), c.Free(wire(4)))
	}
	c.Delete(b, t0) // not cached: nothing happens
	if c.lookup(a) == nil {
		t.Fatal("deleting a key that was not cached cleared its slot")
	}
	c.Delete(a, t0)
	if c.lookup(a) != nil {
		t.Fatal("a deleted key is still found")
	}
	if !c.Free(b) {
		t.Error("a deleted key's slot is not free")
	}
	c.Put(b, value(2), t0)
	if c.lookup(b) != nil {
		t.Fatal("a deleted key's slot was reused within the grace")
	}
	c.Refill(t0.Add(testGrace))
	if !slices.Equal(c.lookup(b), cached(b, 2)) {
		t.Fatalf("the slot was not reused after the grace: %x", c.lookup(b))
	}
	c.Put(0, value(3), t0)
	if c.lookup(0) != nil {
		t.Fatal("key 0 cached")
	}
}

func TestDirectSlots(t *testing.T) {
	for _, c := range []struct{ keys, want int }{{0, 1}, {1, 1}, {2, 2}, {3, 4}, {100000, 131072}} {
		if got := DirectSlots(c.keys); got != c.want {
			t.Errorf("DirectSlots(%d) = %d, want %d", c.keys, got, c.want)
		}
	}
	if _, err := NewDirect(make([]uint64, 3*SlotWords), testGrace, time.Now()); err == nil {
		t.Error("3 slots accepted")
	}
}

// TestDirectStoresTheKeyLast: fill stores a copy's key only after all its other words, so a
// reader that finds the key finds the whole copy. The slot is laid over a page boundary, the
// words after the key word on a read-only page: the fill faults part-way, and the key must
// not be stored yet (stored first, a reader would take it with the old copy).
func TestDirectStoresTheKeyLast(t *testing.T) {
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	start := page - 8*(KeyWord+1) // words up to the key word on the first page
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[start])), SlotWords)
	now := time.Unix(0, 0)
	c, err := NewDirect(words, testGrace, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[page:], syscall.PROT_READ); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the fill wrote a read-only page")
			}
		}()
		c.Put(wire(1), value(1), now.Add(testGrace))
	}()
	if k := atomic.LoadUint64(&words[KeyWord]); k != 0 {
		t.Errorf("key word %#x stored before the words after it", k)
	}
}
