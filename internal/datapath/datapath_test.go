package datapath

import (
	"bytes"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xupf/xupf/internal/rules"
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
	// sessAnySource's uplink packets may come from any address (anti-spoofing off).
	sessAnySource = session.Session{ID: 5, UE: netip.MustParseAddr("10.45.0.10"), UplinkTEID: 0x108, GNB: addrGNB,
		DownlinkTEID: 0x208, GTPUAddr: addrN3, AllowAnySource: true}
	// sessDropFAR's keys lead to FARs that drop (farSets): it is not installed as a session.
	sessDropFAR = session.Session{ID: 4, UE: netip.MustParseAddr("10.45.0.5"), UplinkTEID: 0x103, GNB: addrGNB,
		DownlinkTEID: 0x203, GTPUAddr: addrN3}
)

// Keys of the rule sets farSets installs, one FAR each of the kinds no static session makes.
const (
	teidN9     = 0x104 // forward into a tunnel toward another UPF (N9)
	teidN9TLM  = 0x105 // the same with transport level marking
	teidBuffer = 0x106 // buffer
)

var (
	ueTLM    = netip.MustParseAddr("10.45.0.6") // tunnel toward the gNB with transport level marking
	ueBuffer = netip.MustParseAddr("10.45.0.7") // buffer (the FAR keeps its tunnel, as after FORW -> BUFF)
	ueRouted = netip.MustParseAddr("10.45.0.8") // forward without a tunnel: plain IP routing

	ohcN9    = rules.OuterHeader{TEID: 0x300, Peer: addrUPF, Local: addrN3}
	ohcN9TLM = rules.OuterHeader{TEID: 0x301, Peer: addrUPF, Local: addrN3}
	ohcTLM   = rules.OuterHeader{TEID: 0x206, Peer: addrGNB, Local: addrN3}
)

// tlmTOS is the FAR's transport level marking: DSCP 46 (EF), and ECN bits the outer header
// must not take (they come from the inner packet). tlmInnerTOS is DSCP 10 with ECT(1);
// tlmOuterTOS, the FAR's DSCP with the inner ECN bits, is what the outer header gets.
const (
	tlmTOS      = 0xbb
	tlmInnerTOS = 0x29
	tlmOuterTOS = 0xb9
)

// farSets are the rule sets, beside the sessions, of the FAR cases (farCases).
func farSets() []rules.RuleSet {
	one := func(far rules.FAR) []rules.PDR { return []rules.PDR{{ID: 1, Precedence: 1, FAR: far}} }
	drop := rules.FAR{Action: rules.Drop}
	return []rules.RuleSet{
		{Uplink: true, TEID: sessDropFAR.UplinkTEID, PDRs: one(drop)},
		{UE: sessDropFAR.UE, PDRs: one(drop)},
		{Uplink: true, TEID: teidN9, PDRs: one(rules.FAR{Action: rules.Forward, OHC: &ohcN9})},
		{Uplink: true, TEID: teidN9TLM, PDRs: one(rules.FAR{Action: rules.Forward, OHC: &ohcN9TLM,
			TOS: tlmTOS, HasTOS: true})},
		{Uplink: true, TEID: teidBuffer, PDRs: one(rules.FAR{Action: rules.Buffer})},
		{UE: ueTLM, PDRs: one(rules.FAR{Action: rules.Forward, OHC: &ohcTLM, TOS: tlmTOS, HasTOS: true})},
		{UE: ueBuffer, PDRs: one(rules.FAR{Action: rules.Buffer, OHC: &ohcTLM})},
		{UE: ueRouted, PDRs: one(rules.FAR{Action: rules.Forward})},
	}
}

func newSessionsEnv(t *testing.T) *testEnv {
	return newSessionsEnvOpts(t, Options{MaxSessions: 1024})
}

// newSessionsEnvOpts is newSessionsEnv with opts.
func newSessionsEnvOpts(t testing.TB, opts Options) *testEnv {
	e := newTestEnvOpts(t, opts)
	for _, s := range []session.Session{sessPlain, sessQFI, sessNoARP, sessAnySource} {
		if err := e.addSession(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, rs := range farSets() {
		e.installSet(t, rs)
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
	// ret runs the return device's program (xupf_xdp_return) instead of the interfaces'.
	ret bool
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
	prog := e.dp.Program()
	if c.ret {
		prog = e.dp.objs.XupfXdpReturn
	}
	ret, out := e.runProgramOn(t, prog, anyCPU, c.in, c.ifindex(e))
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
		// A gNB's usual G-PDU (E only, one PSC of length 1) is read at fixed offsets
		// (GTPU_PSC_ONLY); these check that the octets it ignores are ignored, and that the
		// forms it leaves to the walk get the walk's answer.
		{name: "uplink PSC behind sequence and N-PDU octets, E only",
			in:      outerGTP(t, gtpHdr(0x34, 255, 0x101, concat([]byte{0xab, 0xcd, 0xef}, optPSC(9)[3:5], []byte{0x1f, 0xc9, 0}), innerQFI), nil),
			ifindex: n3, verdict: xdpRedirect, out: fwdQFI, counters: ulOK},
		{name: "uplink PSC of length 2",
			in:      outerGTP(t, gtpHdr(0x34, 255, 0x101, []byte{0, 0, 0, 0x85, 2, 0x10, 9, 0, 0, 0, 0, 0}, innerQFI), nil),
			ifindex: n3, verdict: xdpRedirect, out: fwdQFI, counters: ulOK},
		{name: "uplink PSC longer than the GTP length",
			in:      outerGTP(t, withGTPLength(gtpHdr(0x34, 255, 0x101, optPSC(9), innerQFI), 4), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"malformed_gtp": 1}},
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
		{name: "error indication is xupfd's", in: outerGTP(t, gtpHdr(0x32, 26, 0, []byte{0, 1, 0, 0}, nil), nil),
			ifindex: n3, verdict: xdpPass, counters: map[string]uint64{"pass": 1}},
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
	cases = append(cases, spoofCases(t)...)
	cases = append(cases, n6GTPUCases(t)...)
	cases = append(cases, notOursCases(t)...)
	cases = append(cases, downlinkCases(t)...)
	cases = append(cases, farCases(t)...)
	cases = append(cases, echoCases(t)...)
	return cases
}

// spoofCases: an uplink packet must come from its session's UE address, unless the session
// allows any source.
func spoofCases(t testing.TB) []pktCase {
	other := netip.MustParseAddr("10.45.0.99")
	spoofed := map[string]uint64{"spoofed_source": 1}
	gpdu := func(teid uint32, src netip.Addr) []byte {
		return outerGTP(t, gtpHdr(0x30, 255, teid, nil, innerUDP(t, src, addrDN, 1000, 2000, 64, payload)), nil)
	}
	return []pktCase{
		{name: "uplink from an address that is no UE's", in: gpdu(sessPlain.UplinkTEID, other), ifindex: n3,
			verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: spoofed},
		{name: "uplink from another session's UE", in: gpdu(sessPlain.UplinkTEID, sessQFI.UE), ifindex: n3,
			verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: spoofed},
		{name: "uplink from the session's own UE, anti-spoofing off", in: gpdu(sessAnySource.UplinkTEID, sessAnySource.UE),
			ifindex: n3, verdict: xdpRedirect, counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1},
			out: concat(ethBytes(macN6, macDN), innerUDP(t, sessAnySource.UE, addrDN, 1000, 2000, 63, payload))},
		{name: "uplink from any address, anti-spoofing off", in: gpdu(sessAnySource.UplinkTEID, other),
			ifindex: n3, verdict: xdpRedirect, counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1},
			out: concat(ethBytes(macN6, macDN), innerUDP(t, other, addrDN, 1000, 2000, 63, payload))},
	}
}

// n6GTPUCases: GTP-U to the GTP-U address is accepted on the n3 interface only; from the data
// network it is dropped, not decapsulated, while other UDP to that address is the kernel's.
func n6GTPUCases(t testing.TB) []pktCase {
	fromDN := func(dport uint16, payload []byte) []byte {
		return serialize(t, ethernet(macDN, macN6, layers.EthernetTypeIPv4), ipv4(addrDN, addrN3, layers.IPProtocolUDP, 64),
			&layers.UDP{SrcPort: 2152, DstPort: layers.UDPPort(dport)}, gopacket.Payload(payload))
	}
	notN3 := map[string]uint64{"gtpu_not_n3": 1}
	return []pktCase{
		{name: "G-PDU arriving on N6", in: fromDN(2152, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, ulInner(t, 64))),
			ifindex: n6, verdict: xdpDrop, drops: notN3},
		{name: "echo request arriving on N6", in: fromDN(2152, gtpHdr(0x32, 1, 0, []byte{0x12, 0x34, 0, 0}, nil)),
			ifindex: n6, verdict: xdpDrop, drops: notN3},
		{name: "PFCP to the GTP-U address arriving on N6", in: fromDN(8805, []byte("pfcp heartbeat, say")),
			ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"pass": 1}},
	}
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

// tunnelled is what a packet should look like when it leaves on N3 in the tunnel oh toward
// the neighbour at dstMAC: outer headers as encap_gpdu writes them, with a DL PDU Session
// Container when qfi is not 0. The UDP source port is 0: runCase's fixSport puts in the hash.
func tunnelled(t testing.TB, dstMAC net.HardwareAddr, oh rules.OuterHeader, qfi, tos uint8, inner []byte) []byte {
	var gtp []byte
	if qfi != 0 {
		gtp = gtpHdr(0x34, 255, oh.TEID, []byte{0, 0, 0, 0x85, 1, 0x00, qfi, 0}, inner)
	} else {
		gtp = gtpHdr(0x30, 255, oh.TEID, nil, inner)
	}
	ip := ipv4(oh.Local, oh.Peer, layers.IPProtocolUDP, 64)
	ip.Flags = layers.IPv4DontFragment
	ip.TOS = tos
	pkt := serialize(t, ethernet(macN3, dstMAC, layers.EthernetTypeIPv4), ip,
		&layers.UDP{SrcPort: 0, DstPort: 2152}, gopacket.Payload(gtp))
	pkt[40], pkt[41] = 0, 0 // UDP checksum 0: allowed over IPv4, and what we send
	return pkt
}

// dlOuter is what a downlink packet to s should look like when it leaves toward the gNB.
func dlOuter(t testing.TB, s session.Session, inner []byte, tos uint8) []byte {
	oh := rules.OuterHeader{TEID: s.DownlinkTEID, Peer: s.GNB, Local: s.GTPUAddr}
	return tunnelled(t, macGNB, oh, s.QFI, tos, inner)
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

// farCases run through the rule sets of farSets: tunnels uplink (N9), transport level
// marking, buffering, and downlink forwarding without a tunnel.
func farCases(t *testing.T) []pktCase {
	ulOK := map[string]uint64{"ul_rx": 1, "ul_tx": 1}
	dlOK := map[string]uint64{"dl_rx": 1, "dl_tx": 1}
	inner := ulInner(t, 64)
	// Uplink N9: the incoming tunnel's headers (PSC included) go; the packet, one hop on,
	// leaves in a new tunnel toward the other UPF, without a PSC, outer ToS = inner ToS.
	n9Out := tunnelled(t, macUPF, ohcN9, 0, 0x28, ulInner(t, 63))
	tlmInner := func(src, dst netip.Addr, ttl uint8) []byte {
		return innerUDPTOS(t, src, dst, 1000, 2000, ttl, tlmInnerTOS, payload)
	}
	routedIn := concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, ueRouted, 5000, 6000, 64, payload))
	return []pktCase{
		{name: "uplink N9 without PDU Session Container", in: outerGTP(t, gtpHdr(0x30, 255, teidN9, nil, inner), nil),
			ifindex: n3, verdict: xdpRedirect, out: n9Out, fixSport: true, counters: ulOK},
		{name: "uplink N9 with PDU Session Container", in: outerGTP(t, gtpHdr(0x34, 255, teidN9, optPSC(9), inner), nil),
			ifindex: n3, verdict: xdpRedirect, out: n9Out, fixSport: true, counters: ulOK},
		{name: "uplink N9 with transport level marking",
			in:      outerGTP(t, gtpHdr(0x30, 255, teidN9TLM, nil, tlmInner(ueAddr, addrDN, 64)), nil),
			ifindex: n3, verdict: xdpRedirect, fixSport: true, counters: ulOK,
			out: tunnelled(t, macUPF, ohcN9TLM, 0, tlmOuterTOS, tlmInner(ueAddr, addrDN, 63))},
		{name: "uplink N9 inner TTL 1 goes to the kernel decapsulated",
			in:      outerGTP(t, gtpHdr(0x30, 255, teidN9, nil, ulInner(t, 1)), nil),
			ifindex: n3, verdict: xdpPass, out: concat(ethBytes(macGNB, macN3), ulInner(t, 1)),
			counters: map[string]uint64{"ul_rx": 1, "ul_kernel": 1, "fib_ttl": 1}},
		{name: "FAR buffer (uplink)", in: outerGTP(t, gtpHdr(0x30, 255, teidBuffer, nil, inner), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1, "buffered": 1}},
		{name: "downlink with transport level marking",
			in:      concat(ethBytes(macDN, macN6), tlmInner(addrDN, ueTLM, 64)),
			ifindex: n6, verdict: xdpRedirect, fixSport: true, counters: dlOK,
			out: tunnelled(t, macGNB, ohcTLM, 0, tlmOuterTOS, tlmInner(addrDN, ueTLM, 63))},
		{name: "FAR buffer (downlink)", in: concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, ueBuffer, 5000, 6000, 64, payload)),
			ifindex: n6, verdict: xdpDrop, counters: map[string]uint64{"dl_rx": 1, "buffered": 1}},
		// The test FIB's only way to the UE's address is the default route: back out of N6.
		{name: "downlink without outer header creation is routed as IP", in: routedIn, ifindex: n6, verdict: xdpRedirect,
			out:      concat(ethBytes(macN6, macDN), innerUDP(t, addrDN, ueRouted, 5000, 6000, 63, payload)),
			counters: dlOK},
		{name: "downlink without outer header creation, TTL 1, goes to the kernel untouched",
			in:      concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, ueRouted, 5000, 6000, 1, payload)),
			ifindex: n6, verdict: xdpPass, counters: map[string]uint64{"dl_rx": 1, "dl_kernel": 1, "fib_ttl": 1}},
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
