package report

import (
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// TestNATSection: every datapath's rate against the forwarder's in its direction, the XDP
// cost (none for Linux with or without NAT), and the cache hit judged against the same
// packets without NAT, uplink and downlink each: +15 ns at most; a direction without one of
// the two says it is not judged.
func TestNATSection(t *testing.T) {
	up, down := scenario.Uplink, scenario.Downlink
	pt := func(index int, dir, dp string, ns, rate float64) *result.Result {
		r := costRes("nat", dir, ns, rate, datapath(dp))
		r.Point.Index = index
		r.Point.Traffic.PacketSize = 108
		return r
	}
	base := []*result.Result{
		pt(0, up, scenario.DatapathXDPForwarder, 8, 2e6),
		pt(1, up, scenario.DatapathKernelNAT, 1, 0.5e6),
		pt(2, up, scenario.DatapathXUPF, 40, 1.8e6),
		pt(3, up, scenario.DatapathXUPFKernelNAT, 200, 0.4e6),
		pt(4, down, scenario.DatapathXDPForwarder, 8, 2e6),
		pt(5, down, scenario.DatapathKernelNAT, 1, 0.6e6),
		pt(6, down, scenario.DatapathXUPF, 50, 1.6e6),
		pt(7, down, scenario.DatapathXUPFKernelNAT, 30, 0.3e6),
	}
	for _, c := range []struct {
		name          string
		upNs, downNs  float64
		want, notWant []string
	}{
		{"within", 52, 60, []string{
			"| Linux forwarding + NAT | uplink | 108 B | 0.500 | 0.25 | – |",
			"| xupf + kernel NAT, no cache | uplink | 108 B | 0.400 | 0.20 | 200.0 |",
			"| xupf + NAT flow cache | uplink | 108 B | 1.600 | 0.80 | 52.0 |",
			"| Linux forwarding + NAT | downlink | 108 B | 0.600 | 0.30 | – |",
			"| xupf + kernel NAT, no cache | downlink | 108 B | 0.300 | 0.15 | 30.0 |",
			"| xupf + NAT flow cache | downlink | 108 B | 1.500 | 0.75 | 60.0 |",
			"- uplink: 52.0 ns against 40.0 without NAT (+12.0 ns); budget ≤ 55.0 ns (+15), margin +3.0 ns: within",
			"- downlink: 60.0 ns against 50.0 without NAT (+10.0 ns); budget ≤ 65.0 ns (+15), margin +5.0 ns: within",
		}, []string{"OVER", "not judged"}},
		{"over one way", 60, 60, []string{
			"- uplink: 60.0 ns against 40.0 without NAT (+20.0 ns); budget ≤ 55.0 ns (+15), margin -5.0 ns: **OVER**",
			"- downlink: 60.0 ns against 50.0 without NAT (+10.0 ns); budget ≤ 65.0 ns (+15), margin +5.0 ns: within",
		}, nil},
		{"downlink missing", 52, 0, []string{"- uplink: 52.0 ns", "- downlink: not judged: the run lacks the xupf or xupf_nat_cache point", "CONFIG_NF_FLOW_TABLE"}, nil},
	} {
		rs := append(base[:len(base):len(base)], pt(8, up, scenario.DatapathXUPFNATCache, c.upNs, 1.6e6))
		if c.downNs > 0 {
			rs = append(rs, pt(9, down, scenario.DatapathXUPFNATCache, c.downNs, 1.5e6))
		}
		s := natSection(rs)
		for _, want := range c.want {
			if !strings.Contains(s.table+s.text, want) {
				t.Errorf("%s: section lacks %q:\n%s\n%s", c.name, want, s.text, s.table)
			}
		}
		for _, no := range c.notWant {
			if strings.Contains(s.table+s.text, no) {
				t.Errorf("%s: section has %q:\n%s\n%s", c.name, no, s.text, s.table)
			}
		}
	}
}
