package datapath

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xupf/xupf/internal/router"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// TestRouteCases: what bpf_fib_lookup did and the route table now does, beyond the cases of
// TestDatapathPackets (resolved, unresolved neighbour, blackhole): a packet over the route's
// MTU and one whose out interface the datapath is not attached to go to the kernel as they
// are.
func TestRouteCases(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	mtuNet, otherNet := netip.MustParsePrefix("192.0.2.128/25"), netip.MustParsePrefix("203.0.113.0/24")
	err := e.do(func() error {
		// d0 is an Ethernet interface the datapath is not attached to, its next hop resolved.
		if _, _, err := (testbed.VethPair{Name: "d0", Peer: "d0p", MAC: net.HardwareAddr{2, 0, 0, 0, 3, 1}}).Add(); err != nil {
			return err
		}
		d0, err := netlink.LinkByName("d0")
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("10.0.3.1/24")
		if err := netlink.AddrAdd(d0, addr); err != nil {
			return err
		}
		if err := netlink.NeighAdd(&netlink.Neigh{LinkIndex: d0.Attrs().Index, Family: netlink.FAMILY_V4,
			State: netlink.NUD_PERMANENT, IP: net.IP{10, 0, 3, 2}, HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 3, 2}}); err != nil {
			return err
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: d0.Attrs().Index, Dst: ipNet(otherNet), Gw: net.IP{10, 0, 3, 2}}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: e.n6, Dst: ipNet(mtuNet), Gw: net.IP{10, 0, 2, 2}, MTU: 100})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Route and neighbour events come on sockets of their own, in any order: wait for both.
	resolved := func(nh router.Nexthop, found bool) bool { return found && nh.Kind == router.Forward }
	e.waitRoute(t, mtuNet, resolved)
	e.waitRoute(t, otherNet, resolved)

	long := strings.Repeat("x", 100) // 128-byte inner packet: over the MTU of 100
	toKernel := func(name string, inner []byte) pktCase {
		return pktCase{name: name, in: outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil), ifindex: n3,
			verdict: xdpPass, out: concat(ethBytes(macGNB, macN3), inner), counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1}}
	}
	for _, c := range []pktCase{
		toKernel("over the route's MTU", innerUDP(t, ueAddr, netip.MustParseAddr("192.0.2.200"), 1, 2, 64, long)),
		toKernel("out of an interface the datapath is not attached to", innerUDP(t, ueAddr, netip.MustParseAddr("203.0.113.9"), 1, 2, 64, payload)),
		{name: "within the route's MTU", in: outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil,
			innerUDP(t, ueAddr, netip.MustParseAddr("192.0.2.200"), 1, 2, 64, payload)), nil), ifindex: n3,
			verdict: xdpRedirect, out: concat(ethBytes(macN6, macDN), innerUDP(t, ueAddr, netip.MustParseAddr("192.0.2.200"), 1, 2, 63, payload)),
			counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1}},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// TestNeighbourChangeUnderTraffic: while uplink packets run without pause, the DN router's
// MAC changes and then its neighbour entry goes. Once the router has written a change, no
// packet that starts later is sent to the old MAC; once it has written the deletion, every
// packet goes to the kernel (fib_no_neigh), which resolves the next hop again.
func TestNeighbourChangeUnderTraffic(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	pkt := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, innerUDP(t, ueAddr, addrDN, 1, 2, 64, payload)), nil)
	macNew := net.HardwareAddr{2, 0, 0, 0, 2, 9}
	gw := &netlink.Neigh{LinkIndex: e.n6, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.IP{10, 0, 2, 2}, HardwareAddr: macNew}
	def := netip.MustParsePrefix("0.0.0.0/0")
	trafficUnderChanges(t, e, pkt, e.n3, []routeChange{
		{"the MAC change", func() error { return netlink.NeighSet(gw) },
			def, func(nh router.Nexthop, found bool) bool { return found && nh.Dst == [6]byte(macNew) },
			func(verdict uint32, dst net.HardwareAddr) bool {
				return verdict != xdpRedirect || bytes.Equal(dst, macNew)
			}},
		{"the deletion", func() error { return netlink.NeighDel(gw) },
			def, func(nh router.Nexthop, found bool) bool { return found && nh.Kind == router.Unresolved },
			func(verdict uint32, _ net.HardwareAddr) bool { return verdict == xdpPass }},
	})
}

// TestTunnelPeerChangesUnderTraffic: the same for downlink packets, whose next hop is their
// gNB's pin (routedir pins): a more specific route toward the gNB, its gateway's MAC
// changed, its neighbour entry deleted, the route replaced and deleted. Each is in the pin
// by the time the router has written it.
func TestTunnelPeerChangesUnderTraffic(t *testing.T) {
	e := newTestEnv(t, 4)
	gnb := netip.MustParseAddr("203.0.113.7") // reached through the default route at first
	s := session.Session{ID: 9, UE: netip.MustParseAddr("10.45.0.9"), UplinkTEID: 0x109, GNB: gnb,
		DownlinkTEID: 0x209, GTPUAddr: addrN3}
	if err := e.addSession(s); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := e.dp.routes.table.Pinned(gnb); !ok {
		t.Fatalf("the session's gNB %s is not pinned", gnb)
	}
	macNew := net.HardwareAddr{2, 0, 0, 0, 1, 9}
	gw := &netlink.Neigh{LinkIndex: e.n3, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.IP{10, 0, 1, 4}, HardwareAddr: macNew}
	p := netip.MustParsePrefix("203.0.113.0/24")
	route := &netlink.Route{LinkIndex: e.n3, Dst: ipNet(p), Gw: net.IP{10, 0, 1, 4}}
	viaDN := &netlink.Route{LinkIndex: e.n6, Dst: ipNet(p), Gw: net.IP{10, 0, 2, 2}}
	sentTo := func(mac net.HardwareAddr) func(uint32, net.HardwareAddr) bool {
		return func(verdict uint32, dst net.HardwareAddr) bool {
			return verdict == xdpRedirect && bytes.Equal(dst, mac)
		}
	}
	forwardsTo := func(mac net.HardwareAddr) func(router.Nexthop, bool) bool {
		return func(nh router.Nexthop, found bool) bool { return found && nh.Dst == [6]byte(mac) }
	}
	trafficUnderChanges(t, e, dlIn(t, s, 64), e.n6, []routeChange{
		{"the route toward the gNB", func() error { return netlink.RouteAdd(route) }, p, forwardsTo(macUPF), sentTo(macUPF)},
		{"its gateway's MAC change", func() error { return netlink.NeighSet(gw) }, p, forwardsTo(macNew), sentTo(macNew)},
		{"its gateway's deletion", func() error { return netlink.NeighDel(gw) },
			p, func(nh router.Nexthop, found bool) bool { return found && nh.Kind == router.Unresolved },
			func(verdict uint32, _ net.HardwareAddr) bool { return verdict == xdpPass }},
		{"the route's replacement", func() error { return netlink.RouteReplace(viaDN) }, p, forwardsTo(macDN), sentTo(macDN)},
		{"the route's deletion", func() error { return netlink.RouteDel(viaDN) }, p, absent, sentTo(macDN)},
	})
}

// routeChange is a step of trafficUnderChanges: make, in the namespace; then the router's
// entry for prefix satisfies written; from then on until the next step, every packet that
// starts passes check (its verdict and the destination MAC it leaves with).
type routeChange struct {
	name    string
	make    func() error
	prefix  netip.Prefix
	written func(nh router.Nexthop, found bool) bool
	check   func(verdict uint32, dst net.HardwareAddr) bool
}

// trafficUnderChanges runs pkt through the program on ifindex without pause while changes
// are made one after the other, and checks every packet against the last change written
// before it started (or the one being made). Each step must see some packets.
func trafficUnderChanges(t *testing.T, e *testEnv, pkt []byte, ifindex int, changes []routeChange) {
	type result struct {
		seq     uint64
		verdict uint32
		dst     net.HardwareAddr
	}
	var (
		seq     atomic.Uint64
		stop    atomic.Bool
		results []result
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			n := seq.Add(1)
			ret, out := e.run(t, pkt, ifindex)
			results = append(results, result{n, ret, slices.Clone(out[:6])})
		}
	}()
	// someAfter lets packets run for 20 ms after n started, and at least 50 of them however
	// loaded the machine is.
	someAfter := func(n uint64) {
		time.Sleep(20 * time.Millisecond)
		for deadline := time.Now().Add(3 * time.Second); seq.Load() < n+50 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	written := make([]uint64, len(changes)) // the last packet started before each was written
	someAfter(0)
	for i, c := range changes {
		if err := e.do(c.make); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("%s: %v", c.name, err)
		}
		e.waitRoute(t, c.prefix, c.written)
		written[i] = seq.Load()
		someAfter(written[i])
	}
	stop.Store(true)
	wg.Wait()

	seen := make([]int, len(changes)+1) // packets before the first change, after each
	for _, r := range results {
		i := 0
		for i < len(changes) && r.seq > written[i] {
			i++
		}
		seen[i]++
		// The change being made may be in the table before waitRoute sees it.
		ok := i == 0 || changes[i-1].check(r.verdict, r.dst) || i < len(changes) && changes[i].check(r.verdict, r.dst)
		if !ok {
			t.Fatalf("packet %d, after %s was written: verdict %s to %s", r.seq, changes[i-1].name,
				verdictNames[r.verdict], r.dst)
		}
	}
	if slices.Contains(seen, 0) {
		t.Fatalf("packets before the first change and after each: %v; want some of each", seen)
	}
	t.Logf("packets before the first change and after each: %v", seen)
}

// BenchmarkRouteConvergence: the time from a netlink change returning to the route table
// holding its effect, over 100 changes each: the DN router's MAC (a neighbour event) and a
// route added and deleted (route events, which have the routes listed again). The maps are
// polled as the datapath reads them.
func BenchmarkRouteConvergence(b *testing.B) {
	e := newTestEnv(b, 4)
	// lookup finds the entry a packet to a would use.
	lookup := func(a netip.Addr) (xupfNexthop, bool) {
		var v xupfNexthop
		slot := e.dp.routes.table.Lookup(a)
		err := e.dp.objs.XupfNexthops.Lookup(slot, &v)
		return v, err == nil && slot != 0
	}
	dst := netip.MustParsePrefix("203.0.113.0/24")
	measure := func(name string, change func(i int) error, done func(i int) bool) {
		var times []time.Duration
		for i := range 100 {
			start := time.Now()
			if err := e.do(func() error { return change(i) }); err != nil {
				b.Fatal(err)
			}
			for !done(i) {
				if time.Since(start) > 3*time.Second {
					b.Fatalf("%s %d: not in the route table after 3s", name, i)
				}
			}
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		b.ReportMetric(float64(times[50].Microseconds()), name+"-p50-µs")
		b.ReportMetric(float64(times[98].Microseconds()), name+"-p99-µs")
	}
	viaDefault := netip.MustParseAddr("192.0.2.1") // in no other route
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0x20, byte(i)} }
	// Via a gateway without a neighbour entry: the lookup (longest match) tells the route's
	// unresolved entry from the default route's resolved one.
	route := &netlink.Route{LinkIndex: e.n6, Dst: ipNet(dst), Gw: net.IP{10, 0, 2, 3}}
	for range b.N {
		measure("neigh", func(i int) error {
			return netlink.NeighSet(&netlink.Neigh{LinkIndex: e.n6, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
				IP: net.IP{10, 0, 2, 2}, HardwareAddr: mac(i)})
		}, func(i int) bool { v, ok := lookup(viaDefault); return ok && v.Dmac == [6]byte(mac(i)) })
		measure("route", func(i int) error {
			if i%2 == 0 {
				return netlink.RouteAdd(route)
			}
			return netlink.RouteDel(route)
		}, func(i int) bool {
			v, _ := lookup(dst.Addr())
			return (v.Kind == uint8(router.Unresolved)) == (i%2 == 0)
		})
	}
}
