// Package lbvs compiles classification rules into the tables of Linear Bit Vector Search: per
// field, a table from field value to a bit vector of the rules that accept it, so that a
// packet's match is the AND of one vector per field and the winner its lowest set bit (rules
// are numbered in priority order). The datapath's PDR selection and traffic classifier load
// these tables into BPF maps; this package knows nothing of BPF.
package lbvs

import (
	"cmp"
	"fmt"
	"slices"
)

// Kind says how a field is matched.
type Kind int

const (
	// ExactMatch fields are looked up by value in a hash table; a value no rule names takes the
	// field's wildcard vector.
	ExactMatch Kind = iota
	// PrefixMatch fields are looked up by longest prefix (addresses, port ranges after range to
	// prefix expansion, masked bytes).
	PrefixMatch
)

// Field describes one field of the rules.
type Field struct {
	Name string
	Kind Kind
	// Bits is the width of a Prefix field's values (32 for IPv4, 16 for ports).
	Bits int
}

// Prefix is a value whose first Len bits (of the field's Bits, most significant first)
// matter. Value has no bits set beyond Len.
type Prefix struct {
	Value uint64
	Len   int
}

// Contains reports whether p contains q (q is p or more specific than p).
func (p Prefix) Contains(q Prefix, bits int) bool {
	if q.Len < p.Len {
		return false
	}
	return p.Len == 0 || q.Value>>(bits-p.Len) == p.Value>>(bits-p.Len)
}

// Cond is one rule's condition on one field: Any, or one of Values (Exact fields) or of
// Prefixes (Prefix fields). An empty, non-Any Cond accepts nothing.
type Cond struct {
	Any      bool
	Values   []uint64
	Prefixes []Prefix
}

// Vector is a bit vector, bit i (word i/64, bit i%64) standing for rule i.
type Vector []uint64

func newVector(n int) Vector { return make(Vector, (n+63)/64) }

func (v Vector) set(i int) { v[i/64] |= 1 << (i % 64) }

func (v Vector) or(w Vector) {
	for i := range v {
		v[i] |= w[i]
	}
}

// And returns v AND w.
func (v Vector) And(w Vector) Vector {
	out := slices.Clone(v)
	for i := range out {
		out[i] &= w[i]
	}
	return out
}

// First returns the lowest set bit, or -1.
func (v Vector) First() int {
	for i, w := range v {
		if w != 0 {
			for b := 0; b < 64; b++ {
				if w&(1<<b) != 0 {
					return i*64 + b
				}
			}
		}
	}
	return -1
}

// PrefixEntry is one entry of a Prefix field's table.
type PrefixEntry struct {
	Prefix Prefix
	Bits   Vector
}

// Table is one field's compiled table.
type Table struct {
	Field Field
	// Used is false when every rule accepts any value: the field need not be looked at.
	Used bool
	// Exact fields: the vector of each named value (wildcard rules included), and Wildcard
	// for every other value.
	Values   map[uint64]Vector
	Wildcard Vector
	// Prefix fields: one entry per prefix some rule names, plus the zero-length prefix (the
	// wildcard rules). Each vector includes the rules of every shorter prefix that contains
	// it, so the longest match alone gives the answer.
	Prefixes []PrefixEntry
}

// Compile builds one table per field for rules, given in priority order: rules[i][f] is rule
// i's condition on fields[f].
func Compile(fields []Field, rules [][]Cond) ([]Table, error) {
	n := len(rules)
	tables := make([]Table, len(fields))
	for f, field := range fields {
		t := Table{Field: field}
		wild := newVector(n)
		for i, r := range rules {
			if len(r) != len(fields) {
				return nil, fmt.Errorf("rule %d has %d conditions for %d fields", i, len(r), len(fields))
			}
			if r[f].Any {
				wild.set(i)
			} else {
				t.Used = true
			}
		}
		var err error
		switch field.Kind {
		case ExactMatch:
			t.Wildcard = wild
			t.Values = compileExact(f, rules, wild)
		case PrefixMatch:
			t.Prefixes, err = compilePrefix(field, f, rules, wild)
		default:
			err = fmt.Errorf("field %s: unknown kind %d", field.Name, field.Kind)
		}
		if err != nil {
			return nil, err
		}
		tables[f] = t
	}
	return tables, nil
}

func compileExact(f int, rules [][]Cond, wild Vector) map[uint64]Vector {
	out := map[uint64]Vector{}
	for i, r := range rules {
		if r[f].Any {
			continue
		}
		for _, v := range r[f].Values {
			vec, ok := out[v]
			if !ok {
				vec = slices.Clone(wild)
				out[v] = vec
			}
			vec.set(i)
		}
	}
	return out
}

// compilePrefix gives every named prefix the rules of its own and of every containing
// prefix. Prefixes are visited shortest first, so each one's nearest named ancestor is
// complete when it is needed; the ancestor is found by trying each shorter length.
func compilePrefix(field Field, f int, rules [][]Cond, wild Vector) ([]PrefixEntry, error) {
	own := map[Prefix]Vector{{}: wild}
	for i, r := range rules {
		if r[f].Any {
			continue
		}
		for _, p := range r[f].Prefixes {
			if p.Len < 0 || p.Len > field.Bits || p.Value>>field.Bits != 0 || mask(p.Value, p.Len, field.Bits) != p.Value {
				return nil, fmt.Errorf("field %s: rule %d: prefix %#x/%d is not canonical", field.Name, i, p.Value, p.Len)
			}
			vec, ok := own[p]
			if !ok {
				vec = newVector(len(rules))
				own[p] = vec
			}
			vec.set(i)
		}
	}
	keys := make([]Prefix, 0, len(own))
	for p := range own {
		keys = append(keys, p)
	}
	slices.SortFunc(keys, func(a, b Prefix) int {
		return cmp.Or(cmp.Compare(a.Len, b.Len), cmp.Compare(a.Value, b.Value))
	})
	full := make(map[Prefix]Vector, len(own))
	entries := make([]PrefixEntry, 0, len(keys))
	for _, p := range keys {
		vec := slices.Clone(own[p])
		for l := p.Len - 1; l >= 0; l-- {
			anc := Prefix{Value: mask(p.Value, l, field.Bits), Len: l}
			if av, ok := full[anc]; ok {
				vec.or(av)
				break
			}
		}
		full[p] = vec
		entries = append(entries, PrefixEntry{Prefix: p, Bits: vec})
	}
	return entries, nil
}

// mask keeps the first l of bits bits of v.
func mask(v uint64, l, bits int) uint64 {
	if l == 0 {
		return 0
	}
	return v >> (bits - l) << (bits - l)
}

// Lookup does in Go what the datapath does with the tables: one lookup per used field, ANDed,
// starting from all rules. values[f] is the packet's value of field f. It returns the vector
// of matching rules.
func Lookup(tables []Table, nrules int, values []uint64) Vector {
	v := newVector(nrules)
	for i := range nrules {
		v.set(i)
	}
	for f, t := range tables {
		if !t.Used {
			continue
		}
		switch t.Field.Kind {
		case ExactMatch:
			if vec, ok := t.Values[values[f]]; ok {
				v = v.And(vec)
			} else {
				v = v.And(t.Wildcard)
			}
		case PrefixMatch:
			best := -1
			for i, e := range t.Prefixes {
				if e.Prefix.Contains(Prefix{Value: values[f], Len: t.Field.Bits}, t.Field.Bits) &&
					(best < 0 || e.Prefix.Len > t.Prefixes[best].Prefix.Len) {
					best = i
				}
			}
			v = v.And(t.Prefixes[best].Bits) // the zero-length entry always matches
		}
	}
	return v
}

// RangePrefixes returns the fewest prefixes of a bits-wide field that together cover exactly
// first..last (inclusive).
func RangePrefixes(first, last uint64, bits int) []Prefix {
	var out []Prefix
	for first <= last {
		// The largest block that starts at first (alignment) and ends by last.
		size := 0
		for size < bits && first&(1<<size) == 0 && first+(1<<(size+1))-1 <= last {
			size++
		}
		out = append(out, Prefix{Value: first, Len: bits - size})
		end := first + (1 << size) - 1
		if end == 1<<bits-1 {
			break // covered to the top: first+size would overflow the field
		}
		first = end + 1
	}
	return out
}
