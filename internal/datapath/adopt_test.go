package datapath

import (
	"testing"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

// TestMatchesOfBitsIgnoresOtherRules: what a PDR of an SDF_BITS rule set accepts is
// described the same whatever the other PDRs make of the table entries (their ranges split
// its ranges elsewhere, its bits move), and differently once its own filter changes.
func TestMatchesOfBitsIgnoresOtherRules(t *testing.T) {
	many := func(first uint16) []sdf.PortRange { // one compare rule each: too many for SDF_LINEAR
		var out []sdf.PortRange
		for i := range uint16(len(xupfRuleset{}.Rules) + 1) {
			out = append(out, sdf.PortRange{First: first + 2*i, Last: first + 2*i})
		}
		return out
	}
	set := func(other []sdf.PortRange, mine sdf.PortRange) rules.RuleSet {
		return rules.RuleSet{Uplink: true, TEID: 1, PDRs: []rules.PDR{
			{ID: 1, Precedence: 10, Filters: []sdf.Filter{{Protocol: 6, RemotePorts: other}}},
			{ID: 2, Precedence: 20, Filters: []sdf.Filter{{Protocol: 17, RemotePorts: []sdf.PortRange{mine}}}},
			{ID: 3, Precedence: 30},
		}}
	}
	describe := func(rs rules.RuleSet) map[uint32]string {
		t.Helper()
		c, err := compileTables(rs, []uint32{0, 1, 2})
		if err != nil {
			t.Fatal(err)
		}
		if c.desc.Method != xupfSdfMethodSDF_BITS {
			t.Fatalf("rule set classified by method %d, want SDF_BITS", c.desc.Method)
		}
		return matchesOfBits(c.desc, sdfVectors{c.exact, c.lpm})
	}
	mine := sdf.PortRange{First: 2000, Last: 2100}
	before := describe(set(many(3000), mine))
	after := describe(set(append(many(2050), sdf.PortRange{First: 1990, Last: 2030}), mine))
	if before[1] != after[1] {
		t.Errorf("PDR 2, unchanged, described otherwise beside other rules:\n%s\n%s", before[1], after[1])
	}
	if before[2] != after[2] {
		t.Errorf("PDR 3, unchanged, described otherwise beside other rules:\n%s\n%s", before[2], after[2])
	}
	if before[0] == after[0] {
		t.Error("PDR 1, changed, described the same")
	}
	changed := describe(set(many(3000), sdf.PortRange{First: 2000, Last: 2101}))
	if changed[1] == before[1] {
		t.Error("PDR 2 with a wider port range described the same")
	}
}
