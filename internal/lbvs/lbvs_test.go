package lbvs

import (
	"math/rand/v2"
	"testing"
)

// brute is the reference: the first rule (in priority order) whose every condition accepts
// the packet's value.
func brute(fields []Field, rules [][]Cond, values []uint64) int {
	for i, r := range rules {
		ok := true
		for f, c := range r {
			if !accepts(fields[f], c, values[f]) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

func accepts(field Field, c Cond, v uint64) bool {
	if c.Any {
		return true
	}
	for _, x := range c.Values {
		if x == v {
			return true
		}
	}
	for _, p := range c.Prefixes {
		if p.Contains(Prefix{Value: v, Len: field.Bits}, field.Bits) {
			return true
		}
	}
	return false
}

func TestRangePrefixes(t *testing.T) {
	for _, c := range []struct {
		first, last uint64
		bits        int
		want        int
	}{
		{0, 65535, 16, 1}, {1000, 2000, 16, 8}, {80, 80, 16, 1}, {1, 65534, 16, 30}, {65535, 65535, 16, 1},
		{0, 255, 8, 1}, {4, 7, 8, 1}, {3, 4, 8, 2},
	} {
		got := RangePrefixes(c.first, c.last, c.bits)
		if len(got) != c.want {
			t.Errorf("%d-%d: %d prefixes %v, want %d", c.first, c.last, len(got), got, c.want)
		}
		// Exactly the range is covered, each value once.
		for v := uint64(0); v < 1<<c.bits; v++ {
			n := 0
			for _, p := range got {
				if p.Contains(Prefix{Value: v, Len: c.bits}, c.bits) {
					n++
				}
			}
			in := v >= c.first && v <= c.last
			if (in && n != 1) || (!in && n != 0) {
				t.Fatalf("%d-%d: value %d covered %d times", c.first, c.last, v, n)
			}
		}
	}
}

// TestCompileDifferential compiles random rule sets and checks every random packet's winner
// against the rule-by-rule reference. Rule prefixes nest on purpose (a few short base values)
// so that inheritance from less specific prefixes is exercised.
func TestCompileDifferential(t *testing.T) {
	fields := []Field{
		{Name: "proto", Kind: ExactMatch},
		{Name: "addr", Kind: PrefixMatch, Bits: 32},
		{Name: "port", Kind: PrefixMatch, Bits: 16},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := []uint64{0x0a000000, 0x0a010000, 0x0a010100, 0xc0a80000}
	for iter := range 2000 {
		nrules := 1 + rng.IntN(80)
		rules := make([][]Cond, nrules)
		for i := range rules {
			r := make([]Cond, 3)
			if rng.IntN(3) == 0 {
				r[0].Any = true
			} else {
				r[0].Values = []uint64{uint64([]int{1, 6, 17}[rng.IntN(3)])}
			}
			if rng.IntN(3) == 0 {
				r[1].Any = true
			} else {
				l := []int{8, 16, 24, 32}[rng.IntN(4)]
				r[1].Prefixes = []Prefix{{Value: mask(addrs[rng.IntN(len(addrs))]|uint64(rng.IntN(4)), l, 32), Len: l}}
			}
			if rng.IntN(3) == 0 {
				r[2].Any = true
			} else {
				a := uint64(rng.IntN(3000))
				r[2].Prefixes = RangePrefixes(a, a+uint64(rng.IntN(1500)), 16)
			}
			rules[i] = r
		}
		tables, err := Compile(fields, rules)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			values := []uint64{
				uint64([]int{1, 6, 17, 50}[rng.IntN(4)]),
				addrs[rng.IntN(len(addrs))] | uint64(rng.IntN(1<<10)),
				uint64(rng.IntN(5000)),
			}
			got := Lookup(tables, nrules, values).First()
			if want := brute(fields, rules, values); got != want {
				t.Fatalf("iteration %d: packet %v: LBVS says rule %d, reference %d\nrules: %+v", iter, values, got, want, rules)
			}
		}
	}
}

func TestCompileRejectsNonCanonicalPrefix(t *testing.T) {
	_, err := Compile([]Field{{Name: "addr", Kind: PrefixMatch, Bits: 32}},
		[][]Cond{{{Prefixes: []Prefix{{Value: 0x0a000001, Len: 8}}}}})
	if err == nil {
		t.Fatal("accepted 10.0.0.1/8")
	}
}
