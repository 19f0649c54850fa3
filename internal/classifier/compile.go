package classifier

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/xupf/xupf/internal/lbvs"
)

// Field indexes: the order of enum cls_field in bpf/lib/classifier.h (checked by a test in
// internal/datapath).
const (
	FieldDirection = iota
	FieldSrcMAC
	FieldDstMAC
	FieldEtherType
	FieldProtocol
	FieldSrcIP
	FieldDstIP
	FieldSrcPort
	FieldDstPort
	NumFields
)

// Fields are the classifier's LBVS fields, indexed as above.
var Fields = []lbvs.Field{
	FieldDirection: {Name: "direction", Kind: lbvs.ExactMatch},
	FieldSrcMAC:    {Name: "src_mac", Kind: lbvs.ExactMatch},
	FieldDstMAC:    {Name: "dst_mac", Kind: lbvs.ExactMatch},
	FieldEtherType: {Name: "ethertype", Kind: lbvs.ExactMatch},
	FieldProtocol:  {Name: "protocol", Kind: lbvs.ExactMatch},
	FieldSrcIP:     {Name: "src_ip", Kind: lbvs.PrefixMatch, Bits: 32},
	FieldDstIP:     {Name: "dst_ip", Kind: lbvs.PrefixMatch, Bits: 32},
	FieldSrcPort:   {Name: "src_port", Kind: lbvs.PrefixMatch, Bits: 16},
	FieldDstPort:   {Name: "dst_port", Kind: lbvs.PrefixMatch, Bits: 16},
}

// Compiled is a class set ready for the datapath.
type Compiled struct {
	Tables []lbvs.Table // one per field
	IDs    []uint32     // bit -> class id, in priority order
	Fields uint32       // (1 << field) of the fields some class constrains
	Words  int          // 64-bit words of the vectors
}

// Compile orders rules by priority (highest first, then lowest id) and builds the tables.
func Compile(rules []Rule) (Compiled, error) {
	if len(rules) > MaxClasses {
		return Compiled{}, fmt.Errorf("%d classes: the classifier holds at most %d", len(rules), MaxClasses)
	}
	sorted := slices.Clone(rules)
	slices.SortFunc(sorted, func(a, b Rule) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.ID, b.ID))
	})
	conds := make([][]lbvs.Cond, len(sorted))
	c := Compiled{IDs: make([]uint32, len(sorted)), Words: (len(sorted) + 63) / 64}
	for i, r := range sorted {
		conds[i] = r.conds()
		c.IDs[i] = r.ID
	}
	var err error
	if c.Tables, err = lbvs.Compile(Fields, conds); err != nil {
		return Compiled{}, err
	}
	for f, t := range c.Tables {
		if t.Used {
			c.Fields |= 1 << f
		}
	}
	return c, nil
}

func (r Rule) conds() []lbvs.Cond {
	any := lbvs.Cond{Any: true}
	c := make([]lbvs.Cond, NumFields)
	for i := range c {
		c[i] = any
	}
	switch r.Direction {
	case Ingress:
		c[FieldDirection] = lbvs.Cond{Values: []uint64{DirUplink}}
	case Egress:
		c[FieldDirection] = lbvs.Cond{Values: []uint64{DirDownlink}}
	}
	if r.SrcMAC != nil {
		c[FieldSrcMAC] = lbvs.Cond{Values: []uint64{*r.SrcMAC}}
	}
	if r.DstMAC != nil {
		c[FieldDstMAC] = lbvs.Cond{Values: []uint64{*r.DstMAC}}
	}
	if r.EtherType != nil {
		c[FieldEtherType] = lbvs.Cond{Values: []uint64{uint64(*r.EtherType)}}
	}
	if r.Protocol != nil {
		c[FieldProtocol] = lbvs.Cond{Values: []uint64{uint64(*r.Protocol)}}
	}
	for f, p := range map[int]*PortRange{FieldSrcPort: r.SrcPort, FieldDstPort: r.DstPort} {
		if p != nil {
			c[f] = lbvs.Cond{Prefixes: lbvs.RangePrefixes(uint64(p.First), uint64(p.Last), 16)}
		}
	}
	for f, p := range map[int]*[2]uint64{FieldSrcIP: prefixValue(r.SrcIP), FieldDstIP: prefixValue(r.DstIP)} {
		if p != nil {
			c[f] = lbvs.Cond{Prefixes: []lbvs.Prefix{{Value: p[0], Len: int(p[1])}}}
		}
	}
	return c
}

// prefixValue is p as (value, length), or nil when p matches everything.
func prefixValue(p netip.Prefix) *[2]uint64 {
	if !p.IsValid() || p.Bits() == 0 {
		return nil
	}
	a := p.Addr().As4()
	return &[2]uint64{uint64(a[0])<<24 | uint64(a[1])<<16 | uint64(a[2])<<8 | uint64(a[3]), uint64(p.Bits())}
}

// Direction values in packets: enum direction (bpf/lib/types.h), checked by a test in
// internal/datapath.
const (
	DirUplink   = 1
	DirDownlink = 2
)
