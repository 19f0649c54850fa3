package router

import (
	"bytes"
	"maps"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/testbed"
)

// lockedTable is a fakeTable the follower's goroutine and the test share.
type lockedTable struct {
	mu sync.Mutex
	fakeTable
}

func (l *lockedTable) Put(p netip.Prefix, nh Nexthop) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fakeTable.Put(p, nh)
}

func (l *lockedTable) Delete(p netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fakeTable.Delete(p)
}

// newNS returns a new network namespace and a netlink handle in it; the calling thread stays
// where it was.
func newNS(t *testing.T) (netns.NsHandle, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	ns, err := testbed.NewNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return ns, h
}

// addLink adds a veth "a", up, with 10.0.1.1/24.
func addLink(t *testing.T, h *netlink.Handle) netlink.Link {
	t.Helper()
	must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a"}, PeerName: "ap"}))
	a, err := h.LinkByName("a")
	must(t, err)
	must(t, h.LinkSetUp(a))
	addr, _ := netlink.ParseAddr("10.0.1.1/24")
	must(t, h.AddrAdd(a, addr))
	return a
}

// follow starts a mirroring router in ns over a fresh table.
func follow(t *testing.T, ns netns.NsHandle) *Router {
	t.Helper()
	return followWatched(t, ns, nil)
}

// followWatched is follow with watch (nil: none) given to Router.Watch.
func followWatched(t *testing.T, ns netns.NsHandle, watch func(Change)) *Router {
	t.Helper()
	fd, err := unix.Dup(int(ns))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(&lockedTable{fakeTable: fakeTable{m: map[netip.Prefix]Nexthop{}}}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Watch(watch)
	stop, err := r.Follow(netns.NsHandle(fd))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return r
}

// waitEntry waits until r's entry for p is want (nil: no entry).
func waitEntry(t *testing.T, r *Router, p netip.Prefix, want *Nexthop) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		got, ok := r.Entries()[p]
		if want == nil && !ok || want != nil && ok && got == *want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: entry %+v (present %v) after 3s, want %+v", p, got, ok, want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFollowMirrorsTheKernel: netlink events become entries: neighbours added, changed and
// deleted; routes added, replaced and deleted; a link going down.
func TestFollowMirrorsTheKernel(t *testing.T) {
	ns, h := newNS(t)
	mac, m1, m2 := net.HardwareAddr{2, 0, 0, 0, 1, 1}, net.HardwareAddr{2, 0, 0, 0, 1, 2}, net.HardwareAddr{2, 0, 0, 0, 1, 3}
	must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a", HardwareAddr: mac, MTU: 1400}, PeerName: "ap"}))
	a, err := h.LinkByName("a")
	must(t, err)
	ap, err := h.LinkByName("ap")
	must(t, err)
	must(t, h.LinkSetUp(ap))
	must(t, h.LinkSetUp(a))
	addr, _ := netlink.ParseAddr("10.0.1.1/24")
	must(t, h.AddrAdd(a, addr))
	idx := a.Attrs().Index

	r := follow(t, ns)
	onLink := pfx("10.0.1.0/24")
	unresolved := Nexthop{Kind: Unresolved, Ifindex: idx, MTU: 1400, Src: [6]byte(mac)}
	waitEntry(t, r, onLink, &unresolved)
	waitEntry(t, r, pfx("10.0.1.1/32"), &Nexthop{Kind: Kernel})

	gw := pfx("10.0.1.2/32")
	neigh := func(m net.HardwareAddr) *netlink.Neigh {
		return &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: net.IP{10, 0, 1, 2}, HardwareAddr: m}
	}
	fwd := func(m net.HardwareAddr) *Nexthop {
		nh := unresolved
		nh.Kind, nh.Dst = Forward, [6]byte(m)
		return &nh
	}
	must(t, h.NeighAdd(neigh(m1)))
	waitEntry(t, r, gw, fwd(m1))
	must(t, h.NeighSet(neigh(m2)))
	waitEntry(t, r, gw, fwd(m2))

	dn := pfx("192.0.2.0/24")
	_, dst, _ := net.ParseCIDR(dn.String())
	route := &netlink.Route{LinkIndex: idx, Dst: dst, Gw: net.IP{10, 0, 1, 2}}
	must(t, h.RouteAdd(route))
	waitEntry(t, r, dn, fwd(m2))
	route.Gw = net.IP{10, 0, 1, 3} // no neighbour entry
	must(t, h.RouteReplace(route))
	waitEntry(t, r, dn, &unresolved)
	must(t, h.RouteReplace(&netlink.Route{Dst: dst, Type: unix.RTN_BLACKHOLE}))
	waitEntry(t, r, dn, &Nexthop{Kind: NoRoute})
	must(t, h.RouteDel(&netlink.Route{Dst: dst, Type: unix.RTN_BLACKHOLE}))
	waitEntry(t, r, dn, nil)

	// Appended after a first route to the same prefix and metric, a second one is not used.
	other := pfx("198.51.100.0/24")
	_, otherDst, _ := net.ParseCIDR(other.String())
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: otherDst, Gw: net.IP{10, 0, 1, 2}}))
	must(t, h.RouteAppend(&netlink.Route{LinkIndex: idx, Dst: otherDst, Gw: net.IP{10, 0, 1, 3}}))
	waitEntry(t, r, other, fwd(m2))

	must(t, h.NeighDel(neigh(m2)))
	waitEntry(t, r, gw, nil)
	waitEntry(t, r, other, &unresolved)

	route.Gw = net.IP{10, 0, 1, 2}
	must(t, h.NeighAdd(neigh(m1)))
	must(t, h.RouteAdd(route))
	waitEntry(t, r, dn, fwd(m1))
	// Down, the link loses its routes (without a netlink event for each) and neighbours.
	must(t, h.LinkSetDown(a))
	for _, p := range []netip.Prefix{dn, onLink, gw} {
		waitEntry(t, r, p, nil)
	}
}

// TestFollowReportsChanges: Watch hears of every route change and of every neighbour MAC that
// stops being valid, and not of a neighbour confirmed with the MAC it had nor of a link event
// that changes nothing followed.
func TestFollowReportsChanges(t *testing.T) {
	ns, h := newNS(t)
	a := addLink(t, h)
	idx := a.Attrs().Index
	changes := make(chan Change, 16)
	followWatched(t, ns, func(c Change) { changes <- c })
	next := nextChange(t, changes)
	if c := next("start"); !c.Routes {
		t.Errorf("start: %+v, want routes (what was copied before may be stale)", c)
	}
	m1, m2 := net.HardwareAddr{2, 0, 0, 0, 1, 2}, net.HardwareAddr{2, 0, 0, 0, 1, 3}
	neigh := func(m net.HardwareAddr, state int) *netlink.Neigh {
		return &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: state, IP: net.IP{10, 0, 1, 2}, HardwareAddr: m}
	}
	must(t, h.NeighAdd(neigh(m1, netlink.NUD_PERMANENT)))
	must(t, h.NeighSet(neigh(m1, netlink.NUD_REACHABLE))) // the same MAC: nothing to report
	// A link event that changes nothing the router follows is no change: were it one, it
	// would be reported before the MAC change, as a route change.
	must(t, h.LinkSetAlias(a, "renamed in name only"))
	must(t, h.NeighSet(neigh(m2, netlink.NUD_REACHABLE)))
	want := GoneNeighbour{Ifindex: idx, MAC: m1}
	if c := next("MAC changed"); c.Routes || len(c.Gone) != 1 || c.Gone[0].Ifindex != want.Ifindex ||
		!bytes.Equal(c.Gone[0].MAC, want.MAC) || c.Gone[0].Collected {
		t.Errorf("MAC changed: %+v, want %+v gone", c, want)
	}
	must(t, h.NeighDel(neigh(m2, netlink.NUD_REACHABLE)))
	want.MAC = m2
	if c := next("neighbour deleted"); c.Routes || len(c.Gone) != 1 || !bytes.Equal(c.Gone[0].MAC, want.MAC) || c.Gone[0].Collected {
		t.Errorf("neighbour deleted: %+v, want %+v gone, not collected", c, want)
	}
	_, dst, _ := net.ParseCIDR("192.0.2.0/24")
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: dst, Gw: net.IP{10, 0, 1, 2}}))
	if c := next("route added"); !c.Routes {
		t.Errorf("route added: %+v, want routes", c)
	}
}

// nextChange returns a function that waits for the next change on changes, naming what it
// waits for when none comes within 3s.
func nextChange(t *testing.T, changes <-chan Change) func(what string) Change {
	return func(what string) Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: no change reported within 3s", what)
			return Change{}
		}
	}
}

// followPrivateWatched starts a private router in ns over a fresh table, ready to write,
// with a Watch: next waits for the changes it reports; stop stops the Follow.
func followPrivateWatched(t *testing.T, ns netns.NsHandle) (r *Router, next func(what string) Change, stop func()) {
	t.Helper()
	fd, err := unix.Dup(int(ns))
	must(t, err)
	r, err = New(&lockedTable{fakeTable: fakeTable{m: map[netip.Prefix]Nexthop{}}}, true, nil)
	must(t, err)
	changes := make(chan Change, 16)
	r.Watch(func(c Change) { changes <- c })
	stop, err = r.Follow(netns.NsHandle(fd))
	must(t, err)
	if err := r.Ready(); err != nil {
		stop()
		t.Fatal(err)
	}
	return r, nextChange(t, changes), stop
}

// TestFollowPrivateReportsKernelChanges: a private router with a Watch reports the kernel's
// route changes and neighbour MACs gone, as a mirroring one does (what copies the kernel's
// decisions copies them in either mode), and its entries stay its own.
func TestFollowPrivateReportsKernelChanges(t *testing.T) {
	ns, h := newNS(t)
	a := addLink(t, h)
	idx := a.Attrs().Index
	r, next, stop := followPrivateWatched(t, ns)
	defer stop()
	if c := next("start"); !c.Routes {
		t.Errorf("start: %+v, want routes", c)
	}
	m1, m2 := net.HardwareAddr{2, 0, 0, 0, 1, 2}, net.HardwareAddr{2, 0, 0, 0, 1, 3}
	neigh := func(m net.HardwareAddr) *netlink.Neigh {
		return &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: net.IP{10, 0, 1, 2}, HardwareAddr: m}
	}
	must(t, h.NeighAdd(neigh(m1)))
	must(t, h.NeighSet(neigh(m2)))
	if c := next("MAC changed"); c.Routes || len(c.Gone) != 1 || c.Gone[0].Ifindex != idx || !bytes.Equal(c.Gone[0].MAC, m1) {
		t.Errorf("MAC changed: %+v, want %v on %d gone", c, m1, idx)
	}
	_, dst, _ := net.ParseCIDR("192.0.2.0/24")
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: dst, Gw: net.IP{10, 0, 1, 2}}))
	if c := next("route added"); !c.Routes {
		t.Errorf("route added: %+v, want routes", c)
	}
	if got, want := r.Entries(), fixed; !maps.Equal(got, want) {
		t.Errorf("entries %v, want only the fixed ones %v: the kernel's routes are not the router's", got, want)
	}
}

// TestFollowPrivateReportsKernelRoutesUnlocked: a private router reports a kernel route
// change without taking its lock: the kernel's routes are none of its own, so its table (a
// million routes take seconds to resolve) is not rebuilt before the report.
func TestFollowPrivateReportsKernelRoutesUnlocked(t *testing.T) {
	ns, h := newNS(t)
	a := addLink(t, h)
	r, next, stop := followPrivateWatched(t, ns)
	defer stop()
	next("start")
	r.mu.Lock()         // as a rebuild of the private table would hold it
	defer r.mu.Unlock() // before stop, which waits for the follower
	_, dst, _ := net.ParseCIDR("192.0.2.0/24")
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: a.Attrs().Index, Dst: dst, Gw: net.IP{10, 0, 1, 2}}))
	if c := next("route added while the router is locked"); !c.Routes {
		t.Errorf("route added: %+v, want routes", c)
	}
}

// TestFollowPrivateIgnoresKernelRoutes: a private router follows the links only.
func TestFollowPrivateIgnoresKernelRoutes(t *testing.T) {
	ns, h := newNS(t)
	addLink(t, h)
	fd, err := unix.Dup(int(ns))
	must(t, err)
	tbl := &lockedTable{fakeTable: fakeTable{m: map[netip.Prefix]Nexthop{}}}
	r, err := New(tbl, true, nil)
	must(t, err)
	stop, err := r.Follow(netns.NsHandle(fd))
	must(t, err)
	defer stop()
	must(t, r.Ready())
	if got, want := r.Entries(), fixed; !maps.Equal(got, want) {
		t.Errorf("entries %v, want only the fixed ones %v", got, want)
	}
}

// TestFollowResyncsAfterALostSubscription: when the subscriptions end (as on a receive error,
// a full socket buffer say), events are lost; the router subscribes again and lists
// everything, so a neighbour added meanwhile still becomes an entry.
func TestFollowResyncsAfterALostSubscription(t *testing.T) {
	ns, h := newNS(t)
	a := addLink(t, h)

	r, err := New(&lockedTable{fakeTable: fakeTable{m: map[netip.Prefix]Nexthop{}}}, false, nil)
	must(t, err)
	fh, err := netlink.NewHandleAt(ns)
	must(t, err)
	defer fh.Close()
	f := &follower{r: r, ns: ns, h: fh, done: make(chan struct{})}
	s, err := f.subscribe()
	must(t, err)
	must(t, f.resync())
	exited := make(chan struct{})
	go func() { defer close(exited); f.run(s) }()
	defer func() { close(f.done); <-exited }()

	s.close() // the subscriptions are lost
	must(t, h.NeighAdd(&netlink.Neigh{LinkIndex: a.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.IP{10, 0, 1, 2}, HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 1, 2}}))
	nh := Nexthop{Kind: Forward, Ifindex: a.Attrs().Index, MTU: a.Attrs().MTU, Src: [6]byte(a.Attrs().HardwareAddr),
		Dst: [6]byte{2, 0, 0, 0, 1, 2}}
	waitEntry(t, r, pfx("10.0.1.2/32"), &nh)
}

// TestFollowReportsPolicyRouting: a Watch hears of policy routing, which the router does not
// copy but the kernel decides by: an IPv4 rule added or deleted (ip rule), a route added to a
// table other than main and local; in either mode, and the router's entries stay as they were.
func TestFollowReportsPolicyRouting(t *testing.T) {
	for _, private := range []bool{false, true} {
		name := "mirroring"
		if private {
			name = "private"
		}
		t.Run(name, func(t *testing.T) {
			ns, h := newNS(t)
			idx := addLink(t, h).Attrs().Index
			var r *Router
			var next func(what string) Change
			if private {
				var stop func()
				r, next, stop = followPrivateWatched(t, ns)
				defer stop()
			} else {
				changes := make(chan Change, 16)
				r = followWatched(t, ns, func(c Change) { changes <- c })
				must(t, r.Ready())
				next = nextChange(t, changes)
			}
			next("start")
			before := r.Entries()
			rule := netlink.NewRule()
			rule.Table, rule.Priority = 100, 100
			rule.Src = &net.IPNet{IP: net.IP{10, 0, 9, 0}, Mask: net.CIDRMask(24, 32)}
			_, dst, _ := net.ParseCIDR("192.0.2.0/24")
			for _, c := range []struct {
				what   string
				change func() error
			}{
				{"rule added", func() error { return h.RuleAdd(rule) }},
				{"route added to table 100", func() error {
					return h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: dst, Gw: net.IP{10, 0, 1, 2}, Table: 100})
				}},
				{"rule deleted", func() error { return h.RuleDel(rule) }},
			} {
				must(t, c.change())
				if ch := next(c.what); !ch.Routes {
					t.Errorf("%s: %+v, want routes", c.what, ch)
				}
			}
			if got := r.Entries(); !maps.Equal(got, before) {
				t.Errorf("entries %v, want them unchanged %v", got, before)
			}
		})
	}
}

// TestNeighbourCollected: only the deletion of an entry the kernel no longer confirmed is
// garbage collection; a live entry deleted is how the kernel sends a MAC replaced, and
// ip neigh del fails the entry before deleting it.
func TestNeighbourCollected(t *testing.T) {
	for _, c := range []struct {
		typ   uint16
		state int
		want  bool
	}{
		{unix.RTM_DELNEIGH, netlink.NUD_STALE, true},
		{unix.RTM_DELNEIGH, netlink.NUD_PROBE, true},
		{unix.RTM_DELNEIGH, netlink.NUD_REACHABLE, false},
		{unix.RTM_DELNEIGH, netlink.NUD_PERMANENT, false},
		{unix.RTM_NEWNEIGH, netlink.NUD_FAILED, false},
		{unix.RTM_NEWNEIGH, netlink.NUD_STALE, false},
	} {
		u := netlink.NeighUpdate{Type: c.typ, Neigh: netlink.Neigh{State: c.state}}
		if got := collected(u); got != c.want {
			t.Errorf("type %d state %#x: collected %v, want %v", c.typ, c.state, got, c.want)
		}
	}
}
