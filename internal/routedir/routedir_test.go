package routedir

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/router"
)

// memSlots is a slot array in memory.
type memSlots []router.Nexthop

func (m memSlots) Put(s uint32, nh router.Nexthop) error { m[s] = nh; return nil }
func (m memSlots) Get(s uint32) (router.Nexthop, error)  { return m[s], nil }

var testLimits = Limits{Routes: 1 << 20, Chunks: 4096, Slots: 4096,
	RoutesKey: "max_routes", ChunksKey: "max_route_chunks", SlotsKey: "max_nexthops"}

func newTable(t testing.TB, lim Limits) (*Table, []uint32, memSlots) {
	t.Helper()
	words, slots := make([]uint32, Words(lim.Chunks)), make(memSlots, lim.Slots)
	tab, err := New(words, slots, lim)
	if err != nil {
		t.Fatal(err)
	}
	return tab, words, slots
}

// longestMatch is the reference: the entry of a's longest prefix in want.
func longestMatch(want map[netip.Prefix]router.Nexthop, a netip.Addr) (router.Nexthop, bool) {
	for bits := 32; bits >= 0; bits-- {
		p, _ := a.Prefix(bits)
		if nh, ok := want[p]; ok {
			return nh, true
		}
	}
	return router.Nexthop{}, false
}

// allLengths are lengths around the levels' edges; upTo24 has no third level.
var (
	allLengths = []int{0, 1, 8, 12, 15, 16, 17, 20, 23, 24, 25, 28, 31, 32}
	upTo24     = []int{0, 8, 16, 24}
)

// randomPrefix draws prefixes of the given lengths that overlap a lot: few top bytes.
func randomPrefix(r *rand.Rand, lens []int) netip.Prefix {
	tops := []byte{10, 11, 192, 255}
	a := netip.AddrFrom4([4]byte{tops[r.IntN(len(tops))], byte(r.IntN(4)), byte(r.IntN(8)), byte(r.IntN(256))})
	p, _ := a.Prefix(lens[r.IntN(len(lens))])
	return p
}

func randomNexthop(r *rand.Rand) router.Nexthop {
	return router.Nexthop{Kind: router.Kind(r.IntN(4)), Ifindex: 1 + r.IntN(3), MTU: 1500, Dst: [6]byte{2, 0, 0, 0, 0, byte(r.IntN(8))}}
}

// compare checks the table's answer against the reference for the edges of every prefix of
// want and random addresses.
func compare(t *testing.T, tab *Table, slots memSlots, want map[netip.Prefix]router.Nexthop, r *rand.Rand) {
	t.Helper()
	var addrs []netip.Addr
	for p := range want {
		first := addrOf(p)
		last := first | ^mask(p.Bits())
		for _, a := range []uint32{first, last, first + r.Uint32()&^mask(p.Bits()), first - 1, last + 1} {
			addrs = append(addrs, prefixOf(a, 32).Addr())
		}
	}
	for range 200 {
		addrs = append(addrs, prefixOf(r.Uint32(), 32).Addr())
	}
	for _, a := range addrs {
		nh, ok := longestMatch(want, a)
		s := tab.Lookup(a)
		if ok != (s != 0) || ok && slots[s] != nh {
			t.Fatalf("%s: table has slot %d (%+v), reference %+v (found %v)", a, s, slots[s], nh, ok)
		}
	}
}

func equalEntries(t *testing.T, got, want map[netip.Prefix]router.Nexthop) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for p, nh := range want {
		if got[p] != nh {
			t.Fatalf("entry %s: %+v, want %+v", p, got[p], nh)
		}
	}
}

// TestRandomRoutes: random puts, replacements and deletes of overlapping prefixes; after
// each, the words answer every address as a longest-prefix match over the entries would.
func TestRandomRoutes(t *testing.T) {
	t.Run("all lengths", func(t *testing.T) { testRandomRoutes(t, allLengths) })
	t.Run("up to /24", func(t *testing.T) { testRandomRoutes(t, upTo24) })
}

func testRandomRoutes(t *testing.T, lens []int) {
	r := rand.New(rand.NewPCG(1, 2))
	tab, words, _ := newTable(t, testLimits)
	slots := tab.slots.(memSlots)
	want := map[netip.Prefix]router.Nexthop{}
	for i := range 3000 {
		p := randomPrefix(r, lens)
		if _, ok := want[p]; ok && r.IntN(2) == 0 {
			if err := tab.Delete(p); err != nil {
				t.Fatal(err)
			}
			delete(want, p)
		} else {
			nh := randomNexthop(r)
			if err := tab.Put(p, nh); err != nil {
				t.Fatal(err)
			}
			want[p] = nh
		}
		if i%10 == 0 {
			compare(t, tab, slots, want, r)
		}
	}
	compare(t, tab, slots, want, r)
	equalEntries(t, tab.Entries(), want)
	for p := range want {
		if err := tab.Delete(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range words[:L1Entries] { // so no chunk is reached either
		if w != 0 {
			t.Fatalf("word %d is %#x with no routes", i, w)
		}
	}
	if c, s := tab.Usage(); c != 0 || s != 0 {
		t.Fatalf("%d chunks and %d slots in use with no routes", c, s)
	}
}

// TestTakeOver: a table opened over the words and slots of an earlier one answers as it did,
// and the router's first write (the wanted entries put, the others deleted) leaves exactly
// the wanted ones.
func TestTakeOver(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tab, words, slots := newTable(t, testLimits)
	want := map[netip.Prefix]router.Nexthop{}
	for range 500 {
		p, nh := randomPrefix(r, allLengths), randomNexthop(r)
		if err := tab.Put(p, nh); err != nil {
			t.Fatal(err)
		}
		want[p] = nh
	}
	again, err := New(words, slots, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, again, slots, want, r)
	// A slot whose prefixes are all hidden by longer ones is no word's: not taken over.
	c1, s1 := tab.Usage()
	if c2, s2 := again.Usage(); c1 != c2 || s2 > s1 {
		t.Fatalf("taken over: %d chunks, %d slots in use; the earlier table had %d, %d", c2, s2, c1, s1)
	}
	installed := again.Entries()
	for p := range want {
		want[p] = randomNexthop(r)
		if r.IntN(3) == 0 {
			delete(want, p)
		}
	}
	for p, nh := range want {
		if err := again.Put(p, nh); err != nil {
			t.Fatal(err)
		}
	}
	for p := range installed {
		if _, ok := want[p]; !ok {
			if err := again.Delete(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	compare(t, again, slots, want, r)
	equalEntries(t, again.Entries(), want)
}

// TestTakeOverRefusesBadWords: words no table wrote are an error, not a crash.
func TestTakeOverRefusesBadWords(t *testing.T) {
	lim := testLimits
	lim.Chunks = 4
	for _, w := range []uint32{ChunkFlag | 4, 5000} {
		words := make([]uint32, Words(lim.Chunks))
		words[7] = w
		if _, err := New(words, make(memSlots, lim.Slots), lim); err == nil || !strings.Contains(err.Error(), "earlier run") {
			t.Fatalf("word %#x: error %v, want one about the earlier run", w, err)
		}
	}
}

// TestLimits: a full table refuses a route and names the setting to raise; the table is as
// before the refusal.
func TestLimits(t *testing.T) {
	nh := router.Nexthop{Kind: router.Forward, Ifindex: 1}
	for _, c := range []struct {
		name   string
		lim    Limits
		puts   []string
		refuse string
		key    string
	}{
		{"routes", Limits{Routes: 2, Chunks: 4, Slots: 4}, []string{"10.0.0.0/8", "10.1.0.0/16"}, "10.2.0.0/16", "RoutesKey"},
		{"chunks", Limits{Routes: 10, Chunks: 2, Slots: 4}, []string{"10.0.0.0/24", "10.0.0.0/32"}, "10.1.0.0/24", "ChunksKey"},
		{"two chunks", Limits{Routes: 10, Chunks: 1, Slots: 4}, nil, "10.0.0.0/32", "ChunksKey"},
		{"slots", Limits{Routes: 10, Chunks: 4, Slots: 2}, []string{"10.0.0.0/8"}, "11.0.0.0/8", "SlotsKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.lim.RoutesKey, c.lim.ChunksKey, c.lim.SlotsKey = "RoutesKey", "ChunksKey", "SlotsKey"
			tab, _, slots := newTable(t, c.lim)
			want := map[netip.Prefix]router.Nexthop{}
			for i, s := range c.puts {
				want[netip.MustParsePrefix(s)] = nh
				if err := tab.Put(netip.MustParsePrefix(s), nh); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			other := router.Nexthop{Kind: router.Forward, Ifindex: 2}
			err := tab.Put(netip.MustParsePrefix(c.refuse), other)
			if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "raise "+c.key) {
				t.Fatalf("error %v, want ErrFull naming %s", err, c.key)
			}
			compare(t, tab, slots, want, rand.New(rand.NewPCG(5, 6)))
			equalEntries(t, tab.Entries(), want)
		})
	}
}

// TestPoolGrace: a released index is handed out again only after grace, unless there is no
// other; then alloc waits out the rest of its grace.
func TestPoolGrace(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	p := newPool(1, 3)
	p.now = func() time.Time { return now }
	p.sleep = func(d time.Duration) { slept += d; now = now.Add(d) }
	a, _ := p.alloc()
	p.release(a)
	b, _ := p.alloc()
	if a == b {
		t.Fatalf("index %d reused at once, with another free", a)
	}
	now = now.Add(grace / 4)
	if c, ok := p.alloc(); !ok || c != a || slept != grace*3/4 {
		t.Fatalf("alloc with only a resting index: %d, %v after sleeping %s; want %d after %s", c, ok, slept, a, grace*3/4)
	}
	if _, ok := p.alloc(); ok {
		t.Fatal("alloc succeeded with every index in use")
	}
}

// BenchmarkPut: a /24 route replaced (a neighbour change of a route via it) in a table of
// 100,000 random /24s, and the default route replaced under them (every first-level word
// and chunk visited). It logs the chunks 1,000 and 100,000 random /24s take.
func BenchmarkPut(b *testing.B) {
	lim := testLimits
	lim.Chunks, lim.Slots = 65536, 1024
	tab, _, _ := newTable(b, lim)
	r := rand.New(rand.NewPCG(7, 8))
	var ps []netip.Prefix
	for len(ps) < 100000 {
		p, _ := prefixOf(r.Uint32(), 32).Addr().Prefix(24)
		if err := tab.Put(p, router.Nexthop{Kind: router.Forward, Ifindex: 1}); err != nil {
			b.Fatal(err)
		}
		if ps = append(ps, p); len(ps) == 1000 || len(ps) == 100000 {
			c, _ := tab.Usage()
			b.Logf("%d random /24s: %d chunks, %d KiB with the first level", len(ps), c, Words(c)*4>>10)
		}
	}
	b.Run("slash24", func(b *testing.B) {
		for i := range b.N {
			tab.Put(ps[i%len(ps)], router.Nexthop{Kind: router.Forward, Ifindex: 1, MTU: i % 2})
		}
	})
	b.Run("default", func(b *testing.B) {
		for i := range b.N {
			tab.Put(netip.MustParsePrefix("0.0.0.0/0"), router.Nexthop{Kind: router.Forward, Ifindex: 2, MTU: i % 2})
		}
	})
}
