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
			ret, out := e.run(t, pkt, e.n3)
			results = append(results, result{n, ret, slices.Clone(out[:6])})
		}
	}()
	macNew := net.HardwareAddr{2, 0, 0, 0, 2, 9}
	gw := &netlink.Neigh{LinkIndex: e.n6, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.IP{10, 0, 2, 2}, HardwareAddr: macNew}
	def := netip.MustParsePrefix("0.0.0.0/0")
	time.Sleep(20 * time.Millisecond)
	if err := e.do(func() error { return netlink.NeighSet(gw) }); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, def, func(nh router.Nexthop, found bool) bool { return found && nh.Dst == [6]byte(macNew) })
	changed := seq.Load()
	time.Sleep(20 * time.Millisecond)
	if err := e.do(func() error { return netlink.NeighDel(gw) }); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, def, func(nh router.Nexthop, found bool) bool { return found && nh.Kind == router.Unresolved })
	deleted := seq.Load()
	time.Sleep(20 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	var before, between, after int
	for _, r := range results {
		switch {
		case r.seq > deleted:
			after++
			if r.verdict != xdpPass {
				t.Fatalf("packet %d, after the deletion was written: verdict %s to %s, want PASS",
					r.seq, verdictNames[r.verdict], r.dst)
			}
		case r.seq > changed:
			between++
			if r.verdict == xdpRedirect && !bytes.Equal(r.dst, macNew) {
				t.Fatalf("packet %d, after the change was written: sent to %s, want %s", r.seq, r.dst, macNew)
			}
		default:
			before++
		}
	}
	if before == 0 || between == 0 || after == 0 {
		t.Fatalf("packets before the change, between, after the deletion: %d, %d, %d; want some of each",
			before, between, after)
	}
	t.Logf("packets before the change, between, after the deletion: %d, %d, %d", before, between, after)
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
		slot := e.dp.routes.Lookup(a)
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
