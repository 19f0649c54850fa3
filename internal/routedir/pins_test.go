package routedir

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/router"
)

// testEncode lays a next hop out in a pin's copy, as the datapath's struct nexthop would.
func testEncode(nh router.Nexthop) [CopyWords]uint64 {
	d := nh.Dst
	return [CopyWords]uint64{uint64(nh.Kind) | uint64(nh.Ifindex)<<32, uint64(nh.MTU),
		uint64(d[0]) | uint64(d[1])<<8 | uint64(d[2])<<16 | uint64(d[3])<<24 | uint64(d[4])<<32 | uint64(d[5])<<40}
}

// fakeClock is the pins' clock in tests: sleeping moves it on.
type fakeClock struct {
	t     time.Time
	slept []time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(d time.Duration) {
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
}

// setPins gives tab n pin entries and a fake clock, grace past the load.
func setPins(tab *Table, n int) ([]uint64, *fakeClock) {
	words := make([]uint64, n*PinWords)
	tab.SetPins(words, testEncode)
	c := &fakeClock{t: time.Unix(1000, 0)}
	tab.pins.now, tab.pins.sleep = c.now, c.sleep
	tab.pins.rest(c.t.Add(-grace))
	return words, c
}

// TestPinsFollowChanges changes random routes around pinned addresses: after every change,
// each pin word holds its address and the slot the words give it, that slot is in use (not
// resting or reused), and the copy the word names holds the slot's next hop, so the datapath
// reading the pin sends where the words would.
func TestPinsFollowChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tab, _, _ := newTable(t, testLimits)
	words := make([]uint64, 64*PinWords)
	words[3*PinWords] = 0xdead // left by an earlier run: cleared
	tab.SetPins(words, testEncode)
	if words[3*PinWords] != 0 {
		t.Fatalf("SetPins left entry 3's word = %#x", words[3*PinWords])
	}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tab.pins.now, tab.pins.sleep = clock.now, clock.sleep
	tab.pins.rest(clock.t)
	var pinned []netip.Addr
	for range 40 {
		a := randomPrefix(r, []int{32}).Addr()
		if tab.Pin(a) == 0 {
			t.Fatalf("no pin for %s with %d words", a, len(words))
		}
		pinned = append(pinned, a)
	}
	for i := range 3000 {
		p := randomPrefix(r, allLengths)
		var err error
		if r.IntN(3) == 0 {
			err = tab.Delete(p)
		} else {
			err = tab.Put(p, randomNexthop(r))
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 { // pins come and go too
			a := pinned[r.IntN(len(pinned))]
			tab.Unpin(a)
			tab.Pin(a)
		}
		for _, a := range pinned {
			checkPin(t, tab, words, a)
		}
	}
}

func checkPin(t *testing.T, tab *Table, words []uint64, a netip.Addr) {
	t.Helper()
	i := tab.pins.index[addrOf(netip.PrefixFrom(a, 32))]
	b := a.As4()
	w := words[i*PinWords]
	if got := [4]byte{byte(w), byte(w >> 8), byte(w >> 16), byte(w >> 24)}; got != b {
		t.Fatalf("pin word %d holds address %v, want %s", i, got, a)
	}
	s, copied, _ := tab.Pinned(a)
	if want := tab.Lookup(a); s != want {
		t.Fatalf("pin of %s names slot %d; the words give %d", a, s, want)
	}
	if want := testEncode(tab.Nexthop(s)); copied != want {
		t.Fatalf("pin of %s names a copy %#x; slot %d holds %#x", a, copied, s, want)
	}
	if s != 0 && tab.refs[s] <= 0 {
		t.Fatalf("pin of %s names slot %d, which no prefix uses (released)", a, s)
	}
}

// TestPinWords: a pin is shared by those who ask for it and freed by the last Unpin; when
// the words run out Pin answers 0 (the datapath reads the route words instead).
func TestPinWords(t *testing.T) {
	tab, _, _ := newTable(t, testLimits)
	words, _ := setPins(tab, 3) // entry 0 is never a pin: two pins
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	ia, ib := tab.Pin(a), tab.Pin(b)
	if ia == 0 || ib == 0 || ia == ib {
		t.Fatalf("pins %d, %d: want two words", ia, ib)
	}
	if again := tab.Pin(a); again != ia {
		t.Fatalf("second Pin of %s: word %d, want %d", a, again, ia)
	}
	if ic := tab.Pin(c); ic != 0 {
		t.Fatalf("Pin with no word free: %d, want 0", ic)
	}
	tab.Unpin(a)
	if words[ia*PinWords] == 0 {
		t.Fatal("the first Unpin of a pin asked for twice cleared it")
	}
	tab.Unpin(a)
	if words[ia*PinWords] != 0 {
		t.Fatalf("unpinned entry %d's word still holds %#x", ia, words[ia*PinWords])
	}
	if ic := tab.Pin(c); ic != ia {
		t.Fatalf("Pin after Unpin: word %d, want the freed %d", ic, ia)
	}
	if _, _, ok := tab.Pinned(a); ok {
		t.Fatalf("%s still pinned", a)
	}
}

// TestPinCopiesRest: a changed next hop goes to the copy the word does not name, and a copy is
// written only once grace has passed since the word last named it (a packet that read the word
// before may still read the copy): a second change within grace waits out the rest.
func TestPinCopiesRest(t *testing.T) {
	tab, _, _ := newTable(t, testLimits)
	words, clock := setPins(tab, 2)
	gnb := netip.MustParseAddr("10.0.0.1")
	p := netip.MustParsePrefix("10.0.0.1/32")
	nh := func(last byte) router.Nexthop {
		return router.Nexthop{Kind: router.Forward, Ifindex: 2, MTU: 1500, Dst: [6]byte{2, 0, 0, 0, 0, last}}
	}
	if err := tab.Put(p, nh(1)); err != nil {
		t.Fatal(err)
	}
	i := tab.Pin(gnb)
	named := func() uint64 { return words[i*PinWords] >> 32 & 1 }
	first := named()
	clock.t = clock.t.Add(time.Second)
	if err := tab.Put(p, nh(2)); err != nil {
		t.Fatal(err)
	}
	if named() == first || len(clock.slept) != 0 {
		t.Fatalf("a change a second after the last: copy %d (was %d), slept %v; want the other copy at once", named(), first, clock.slept)
	}
	clock.t = clock.t.Add(3 * time.Millisecond)
	if err := tab.Put(p, nh(3)); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{grace - 3*time.Millisecond}; len(clock.slept) != 1 || clock.slept[0] != want[0] {
		t.Fatalf("a change 3 ms after the last slept %v; want %v", clock.slept, want)
	}
	if named() != first {
		t.Fatalf("copy %d after two changes; want %d again", named(), first)
	}
	checkPin(t, tab, words, gnb)
}

// TestPinCopiesRestAtLoad: an earlier run's program may still read the copies its words named
// when a load clears them, so the first pin within grace of the load waits out the rest.
func TestPinCopiesRestAtLoad(t *testing.T) {
	tab, _, _ := newTable(t, testLimits)
	words := make([]uint64, 2*PinWords)
	words[1*PinWords+1] = 0xdead // a copy an earlier run's word named
	tab.SetPins(words, testEncode)
	if words[1*PinWords+1] != 0xdead {
		t.Fatal("SetPins rewrote a copy at once")
	}
	if since := time.Since(tab.pins.changed[1]); since > time.Minute {
		t.Fatalf("entry 1's copies rest from %v ago; want from the load", since)
	}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tab.pins.now, tab.pins.sleep = clock.now, clock.sleep
	tab.pins.rest(clock.t.Add(-4 * time.Millisecond)) // loaded 4 ms ago
	tab.Pin(netip.MustParseAddr("10.0.0.1"))
	if want := grace - 4*time.Millisecond; len(clock.slept) != 1 || clock.slept[0] != want {
		t.Fatalf("a pin 4 ms after the load slept %v; want %v", clock.slept, want)
	}
}
