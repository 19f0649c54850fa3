package datapath

import (
	"bytes"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xupf/xupf/internal/session"
)

const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpTX       = 3
	xdpRedirect = 4
)

var verdictNames = map[uint32]string{0: "ABORTED", 1: "DROP", 2: "PASS", 3: "TX", 4: "REDIRECT"}

// Sessions installed in every datapath test environment.
var (
	sessPlain = session.Session{ID: 1, UE: ueAddr, UplinkTEID: 0x100, GNB: addrGNB, DownlinkTEID: 0x200, GTPUAddr: addrN3}
	sessQFI   = session.Session{ID: 2, UE: netip.MustParseAddr("10.45.0.3"), UplinkTEID: 0x101, GNB: addrGNB,
		DownlinkTEID: 0x201, QFI: 9, GTPUAddr: addrN3}
	sessNoARP = session.Session{ID: 3, UE: netip.MustParseAddr("10.45.0.4"), UplinkTEID: 0x102, GNB: addrGNBNoARP,
		DownlinkTEID: 0x202, GTPUAddr: addrN3}
	sessDropFAR = session.Session{ID: 4, UE: netip.MustParseAddr("10.45.0.5"), UplinkTEID: 0x103, GNB: addrGNB,
		DownlinkTEID: 0x203, GTPUAddr: addrN3}
)

func newSessionsEnv(t *testing.T) *testEnv {
	e := newTestEnv(t, 1024)
	for _, s := range []session.Session{sessPlain, sessQFI, sessNoARP, sessDropFAR} {
		if err := e.dp.AddSession(s); err != nil {
			t.Fatal(err)
		}
	}
	// A FAR that drops: written directly, as PFCP will do with a DROP FAR.
	in := e.dp.sessions[sessDropFAR.ID]
	if err := e.dp.objs.XupfFars.Put(in.sets[0].slots[0], xupfFar{Action: uint32(xupfFarActionFAR_DROP)}); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.objs.XupfFars.Put(in.sets[1].slots[0], xupfFar{Action: uint32(xupfFarActionFAR_DROP)}); err != nil {
		t.Fatal(err)
	}
	return e
}

type pktCase struct {
	name    string
	in      []byte
	ifindex func(e *testEnv) int
	verdict uint32
	// out is the whole expected output packet; nil means "the input, unchanged".
	out []byte
	// fixSport copies the outer UDP source port of the output into out before comparing:
	// it is a hash (checked on its own in TestDownlinkSourcePortSpreadsFlows).
	fixSport bool
	// counters and drops are the expected increments; every other counter must stay put.
	counters map[string]uint64
	drops    map[string]uint64
}

func n3(e *testEnv) int { return e.n3 }
func n6(e *testEnv) int { return e.n6 }

func TestDatapathPackets(t *testing.T) {
	e := newSessionsEnv(t)
	for _, c := range packetCases(t) {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
}

func runCase(t *testing.T, e *testEnv, c pktCase) {
	t.Helper()
	before, err := e.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	ret, out := e.run(t, c.in, c.ifindex(e))
	after, err := e.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ret != c.verdict {
		t.Errorf("verdict %s, want %s", verdictNames[ret], verdictNames[c.verdict])
	}
	want := c.out
	if want == nil {
		want = c.in
	}
	if c.fixSport && len(out) >= 14+20+2 && len(want) >= 14+20+2 {
		want = bytes.Clone(want)
		copy(want[34:36], out[34:36])
	}
	if !bytes.Equal(out, want) {
		t.Errorf("output packet differs\n--- got (%d bytes)\n%s\n--- want (%d bytes)\n%s", len(out), dump(out), len(want), dump(want))
	}
	checkDeltas(t, "counter", before.Counters, after.Counters, c.counters)
	checkDeltas(t, "drop", before.Drops, after.Drops, c.drops)
}

func checkDeltas(t *testing.T, kind string, before, after, want map[string]uint64) {
	t.Helper()
	for name := range want {
		if _, ok := after[name]; !ok {
			t.Errorf("%s %q does not exist", kind, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if got := after[name] - before[name]; got != want[name] {
			t.Errorf("%s %s rose by %d, want %d", kind, name, got, want[name])
		}
	}
}

// Expected results shared by many cases.
func ulInner(t testing.TB, ttl uint8) []byte {
	return innerUDP(t, ueAddr, addrDN, 1000, 2000, ttl, payload)
}

func ulForwarded(t testing.TB) []byte {
	return concat(ethBytes(macN6, macDN), ulInner(t, 63))
}

func packetCases(t *testing.T) []pktCase {
	inner := ulInner(t, 64)
	innerQFI := innerUDP(t, sessQFI.UE, addrDN, 1000, 2000, 64, payload)
	fwdQFI := concat(ethBytes(macN6, macDN), innerUDP(t, sessQFI.UE, addrDN, 1000, 2000, 63, payload))
	ulOK := map[string]uint64{"ul_rx": 1, "ul_tx": 1}
	udpPortExt := []byte{1, 0x12, 0x34, 0x85} // UDP Port extension header (type 0x40), then a PSC

	validPSC := outerGTP(t, gtpHdr(0x34, 255, 0x101, optPSC(9), innerQFI), nil)
	truncations := []struct {
		at     int
		reason string
	}{
		// (BPF_PROG_TEST_RUN refuses frames shorter than an Ethernet header.)
		{14, ""}, {14 + 19, ""}, // not even an IPv4 header: not ours
		{14 + 20, "malformed_udp"}, {14 + 27, "malformed_udp"},
		{14 + 28, "malformed_gtp"}, {14 + 35, "malformed_gtp"},
		{14 + 36, "malformed_gtp"}, {14 + 39, "malformed_gtp"}, // optional fields cut
		{14 + 40, "gtp_ext_malformed"}, {14 + 43, "gtp_ext_malformed"}, // PSC cut
		{14 + 44, "malformed_gtp"}, {14 + 50, "malformed_gtp"}, // inner cut: GTP length overruns
	}

	cases := []pktCase{
		{name: "uplink without PDU Session Container", in: outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner), nil),
			ifindex: n3, verdict: xdpRedirect, out: ulForwarded(t), counters: ulOK},
		{name: "uplink with PDU Session Container", in: validPSC,
			ifindex: n3, verdict: xdpRedirect, out: fwdQFI, counters: ulOK},
		{name: "uplink with another extension header before the PSC",
			in:      outerGTP(t, gtpHdr(0x34, 255, 0x101, concat([]byte{0, 0, 0, 0x40}, udpPortExt, optPSC(9)[4:]), innerQFI), nil),
			ifindex: n3, verdict: xdpRedirect, out: fwdQFI, counters: ulOK},
		{name: "uplink with a sequence number only",
			in:      outerGTP(t, gtpHdr(0x32, 255, 0x100, []byte{0x12, 0x34, 0, 0x85 /* ignored: E=0 */}, inner), nil),
			ifindex: n3, verdict: xdpRedirect, out: ulForwarded(t), counters: ulOK},
		{name: "uplink with outer IP options",
			in: outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner), func(ip *layers.IPv4) {
				ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
			}),
			ifindex: n3, verdict: xdpRedirect, out: ulForwarded(t), counters: ulOK},
		{name: "uplink with four extension headers (the bound)",
			in: outerGTP(t, gtpHdr(0x34, 255, 0x101, concat([]byte{0, 0, 0, 0x40},
				[]byte{1, 0, 0, 0x40}, []byte{1, 0, 0, 0x40}, []byte{1, 0, 0, 0x85}, optPSC(9)[4:]), innerQFI), nil),
			ifindex: n3, verdict: xdpRedirect, out: fwdQFI, counters: ulOK},
		{name: "uplink with five extension headers",
			in: outerGTP(t, gtpHdr(0x34, 255, 0x101, concat([]byte{0, 0, 0, 0x40},
				[]byte{1, 0, 0, 0x40}, []byte{1, 0, 0, 0x40}, []byte{1, 0, 0, 0x40}, []byte{1, 0, 0, 0x85}, optPSC(9)[4:]), innerQFI), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1},
			drops: map[string]uint64{"gtp_ext_chain_too_long": 1}},
		{name: "extension header of length 0",
			in:      outerGTP(t, gtpHdr(0x34, 255, 0x100, []byte{0, 0, 0, 0x40, 0, 0, 0, 0}, inner), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"gtp_ext_malformed": 1}},
		{name: "uplink QFI differs from the PDR's",
			in:      outerGTP(t, gtpHdr(0x34, 255, 0x101, optPSC(5), innerQFI), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"no_pdr_match": 1}},
		{name: "uplink without QFI to a PDR that needs one",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x101, nil, innerQFI), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"no_pdr_match": 1}},
		{name: "unknown TEID",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0xdead, nil, inner), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"unknown_teid": 1}},
		{name: "FAR drop (uplink)",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x103, nil, inner), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"far_drop": 1}},
		{name: "inner TTL 1 goes to the kernel decapsulated",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, ulInner(t, 1)), nil),
			ifindex: n3, verdict: xdpPass, out: concat(ethBytes(macGNB, macN3), ulInner(t, 1)),
			counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1, "fib_ttl": 1}},
		{name: "inner destination blackholed",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, innerUDP(t, ueAddr, addrBlackhol, 1, 2, 64, payload)), nil),
			ifindex: n3, verdict: xdpDrop, out: concat(ethBytes(macGNB, macN3), innerUDP(t, ueAddr, addrBlackhol, 1, 2, 64, payload)),
			counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"no_route": 1}},
		{name: "inner IPv6",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, append([]byte{0x60}, make([]byte, 39)...)), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"inner_not_ipv4": 1}},
		{name: "inner IPv4 header truncated",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner[:12]), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"malformed_inner": 1}},
		{name: "inner total length beyond the packet",
			in:      outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner[:len(inner)-4]), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"malformed_inner": 1}},
		{name: "GTP version 2", in: outerGTP(t, gtpHdr(0x50, 255, 0x100, nil, inner), nil),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"gtp_version": 1}},
		{name: "PT=0 (GTP')", in: outerGTP(t, gtpHdr(0x20, 255, 0x100, nil, inner), nil),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"gtp_not_gtpu": 1}},
		{name: "error indication", in: outerGTP(t, gtpHdr(0x32, 26, 0, []byte{0, 1, 0, 0}, nil), nil),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"gtp_msg_type": 1}},
		{name: "end marker", in: outerGTP(t, gtpHdr(0x30, 254, 0x100, nil, nil), nil),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"gtp_msg_type": 1}},
		{name: "echo response", in: outerGTP(t, gtpHdr(0x32, 2, 0, []byte{0, 1, 0, 0, 14, 0}, nil), nil),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"gtp_msg_type": 1}},
		{name: "GTP length beyond the packet",
			in:      outerGTP(t, func() []byte { g := gtpHdr(0x30, 255, 0x100, nil, inner); g[3] += 8; return g }(), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"malformed_gtp": 1}},
		{name: "outer first fragment",
			in: outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner), func(ip *layers.IPv4) {
				ip.Flags = layers.IPv4MoreFragments
			}),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"outer_fragment": 1}},
		{name: "outer non-first fragment is the kernel's",
			in: outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner), func(ip *layers.IPv4) {
				ip.FragOffset = 100
			}),
			ifindex: n3, verdict: xdpPass, counters: map[string]uint64{"pass": 1}},
		{name: "outer IHL below 5",
			in: func() []byte {
				p := outerGTP(t, gtpHdr(0x30, 255, 0x100, nil, inner), nil)
				p[14] = 0x44
				return p
			}(),
			ifindex: n3, verdict: xdpDrop, drops: map[string]uint64{"malformed_ip": 1}},
	}
	for _, tr := range truncations {
		c := pktCase{name: "uplink truncated at " + strconv.Itoa(tr.at), in: validPSC[:tr.at], ifindex: n3}
		switch {
		case tr.reason == "":
			c.verdict, c.counters = xdpPass, map[string]uint64{"pass": 1}
		case tr.at >= 14+44:
			c.verdict, c.counters, c.drops = xdpDrop, map[string]uint64{"ul_rx": 1}, map[string]uint64{tr.reason: 1}
		case tr.at >= 14+36:
			c.verdict, c.counters, c.drops = xdpDrop, map[string]uint64{"ul_rx": 1}, map[string]uint64{tr.reason: 1}
		default:
			c.verdict, c.drops = xdpDrop, map[string]uint64{tr.reason: 1}
		}
		cases = append(cases, c)
	}
	cases = append(cases, notOursCases(t)...)
	cases = append(cases, downlinkCases(t)...)
	cases = append(cases, echoCases(t)...)
	return cases
}

func notOursCases(t testing.TB) []pktCase {
	pass := map[string]uint64{"pass": 1}
	arp := serialize(t, ethernet(macGNB, layers.EthernetBroadcast, layers.EthernetTypeARP), &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: macGNB, SourceProtAddress: addrGNB.AsSlice(),
		DstHwAddress: make([]byte, 6), DstProtAddress: addrN3.AsSlice()})
	icmp := serialize(t, ethernet(macGNB, macN3, layers.EthernetTypeIPv4), ipv4(addrGNB, addrN3, layers.IPProtocolICMPv4, 64),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, gopacket.Payload("ping"))
	pfcp := serialize(t, ethernet(macGNB, macN3, layers.EthernetTypeIPv4), ipv4(addrGNB, addrN3, layers.IPProtocolUDP, 64),
		&layers.UDP{SrcPort: 8805, DstPort: 8805}, gopacket.Payload("pfcp heartbeat, say"))
	ssh := serialize(t, ethernet(macDN, macN6, layers.EthernetTypeIPv4), ipv4(addrDN, netip.MustParseAddr("10.0.2.1"), layers.IPProtocolTCP, 64),
		&layers.TCP{SrcPort: 40000, DstPort: 22, SYN: true, Window: 1000})
	toOtherHost := serialize(t, ethernet(macDN, macN6, layers.EthernetTypeIPv4), ipv4(addrDN, netip.MustParseAddr("10.46.0.1"), layers.IPProtocolUDP, 64),
		&layers.UDP{SrcPort: 1, DstPort: 2}, gopacket.Payload("not for a UE"))
	gtpToOther := serialize(t, ethernet(macGNB, macN3, layers.EthernetTypeIPv4), ipv4(addrGNB, netip.MustParseAddr("10.0.1.9"), layers.IPProtocolUDP, 64),
		&layers.UDP{SrcPort: 2152, DstPort: 2152}, gopacket.Payload(gtpHdr(0x30, 255, 0x100, nil, ulInner(t, 64))))
	return []pktCase{
		{name: "ARP", in: arp, ifindex: n3, verdict: xdpPass, counters: pass},
		{name: "ICMP to the GTP-U address", in: icmp, ifindex: n3, verdict: xdpPass, counters: pass},
		{name: "PFCP to the GTP-U address", in: pfcp, ifindex: n3, verdict: xdpPass, counters: pass},
		{name: "SSH to the host", in: ssh, ifindex: n6, verdict: xdpPass, counters: pass},
		{name: "IPv4 to an address that is no UE", in: toOtherHost, ifindex: n6, verdict: xdpPass, counters: pass},
		{name: "GTP-U to an address that is not ours", in: gtpToOther, ifindex: n3, verdict: xdpPass, counters: pass},
	}
}

// dlOuter is what a downlink packet to s should look like when it leaves toward the gNB.
func dlOuter(t testing.TB, s session.Session, inner []byte, tos uint8) []byte {
	var gtp []byte
	if s.QFI != 0 {
		gtp = gtpHdr(0x34, 255, s.DownlinkTEID, []byte{0, 0, 0, 0x85, 1, 0x00, s.QFI, 0}, inner)
	} else {
		gtp = gtpHdr(0x30, 255, s.DownlinkTEID, nil, inner)
	}
	ip := ipv4(s.GTPUAddr, s.GNB, layers.IPProtocolUDP, 64)
	ip.Flags = layers.IPv4DontFragment
	ip.TOS = tos
	pkt := serialize(t, ethernet(macN3, macGNB, layers.EthernetTypeIPv4), ip,
		&layers.UDP{SrcPort: 0, DstPort: 2152}, gopacket.Payload(gtp))
	pkt[40], pkt[41] = 0, 0 // UDP checksum 0: allowed over IPv4, and what we send
	return pkt
}

func dlIn(t testing.TB, s session.Session, ttl uint8) []byte {
	return concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, s.UE, 5000, 6000, ttl, payload))
}

func downlinkCases(t *testing.T) []pktCase {
	dlOK := map[string]uint64{"dl_rx": 1, "dl_tx": 1}
	inner := func(s session.Session, ttl uint8) []byte { return innerUDP(t, addrDN, s.UE, 5000, 6000, ttl, payload) }
	noARPOut := dlOuter(t, sessNoARP, inner(sessNoARP, 63), 0x28)
	copy(noARPOut[0:12], concat(macN6, macDN)) // MACs as they came: the kernel fills them in
	badIHL := dlIn(t, sessPlain, 64)
	badIHL[14] = 0x44
	return []pktCase{
		{name: "downlink without QFI", in: dlIn(t, sessPlain, 64), ifindex: n6, verdict: xdpRedirect,
			out: dlOuter(t, sessPlain, inner(sessPlain, 63), 0x28), fixSport: true, counters: dlOK},
		{name: "downlink with QFI", in: dlIn(t, sessQFI, 64), ifindex: n6, verdict: xdpRedirect,
			out: dlOuter(t, sessQFI, inner(sessQFI, 63), 0x28), fixSport: true, counters: dlOK},
		{name: "downlink with gNB neighbour unresolved goes to the kernel encapsulated", in: dlIn(t, sessNoARP, 64),
			ifindex: n6, verdict: xdpPass, out: noARPOut, fixSport: true,
			counters: map[string]uint64{"dl_rx": 1, "dl_kernel": 1, "fib_no_neigh": 1}},
		{name: "downlink TTL 1 goes to the kernel untouched", in: dlIn(t, sessPlain, 1), ifindex: n6, verdict: xdpPass,
			counters: map[string]uint64{"dl_rx": 1, "dl_kernel": 1, "fib_ttl": 1}},
		{name: "FAR drop (downlink)", in: dlIn(t, sessDropFAR, 64), ifindex: n6, verdict: xdpDrop,
			counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"far_drop": 1}},
		{name: "downlink IHL below 5", in: badIHL, ifindex: n6, verdict: xdpDrop,
			counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"malformed_dl_ip": 1}},
		{name: "downlink total length beyond the packet", in: dlIn(t, sessPlain, 64)[:50], ifindex: n6, verdict: xdpDrop,
			counters: map[string]uint64{"dl_rx": 1}, drops: map[string]uint64{"malformed_dl_ip": 1}},
	}
}

func echoCases(t *testing.T) []pktCase {
	reply := func() []byte {
		ip := ipv4(addrN3, addrGNB, layers.IPProtocolUDP, 64)
		ip.Flags = layers.IPv4DontFragment
		p := serialize(t, ethernet(macN3, macGNB, layers.EthernetTypeIPv4), ip, &layers.UDP{SrcPort: 2152, DstPort: 40000},
			gopacket.Payload(gtpHdr(0x32, 2, 0, []byte{0x12, 0x34, 0, 0, 14, 0}, nil)))
		p[40], p[41] = 0, 0
		return p
	}()
	req := func(mod func(*layers.IPv4)) []byte {
		ip := ipv4(addrGNB, addrN3, layers.IPProtocolUDP, 64)
		if mod != nil {
			mod(ip)
		}
		return serialize(t, ethernet(macGNB, macN3, layers.EthernetTypeIPv4), ip, &layers.UDP{SrcPort: 40000, DstPort: 2152},
			gopacket.Payload(gtpHdr(0x32, 1, 0, []byte{0x12, 0x34, 0, 0}, nil)))
	}
	echo := map[string]uint64{"echo_replied": 1}
	return []pktCase{
		{name: "echo request", in: req(nil), ifindex: n3, verdict: xdpTX, out: reply, counters: echo},
		{name: "echo request with outer IP options", in: req(func(ip *layers.IPv4) {
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		}), ifindex: n3, verdict: xdpTX, out: reply, counters: echo},
		{name: "echo request truncated in its optional fields", in: req(nil)[:14+28+10], ifindex: n3, verdict: xdpDrop,
			drops: map[string]uint64{"malformed_gtp": 1}},
	}
}
