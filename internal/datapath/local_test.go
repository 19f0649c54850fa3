package datapath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
)

// TestUEToUPF: a UE's packet to the UPF's own addresses (any interface's, broadcast, loopback)
// never reaches the kernel, which would deliver it to the UPF's sockets (PFCP, the API…):
// it is dropped as ue_to_upf, TTL 1 or not, unless ue_to_upf_allowed lists the service.
func TestUEToUPF(t *testing.T) {
	n6Addr := netip.MustParseAddr("10.0.2.1")
	e := newTestEnvOpts(t, Options{MaxSessions: 4, UEAllowed: []UEService{
		{Addr: n6Addr, Protocol: 17, Port: 53}, // a DNS resolver on the UPF
		{Addr: n6Addr, Protocol: 1},            // ping
	}})
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	// A new namespace's loopback is down, without its local routes; a host's is up.
	err := e.do(func() error {
		l, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	udpTo := func(dst netip.Addr, dport uint16, ttl uint8) []byte {
		return innerUDP(t, ueAddr, dst, 1000, dport, ttl, payload)
	}
	ping := serialize(t, ipv4(ueAddr, n6Addr, layers.IPProtocolICMPv4, 64),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, gopacket.Payload("ping"))
	gpdu := func(inner []byte) []byte {
		return outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil)
	}
	dropped := func(name string, inner []byte) pktCase {
		return pktCase{name: name, in: gpdu(inner), ifindex: n3, verdict: xdpDrop, out: concat(ethBytes(macGNB, macN3), inner),
			counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"ue_to_upf": 1}}
	}
	toKernel := func(name string, inner []byte) pktCase {
		return pktCase{name: name, in: gpdu(inner), ifindex: n3, verdict: xdpPass, out: concat(ethBytes(macGNB, macN3), inner),
			counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1}}
	}
	for _, c := range []pktCase{
		dropped("PFCP to the N3 address", udpTo(addrN3, 8805, 64)),
		dropped("PFCP to the N6 address", udpTo(n6Addr, 8805, 64)),
		dropped("PFCP to the N6 address, TTL 1", udpTo(n6Addr, 8805, 1)),
		dropped("to the N6 subnet's broadcast address", udpTo(netip.MustParseAddr("10.0.2.255"), 8805, 64)),
		dropped("to loopback", udpTo(netip.MustParseAddr("127.0.0.1"), 8080, 64)),
		dropped("to loopback's network", udpTo(netip.MustParseAddr("127.0.0.53"), 53, 64)),
		dropped("to a port of an allowed address that is not allowed", udpTo(n6Addr, 54, 64)),
		toKernel("to the allowed DNS resolver", udpTo(n6Addr, 53, 64)),
		toKernel("ping to the allowed address", ping),
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}

	// Without any route the kernel would not forward the packet either (it would answer ICMP
	// net unreachable): dropped as no_route, like a blackholed destination.
	defaultRoute := &netlink.Route{LinkIndex: e.n6, Gw: net.ParseIP("10.0.2.2")}
	if err := e.do(func() error { return netlink.RouteDel(defaultRoute) }); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, netip.MustParsePrefix("0.0.0.0/0"), absent)
	runCase(t, e, pktCase{name: "no route at all", in: gpdu(udpTo(addrDN, 2000, 64)), ifindex: n3, verdict: xdpDrop,
		out:      concat(ethBytes(macGNB, macN3), udpTo(addrDN, 2000, 64)),
		counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"no_route": 1}})
	if err := e.do(func() error { return netlink.RouteAdd(defaultRoute) }); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, netip.MustParsePrefix("0.0.0.0/0"), present)

	// An address added later, on any interface, is the UPF's too as soon as netlink says so;
	// removed, it is an ordinary destination again.
	added := netip.MustParseAddr("203.0.113.7")
	lo := func(f func(netlink.Link, *netlink.Addr) error) {
		t.Helper()
		err := e.do(func() error {
			l, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			return f(l, &netlink.Addr{IPNet: &net.IPNet{IP: added.AsSlice(), Mask: net.CIDRMask(32, 32)}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	lo(netlink.AddrAdd)
	waitDrop(t, e, gpdu(udpTo(added, 8805, 64)), "ue_to_upf")
	// PFCP asks the same table which addresses no session may claim.
	if !e.dp.IsLocal(added) || !e.dp.IsLocal(n6Addr) || e.dp.IsLocal(addrDN) {
		t.Errorf("IsLocal: %s %v, %s %v, %s %v; want true, true, false", added, e.dp.IsLocal(added),
			n6Addr, e.dp.IsLocal(n6Addr), addrDN, e.dp.IsLocal(addrDN))
	}
	lo(netlink.AddrDel)
	deadline := time.Now().Add(2 * time.Second)
	for {
		ret, _ := e.run(t, gpdu(udpTo(added, 8805, 64)), e.n3)
		if ret == xdpRedirect {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a removed address is still the UPF's: %s", verdictNames[ret])
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The table follows netlink's event, which may come after the FIB changed.
	for e.dp.IsLocal(added) {
		if time.Now().After(deadline) {
			t.Fatalf("IsLocal(%s) 2s after its removal", added)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addN6Addr adds a to n6, as a /32.
func (e *testEnv) addN6Addr(t *testing.T, a netip.Addr) {
	t.Helper()
	e.changeAddr(t, "n6", a, netlink.AddrAdd)
}

// changeAddr adds (netlink.AddrAdd) or removes (netlink.AddrDel) a, a /32, on the link name.
func (e *testEnv) changeAddr(t *testing.T, name string, a netip.Addr, change func(netlink.Link, *netlink.Addr) error) {
	t.Helper()
	err := e.do(func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		return change(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitDrop runs pkt on N3 until the datapath drops it for reason (the table it depends on is
// updated asynchronously), for at most three seconds.
func waitDrop(t *testing.T, e *testEnv, pkt []byte, reason string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		before, _ := e.dp.Stats()
		e.run(t, pkt, e.n3)
		after, _ := e.dp.Stats()
		if after.Drops[reason] > before.Drops[reason] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not dropped as %s within 3s; drops %v", reason, after.Drops)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLocalAddrsResubscribe: when the netlink subscription ends (as it does on a receive
// error, a full socket buffer say), the table is still kept: a new subscription follows.
func TestLocalAddrsResubscribe(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	e.dp.stopAddrs() // the environment's own watcher would keep the table anyway
	h, err := netlink.NewHandleAt(e.ns)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan netlink.AddrUpdate)
	close(ended)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() { defer close(exited); e.dp.localAddrEvents(e.ns, h).Follow(done, ended, make(chan struct{})) }()
	t.Cleanup(func() { close(done); <-exited; h.Close() })

	added := netip.MustParseAddr("203.0.113.9")
	e.addN6Addr(t, added)
	inner := innerUDP(t, ueAddr, added, 1000, 8805, 64, payload)
	waitDrop(t, e, outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil), "ue_to_upf")
}

// TestLocalAddrsFailedSync: an update of xupf_local_addrs that fails (here the map is full)
// leaves IsLocal answering from the earlier addresses and the wanted ones, not refusing every
// address, and is tried again without waiting for another address event.
func TestLocalAddrsFailedSync(t *testing.T) {
	e := newTestEnv(t, 4)
	m := e.dp.objs.XupfLocalAddrs
	var filler []uint32 // keys of no address, until the map is full
	for i := range m.MaxEntries() {
		k := addrBE(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
		if err := m.Put(k, uint8(1)); err != nil {
			break
		}
		filler = append(filler, k)
	}
	added := netip.MustParseAddr("203.0.113.9")
	e.addN6Addr(t, added)
	deadline := time.Now().Add(3 * time.Second)
	for !e.dp.IsLocal(added) {
		if time.Now().After(deadline) {
			t.Fatalf("IsLocal(%s) false 3s after it was added", added)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var v uint8
	if err := m.Lookup(addrBE(added), &v); err == nil {
		t.Fatalf("%s is in the full map: the update did not fail", added)
	}
	if e.dp.IsLocal(ueAddr) || !e.dp.IsLocal(netip.MustParseAddr("10.0.2.1")) {
		t.Errorf("after a failed update: IsLocal(%s) %v, IsLocal(10.0.2.1) %v; want false, true",
			ueAddr, e.dp.IsLocal(ueAddr), e.dp.IsLocal(netip.MustParseAddr("10.0.2.1")))
	}
	for _, k := range filler {
		if err := m.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(3 * localAddrsRetry)
	for m.Lookup(addrBE(added), &v) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s not in the map %v after the room was made", added, 3*localAddrsRetry)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
