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

// fakeClock is the pins' clock in tests, and their timer: pass runs SettlePins once the
// wait given to wake is over, as the datapath's timer does.
type fakeClock struct {
	t     time.Time
	waits []time.Duration // every wait wake was given
	at    time.Time       // when SettlePins is to run; zero: not armed
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) wake(d time.Duration) {
	c.waits = append(c.waits, d)
	c.at = c.t.Add(d)
}

// pass moves the clock on by d, settling tab's pins if their wait is over.
func (c *fakeClock) pass(tab *Table, d time.Duration) {
	c.t = c.t.Add(d)
	if !c.at.IsZero() && !c.t.Before(c.at) {
		c.at = time.Time{}
		tab.SettlePins()
	}
}

// setPinsAt gives tab the pin entries words and a fake clock, the load since ago.
func setPinsAt(tab *Table, words []uint64, since time.Duration) *fakeClock {
	c := &fakeClock{t: time.Unix(1000, 0)}
	tab.SetPins(words, testEncode, c.wake)
	tab.pins.now = c.now
	tab.pins.rest(c.t.Add(-since))
	return c
}

// setPins gives tab n pin entries and a fake clock, grace past the load.
func setPins(tab *Table, n int) ([]uint64, *fakeClock) {
	words := make([]uint64, n*PinWords)
	return words, setPinsAt(tab, words, grace)
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
	clock := setPinsAt(tab, words, 0)
	if words[3*PinWords] != 0 {
		t.Fatalf("SetPins left entry 3's word = %#x", words[3*PinWords])
	}
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
		clock.pass(tab, time.Duration(r.IntN(4))*time.Millisecond)
	}
	clock.pass(tab, grace)
	for _, a := range pinned {
		if x := addrOf(netip.PrefixFrom(a, 32)); tab.pins.due[x] {
			t.Fatalf("pin of %s still due a grace after the last change", a)
		}
		checkPin(t, tab, words, a)
	}
}

// checkPin checks that a's pin sends where the words would: its word names a's slot and a
// copy of its next hop, or is 0 (the datapath walks the words) while the entry is due.
func checkPin(t *testing.T, tab *Table, words []uint64, a netip.Addr) {
	t.Helper()
	x := addrOf(netip.PrefixFrom(a, 32))
	i := tab.pins.index[x]
	b := a.As4()
	w := words[i*PinWords]
	if w == 0 && tab.pins.due[x] {
		if !tab.pins.armed {
			t.Fatalf("pin of %s is due but SettlePins is not to run", a)
		}
		return
	}
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
// before may still read the copy): a second change within grace does not wait, under the
// route table's lock, for the rest; it stores 0 in the word, and SettlePins names the copy
// once the rest is over.
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
	if named() == first || len(clock.waits) != 0 {
		t.Fatalf("a change a second after the last: copy %d (was %d), waits %v; want the other copy at once", named(), first, clock.waits)
	}
	clock.pass(tab, 3*time.Millisecond)
	if err := tab.Put(p, nh(3)); err != nil {
		t.Fatal(err)
	}
	if w := words[i*PinWords]; w != 0 {
		t.Fatalf("a change 3 ms after the last: word %#x; want 0 until the spare copy rests", w)
	}
	if want := []time.Duration{grace - 3*time.Millisecond}; len(clock.waits) != 1 || clock.waits[0] != want[0] {
		t.Fatalf("a change 3 ms after the last: waits %v; want %v", clock.waits, want)
	}
	clock.pass(tab, grace-3*time.Millisecond-1)
	if w := words[i*PinWords]; w != 0 {
		t.Fatalf("word %#x before the spare copy rested; want 0", w)
	}
	clock.pass(tab, 1)
	if named() != first {
		t.Fatalf("copy %d after two changes; want %d again", named(), first)
	}
	checkPin(t, tab, words, gnb)
}

// TestPinCopiesRestAtLoad: an earlier run's program may still read the copies its words named
// when a load clears them, so the first pin within grace of the load names a copy only once
// the rest is over.
func TestPinCopiesRestAtLoad(t *testing.T) {
	tab, _, _ := newTable(t, testLimits)
	words := make([]uint64, 2*PinWords)
	words[1*PinWords+1] = 0xdead // a copy an earlier run's word named
	tab.SetPins(words, testEncode, func(time.Duration) {})
	if words[1*PinWords+1] != 0xdead {
		t.Fatal("SetPins rewrote a copy at once")
	}
	if since := time.Since(tab.pins.changed[1]); since > time.Minute {
		t.Fatalf("entry 1's copies rest from %v ago; want from the load", since)
	}
	clock := setPinsAt(tab, words, 4*time.Millisecond) // loaded 4 ms ago
	a := netip.MustParseAddr("10.0.0.1")
	i := tab.Pin(a)
	if want := grace - 4*time.Millisecond; len(clock.waits) != 1 || clock.waits[0] != want || words[i*PinWords] != 0 {
		t.Fatalf("a pin 4 ms after the load: word %#x, waits %v; want 0 and %v", words[i*PinWords], clock.waits, want)
	}
	clock.pass(tab, grace-4*time.Millisecond)
	checkPin(t, tab, words, a)
	if words[i*PinWords] == 0 {
		t.Fatal("the pin's word is still 0 once the copies rested")
	}
}

// TestPinsFlappingRoute: a run of changes of the route covering pinned peers (a flapping
// default route) never waits under the route table's lock, which PFCP installs and the
// router's netlink reader take: each change leaves every pin right or 0, one wake at a time
// is pending, and a grace after the last change every pin names its next hop again.
func TestPinsFlappingRoute(t *testing.T) {
	tab, _, _ := newTable(t, testLimits)
	words, clock := setPins(tab, 64)
	var peers []netip.Addr
	for i := range 20 {
		peers = append(peers, netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}))
		tab.Pin(peers[i])
	}
	def := netip.MustParsePrefix("0.0.0.0/0")
	for i := range 50 {
		nh := router.Nexthop{Kind: router.Forward, Ifindex: 2, MTU: 1500, Dst: [6]byte{2, 0, 0, 0, 0, byte(i%2 + 1)}}
		if err := tab.Put(def, nh); err != nil {
			t.Fatal(err)
		}
		for _, a := range peers {
			checkPin(t, tab, words, a)
		}
		clock.pass(tab, time.Millisecond)
	}
	if max := 50/int(grace/time.Millisecond) + 1; len(clock.waits) > max {
		t.Errorf("50 changes 1 ms apart asked for %d wakes; want at most %d, one per grace", len(clock.waits), max)
	}
	clock.pass(tab, grace)
	for _, a := range peers {
		checkPin(t, tab, words, a)
		if words[tab.pins.index[addrOf(netip.PrefixFrom(a, 32))]*PinWords] == 0 {
			t.Fatalf("pin of %s is 0 a grace after the last change", a)
		}
	}
}
