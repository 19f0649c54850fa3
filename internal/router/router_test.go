package router

import (
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var (
	macN3  = net.HardwareAddr{2, 0, 0, 0, 1, 1}
	macGNB = net.HardwareAddr{2, 0, 0, 0, 1, 2}
	macN6  = net.HardwareAddr{2, 0, 0, 0, 2, 1}
	macDN  = net.HardwareAddr{2, 0, 0, 0, 2, 2}
	macDN2 = net.HardwareAddr{2, 0, 0, 0, 2, 3}
)

const n3, n6 = 3, 6

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

// fakeTable records the router's writes.
type fakeTable struct {
	m            map[netip.Prefix]Nexthop
	puts, delete int
}

func (f *fakeTable) Put(p netip.Prefix, nh Nexthop) error { f.m[p] = nh; f.puts++; return nil }
func (f *fakeTable) Delete(p netip.Prefix) error          { delete(f.m, p); f.delete++; return nil }
func (f *fakeTable) Entries() (map[netip.Prefix]Nexthop, error) {
	return maps.Clone(f.m), nil
}

// testState is the datapath tests' network: n3 10.0.1.1/24 with the gNB 10.0.1.2 resolved,
// n6 10.0.2.1/24 with the DN router 10.0.2.2, default via 10.0.2.2, a blackhole.
func testState() state {
	s := newState()
	s.setLinks([]Link{{Index: n3, Name: "n3", MAC: macN3, MTU: 1500}, {Index: n6, Name: "n6", MAC: macN6, MTU: 9000}})
	for _, r := range []Route{
		{Prefix: pfx("10.0.1.0/24"), Ifindex: n3},
		{Prefix: pfx("10.0.2.0/24"), Ifindex: n6},
		{Prefix: pfx("0.0.0.0/0"), Ifindex: n6, Gateway: addr("10.0.2.2")},
		{Prefix: pfx("198.51.100.0/24"), Type: Drop},
		{Prefix: pfx("10.0.1.1/32"), Type: Local, LocalTable: true, Ifindex: n3},
	} {
		s.routes[keyOf(r)] = r
	}
	s.neighs[neighKey{addr("10.0.1.2"), n3}] = macGNB
	s.neighs[neighKey{addr("10.0.2.2"), n6}] = macDN
	return s
}

func TestResolve(t *testing.T) {
	fwd := func(ifindex, mtu int, src, dst net.HardwareAddr) Nexthop {
		return Nexthop{Kind: Forward, Ifindex: ifindex, MTU: mtu, Src: [6]byte(src), Dst: [6]byte(dst)}
	}
	unresolved := func(ifindex, mtu int, src net.HardwareAddr) Nexthop {
		return Nexthop{Kind: Unresolved, Ifindex: ifindex, MTU: mtu, Src: [6]byte(src)}
	}
	base := map[netip.Prefix]Nexthop{
		pfx("0.0.0.0/8"):          {Kind: Kernel},
		pfx("127.0.0.0/8"):        {Kind: Kernel},
		pfx("224.0.0.0/4"):        {Kind: Kernel},
		pfx("255.255.255.255/32"): {Kind: Kernel},
		pfx("10.0.1.0/24"):        unresolved(n3, 1500, macN3),
		pfx("10.0.1.2/32"):        fwd(n3, 1500, macN3, macGNB),
		pfx("10.0.2.0/24"):        unresolved(n6, 9000, macN6),
		pfx("10.0.2.2/32"):        fwd(n6, 9000, macN6, macDN),
		pfx("0.0.0.0/0"):          fwd(n6, 9000, macN6, macDN),
		pfx("198.51.100.0/24"):    {Kind: NoRoute},
		pfx("10.0.1.1/32"):        {Kind: Kernel},
	}
	for _, c := range []struct {
		name   string
		change func(*state)
		want   func(map[netip.Prefix]Nexthop)
	}{
		{"as set up", func(*state) {}, func(map[netip.Prefix]Nexthop) {}},
		{"gateway unresolved", func(s *state) { delete(s.neighs, neighKey{addr("10.0.2.2"), n6}) },
			func(w map[netip.Prefix]Nexthop) {
				w[pfx("0.0.0.0/0")] = unresolved(n6, 9000, macN6)
				delete(w, pfx("10.0.2.2/32"))
			}},
		{"neighbour changed", func(s *state) { s.neighs[neighKey{addr("10.0.2.2"), n6}] = macDN2 },
			func(w map[netip.Prefix]Nexthop) {
				w[pfx("0.0.0.0/0")] = fwd(n6, 9000, macN6, macDN2)
				w[pfx("10.0.2.2/32")] = fwd(n6, 9000, macN6, macDN2)
			}},
		{"a neighbour on another interface than the on-link route's is not a next hop",
			func(s *state) { s.neighs[neighKey{addr("10.0.1.9"), n6}] = macDN }, func(map[netip.Prefix]Nexthop) {}},
		{"a neighbour outside every on-link route is not a next hop",
			func(s *state) { s.neighs[neighKey{addr("192.0.2.1"), n6}] = macDN }, func(map[netip.Prefix]Nexthop) {}},
		{"a more specific route takes a neighbour's address from the on-link route",
			func(s *state) {
				r := Route{Prefix: pfx("10.0.1.0/25"), Ifindex: n6, Gateway: addr("10.0.2.2")}
				s.routes[keyOf(r)] = r
			},
			func(w map[netip.Prefix]Nexthop) {
				w[pfx("10.0.1.0/25")] = fwd(n6, 9000, macN6, macDN)
				delete(w, pfx("10.0.1.2/32"))
			}},
		{"the route's MTU wins over the interface's",
			func(s *state) {
				r := Route{Prefix: pfx("0.0.0.0/0"), Ifindex: n6, Gateway: addr("10.0.2.2"), MTU: 1400}
				s.routes[keyOf(r)] = r
			},
			func(w map[netip.Prefix]Nexthop) { w[pfx("0.0.0.0/0")] = fwd(n6, 1400, macN6, macDN) }},
		{"of two routes to a prefix the lower priority wins",
			func(s *state) {
				r := Route{Prefix: pfx("0.0.0.0/0"), Type: Drop, Priority: 100}
				s.routes[keyOf(r)] = r
			}, func(map[netip.Prefix]Nexthop) {}},
		{"the local table wins over the main one",
			func(s *state) {
				r := Route{Prefix: pfx("10.0.2.2/32"), Type: Local, LocalTable: true}
				s.routes[keyOf(r)] = r
			},
			func(w map[netip.Prefix]Nexthop) { w[pfx("10.0.2.2/32")] = Nexthop{Kind: Kernel} }},
		{"an interface without an Ethernet address is the kernel's",
			func(s *state) { s.links[n6] = Link{Index: n6, Name: "tun0", MTU: 1400} },
			func(w map[netip.Prefix]Nexthop) {
				for _, p := range []string{"0.0.0.0/0", "10.0.2.0/24"} {
					w[pfx(p)] = Nexthop{Kind: Kernel}
				}
				delete(w, pfx("10.0.2.2/32"))
			}},
		{"a local address is never forwarded", func(s *state) { s.local[addr("10.0.2.1")] = true },
			func(w map[netip.Prefix]Nexthop) { w[pfx("10.0.2.1/32")] = Nexthop{Kind: Kernel} }},
		{"a route to a multicast prefix wins over the fixed one",
			func(s *state) {
				r := Route{Prefix: pfx("224.0.0.0/4"), Ifindex: n6, Gateway: addr("10.0.2.2")}
				s.routes[keyOf(r)] = r
			},
			func(w map[netip.Prefix]Nexthop) { w[pfx("224.0.0.0/4")] = fwd(n6, 9000, macN6, macDN) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testState()
			c.change(&s)
			want := maps.Clone(base)
			c.want(want)
			got, _ := s.resolve()
			for p, nh := range want {
				if g, ok := got[p]; !ok || g != nh {
					t.Errorf("%s: got %+v (present %v), want %+v", p, g, ok, nh)
				}
			}
			for p, nh := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("%s: unexpected entry %+v", p, nh)
				}
			}
		})
	}
}

// TestWriteOnlyChanges: the router writes the entries that changed and deletes the ones gone,
// and takes over the table's entries from an earlier run.
func TestWriteOnlyChanges(t *testing.T) {
	stale := pfx("203.0.113.0/24")
	tbl := &fakeTable{m: map[netip.Prefix]Nexthop{stale: {Kind: NoRoute}}}
	r, err := New(tbl, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := testState()
	if err := r.list(func(s *state) error { *s = st; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.m[stale]; ok || tbl.delete != 1 {
		t.Errorf("the earlier run's entry was not deleted: %v, %d deletes", tbl.m, tbl.delete)
	}
	if want, _ := st.resolve(); !maps.Equal(tbl.m, want) || !maps.Equal(r.Entries(), tbl.m) {
		t.Fatalf("table %v, want %v", tbl.m, want)
	}
	tbl.puts, tbl.delete = 0, 0
	err = r.updateNeighs(func(s *state) ([]neighKey, error) {
		k := neighKey{addr("10.0.2.2"), n6}
		s.neighs[k] = macDN2
		return []neighKey{k}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.puts != 2 || tbl.delete != 0 {
		t.Errorf("a neighbour change wrote %d entries and deleted %d; want 2 (the default route and the /32) and 0",
			tbl.puts, tbl.delete)
	}
	tbl.puts = 0
	err = r.updateNeighs(func(s *state) ([]neighKey, error) {
		k := neighKey{addr("10.0.1.2"), n3}
		delete(s.neighs, k)
		return []neighKey{k}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.puts != 0 || tbl.delete != 1 {
		t.Errorf("a neighbour deletion wrote %d entries and deleted %d; want 0 and 1", tbl.puts, tbl.delete)
	}
}

// TestPrivate: private routes and neighbours become entries; what is not valid, or a change
// to a mirroring router, is refused with what to fix.
func TestPrivate(t *testing.T) {
	newRouter := func(private bool) *Router {
		r, err := New(&fakeTable{m: map[netip.Prefix]Nexthop{}}, private, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.st.setLinks([]Link{{Index: n6, Name: "n6", MAC: macN6, MTU: 1500}})
		if err := r.Ready(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := newRouter(false).AddRoute(Route{Prefix: pfx("0.0.0.0/0"), Ifindex: n6}); !errors.Is(err, ErrMirror) {
		t.Errorf("a route added to a mirroring router: %v, want ErrMirror", err)
	}
	r := newRouter(true)
	def := Route{Prefix: pfx("0.0.0.0/0"), Ifindex: n6, Gateway: addr("10.0.2.2")}
	if err := r.AddRoute(def); err != nil {
		t.Fatal(err)
	}
	if err := r.AddNeighbour(Neighbour{Addr: addr("10.0.2.2"), Ifindex: n6, MAC: macDN}); err != nil {
		t.Fatal(err)
	}
	want := Nexthop{Kind: Forward, Ifindex: n6, MTU: 1500, Src: [6]byte(macN6), Dst: [6]byte(macDN)}
	if got := r.Entries()[def.Prefix]; got != want {
		t.Errorf("default route %+v, want %+v", got, want)
	}
	if err := r.DeleteNeighbour(addr("10.0.2.2"), n6); err != nil || r.Entries()[def.Prefix].Kind != Unresolved {
		t.Errorf("after the neighbour's deletion (%v): %+v, want unresolved", err, r.Entries()[def.Prefix])
	}
	if err := r.DeleteRoute(def.Prefix); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Entries()[def.Prefix]; ok || !errors.Is(r.DeleteRoute(def.Prefix), ErrNotFound) {
		t.Errorf("a deleted route is still there, or deletes twice")
	}
	for _, c := range []struct {
		route Route
		want  string
	}{
		{Route{Prefix: pfx("10.0.0.1/8"), Ifindex: n6}, "prefix: 10.0.0.1/8 has host bits set; use 10.0.0.0/8"},
		{Route{Prefix: pfx("2001:db8::/32"), Ifindex: n6}, "is not an IPv4 prefix"},
		{Route{Prefix: pfx("10.0.0.0/8")}, "interface: missing"},
		{Route{Prefix: pfx("10.0.0.0/8"), Ifindex: 99}, "interface: ifindex 99 does not exist"},
		{Route{Prefix: pfx("10.0.0.0/8"), Ifindex: n6, MTU: 20}, "mtu: 20 is below IPv4's minimum"},
		{Route{Prefix: pfx("10.0.0.0/8"), Ifindex: n6, Gateway: addr("224.0.0.1")}, "via: 224.0.0.1 is not a unicast IPv4 address"},
		{Route{Prefix: pfx("10.0.0.0/8"), Type: Drop, Ifindex: n6}, "a blackhole route has no via, interface or mtu"},
		{Route{Prefix: pfx("10.0.0.0/8"), Type: Local}, "type: local routes are the kernel's"},
	} {
		if err := r.AddRoute(c.route); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.route, err, c.want)
		}
	}
	for _, c := range []struct {
		n    Neighbour
		want string
	}{
		{Neighbour{Addr: addr("10.0.2.2"), Ifindex: n6, MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}}, "is not a unicast Ethernet address"},
		{Neighbour{Addr: addr("10.0.2.2"), Ifindex: n6, MAC: net.HardwareAddr{1, 2}}, "is not an Ethernet address"},
		{Neighbour{Addr: addr("0.0.0.0"), Ifindex: n6, MAC: macDN}, "is not a unicast IPv4 address"},
	} {
		if err := r.AddNeighbour(c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.n, err, c.want)
		}
	}
}

// bigState is testState with 100,000 routes (/24s via the DN router) and 1,000 neighbours
// on an on-link /16.
func bigState() state {
	s := testState()
	for i := range 100000 {
		r := Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{20 + byte(i>>16), byte(i >> 8), byte(i), 0}), 24),
			Ifindex: n6, Gateway: addr("10.0.2.2")}
		s.routes[keyOf(r)] = r
	}
	onLink := Route{Prefix: pfx("10.1.0.0/16"), Ifindex: n3}
	s.routes[keyOf(onLink)] = onLink
	for i := range 1000 {
		s.neighs[neighKey{netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), n3}] = macGNB
	}
	return s
}

// BenchmarkResolve: one resolution of the whole table, what a route or link change costs,
// with bigState.
func BenchmarkResolve(b *testing.B) {
	s := bigState()
	for b.Loop() {
		if out, _ := s.resolve(); len(out) < 101000 {
			b.Fatal("entries missing")
		}
	}
}

// BenchmarkNeighbourChange: a neighbour's MAC changing, with bigState, written to a table:
// the on-link neighbour's /32 alone (the DN router's would rewrite its 100,000 routes).
func BenchmarkNeighbourChange(b *testing.B) {
	r, err := New(&fakeTable{m: map[netip.Prefix]Nexthop{}}, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	st := bigState()
	if err := r.list(func(s *state) error { *s = st; return nil }); err != nil {
		b.Fatal(err)
	}
	k := neighKey{addr("10.1.0.7"), n3}
	i := 0
	for b.Loop() {
		i++
		err := r.updateNeighs(func(s *state) ([]neighKey, error) {
			s.neighs[k] = []net.HardwareAddr{macGNB, macDN}[i%2]
			return []neighKey{k}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestNeighbourChangesAreIncremental: random neighbour changes, each written through
// updateNeighs (only the entries it can change), leave the table as a full resolution would.
func TestNeighbourChangesAreIncremental(t *testing.T) {
	tbl := &fakeTable{m: map[netip.Prefix]Nexthop{}}
	r, err := New(tbl, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := testState()
	for _, rt := range []Route{
		{Prefix: pfx("10.0.1.0/28"), Ifindex: n6, Gateway: addr("10.0.2.2")}, // takes 10.0.1.2 from the on-link /24
		{Prefix: pfx("10.0.1.5/32"), Type: Drop},
		{Prefix: pfx("192.0.2.0/24"), Ifindex: n3, Gateway: addr("10.0.1.20")},
		{Prefix: pfx("192.0.3.0/24"), Ifindex: n6, Gateway: addr("10.0.1.20")}, // a gateway not on n6's subnet
	} {
		st.routes[keyOf(rt)] = rt
	}
	st.local[addr("10.0.2.1")] = true
	if err := r.list(func(s *state) error { *s = st; return nil }); err != nil {
		t.Fatal(err)
	}
	addrs := []netip.Addr{addr("10.0.1.2"), addr("10.0.1.5"), addr("10.0.1.20"), addr("10.0.1.30"),
		addr("10.0.2.1"), addr("10.0.2.2"), addr("10.0.2.9"), addr("192.0.2.1"), addr("224.0.0.5")}
	macs := []net.HardwareAddr{macGNB, macDN, macDN2}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		k := neighKey{addrs[rng.IntN(len(addrs))], []int{n3, n6}[rng.IntN(2)]}
		mac := macs[rng.IntN(len(macs))]
		del := rng.IntN(3) == 0
		err := r.updateNeighs(func(s *state) ([]neighKey, error) {
			if del {
				delete(s.neighs, k)
			} else {
				s.neighs[k] = mac
			}
			return []neighKey{k}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := r.st.resolve()
		if !maps.Equal(tbl.m, want) {
			t.Fatalf("change %d (%v on %d, delete %v): table\n%v\nwant\n%v", i, k.addr, k.ifindex, del, tbl.m, want)
		}
	}
}

// TestNothingWrittenBeforeListing: a mirroring router given its local addresses before Follow
// has listed the kernel's state (as the datapath's Load does) leaves the earlier run's entries
// alone, so they keep forwarding across a restart; the listing then writes.
func TestNothingWrittenBeforeListing(t *testing.T) {
	kept := pfx("10.0.2.0/24")
	tbl := &fakeTable{m: map[netip.Prefix]Nexthop{kept: {Kind: Forward, Ifindex: n6}}}
	r, err := New(tbl, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetLocal([]netip.Addr{addr("10.0.1.1")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.m[kept]; !ok || tbl.delete != 0 || tbl.puts != 0 {
		t.Errorf("before the listing: table %v, %d puts, %d deletes; want the earlier run's alone", tbl.m, tbl.puts, tbl.delete)
	}
	st := testState()
	if err := r.list(func(s *state) error { *s = st; return nil }); err != nil {
		t.Fatal(err)
	}
	if want, _ := st.resolve(); !maps.Equal(tbl.m, want) {
		t.Errorf("after the listing: table %v, want %v", tbl.m, want)
	}
}

// TestPrivateWritesOnceReady: a private router being given its local addresses and routes at
// start-up leaves the earlier run's entries alone until its owner says all are in (Ready),
// then replaces them in one pass.
func TestPrivateWritesOnceReady(t *testing.T) {
	stale := pfx("203.0.113.0/24")
	tbl := &fakeTable{m: map[netip.Prefix]Nexthop{stale: {Kind: Forward, Ifindex: n6}}}
	r, err := New(tbl, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.st.setLinks([]Link{{Index: n6, Name: "n6", MAC: macN6, MTU: 1500}})
	def := Route{Prefix: pfx("0.0.0.0/0"), Ifindex: n6, Gateway: addr("10.0.2.2")}
	if err := errors.Join(r.SetLocal([]netip.Addr{addr("10.0.2.1")}), r.AddRoute(def)); err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.m[stale]; !ok || tbl.puts != 0 || tbl.delete != 0 {
		t.Errorf("before Ready: table %v, %d puts, %d deletes; want the earlier run's alone", tbl.m, tbl.puts, tbl.delete)
	}
	if err := r.Ready(); err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.m[stale]; ok || tbl.m[def.Prefix].Kind != Unresolved {
		t.Errorf("after Ready: table %v, want the default route and not the earlier run's", tbl.m)
	}
}

// TestNeighbourBeforeReady: a neighbour change before the router may write (a private router
// before Ready, a mirroring one before the first listing) leaves the earlier run's entries,
// taken over from the table, alone; they keep forwarding until the whole table is written.
func TestNeighbourBeforeReady(t *testing.T) {
	host := pfx("10.0.2.5/32")
	for _, private := range []bool{true, false} {
		tbl := &fakeTable{m: map[netip.Prefix]Nexthop{host: {Kind: Forward, Ifindex: n6}}}
		r, err := New(tbl, private, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.st.setLinks([]Link{{Index: n6, Name: "n6", MAC: macN6, MTU: 1500}})
		k := neighKey{addr("10.0.2.5"), n6}
		err = r.updateNeighs(func(s *state) ([]neighKey, error) {
			s.neighs[k] = macDN
			return []neighKey{k}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tbl.m[host]; !ok || tbl.puts != 0 || tbl.delete != 0 {
			t.Errorf("private %v: table %v, %d puts, %d deletes; want the earlier run's alone", private, tbl.m, tbl.puts, tbl.delete)
		}
		if r.st.neighs[k] == nil {
			t.Errorf("private %v: the neighbour was not kept for when the router writes", private)
		}
	}
}
