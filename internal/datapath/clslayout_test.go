package datapath

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xupf/xupf/internal/classifier"
)

// clsIndex reads a layout back the way classifier.h does, without BPF.
type clsIndex struct {
	l     clsLayout
	index map[uint32]xupfClsVref
	macs  map[[2]uint64]xupfClsVref
}

func newClsIndex(l clsLayout) clsIndex {
	x := clsIndex{l: l, index: map[uint32]xupfClsVref{}, macs: map[[2]uint64]xupfClsVref{}}
	for _, r := range l.regions {
		for i, v := range r.refs {
			x.index[r.at+uint32(i)] = v
		}
	}
	for _, m := range l.macs {
		x.macs[[2]uint64{uint64(m.field), m.mac}] = m.ref
	}
	return x
}

func (x clsIndex) addr(region uint32, a netip.Addr) xupfClsVref {
	b := a.As4()
	v := x.index[region+uint32(b[0])<<8+uint32(b[1])]
	flag := uint32(xupfClsLayoutCLS_VREF_TABLE)
	for _, next := range b[2:] {
		if v.Base&flag != 0 {
			v = x.index[uint32(xupfClsLayoutCLS_IX_IP_TABLES)+(v.Base&^flag)*clsTableSize+uint32(next)]
		}
	}
	return v
}

// class returns the bit of the class the layout gives p, or -1: from the references' first
// words while the set has one word, else from the chunks.
func (x clsIndex) class(c classifier.Compiled, p classifier.Packet) int {
	port := func(region uint32, port uint16) xupfClsVref {
		if !p.HasPorts {
			return x.index[region+uint32(clsNoPort)]
		}
		return x.index[region+uint32(port)]
	}
	mac := func(f int, v uint64) xupfClsVref {
		if r, ok := x.macs[[2]uint64{uint64(f), v}]; ok {
			return r
		}
		return x.index[uint32(xupfClsLayoutCLS_IX_MAC_WILD)+uint32(f-classifier.FieldSrcMAC)]
	}
	refs := map[int]xupfClsVref{
		classifier.FieldDirection: x.index[uint32(xupfClsLayoutCLS_IX_DIRECTION)+uint32(p.Direction)],
		classifier.FieldSrcMAC:    mac(classifier.FieldSrcMAC, p.SrcMAC),
		classifier.FieldDstMAC:    mac(classifier.FieldDstMAC, p.DstMAC),
		classifier.FieldEtherType: x.index[uint32(xupfClsLayoutCLS_IX_ETHERTYPE)+uint32(p.EtherType)],
		classifier.FieldProtocol:  x.index[uint32(xupfClsLayoutCLS_IX_PROTO)+uint32(p.Protocol)],
		classifier.FieldSrcIP:     x.addr(uint32(xupfClsLayoutCLS_IX_SRC_IP), p.SrcIP),
		classifier.FieldDstIP:     x.addr(uint32(xupfClsLayoutCLS_IX_DST_IP), p.DstIP),
		classifier.FieldSrcPort:   port(uint32(xupfClsLayoutCLS_IX_SRC_PORT), p.SrcPort),
		classifier.FieldDstPort:   port(uint32(xupfClsLayoutCLS_IX_DST_PORT), p.DstPort),
	}
	if c.Words == 1 { // the vector words in the references, as classifier.h reads them then
		v := ^uint64(0)
		for f, r := range refs {
			if c.Fields&(1<<f) != 0 {
				v &= r.First
			}
		}
		for b := range 64 {
			if v&(1<<b) != 0 {
				return b
			}
		}
		return -1
	}
	for ch := 0; ch*clsChunkWords < c.Words; ch++ {
		acc := [8]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		for f, r := range refs {
			if c.Fields&(1<<f) == 0 {
				continue
			}
			if r.Present&(1<<ch) == 0 {
				acc = [8]uint64{}
				break
			}
			below := r.Present & (1<<ch - 1)
			n := 0
			for ; below != 0; below &= below - 1 {
				n++
			}
			for w, v := range x.l.chunks[int(r.Base)+n].W {
				acc[w] &= v
			}
		}
		for w, v := range acc {
			for b := range 64 {
				if v&(1<<b) != 0 {
					return (ch*clsChunkWords+w)*64 + b
				}
			}
		}
	}
	return -1
}

// TestClsLayoutMatchesReference lays random class sets out and reads them back as
// classifier.h does, for random packets and the edges (ports 0 and 65535, no ports, the
// lowest and highest addresses), against the one-by-one reference.
func TestClsLayoutMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	addrs := []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"),
		netip.MustParseAddr("100.64.0.127"), netip.MustParseAddr("100.64.0.128"), netip.MustParseAddr("100.64.0.7"),
		netip.MustParseAddr("10.45.0.2"), netip.MustParseAddr("10.45.255.255"), netip.MustParseAddr("203.0.113.255")}
	ports := []uint16{0, 1, 80, 999, 1000, 1600, 2000, 2001, 5060, 39999, 40000, 65534, 65535}
	for iter := range 40 {
		n := []int{1, 5, 64, 65, 600}[iter%5]
		var classes []classifier.Class
		for i := range n {
			c := randClass(rng, uint32(i+1))
			if rng.IntN(8) == 0 && (c.Protocol == "udp" || c.Protocol == "tcp") {
				c.SrcPort, c.DstPort = "0-1", "65535" // the edges of the port space
			}
			classes = append(classes, c)
		}
		rules, c := compileClasses(t, classes...)
		l, err := layoutClasses(c, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		x := newClsIndex(l)
		for range 300 {
			p := classifier.Packet{
				Direction: []int{classifier.DirUplink, classifier.DirDownlink}[rng.IntN(2)],
				SrcMAC:    macValue(pick(rng, clsMACs)), DstMAC: macValue(pick(rng, clsMACs)),
				EtherType: []uint16{0x0800, 0x86dd}[rng.IntN(2)], Protocol: []uint8{6, 17, 1}[rng.IntN(3)],
				SrcIP: addrs[rng.IntN(len(addrs))], DstIP: addrs[rng.IntN(len(addrs))],
				HasPorts: rng.IntN(6) > 0, SrcPort: ports[rng.IntN(len(ports))], DstPort: ports[rng.IntN(len(ports))],
			}
			want, ok := classifier.Match(rules, p)
			bit := x.class(c, p)
			if got := bit >= 0; got != ok || ok && c.IDs[bit] != want {
				t.Fatalf("iteration %d (%d classes): packet %+v: layout bit %d, reference class %d (%v)", iter, n, p, bit, want, ok)
			}
		}
	}
}

// TestClsLayoutLimits: a set needing more chunks or address tables than the datapath has is
// refused with an error that says what to change.
func TestClsLayoutLimits(t *testing.T) {
	var classes []classifier.Class
	for i := range 300 {
		// Each class its own /32 in its own /16: a /16 table and a /24 table each.
		classes = append(classes, classifier.Class{ID: uint32(i + 1),
			SrcIP: netip.AddrFrom4([4]byte{10, byte(i), byte(i >> 8), 1}).String(),
			DstIP: netip.AddrFrom4([4]byte{11, byte(i), 0, 1}).String()})
	}
	_, c := compileClasses(t, classes...)
	if _, err := layoutClasses(c, 1<<20); err == nil {
		t.Errorf("%d address tables accepted, the datapath has %d", 4*len(classes), clsIPTables)
	}
	if _, err := layoutClasses(c, 100); err == nil {
		t.Error("more vectors than the pool holds accepted")
	}
}
