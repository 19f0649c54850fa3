package routedir

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestPinsFollowChanges changes random routes around pinned addresses: after every change,
// each pin word holds its address and the slot the words give it, and that slot is in use
// (not resting or reused), so the datapath reading the pin sends where the words would.
func TestPinsFollowChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tab, _, _ := newTable(t, testLimits)
	words := make([]uint64, 64)
	words[3] = 0xdead // left by an earlier run: cleared
	tab.SetPins(words)
	if words[3] != 0 {
		t.Fatalf("SetPins left word 3 = %#x", words[3])
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
	}
}

func checkPin(t *testing.T, tab *Table, words []uint64, a netip.Addr) {
	t.Helper()
	i := tab.pins.index[addrOf(netip.PrefixFrom(a, 32))]
	b := a.As4()
	w := words[i]
	if got := [4]byte{byte(w), byte(w >> 8), byte(w >> 16), byte(w >> 24)}; got != b {
		t.Fatalf("pin word %d holds address %v, want %s", i, got, a)
	}
	s, _ := tab.Pinned(a)
	if want := tab.Lookup(a); s != want {
		t.Fatalf("pin of %s names slot %d; the words give %d", a, s, want)
	}
	if s != 0 && tab.refs[s] <= 0 {
		t.Fatalf("pin of %s names slot %d, which no prefix uses (released)", a, s)
	}
}

// TestPinWords: a pin is shared by those who ask for it and freed by the last Unpin; when
// the words run out Pin answers 0 (the datapath reads the route words instead).
func TestPinWords(t *testing.T) {
	tab, _, _ := newTable(t, testLimits)
	words := make([]uint64, 3) // word 0 is never a pin: two pins
	tab.SetPins(words)
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
	if words[ia] == 0 {
		t.Fatal("the first Unpin of a pin asked for twice cleared it")
	}
	tab.Unpin(a)
	if words[ia] != 0 {
		t.Fatalf("unpinned word %d still holds %#x", ia, words[ia])
	}
	if ic := tab.Pin(c); ic != ia {
		t.Fatalf("Pin after Unpin: word %d, want the freed %d", ic, ia)
	}
	if _, ok := tab.Pinned(a); ok {
		t.Fatalf("%s still pinned", a)
	}
}
