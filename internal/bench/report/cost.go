package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
	"github.com/xupf/xupf/internal/config"
)

// CostPrefix starts the names of the scenarios whose points make the cost table
// (bench/quick/cost-*.yaml).
const CostPrefix = "cost-"

// A budget says how a row's figure is judged.
type budget int

const (
	// noBudget: a reference row (the baselines).
	noBudget budget = iota
	// absNs: ns per packet ≤ limit.
	absNs
	// plusNs: ns per packet ≤ the reference row's + limit.
	plusNs
	// withinNs: ns per packet within ± limit of the reference row's.
	withinNs
	// timesNs: ns per packet ≤ limit × the reference row's.
	timesNs
	// timesRate: throughput ≥ limit × the reference row's.
	timesRate
)

// costRow is one row of the fast-path budget table: which points it reads, and its budget.
type costRow struct {
	name     string
	scenario string
	match    func(p scenario.Point) bool
	budget   budget
	limit    float64
	// ref is the row the budget is relative to, in the same direction.
	ref string
	// minRatio is the least throughput against the bare forwarder, 0 for none.
	minRatio float64
}

func datapathIs(d string) func(scenario.Point) bool {
	return func(p scenario.Point) bool { return p.Pipeline.Datapath == d }
}

func anyPoint(scenario.Point) bool { return true }

// Names of the rows other rows refer to.
const (
	rowForwarder = "bare XDP forwarder"
	rowCommon    = "common case (Open5GS: xupf chose the TEID)"
	rowClasses8  = "8 traffic classes"
	// rowManyClasses and rowSessions are named after their points.
	rowManyClasses = "many traffic classes"
	rowSessions    = "many sessions installed"
	rowOneGNB      = "one gNB (one outer 5-tuple) on one CPU, no spreading"
)

func spreadIs(mode config.SpreadMode, cpus string) func(scenario.Point) bool {
	return func(p scenario.Point) bool {
		return p.Pipeline.UplinkSpread == mode && (cpus == "" || p.Pipeline.UplinkSpreadCPUs == cpus)
	}
}

// costRows are the budget table's rows, in report order. The quick profile's sessions row
// installs 100,000 sessions (the full profile 1,000,000): its name says which from the
// points themselves.
var costRows = []costRow{
	{name: rowForwarder, scenario: "cost-common", match: datapathIs(scenario.DatapathXDPForwarder)},
	{name: "minimal GTP-U decap / encap, no lookup", scenario: "cost-common", match: datapathIs(scenario.DatapathGTPU)},
	{name: rowCommon, scenario: "cost-common", match: datapathIs(scenario.DatapathXUPF), budget: absNs, limit: 35, minRatio: 0.9},
	{name: "common case, xupf chose the TEID and the UE address", scenario: "cost-ue-pool", match: anyPoint, budget: absNs, limit: 35, minRatio: 0.9},
	{name: "common case, free5GC layout (SMF chose the TEID, UE IP on the uplink PDR)", scenario: "cost-free5gc", match: anyPoint, budget: withinNs, limit: 3, ref: rowCommon},
	{name: "+ one MBR meter", scenario: "cost-mbr", match: anyPoint, budget: plusNs, limit: 15, ref: rowCommon},
	{name: "+ URR with a volume threshold and quota", scenario: "cost-urr", match: anyPoint, budget: plusNs, limit: 10, ref: rowCommon},
	{name: "8 PDRs with SDF filters", scenario: "cost-sdf", match: anyPoint, budget: plusNs, limit: 25, ref: rowCommon},
	{name: rowClasses8, scenario: "cost-classes", match: func(p scenario.Point) bool { return p.Pipeline.ClassifierClasses == 8 }, budget: plusNs, limit: 30, ref: rowCommon},
	// The quick profile installs 128 classes (10,000 through the API had not finished in 15
	// minutes here); the budget is 10,000's.
	{name: rowManyClasses, scenario: "cost-classes", match: func(p scenario.Point) bool { return p.Pipeline.ClassifierClasses > 8 }, budget: plusNs, limit: 60, ref: rowCommon},
	{name: "policer contract (on the 8 classes)", scenario: "cost-policer", match: anyPoint, budget: plusNs, limit: 15, ref: rowClasses8},
	{name: rowSessions, scenario: "cost-sessions", match: anyPoint, budget: timesNs, limit: 1.05, ref: rowCommon},
	// One gNB's frames all arrive on one CPU; spreading hands them to both (the program's
	// figure is then the receiving CPU's: the spreading stage, and the share it keeps).
	{name: rowOneGNB, scenario: "cost-one-gnb", match: spreadIs(config.SpreadOff, "")},
	{name: "one gNB on one CPU, spread over 2 CPUs by TEID", scenario: "cost-one-gnb", match: spreadIs(config.SpreadTEID, scenario.SpreadCPUsAll), budget: timesRate, limit: 1.8, ref: rowOneGNB},
	{name: "one gNB on one CPU, spread over 2 CPUs by inner flow", scenario: "cost-one-gnb", match: spreadIs(config.SpreadFlow, scenario.SpreadCPUsAll), budget: timesRate, limit: 1.8, ref: rowOneGNB},
	{name: "one gNB on one CPU, which only spreads, by TEID, to the other", scenario: "cost-one-gnb", match: spreadIs(config.SpreadTEID, scenario.SpreadCPUsOthers), budget: timesRate, limit: 1.8, ref: rowOneGNB},
	{name: "one gNB on one CPU, which only spreads, by inner flow, to the other", scenario: "cost-one-gnb", match: spreadIs(config.SpreadFlow, scenario.SpreadCPUsOthers), budget: timesRate, limit: 1.8, ref: rowOneGNB},
}

// costCell is one row in one direction, its repetitions averaged.
type costCell struct {
	ns, rate float64
	users    int
	reps     []*result.Result
}

// costOf is the program's cost per packet in direction dir of r (ns), from its last trial
// in that direction; ok is false without a measurement.
func costOf(r *result.Result, dir string) (float64, bool) {
	for i := len(r.Trials) - 1; i >= 0; i-- {
		if t := r.Trials[i]; t.Direction == dir && t.Cost != nil && t.Cost.Runs > 0 {
			return t.Cost.NsPerPacket(), true
		}
	}
	return 0, false
}

// costCells finds each row's points per direction and averages their repetitions.
func costCells(rs []*result.Result) map[string]map[string]*costCell {
	cells := map[string]map[string]*costCell{}
	for _, row := range costRows {
		for _, r := range rs {
			dir := r.Point.Traffic.Direction
			ns, ok := costOf(r, dir)
			if r.Scenario != row.scenario || !row.match(r.Point) || !ok {
				continue
			}
			if cells[row.name] == nil {
				cells[row.name] = map[string]*costCell{}
			}
			c := cells[row.name][dir]
			if c == nil {
				c = &costCell{users: r.Point.Pipeline.Users}
				cells[row.name][dir] = c
			}
			n := float64(len(c.reps))
			c.ns = (c.ns*n + ns) / (n + 1)
			c.rate = (c.rate*n + r.Summary.Directions[dir].Rate) / (n + 1)
			c.reps = append(c.reps, r)
		}
	}
	return cells
}

// judge is a row's budget in a direction as the table shows it, its margin (positive:
// within), and whether it is over. ok is false when the reference is missing.
func (row costRow) judge(c *costCell, ref *costCell) (budgetText, marginText string, over, ok bool) {
	if row.budget == noBudget {
		return "–", "–", false, true
	}
	if row.ref != "" && ref == nil {
		return "no reference", "–", false, false
	}
	var limit, margin float64
	unit := "ns"
	switch row.budget {
	case absNs:
		limit = row.limit
		margin = limit - c.ns
		budgetText = fmt.Sprintf("≤ %.0f ns", limit)
	case plusNs:
		limit = ref.ns + row.limit
		margin = limit - c.ns
		budgetText = fmt.Sprintf("≤ %.1f ns (+%.0f)", limit, row.limit)
	case withinNs:
		margin = row.limit - math.Abs(c.ns-ref.ns)
		budgetText = fmt.Sprintf("%.1f ± %.0f ns", ref.ns, row.limit)
	case timesNs:
		limit = row.limit * ref.ns
		margin = limit - c.ns
		budgetText = fmt.Sprintf("≤ %.1f ns (%.2f×)", limit, row.limit)
	case timesRate:
		got := c.rate / ref.rate
		margin = got - row.limit
		unit = "×"
		budgetText = fmt.Sprintf("≥ %.2f× the rate without", row.limit)
		return budgetText, fmt.Sprintf("%+.2f× (%.2f×)", margin, got), margin < 0, true
	}
	return budgetText, fmt.Sprintf("%+.1f %s", margin, unit), margin < 0, true
}

// costSection is the budget table: every row's program cost per packet in traffic, its
// budget and margin, and its throughput against the bare forwarder, per direction.
func costSection(rs []*result.Result) section {
	cells := costCells(rs)
	var tb strings.Builder
	tb.WriteString("| case | direction | ns/packet | budget | margin | Mpps | × forwarder | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range costRows {
		for _, dir := range []string{scenario.Uplink, scenario.Downlink} {
			c := cells[row.name][dir]
			if c == nil {
				continue
			}
			var ref *costCell
			if row.ref != "" {
				ref = cells[row.ref][dir]
			}
			budgetText, margin, over, ok := row.judge(c, ref)
			ratio := "–"
			if fw := cells[rowForwarder][dir]; fw != nil && fw.rate > 0 {
				x := c.rate / fw.rate
				ratio = fmt.Sprintf("%.2f", x)
				if row.minRatio > 0 {
					ratio += fmt.Sprintf(" (≥ %.1f)", row.minRatio)
					over = over || x < row.minRatio
				}
			}
			verdict := "within"
			switch {
			case row.budget == noBudget:
				verdict = "reference"
			case !ok:
				verdict = "not judged"
			case over:
				verdict = "**OVER**"
			}
			name := row.name
			switch row.name {
			case rowManyClasses:
				name = fmt.Sprintf("%s traffic classes (budget: 10,000)", thousands(c.reps[0].Point.Pipeline.ClassifierClasses))
			case rowSessions:
				name = fmt.Sprintf("%s sessions installed vs %d, the same %d active", thousands(c.users), cells[row.ref][dir].users, c.reps[0].Point.Traffic.ActiveUsers)
			}
			fmt.Fprintf(&tb, "| %s | %s | %.1f | %s | %s | %s | %s | %s |\n", name, dir, c.ns, budgetText, margin, mpps(c.rate), ratio, verdict)
		}
	}
	text := `
The fast-path budget table, measured in traffic: for each case, the mean time the datapath's
XDP program took per packet during the trial (the kernel's BPF statistics, run time over
runs, on for the trial only), less the floor: the same figure of an empty program measured
right after the trial, which is the statistics' own two clock reads (about 45 ns here).
Every point of the cost-* scenarios: 64 sessions (one gNB), 16 flows each, 108-byte frames
(uplink with a PDU Session Container, downlink 108-byte inner frames), the generator on one
CPU, one direction at a time, as fast as the generator can; the baselines in the same run.
"margin" is the budget minus the figure (negative: over); a row over budget, or a common
case below 0.9 of the forwarder's rate, is marked OVER — a finding, not a failure of the
run. "× forwarder" is the rate against the bare forwarder's in the same direction. Which
steps the common case's time goes to, measured where a few nanoseconds can be told apart, is
in docs/microbenchmarks.md ("Common case: where the time goes"). The
machine is shared: compare rows of one run; two back-to-back runs are in docs/bench.md. The
one-gNB rows send every frame from one generator thread on CPU 0, so the UPF receives them
all on CPU 0, as a NIC's RSS would with one outer 5-tuple; with uplink_spread over both
CPUs, CPU 0 hands about half to CPU 1 through the CPU map; over "the other" CPU 0 only spreads
and CPU 1 processes all. The budget is the rate against the same point without spreading. Their ns/packet is CPU 0's program only (the spreading stage and the share it
keeps; the CPU map's program is not counted). On this 2-vCPU VM the generator and the sink
share the same two CPUs, CPU 0's above all, so the ratio here understates what a second
core gives a UPF whose NIC receives for free.`
	return section{title: "Cost per packet against the budget", text: text, table: tb.String()}
}

// thousands formats n with commas.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
