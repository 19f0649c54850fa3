package report

import (
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// TestTransitSection: each datapath's rate against the forwarder's in its direction, the XDP
// cost (none for Linux), the flow cache's hit share from xupfd's counters, repetitions
// averaged.
func TestTransitSection(t *testing.T) {
	up, down := scenario.Uplink, scenario.Downlink
	pt := func(index int, dir, dp string, ns, rate float64, counters map[string]uint64) *result.Result {
		r := costRes("transit", dir, ns, rate, datapath(dp))
		r.Point.Index = index
		r.Point.Traffic.PacketSize = 108
		if counters != nil {
			r.Datapath = &result.DatapathStats{Counters: counters}
		}
		return r
	}
	rs := []*result.Result{
		pt(0, up, scenario.DatapathXDPForwarder, 8, 2e6, nil),
		pt(1, down, scenario.DatapathXDPForwarder, 9, 4e6, nil),
		pt(2, up, scenario.DatapathKernel, 1, 0.5e6, nil),
		pt(3, down, scenario.DatapathKernel, 1, 0.6e6, nil),
		// Two repetitions: 1.4 and 1.6 Mpps make 0.75 of the forwarder; 40 and 44 ns, 42.
		pt(4, up, scenario.DatapathFlowCache, 40, 1.4e6, map[string]uint64{"flow_hit": 999, "flow_miss": 1}),
		pt(4, up, scenario.DatapathFlowCache, 44, 1.6e6, map[string]uint64{"flow_hit": 999, "flow_miss": 1}),
		pt(5, down, scenario.DatapathFlowCache, 30, 2e6, map[string]uint64{"flow_hit": 3, "flow_miss": 1}),
	}
	tb := transitSection(rs).table
	for _, want := range []string{
		"| bare XDP forwarder | uplink | 108 B | 2.000 | 1.00 | 8.0 | – |",
		"| Linux forwarding | uplink | 108 B | 0.500 | 0.25 | – | – |",
		"| xupf flow cache | uplink | 108 B | 1.500 | 0.75 | 42.0 | 99.90% |",
		"| Linux forwarding | downlink | 108 B | 0.600 | 0.15 | – | – |",
		"| xupf flow cache | downlink | 108 B | 2.000 | 0.50 | 30.0 | 75.00% |",
	} {
		if !strings.Contains(tb, want) {
			t.Errorf("table lacks %q:\n%s", want, tb)
		}
	}
	if strings.Index(tb, "| uplink |") > strings.Index(tb, "| downlink |") {
		t.Errorf("uplink rows do not come first:\n%s", tb)
	}
}
