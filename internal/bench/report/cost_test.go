package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
	"github.com/xupf/xupf/internal/config"
)

// costRes is a result of a cost scenario whose program took ns per packet (above a 45 ns
// floor) at rate frames/s in direction dir.
func costRes(name, dir string, ns, rate float64, edit func(*scenario.Point)) *result.Result {
	return res(name, 0, dir, rate, func(r *result.Result) {
		const runs = 1_000_000
		r.Trials = []result.Trial{{Direction: dir, Cost: &result.ProgramCost{
			RunTime: time.Duration((ns + 45) * runs), Runs: runs, SinkRunTime: 70 * runs, SinkRuns: runs, FloorNs: 45}}}
		if edit != nil {
			edit(&r.Point)
		}
	})
}

func spread(mode config.SpreadMode) func(*scenario.Point) {
	return func(p *scenario.Point) {
		p.Pipeline.UplinkSpread, p.Pipeline.UplinkSpreadCPUs = mode, scenario.SpreadCPUsAll
	}
}

func datapath(d string) func(*scenario.Point) {
	return func(p *scenario.Point) { p.Pipeline.Datapath = d }
}

// TestCostSection: each row's figure, budget, margin and verdict, relative rows read against
// their reference in the same direction, repetitions averaged, the ratio to the forwarder,
// and a common case under 0.9 of the forwarder flagged even within its ns budget.
func TestCostSection(t *testing.T) {
	up, down := scenario.Uplink, scenario.Downlink
	classes := func(n int) func(*scenario.Point) { return func(p *scenario.Point) { p.Pipeline.ClassifierClasses = n } }
	rs := []*result.Result{
		costRes("cost-common", up, 8, 2e6, datapath(scenario.DatapathXDPForwarder)),
		costRes("cost-common", down, 9, 2e6, datapath(scenario.DatapathXDPForwarder)),
		costRes("cost-common", up, 18, 1.9e6, datapath(scenario.DatapathGTPU)),
		// Two repetitions: 30 and 34 make 32 ns, 1.8 Mpps (0.90 of the forwarder).
		costRes("cost-common", up, 30, 1.7e6, nil),
		costRes("cost-common", up, 34, 1.9e6, nil),
		// Within 35 ns but at 0.5 of the forwarder: over.
		costRes("cost-common", down, 20, 1e6, nil),
		costRes("cost-free5gc", up, 36, 1e6, nil), // 32 ± 3: over by 1
		costRes("cost-ue-pool", down, 34, 1.9e6, nil),
		costRes("cost-mbr", up, 40, 1e6, nil), // ≤ 47: within by 7
		costRes("cost-classes", up, 70, 1e6, classes(8)),
		costRes("cost-classes", up, 95.5, 1e6, classes(10000)),
		costRes("cost-policer", up, 90, 1e6, nil), // ≤ 70 + 15: over by 5
		costRes("cost-sessions", up, 33, 1e6, func(p *scenario.Point) { p.Pipeline.Users, p.Traffic.ActiveUsers = 100000, 64 }),
		costRes("cost-one-gnb", up, 32, 1.8e6, spread(config.SpreadOff)),
		costRes("cost-one-gnb", up, 20, 3.42e6, spread(config.SpreadTEID)),
		costRes("cost-one-gnb", up, 22, 2.7e6, spread(config.SpreadFlow)),
		costRes("cost-one-gnb", up, 12, 3.6e6, func(p *scenario.Point) {
			p.Pipeline.UplinkSpread, p.Pipeline.UplinkSpreadCPUs = config.SpreadFlow, scenario.SpreadCPUsOthers
		}),
		// No reference (8 classes) in this direction: not judged.
		costRes("cost-policer", down, 40, 1e6, nil),
	}
	for _, r := range rs {
		if r.Point.Pipeline.Users == 1 {
			r.Point.Pipeline.Users = 64
		}
	}
	tb := costSection(rs).table
	for _, want := range []string{
		"| bare XDP forwarder | uplink | 8.0 | – | – | 2.000 | 1.00 | reference |",
		"| minimal GTP-U decap / encap, no lookup | uplink | 18.0 | – | – | 1.900 | 0.95 | reference |",
		"| common case (Open5GS: xupf chose the TEID) | uplink | 32.0 | ≤ 35 ns | +3.0 ns | 1.800 | 0.90 (≥ 0.9) | within |",
		"| common case (Open5GS: xupf chose the TEID) | downlink | 20.0 | ≤ 35 ns | +15.0 ns | 1.000 | 0.50 (≥ 0.9) | **OVER** |",
		"| common case, xupf chose the TEID and the UE address | downlink | 34.0 | ≤ 35 ns | +1.0 ns | 1.900 | 0.95 (≥ 0.9) | within |",
		"| common case, free5GC layout (SMF chose the TEID, UE IP on the uplink PDR) | uplink | 36.0 | 32.0 ± 3 ns | -1.0 ns | 1.000 | 0.50 | **OVER** |",
		"| + one MBR meter | uplink | 40.0 | ≤ 47.0 ns (+15) | +7.0 ns | 1.000 | 0.50 | within |",
		"| 8 traffic classes | uplink | 70.0 | ≤ 62.0 ns (+30) | -8.0 ns | 1.000 | 0.50 | **OVER** |",
		"| 10,000 traffic classes (budget: 10,000) | uplink | 95.5 | ≤ 92.0 ns (+60) | -3.5 ns | 1.000 | 0.50 | **OVER** |",
		"| policer contract (on the 8 classes) | uplink | 90.0 | ≤ 85.0 ns (+15) | -5.0 ns | 1.000 | 0.50 | **OVER** |",
		"| 100,000 sessions installed vs 64, the same 64 active | uplink | 33.0 | ≤ 33.6 ns (1.05×) | +0.6 ns | 1.000 | 0.50 | within |",
		"| one gNB (one outer 5-tuple) on one CPU, no spreading | uplink | 32.0 | – | – | 1.800 | 0.90 | reference |",
		"| one gNB on one CPU, spread over 2 CPUs by TEID | uplink | 20.0 | ≥ 1.80× the rate without | +0.10× (1.90×) | 3.420 | 1.71 | within |",
		"| one gNB on one CPU, spread over 2 CPUs by inner flow | uplink | 22.0 | ≥ 1.80× the rate without | -0.30× (1.50×) | 2.700 | 1.35 | **OVER** |",
		"| one gNB on one CPU, which only spreads, by inner flow, to the other | uplink | 12.0 | ≥ 1.80× the rate without | +0.20× (2.00×) | 3.600 | 1.80 | within |",
		"| policer contract (on the 8 classes) | downlink | 40.0 | no reference | – | 1.000 | 0.50 | not judged |",
	} {
		if !strings.Contains(tb, want) {
			t.Errorf("table lacks\n%s\n%s", want, tb)
		}
	}
	if strings.Contains(tb, "minimal GTP-U decap / encap, no lookup | downlink") {
		t.Errorf("a row without points:\n%s", tb)
	}
	// In the report, the cost scenarios make that one section, not tables of their own.
	doc := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := Write(Input{Results: rs}, doc); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Cost per packet against the budget") || strings.Contains(string(md), "## Scenario cost-") {
		t.Errorf("report:\n%s", md)
	}
}
