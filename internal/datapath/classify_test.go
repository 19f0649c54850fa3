package datapath

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

// A packet of the differential test, described from the UE's point of view.
type diffPkt struct {
	sdf.Packet
	fragment bool
	hasQFI   bool
	qfi      uint8
	ttl      uint8 // 0: 64
	mf       bool  // a first fragment: more fragments follow, offset 0
}

// refWinner is the reference PDR selection: the PDRs are tried one by one in (precedence,
// id) order; a PDR matches when its QFI (uplink) and any of its filters (or none) match.
func refWinner(rs rules.RuleSet, p diffPkt) (uint32, bool) {
	pdrs := slices.Clone(rs.PDRs)
	slices.SortStableFunc(pdrs, func(a, b rules.PDR) int {
		return cmp.Or(cmp.Compare(a.Precedence, b.Precedence), cmp.Compare(a.ID, b.ID))
	})
	for _, pdr := range pdrs {
		if rs.Uplink && pdr.QFI != 0 && (!p.hasQFI || p.qfi != pdr.QFI) {
			continue
		}
		if (sdf.Rule{Filters: pdr.Filters}).Matches(p.Packet) {
			return pdr.ID, true
		}
	}
	return 0, false
}

var (
	diffRemotes = []netip.Addr{netip.MustParseAddr("100.64.0.7"), netip.MustParseAddr("100.64.0.200"),
		netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("192.0.2.10")}
	diffLocals = []netip.Addr{ueAddr, netip.MustParseAddr("10.45.7.1")}
	diffPorts  = []uint16{53, 80, 443, 1000, 1500, 2000, 5060, 40000, 65535}
	diffProtos = []uint8{6, 17, 132, 1, 50, 51}
)

func randPrefix(rng *rand.Rand, pool []string) netip.Prefix {
	s := pool[rng.IntN(len(pool))]
	if s == "" {
		return netip.Prefix{}
	}
	return netip.MustParsePrefix(s)
}

func randPorts(rng *rand.Rand) []sdf.PortRange {
	var out []sdf.PortRange
	for range rng.IntN(3) {
		a := diffPorts[rng.IntN(len(diffPorts))]
		b := a
		if rng.IntN(2) == 0 {
			b = max(a, diffPorts[rng.IntN(len(diffPorts))])
		}
		out = append(out, sdf.PortRange{First: a, Last: b})
	}
	return out
}

func randFilter(rng *rand.Rand) sdf.Filter {
	f := sdf.Filter{Protocol: sdf.AnyProtocol}
	if rng.IntN(3) > 0 {
		f.Protocol = int(diffProtos[rng.IntN(len(diffProtos))])
	}
	f.Remote = randPrefix(rng, []string{"", "", "100.64.0.0/24", "100.64.0.0/25", "100.64.0.128/26",
		"100.64.0.7/32", "203.0.113.0/24", "0.0.0.0/0"})
	f.Local = randPrefix(rng, []string{"", "", "10.45.0.2/32", "10.45.0.0/16"})
	if f.Protocol == 6 || f.Protocol == 17 || f.Protocol == 132 {
		f.RemotePorts, f.LocalPorts = randPorts(rng), randPorts(rng)
	}
	if rng.IntN(5) == 0 {
		f.TOSMask = []uint8{0xfc, 0xe0, 0xff}[rng.IntN(3)]
		f.TOSValue = uint8(rng.IntN(256)) & f.TOSMask
	}
	if rng.IntN(6) == 0 {
		f.HasSPI, f.SPI = true, uint32(1+rng.IntN(3))
	}
	if rng.IntN(40) == 0 {
		f.HasFlowLabel, f.FlowLabel = true, 7
	}
	return f
}

func randRuleSet(rng *rand.Rand, uplink bool) rules.RuleSet {
	rs := rules.RuleSet{Uplink: uplink, TEID: 0x4000, UE: ueAddr}
	bits := 0
	for id := range 1 + rng.IntN(24) {
		p := rules.PDR{ID: uint32(id), Precedence: uint32(rng.IntN(8)) * 100, FAR: rules.FAR{Action: rules.Forward}}
		if !uplink {
			p.FAR = rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x9000 + uint32(id), Peer: addrGNB, Local: addrN3}}
		}
		if rng.IntN(3) == 0 {
			p.QFI = uint8(1 + rng.IntN(3))
		}
		for range rng.IntN(4) {
			p.Filters = append(p.Filters, randFilter(rng))
		}
		n := max(1, len(p.Filters))
		if bits+n > maxSetRules {
			break
		}
		bits += n
		rs.PDRs = append(rs.PDRs, p)
	}
	return rs
}

func randPacket(rng *rand.Rand) diffPkt {
	p := diffPkt{}
	p.Protocol = diffProtos[rng.IntN(len(diffProtos))]
	p.Remote = diffRemotes[rng.IntN(len(diffRemotes))]
	p.Local = diffLocals[rng.IntN(len(diffLocals))]
	p.TOS = uint8(rng.IntN(256))
	p.fragment = rng.IntN(10) == 0
	p.RemotePort = diffPorts[rng.IntN(len(diffPorts))]
	p.LocalPort = diffPorts[rng.IntN(len(diffPorts))]
	hasL4 := !p.fragment
	p.HasPorts = hasL4 && (p.Protocol == 6 || p.Protocol == 17 || p.Protocol == 132)
	p.HasSPI = hasL4 && (p.Protocol == 50 || p.Protocol == 51)
	p.SPI = uint32(1 + rng.IntN(3))
	if rng.IntN(4) > 0 {
		p.hasQFI, p.qfi = true, uint8(1+rng.IntN(3))
	}
	return p
}

// inner builds the packet's IPv4 bytes; uplink puts the UE (Local) as the source.
func (p diffPkt) inner(t testing.TB, uplink bool) []byte {
	src, dst := p.Remote, p.Local
	sport, dport := p.RemotePort, p.LocalPort
	if uplink {
		src, dst, sport, dport = dst, src, dport, sport
	}
	ttl := p.ttl
	if ttl == 0 {
		ttl = 64
	}
	ip := ipv4(src, dst, layers.IPProtocol(p.Protocol), ttl)
	ip.TOS = p.TOS
	if p.fragment {
		ip.FragOffset = 8
	}
	if p.mf {
		ip.Flags = layers.IPv4MoreFragments
	}
	l4 := make([]byte, 16)
	switch p.Protocol {
	case 6, 17, 132:
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
	case 50:
		binary.BigEndian.PutUint32(l4[0:], p.SPI)
	case 51:
		binary.BigEndian.PutUint32(l4[4:], p.SPI)
	}
	return serialize(t, ip, gopacket.Payload(l4))
}

func (p diffPkt) String() string {
	return fmt.Sprintf("proto %d remote %s:%d local %s:%d tos %#x frag %v ports %v spi %v/%d qfi %v/%d",
		p.Protocol, p.Remote, p.RemotePort, p.Local, p.LocalPort, p.TOS, p.fragment, p.HasPorts,
		p.HasSPI, p.SPI, p.hasQFI, p.qfi)
}

func describeSet(rs rules.RuleSet) string {
	var b strings.Builder
	for _, p := range rs.PDRs {
		fmt.Fprintf(&b, "  PDR %d precedence %d qfi %d:", p.ID, p.Precedence, p.QFI)
		for _, f := range p.Filters {
			fmt.Fprintf(&b, " [%s]", f)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// installSet writes and publishes rs as the datapath does for a session.
func (e *testEnv) installSet(t testing.TB, rs rules.RuleSet) *installedSet {
	t.Helper()
	e.dp.mu.Lock()
	defer e.dp.mu.Unlock()
	set, err := e.dp.writeSet(rs, nil, nil, nil, nil)
	if err != nil {
		t.Fatalf("write rule set: %v\n%s", err, describeSet(rs))
	}
	if err := e.dp.publish(set); err != nil {
		t.Fatal(err)
	}
	return set
}

func (e *testEnv) removeSet(set *installedSet) {
	e.dp.mu.Lock()
	defer e.dp.mu.Unlock()
	e.dp.deleteSetKey(set)
	e.dp.releaseSet(set, nil)
}

// selected runs pkt and returns the id of the PDR whose counter rose, or false when the
// packet was dropped for matching none.
func (e *testEnv) selected(t testing.TB, set *installedSet, pkt []byte, ifindex int) (uint32, bool) {
	t.Helper()
	before := map[uint32]uint64{}
	for id, slot := range set.counters {
		c, _ := e.dp.readCounter(slot.after)
		before[id] = c.Packets
	}
	ret, _ := e.run(t, pkt, ifindex)
	var ids []uint32
	for id, slot := range set.counters {
		c, _ := e.dp.readCounter(slot.after)
		if c.Packets != before[id] {
			ids = append(ids, id)
		}
	}
	switch {
	case len(ids) == 0 && ret == xdpDrop:
		return 0, false
	case len(ids) == 1 && ret == xdpRedirect:
		return ids[0], true
	}
	t.Fatalf("verdict %s with PDR counters %v rising", verdictNames[ret], ids)
	return 0, false
}

// TestPDRSelectionDifferential installs random rule sets (random prefixes, port ranges,
// protocols, wildcards, QFIs, ToS, SPIs and precedences, up to 64 filters) and checks the
// PDR the datapath picks for random packets against refWinner, both directions.
func TestPDRSelectionDifferential(t *testing.T) {
	e := newTestEnv(t, 16)
	rng := rand.New(rand.NewPCG(7, 11))
	cases := 0
	methods := map[xupfSdfMethod]int{}
	for iter := range 150 {
		for _, uplink := range []bool{true, false} {
			rs := randRuleSet(rng, uplink)
			set := e.installSet(t, rs)
			if set.tables != nil {
				methods[e.methodOf(t, set)]++
			}
			for range 20 {
				p := randPacket(rng)
				var pkt []byte
				ifindex := e.n6
				if uplink {
					flags, opt := byte(0x30), []byte(nil)
					if p.hasQFI {
						flags, opt = 0x34, optPSC(p.qfi)
					}
					pkt = outerGTP(t, gtpHdr(flags, 255, rs.TEID, opt, p.inner(t, true)), nil)
					ifindex = e.n3
				} else {
					p.Local = rs.UE // the downlink key: other addresses never reach the rule set
					pkt = concat(ethBytes(macDN, macN6), p.inner(t, false))
				}
				got, gotOK := e.selected(t, set, pkt, ifindex)
				want, wantOK := refWinner(rs, p)
				if got != want || gotOK != wantOK {
					t.Fatalf("iteration %d uplink=%v: packet %s\nrule set:\n%sdatapath: PDR %d (matched %v), reference: PDR %d (matched %v)",
						iter, uplink, p, describeSet(rs), got, gotOK, want, wantOK)
				}
				cases++
			}
			e.removeSet(set)
		}
	}
	t.Logf("%d packets checked; rule sets by method: %v", cases, methods)
	if methods[xupfSdfMethodSDF_LINEAR] < 20 || methods[xupfSdfMethodSDF_BITS] < 20 {
		t.Fatalf("rule sets by method %v: both need exercising", methods)
	}
}

// methodOf reads how the datapath searches set's rule set.
func (e *testEnv) methodOf(t testing.TB, set *installedSet) xupfSdfMethod {
	t.Helper()
	var desc xupfRuleset
	if err := e.dp.objs.XupfRulesets.Lookup(set.tables.id, &desc); err != nil {
		t.Fatal(err)
	}
	return desc.Method
}

// TestPDRSelectionLinearThreshold: a rule set of SDF_LINEAR_RULES rules is matched rule by
// rule, one of a rule more by LBVS, and both pick the PDRs the reference picks, at the port
// edges 0 and 65535 too, and for a packet without ports.
func TestPDRSelectionLinearThreshold(t *testing.T) {
	e := newTestEnv(t, 4)
	limit := len(xupfRuleset{}.Rules)
	for _, n := range []int{limit, limit + 1} {
		rs := rules.RuleSet{UE: ueAddr}
		fwd := rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x9000, Peer: addrGNB, Local: addrN3}}
		ports := []uint16{0, 65535}
		for j := 2; j < n-1; j++ {
			ports = append(ports, uint16(1000+j))
		}
		for j, port := range ports {
			rs.PDRs = append(rs.PDRs, rules.PDR{ID: uint32(j), Precedence: uint32(j), FAR: fwd,
				Filters: []sdf.Filter{{Protocol: 17, LocalPorts: []sdf.PortRange{{First: port, Last: port}}}}})
		}
		rs.PDRs = append(rs.PDRs, rules.PDR{ID: 100, Precedence: 1000, FAR: fwd})
		set := e.installSet(t, rs)
		want := xupfSdfMethodSDF_LINEAR
		if n > limit {
			want = xupfSdfMethodSDF_BITS
		}
		if got := e.methodOf(t, set); got != want {
			t.Fatalf("%d rules: method %d, want %d", n, got, want)
		}
		for _, port := range append(ports, 999, 0) {
			p := diffPkt{}
			p.Protocol, p.Remote, p.Local, p.RemotePort, p.LocalPort = 17, diffRemotes[0], rs.UE, 5000, port
			p.HasPorts = true
			if port == 999 {
				p.RemotePort = 0 // the local port alone says it has ports
			}
			got, gotOK := e.selected(t, set, concat(ethBytes(macDN, macN6), p.inner(t, false)), e.n6)
			wantID, wantOK := refWinner(rs, p)
			if got != wantID || gotOK != wantOK {
				t.Fatalf("%d rules: packet %s: datapath PDR %d (%v), reference PDR %d (%v)", n, p, got, gotOK, wantID, wantOK)
			}
		}
		// Ports 0 and 0: no ports, so only the filterless PDR matches.
		p := diffPkt{}
		p.Protocol, p.Remote, p.Local = 17, diffRemotes[0], rs.UE
		if got, ok := e.selected(t, set, concat(ethBytes(macDN, macN6), p.inner(t, false)), e.n6); !ok || got != 100 {
			t.Fatalf("%d rules: a packet without ports selected PDR %d (%v), want the filterless 100", n, got, ok)
		}
		e.removeSet(set)
	}
}
