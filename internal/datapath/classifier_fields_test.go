package datapath

import (
	"net"
	"net/netip"
	"testing"

	"github.com/xupf/xupf/internal/classifier"
)

// TestClassifierFieldsOneByOne: for each field, class 1 (priority 10) constrains that field
// alone and class 2 (priority 1) takes everything; a packet that matches the field must be
// counted in class 1, one that does not in class 2, and both must be forwarded unchanged by
// the classifier.
func TestClassifierFieldsOneByOne(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	type pkt struct {
		uplink           bool
		srcMAC, dstMAC   net.HardwareAddr
		ethertype        uint16 // 0: IPv4
		proto            uint8
		remote           netip.Addr
		localPort, rport uint16
	}
	base := pkt{srcMAC: macDN, dstMAC: macN6, proto: 17, remote: addrDN, localPort: 6000, rport: 5000}
	with := func(f func(*pkt)) pkt { p := base; f(&p); return p }
	build := func(p pkt) ([]byte, int) {
		d := diffPkt{}
		d.Protocol, d.Remote, d.Local, d.RemotePort, d.LocalPort = p.proto, p.remote, sessPlain.UE, p.rport, p.localPort
		if p.uplink {
			outer := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, d.inner(t, true)), nil)
			return concat(p.dstMAC, p.srcMAC, outer[12:]), e.n3
		}
		return concat(ethBytes(p.srcMAC, p.dstMAC), d.inner(t, false)), e.n6
	}
	cases := []struct {
		name    string
		class   classifier.Class
		match   []pkt
		nomatch []pkt
	}{
		{"direction ingress", classifier.Class{Direction: "ingress"},
			[]pkt{with(func(p *pkt) { p.uplink = true; p.srcMAC, p.dstMAC = macGNB, macN3 })}, []pkt{base}},
		{"direction egress", classifier.Class{Direction: "egress"},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.uplink = true; p.srcMAC, p.dstMAC = macGNB, macN3 })}},
		{"source MAC", classifier.Class{SrcMAC: macDN.String()},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.srcMAC = macGNB })}},
		{"destination MAC", classifier.Class{DstMAC: macN6.String()},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.dstMAC = net.HardwareAddr{2, 9, 9, 9, 9, 9} })}},
		{"ethertype", classifier.Class{EtherType: "0x0800"}, []pkt{base}, nil},
		{"ethertype that IPv4 frames never have", classifier.Class{EtherType: "0x86dd"}, nil, []pkt{base}},
		{"protocol", classifier.Class{Protocol: "udp"},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.proto = 6 })}},
		{"source prefix", classifier.Class{SrcIP: "192.0.2.0/28"},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.remote = netip.MustParseAddr("192.0.2.16") })}},
		{"destination address", classifier.Class{DstIP: sessPlain.UE.String()},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.uplink = true; p.srcMAC, p.dstMAC = macGNB, macN3 })}},
		{"source port range", classifier.Class{Protocol: "udp", SrcPort: "4000-5000"},
			[]pkt{base, with(func(p *pkt) { p.rport = 4000 })}, []pkt{with(func(p *pkt) { p.rport = 5001 })}},
		{"destination port", classifier.Class{Protocol: "udp", DstPort: "6000"},
			[]pkt{base}, []pkt{with(func(p *pkt) { p.localPort = 6001 })}},
		{"every field", classifier.Class{Direction: "egress", SrcMAC: macDN.String(), DstMAC: macN6.String(),
			EtherType: "0x0800", Protocol: "udp", SrcIP: addrDN.String(), DstIP: sessPlain.UE.String(),
			SrcPort: "5000", DstPort: "6000-65535"},
			[]pkt{base, with(func(p *pkt) { p.localPort = 65535 })},
			[]pkt{with(func(p *pkt) { p.rport = 5001 }), with(func(p *pkt) { p.localPort = 5999 }),
				with(func(p *pkt) { p.proto = 6 }), with(func(p *pkt) { p.remote = netip.MustParseAddr("192.0.2.16") }),
				with(func(p *pkt) { p.srcMAC = macGNB }), with(func(p *pkt) { p.uplink = true; p.srcMAC, p.dstMAC = macGNB, macN3 })}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.class
			a.ID, a.Priority = 1, 10
			e.setClasses(t, a, classifier.Class{ID: 2, Priority: 1})
			check := func(p pkt, want uint32) {
				t.Helper()
				b1, _ := e.dp.ClassCounters(1)
				b2, _ := e.dp.ClassCounters(2)
				in, ifindex := build(p)
				if ret, _ := e.run(t, in, ifindex); ret != xdpRedirect {
					t.Errorf("%+v: verdict %s", p, verdictNames[ret])
				}
				a1, _ := e.dp.ClassCounters(1)
				a2, _ := e.dp.ClassCounters(2)
				got := map[bool]uint32{true: 1, false: 2}[a1.Packets > b1.Packets]
				if a1.Packets-b1.Packets+a2.Packets-b2.Packets != 1 || got != want {
					t.Errorf("%+v: counted in class 1 %d, class 2 %d times; want class %d once",
						p, a1.Packets-b1.Packets, a2.Packets-b2.Packets, want)
				}
			}
			for _, p := range c.match {
				check(p, 1)
			}
			for _, p := range c.nomatch {
				check(p, 2)
			}
		})
	}
}

// TestClassifierHoldsMaxClasses installs the most classes the datapath holds (every one a
// /32 of its own): a packet to the last is counted in it, and one more class is refused.
func TestClassifierHoldsMaxClasses(t *testing.T) {
	e := newTestEnv(t, 4)
	rules := benchClasses(classifier.MaxClasses)
	last := rules[len(rules)-1]
	if err := e.addSession(sessionFor(last.DstIP.Addr())); err != nil {
		t.Fatal(err)
	}
	compiled, err := classifier.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.dp.SetClasses(compiled); err != nil {
		t.Fatal(err)
	}
	pkt := concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, last.DstIP.Addr(), 5000, last.DstPort.First, 64, payload))
	before, _ := e.dp.ClassCounters(last.ID)
	if ret, _ := e.run(t, pkt, e.n6); ret != xdpRedirect {
		t.Fatalf("verdict %s", verdictNames[ret])
	}
	if after, _ := e.dp.ClassCounters(last.ID); after.Packets != before.Packets+1 {
		t.Errorf("class %d of %d did not count the packet", last.ID, len(rules))
	}
	if _, err := classifier.Compile(benchClasses(classifier.MaxClasses + 1)); err == nil {
		t.Errorf("%d classes accepted", classifier.MaxClasses+1)
	}
}

// TestClassCountersAcrossChanges: a class's counters carry on through changes that move its
// bit (a class added before it) and start from zero when it is deleted and added again.
func TestClassCountersAcrossChanges(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	send := func() {
		t.Helper()
		pkt := concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, sessPlain.UE, 5000, 6000, 64, payload))
		if ret, _ := e.run(t, pkt, e.n6); ret != xdpRedirect {
			t.Fatalf("verdict %s", verdictNames[ret])
		}
	}
	expect := func(id uint32, packets uint64) {
		t.Helper()
		c, err := e.dp.ClassCounters(id)
		if err != nil || c.Packets != packets {
			t.Fatalf("class %d: %d packets (%v), want %d", id, c.Packets, err, packets)
		}
	}
	udp := classifier.Class{ID: 7, Priority: 1, Protocol: "udp"}
	e.setClasses(t, udp)
	send()
	expect(7, 1)
	// Class 9 comes first in priority and matches nothing here: class 7's bit moves.
	e.setClasses(t, udp, classifier.Class{ID: 9, Priority: 5, Protocol: "tcp"})
	send()
	expect(7, 2)
	expect(9, 0)
	e.setClasses(t, classifier.Class{ID: 9, Priority: 5, Protocol: "tcp"})
	if _, err := e.dp.ClassCounters(7); err == nil {
		t.Fatal("a deleted class still has counters")
	}
	e.setClasses(t, udp)
	expect(7, 0)
	send()
	expect(7, 1)
}
