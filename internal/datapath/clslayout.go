package datapath

import (
	"encoding/binary"
	"fmt"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/lbvs"
)

// clsLayout is a compiled class set as classifier.h reads it, for one buffer: the
// xupf_cls_index regions of the fields in use, the MAC entries and the vector chunks (pool
// index 0 up).
type clsLayout struct {
	regions []clsRegion
	macs    []clsMAC
	chunks  []xupfClsChunk
}

// clsRegion is a run of xupf_cls_index entries starting at index at of the buffer.
type clsRegion struct {
	at   uint32
	refs []xupfClsVref
}

// clsMAC is one xupf_cls_macs entry.
type clsMAC struct {
	field uint32
	mac   uint64
	ref   xupfClsVref
}

// Sizes of the layout's index regions and tables (enum cls_layout).
const (
	clsChunkWords = int(xupfClsLayoutCLS_CHUNK_WORDS)
	clsNoPort     = int(xupfClsLayoutCLS_NO_PORT)
	clsTableSize  = 256
	clsIPTables   = int(xupfClsLayoutCLS_IX_PER_BUF-xupfClsLayoutCLS_IX_IP_TABLES) / clsTableSize
)

// clsBuilder lays a class set out, storing each distinct vector once.
type clsBuilder struct {
	out       clsLayout
	refs      map[string]xupfClsVref // vector words -> its reference
	maxChunks int
	tables    []*[clsTableSize]xupfClsVref // address tables, both address fields
}

// layoutClasses lays c out for a pool of maxChunks chunks per buffer.
func layoutClasses(c classifier.Compiled, maxChunks int) (clsLayout, error) {
	b := &clsBuilder{refs: map[string]xupfClsVref{}, maxChunks: maxChunks}
	for f, t := range c.Tables {
		if !t.Used {
			continue
		}
		var err error
		switch f {
		case classifier.FieldDirection:
			err = b.exact(uint32(xupfClsLayoutCLS_IX_DIRECTION), 4, t)
		case classifier.FieldProtocol:
			err = b.exact(uint32(xupfClsLayoutCLS_IX_PROTO), 256, t)
		case classifier.FieldEtherType:
			err = b.exact(uint32(xupfClsLayoutCLS_IX_ETHERTYPE), 65536, t)
		case classifier.FieldSrcMAC, classifier.FieldDstMAC:
			err = b.macs(uint32(f), t)
		case classifier.FieldSrcPort:
			err = b.ports(uint32(xupfClsLayoutCLS_IX_SRC_PORT), t)
		case classifier.FieldDstPort:
			err = b.ports(uint32(xupfClsLayoutCLS_IX_DST_PORT), t)
		case classifier.FieldSrcIP:
			err = b.addrs(uint32(xupfClsLayoutCLS_IX_SRC_IP), t)
		case classifier.FieldDstIP:
			err = b.addrs(uint32(xupfClsLayoutCLS_IX_DST_IP), t)
		default:
			err = fmt.Errorf("classifier field %d has no layout", f)
		}
		if err != nil {
			return clsLayout{}, err
		}
	}
	if len(b.tables) > 0 {
		r := clsRegion{at: uint32(xupfClsLayoutCLS_IX_IP_TABLES)}
		for _, t := range b.tables {
			r.refs = append(r.refs, t[:]...)
		}
		b.out.regions = append(b.out.regions, r)
	}
	return b.out, nil
}

// ref stores v's non-zero chunks, once per distinct vector, and returns its reference.
func (b *clsBuilder) ref(v lbvs.Vector) (xupfClsVref, error) {
	key := make([]byte, 8*len(v))
	for i, w := range v {
		binary.LittleEndian.PutUint64(key[8*i:], w)
	}
	if r, ok := b.refs[string(key)]; ok {
		return r, nil
	}
	r := xupfClsVref{Base: uint32(len(b.out.chunks))}
	if len(v) > 0 {
		r.First = v[0]
	}
	for c := 0; c*clsChunkWords < len(v); c++ {
		var ch xupfClsChunk
		copy(ch.W[:], v[c*clsChunkWords:])
		if ch == (xupfClsChunk{}) {
			continue
		}
		r.Present |= 1 << c
		b.out.chunks = append(b.out.chunks, ch)
	}
	if len(b.out.chunks) > b.maxChunks {
		return r, fmt.Errorf("the classes make more distinct vectors than the classifier's pool holds "+
			"(%d chunks of 512 classes): use fewer distinct addresses, ports or MACs", b.maxChunks)
	}
	b.refs[string(key)] = r
	return r, nil
}

// exact lays out an exact field whose values are below n: one entry per value.
func (b *clsBuilder) exact(at uint32, n int, t lbvs.Table) error {
	wild, err := b.ref(t.Wildcard)
	if err != nil {
		return err
	}
	refs := make([]xupfClsVref, n)
	for i := range refs {
		refs[i] = wild
	}
	for v, vec := range t.Values {
		if v >= uint64(n) {
			return fmt.Errorf("%s value %d out of range (below %d)", t.Field.Name, v, n)
		}
		if refs[v], err = b.ref(vec); err != nil {
			return err
		}
	}
	b.out.regions = append(b.out.regions, clsRegion{at: at, refs: refs})
	return nil
}

// macs lays out a MAC field (field is its enum cls_field): hash entries and the wildcard.
func (b *clsBuilder) macs(field uint32, t lbvs.Table) error {
	wild, err := b.ref(t.Wildcard)
	if err != nil {
		return err
	}
	b.out.regions = append(b.out.regions, clsRegion{
		at: uint32(xupfClsLayoutCLS_IX_MAC_WILD) + field - uint32(classifier.FieldSrcMAC), refs: []xupfClsVref{wild}})
	for v, vec := range t.Values {
		r, err := b.ref(vec)
		if err != nil {
			return err
		}
		b.out.macs = append(b.out.macs, clsMAC{field: field, mac: v, ref: r})
	}
	return nil
}

// paint sets refs[first .. first+n-1] to r.
func paint(refs []xupfClsVref, first, n uint64, r xupfClsVref) {
	for i := first; i < first+n; i++ {
		refs[i] = r
	}
}

// ports lays out a port field: an entry per port, and CLS_NO_PORT for packets without
// ports, which only the classes without a port condition (the zero-length prefix) accept.
// lbvs lists the prefixes shortest first, each with the classes of the prefixes containing
// it: painted in that order, every port ends with its longest match.
func (b *clsBuilder) ports(at uint32, t lbvs.Table) error {
	refs := make([]xupfClsVref, clsNoPort+1)
	for _, e := range t.Prefixes {
		r, err := b.ref(e.Bits)
		if err != nil {
			return err
		}
		paint(refs, e.Prefix.Value, 1<<(16-e.Prefix.Len), r)
		if e.Prefix.Len == 0 {
			refs[clsNoPort] = r
		}
	}
	b.out.regions = append(b.out.regions, clsRegion{at: at, refs: refs})
	return nil
}

// addrs lays out an address field as a 16-8-8 trie: the region has an entry per first 16
// bits; a /16 that holds a longer prefix points to a table of its third byte, and a /24 that
// holds a longer one to a table of its fourth. Painted shortest first, as ports.
func (b *clsBuilder) addrs(at uint32, t lbvs.Table) error {
	refs := make([]xupfClsVref, 1<<16)
	for _, e := range t.Prefixes {
		r, err := b.ref(e.Bits)
		if err != nil {
			return err
		}
		v, l := e.Prefix.Value, e.Prefix.Len
		switch {
		case l <= 16:
			paint(refs, v>>16, 1<<(16-l), r)
		case l <= 24:
			t2, err := b.table(&refs[v>>16])
			if err != nil {
				return err
			}
			paint(t2[:], v>>8&0xff, 1<<(24-l), r)
		default:
			t2, err := b.table(&refs[v>>16])
			if err != nil {
				return err
			}
			t3, err := b.table(&t2[v>>8&0xff])
			if err != nil {
				return err
			}
			paint(t3[:], v&0xff, 1<<(32-l), r)
		}
	}
	b.out.regions = append(b.out.regions, clsRegion{at: at, refs: refs})
	return nil
}

// table returns the address table entry e points to, first making one that gives every
// value e's vector.
func (b *clsBuilder) table(e *xupfClsVref) (*[clsTableSize]xupfClsVref, error) {
	flag := uint32(xupfClsLayoutCLS_VREF_TABLE)
	if e.Base&flag == 0 {
		if len(b.tables) == clsIPTables {
			return nil, fmt.Errorf("the classes' addresses need more than %d tables (one per /16 and per /24 "+
				"holding a longer prefix): use fewer distinct networks", clsIPTables)
		}
		t := new([clsTableSize]xupfClsVref)
		for i := range t {
			t[i] = *e
		}
		b.tables = append(b.tables, t)
		*e = xupfClsVref{Base: flag | uint32(len(b.tables)-1)}
	}
	return b.tables[e.Base&^flag], nil
}
