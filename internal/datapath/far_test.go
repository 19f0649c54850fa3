package datapath

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/rules"
)

// TestFAREntry checks the struct far written for each kind of rules.FAR, and that a
// forwarding FAR's tunnel without IPv4 ends is refused.
func TestFAREntry(t *testing.T) {
	gnb := rules.OuterHeader{TEID: 0x1234, Peer: addrGNB, Local: addrN3}
	peer := func(a netip.Addr) *rules.OuterHeader { o := gnb; o.Peer = a; return &o }
	local := func(a netip.Addr) *rules.OuterHeader { o := gnb; o.Local = a; return &o }
	drop, fwd, buff := uint32(xupfFarActionFAR_DROP), uint32(xupfFarActionFAR_FORWARD), uint32(xupfFarActionFAR_BUFFER)
	ohc, tlm := uint8(xupfFarFlagFAR_F_OHC), uint8(xupfFarFlagFAR_F_TLM)
	tunnel := xupfFar{Action: fwd, Flags: ohc, Teid: be32(0x1234), PeerAddr: addrBE(addrGNB), LocalAddr: addrBE(addrN3)}
	marked := tunnel
	marked.Flags, marked.Tos = ohc|tlm, 0xb8
	cases := []struct {
		name string
		far  rules.FAR
		want xupfFar
		err  string // a part of the error; "" for none
	}{
		{name: "drop", far: rules.FAR{}, want: xupfFar{Action: drop}},
		{name: "forward", far: rules.FAR{Action: rules.Forward}, want: xupfFar{Action: fwd}},
		{name: "forward into a tunnel", far: rules.FAR{Action: rules.Forward, OHC: &gnb}, want: tunnel},
		{name: "transport level marking", far: rules.FAR{Action: rules.Forward, OHC: &gnb, TOS: 0xb8, HasTOS: true},
			want: marked},
		{name: "buffer leaves its tunnel out, unchecked", far: rules.FAR{Action: rules.Buffer, OHC: peer(netip.Addr{})},
			want: xupfFar{Action: buff}},
		{name: "IPv6 peer", far: rules.FAR{Action: rules.Forward, OHC: peer(netip.MustParseAddr("2001:db8::1"))},
			err: "IPv4 peer address, got 2001:db8::1"},
		{name: "IPv4-mapped IPv6 peer", far: rules.FAR{Action: rules.Forward, OHC: peer(netip.MustParseAddr("::ffff:10.0.1.2"))},
			err: "IPv4 peer address"},
		{name: "unspecified peer", far: rules.FAR{Action: rules.Forward, OHC: peer(netip.IPv4Unspecified())},
			err: "IPv4 peer address, got 0.0.0.0"},
		{name: "no local address", far: rules.FAR{Action: rules.Forward, OHC: local(netip.Addr{})},
			err: "IPv4 local address, got invalid IP"},
		{name: "toward Access without a tunnel", far: rules.FAR{Action: rules.AccessNoTunnel, TOS: 0xb8, HasTOS: true},
			want: xupfFar{Action: uint32(xupfFarActionFAR_ACCESS_NO_TUNNEL)}},
		{name: "drop and notify leaves its tunnel out", far: rules.FAR{Action: rules.DropNotify, OHC: peer(netip.Addr{})},
			want: xupfFar{Action: uint32(xupfFarActionFAR_DROP_NOTIFY)}},
		{name: "unknown action", far: rules.FAR{Action: 7}, err: "FAR action 7 unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := farEntry(c.far)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one with %q", err, c.err)
			case c.err == "" && got != c.want:
				t.Errorf("far %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestN9SourcePortIsTheDownlinkHash checks that a packet tunnelled on uplink (N9) gets the
// outer UDP source port a downlink packet of the same inner flow gets: every tunnel spreads
// its flows with the one hash.
func TestN9SourcePortIsTheDownlinkHash(t *testing.T) {
	e := newTestEnv(t, 4)
	pdrs := []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.Forward, OHC: &ohcN9}}}
	e.installSet(t, rules.RuleSet{Uplink: true, TEID: teidN9, PDRs: pdrs})
	// Downlink rules keyed on the uplink packets' destination, so one inner packet runs both ways.
	e.installSet(t, rules.RuleSet{UE: addrDN, PDRs: pdrs})
	sport := func(pkt []byte, ifindex int) uint16 {
		t.Helper()
		ret, out := e.run(t, pkt, ifindex)
		if ret != xdpRedirect {
			t.Fatalf("verdict %s\n%s", verdictNames[ret], dump(out))
		}
		return binary.BigEndian.Uint16(out[34:36])
	}
	seen := map[uint16]bool{}
	for p := uint16(1000); p < 1016; p++ {
		inner := innerUDP(t, ueAddr, addrDN, p, 2000, 64, payload)
		ul := sport(outerGTP(t, gtpHdr(0x30, 255, teidN9, nil, inner), nil), e.n3)
		dl := sport(concat(ethBytes(macDN, macN6), inner), e.n6)
		if ul != dl || ul < 0xC000 {
			t.Errorf("flow %d: source port %d uplink, %d downlink; want the same, from 0xC000 up", p, ul, dl)
		}
		seen[ul] = true
	}
	if len(seen) < 12 { // 16 flows into 16384 ports: collisions are rare
		t.Errorf("16 flows used only %d source ports", len(seen))
	}
}

// TestAccessWithoutTunnel: a FAR toward Access without a tunnel (free5GC's downlink FAR before
// the gNB is known) drops both ways under its own reason, leaves the packet unrouted (never
// back out of N6) and counts no usage.
func TestAccessWithoutTunnel(t *testing.T) {
	e := newTestEnv(t, 4)
	const owner, teid = 9, 0x107
	ue := netip.MustParseAddr("10.45.0.9")
	pdrs := []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.AccessNoTunnel}}}
	if err := e.dp.Install(owner, []rules.RuleSet{{Uplink: true, TEID: teid, PDRs: pdrs}, {UE: ue, PDRs: pdrs}}); err != nil {
		t.Fatal(err)
	}
	drops := map[string]uint64{"far_access_no_tunnel": 1}
	for _, c := range []pktCase{
		{name: "downlink", in: concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, ue, 5000, 6000, 64, payload)),
			ifindex: n6, verdict: xdpDrop, counters: map[string]uint64{"dl_rx": 1}, drops: drops},
		{name: "uplink", in: outerGTP(t, gtpHdr(0x30, 255, teid, nil, innerUDP(t, ue, addrDN, 1000, 2000, 64, payload)), nil),
			ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1}, drops: drops},
	} {
		t.Run(c.name, func(t *testing.T) { runCase(t, e, c) })
	}
	usage, err := e.dp.Usage(owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if u.Packets != 0 || u.Bytes != 0 {
			t.Errorf("usage %+v: dropped packets must not count as forwarded", u)
		}
	}
}
