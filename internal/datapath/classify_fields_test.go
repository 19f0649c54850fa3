package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/session"
)

// TestSDFFieldsOneByOne checks each classification field on its own: a rule set of two PDRs,
// PDR 1 (precedence 10) with a filter on that field and PDR 0 (the default, no filter). A
// downlink packet must leave with PDR 1's TEID and QFI when it matches the filter and with
// PDR 0's otherwise (whole output packet compared); an uplink packet must be counted to the
// right PDR and leave decapsulated.
func TestSDFFieldsOneByOne(t *testing.T) {
	e := newTestEnv(t, 4)
	pkt := func(mod func(*diffPkt)) diffPkt {
		p := diffPkt{}
		p.Protocol, p.Remote, p.Local = 17, addrDN, ueAddr
		p.RemotePort, p.LocalPort, p.HasPorts = 5000, 6000, true
		p.TOS = 0x28
		if mod != nil {
			mod(&p)
		}
		return p
	}
	udp := func(mod func(*sdf.Filter)) sdf.Filter {
		f := sdf.Filter{Protocol: 17}
		mod(&f)
		return f
	}
	cases := []struct {
		name     string
		uplink   bool
		filter   sdf.Filter
		qfi      uint8 // PDR 1's QFI (an uplink condition)
		match    []diffPkt
		nomatch  []diffPkt
		pdr1Only bool // PDR 1 has no filter, only its QFI
	}{
		{name: "protocol", filter: sdf.Filter{Protocol: 6},
			match:   []diffPkt{pkt(func(p *diffPkt) { p.Protocol = 6 })},
			nomatch: []diffPkt{pkt(nil), pkt(func(p *diffPkt) { p.Protocol = 1; p.HasPorts = false })}},
		{name: "remote address", filter: sdf.Filter{Protocol: sdf.AnyProtocol, Remote: netip.MustParsePrefix("192.0.2.0/28")},
			match:   []diffPkt{pkt(nil), pkt(func(p *diffPkt) { p.Remote = netip.MustParseAddr("192.0.2.15") })},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.Remote = netip.MustParseAddr("192.0.2.16") })}},
		{name: "local address (uplink)", uplink: true, filter: sdf.Filter{Protocol: sdf.AnyProtocol, Local: netip.MustParsePrefix("10.45.0.2/32")},
			match:   []diffPkt{pkt(nil)},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.Local = netip.MustParseAddr("10.45.0.77") })}},
		{name: "remote port range", filter: udp(func(f *sdf.Filter) { f.RemotePorts = []sdf.PortRange{{First: 1000, Last: 5000}} }),
			match:   []diffPkt{pkt(nil), pkt(func(p *diffPkt) { p.RemotePort = 1000 })},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.RemotePort = 5001 }), pkt(func(p *diffPkt) { p.RemotePort = 999 })}},
		{name: "local port", filter: udp(func(f *sdf.Filter) { f.LocalPorts = []sdf.PortRange{{First: 6000, Last: 6000}} }),
			match:   []diffPkt{pkt(nil)},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.LocalPort = 6001 })}},
		{name: "local port (uplink: the source port)", uplink: true,
			filter:  udp(func(f *sdf.Filter) { f.LocalPorts = []sdf.PortRange{{First: 6000, Last: 6000}} }),
			match:   []diffPkt{pkt(nil)},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.LocalPort = 5000; p.RemotePort = 6000 })}},
		{name: "ports of fragments (all fragments of a datagram alike)", filter: udp(func(f *sdf.Filter) { f.LocalPorts = []sdf.PortRange{{First: 6000, Last: 6000}} }),
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.fragment = true; p.HasPorts = false }),
				pkt(func(p *diffPkt) { p.mf = true; p.HasPorts = false })}},
		{name: "tos (DSCP mask)", filter: sdf.Filter{Protocol: sdf.AnyProtocol, TOSValue: 0xb8, TOSMask: 0xfc},
			match:   []diffPkt{pkt(func(p *diffPkt) { p.TOS = 0xb8 }), pkt(func(p *diffPkt) { p.TOS = 0xbb })},
			nomatch: []diffPkt{pkt(nil), pkt(func(p *diffPkt) { p.TOS = 0xbc })}},
		{name: "spi", filter: sdf.Filter{Protocol: sdf.AnyProtocol, HasSPI: true, SPI: 0x1234},
			match: []diffPkt{pkt(func(p *diffPkt) { p.Protocol, p.HasPorts, p.HasSPI, p.SPI = 50, false, true, 0x1234 }),
				pkt(func(p *diffPkt) { p.Protocol, p.HasPorts, p.HasSPI, p.SPI = 51, false, true, 0x1234 })},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.Protocol, p.HasPorts, p.HasSPI, p.SPI = 50, false, true, 0x1235 }), pkt(nil)}},
		{name: "flow label never matches IPv4", filter: sdf.Filter{Protocol: sdf.AnyProtocol, HasFlowLabel: true, FlowLabel: 1},
			nomatch: []diffPkt{pkt(nil)}},
		{name: "qfi (uplink)", uplink: true, qfi: 5, pdr1Only: true,
			match:   []diffPkt{pkt(func(p *diffPkt) { p.hasQFI, p.qfi = true, 5 })},
			nomatch: []diffPkt{pkt(func(p *diffPkt) { p.hasQFI, p.qfi = true, 9 }), pkt(nil)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pdr1 := rules.PDR{ID: 1, Precedence: 10, QFI: 5, Filters: []sdf.Filter{c.filter}}
			if c.pdr1Only {
				pdr1.Filters = nil
			}
			pdr0 := rules.PDR{ID: 0, Precedence: 1000}
			rs := rules.RuleSet{Uplink: c.uplink, TEID: 0x4000, UE: ueAddr}
			if c.uplink {
				pdr1.QFI = c.qfi
				pdr1.FAR, pdr0.FAR = rules.FAR{Action: rules.Forward}, rules.FAR{Action: rules.Forward}
			} else {
				pdr1.FAR = rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x301, Peer: addrGNB, Local: addrN3}}
				pdr0.FAR = rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x300, Peer: addrGNB, Local: addrN3}}
				pdr0.QFI = 0
			}
			rs.PDRs = []rules.PDR{pdr1, pdr0}
			set := e.installSet(t, rs)
			defer e.removeSet(set)
			check := func(p diffPkt, want uint32) {
				t.Helper()
				if c.uplink {
					flags, opt := byte(0x30), []byte(nil)
					if p.hasQFI {
						flags, opt = 0x34, optPSC(p.qfi)
					}
					in := outerGTP(t, gtpHdr(flags, 255, rs.TEID, opt, p.inner(t, true)), nil)
					got, ok := e.selected(t, set, in, e.n3)
					if !ok || got != want {
						t.Errorf("uplink %s: PDR %d (forwarded %v), want PDR %d", p, got, ok, want)
					}
					ret, out := e.run(t, in, e.n3)
					fwd := p
					fwd.ttl = 63
					wantOut := concat(ethBytes(macN6, macDN), fwd.inner(t, true))
					if ret != xdpRedirect || !bytes.Equal(out, wantOut) {
						t.Errorf("uplink %s: verdict %s, packet\n%s\nwant\n%s", p, verdictNames[ret], dump(out), dump(wantOut))
					}
					return
				}
				in := concat(ethBytes(macDN, macN6), p.inner(t, false))
				ret, out := e.run(t, in, e.n6)
				s := session.Session{DownlinkTEID: 0x300, GNB: addrGNB, GTPUAddr: addrN3}
				if want == 1 {
					s.DownlinkTEID, s.QFI = 0x301, 5
				}
				fwd := p
				fwd.ttl = 63
				wantOut := dlOuter(t, s, fwd.inner(t, false), p.TOS)
				if len(out) >= 36 {
					copy(wantOut[34:36], out[34:36])
				}
				if ret != xdpRedirect || !bytes.Equal(out, wantOut) {
					t.Errorf("downlink %s: verdict %s, want PDR %d\n%s\nwant\n%s", p, verdictNames[ret], want, dump(out), dump(wantOut))
				}
			}
			for _, p := range c.match {
				check(p, 1)
			}
			for _, p := range c.nomatch {
				check(p, 0)
			}
		})
	}
}
