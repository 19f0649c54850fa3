package report

import (
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// TestNATSection: every datapath's rate against the forwarder's, the XDP cost (none for
// Linux with or without NAT), and the cache hit judged against the same packets without
// NAT: +15 ns at most; a run without one of the two says it is not judged.
func TestNATSection(t *testing.T) {
	up := scenario.Uplink
	pt := func(index int, dp string, ns, rate float64) *result.Result {
		r := costRes("nat", up, ns, rate, datapath(dp))
		r.Point.Index = index
		r.Point.Traffic.PacketSize = 108
		return r
	}
	base := []*result.Result{
		pt(0, scenario.DatapathXDPForwarder, 8, 2e6),
		pt(1, scenario.DatapathKernelNAT, 1, 0.5e6),
		pt(2, scenario.DatapathXUPF, 40, 1.8e6),
		pt(3, scenario.DatapathXUPFKernelNAT, 200, 0.4e6),
	}
	for _, c := range []struct {
		name  string
		hitNs float64
		want  []string
	}{
		{"within", 52, []string{
			"| Linux forwarding + NAT | uplink | 108 B | 0.500 | 0.25 | – |",
			"| xupf + kernel NAT, no cache | uplink | 108 B | 0.400 | 0.20 | 200.0 |",
			"| xupf + NAT flow cache | uplink | 108 B | 1.600 | 0.80 | 52.0 |",
			"52.0 ns against 40.0 without NAT (+12.0 ns); budget ≤ 55.0 ns (+15), margin +3.0 ns: within",
		}},
		{"over", 60, []string{"(+20.0 ns); budget ≤ 55.0 ns (+15), margin -5.0 ns: **OVER**"}},
		{"missing", 0, []string{"not judged: the run lacks the xupf or xupf_nat_cache point", "CONFIG_NF_FLOW_TABLE"}},
	} {
		rs := base
		if c.hitNs > 0 {
			rs = append(rs[:len(rs):len(rs)], pt(4, scenario.DatapathXUPFNATCache, c.hitNs, 1.6e6))
		}
		s := natSection(rs)
		for _, want := range c.want {
			if !strings.Contains(s.table+s.text, want) {
				t.Errorf("%s: section lacks %q:\n%s\n%s", c.name, want, s.text, s.table)
			}
		}
	}
}
