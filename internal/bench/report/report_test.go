package report

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/bench/plot"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// res is a result of scenario name at point index with the given received rate (frames/s)
// in direction dir; edit fills in the rest.
func res(name string, index int, dir string, rate float64, edit func(*result.Result)) *result.Result {
	p := scenario.Default()
	p.Name, p.Index = name, index
	p.Traffic.Direction = dir
	r := &result.Result{
		Schema: result.SchemaVersion, Scenario: name, Point: p,
		Started:      time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC),
		Machine:      result.Machine{CPUModel: "Test CPU", CPUs: 2, Kernel: "6.18.0"},
		Versions:     result.Versions{XUPF: "abc123", Go: "go1.26"},
		GeneratorMax: map[string]float64{dir: 6e6},
		Summary: result.Summary{Directions: map[string]result.DirectionSummary{
			dir: {Rate: rate, Bits: rate * 8 * 100, Softirq: 0.5},
		}},
		Correctness: result.Correctness{Checked: 100},
	}
	if edit != nil {
		edit(r)
	}
	return r
}

// TestWrite builds a report from synthetic results of every kind of section and checks the
// numbers the report derives (ratios, errors, losses), the figures' files and the header.
func TestWrite(t *testing.T) {
	tp := func(index int, datapath string, threads int, rate float64, rep int) *result.Result {
		return res("throughput-uplink", index, scenario.Uplink, rate, func(r *result.Result) {
			r.Point.Pipeline.Datapath = datapath
			r.Point.Traffic.PacketSize = 108
			r.Point.Tester.GeneratorThreads = threads
			r.Repetition = rep
		})
	}
	// A policer point: frames of size bytes (with FCS), 1e6 of them offered in one second.
	mbr := func(index int, alg string, mbr uint64, size int, ipBits float64) *result.Result {
		return res("policer", index, scenario.Uplink, 1e5, func(r *result.Result) {
			r.Point.Pipeline.MBRUplink, r.Point.Pipeline.Policer = mbr, alg
			r.Point.Traffic.PacketSize = size
			// ipRate: 8 × (bytes − 14 × packets) / elapsed.
			r.Trials = []result.Trial{{Direction: scenario.Uplink, Sent: 1e6,
				Generator: gen.Stats{Sent: 1e6, Bytes: uint64(size-4) * 1e6, Elapsed: time.Second},
				Middle:    result.Window{Packets: 100, Bytes: uint64(ipBits/8) + 1400, Elapsed: time.Second}}}
		})
	}
	policer := []*result.Result{
		// 1518-byte frames carry 1456-byte inner packets (11,648 bits): 11.648 Gbit/s offered.
		mbr(0, scenario.PolicerTokenBucket, 1_000_000, 1518, 990_000),
		mbr(1, scenario.PolicerTokenBucket, 1_000_000_000, 1518, 1_020_000_000),
		// 128-byte frames carry 66-byte ones (528 bits): 528 Mbit/s offered, below 1 Gbit/s.
		mbr(2, scenario.PolicerTokenBucket, 1_000_000, 128, 1_001_000),
		mbr(3, scenario.PolicerTokenBucket, 1_000_000_000, 128, 527_000_000),
	}
	// The figure reads 1 Mbit/s from the small frames (finer), 1 Gbit/s from the large ones
	// (the small ones do not reach it).
	fig := policerSection(policer).fig
	if got, want := fig.Series[0].Points, []plot.Point{{X: 1e6, Y: 1_001_000}, {X: 1e9, Y: 1_020_000_000}}; !slices.Equal(got, want) {
		t.Errorf("policer figure points %v, want %v", got, want)
	}
	handover := res("events-handover", 0, scenario.Bidirectional, 2e5, func(r *result.Result) {
		r.Point.Events.Handover = 100
		r.Point.Tester.Rate = 2e5
		r.Point.Tester.Duration = scenario.Duration(2 * time.Second)
		r.Events.Handovers = result.Latency{Count: 200, P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, Max: 9 * time.Millisecond}
		r.Summary.Directions = map[string]result.DirectionSummary{scenario.Uplink: {Rate: 1.9e5}, scenario.Downlink: {Rate: 1.8e5}}
		r.Trials = []result.Trial{
			{Direction: scenario.Uplink, Sent: 1000, Received: 1000},
			{Direction: scenario.Downlink, Sent: 1000, Received: 997},
		}
	})
	in := Input{
		Command: "make bench",
		Results: append([]*result.Result{
			tp(0, scenario.DatapathXUPF, 1, 2e6, 0), tp(0, scenario.DatapathXUPF, 1, 3e6, 1),
			tp(1, scenario.DatapathXDPForwarder, 1, 5e6, 0),
			handover,
			res("my-own", 0, scenario.Downlink, 1.5e6, nil),
			costRes("cost-common", scenario.Uplink, 30, 1e6, nil),
		}, policer...),
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "benchmarks.md")
	if err := Write(in, doc); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"Produced with `make bench`.",
		"- Machine: Test CPU, 2 CPUs, kernel 6.18.0",
		"- Software: xupf abc123, go1.26, cilium/ebpf (unknown)",
		// Two repetitions averaged (2.5 Mpps), 0.5 × the forwarder's 5 Mpps; both samples.
		"| xupf | 108 B | 1 | 2.500 | 2.000 | 0.50 | 0.50 | 6.000 | 0.0000% | 200/0 |",
		"| bare XDP forwarder | 108 B | 1 | 5.000 | 4.000 | 1.00 |",
		// Delivered inner IP rate against the MBR.
		"| 1.000 Mbit/s | token_bucket | 1518 B | 11.648 Gbit/s | 990.000 kbit/s | -1.00% | 1.16% |",
		"| 1.000 Gbit/s | token_bucket | 1518 B | 11.648 Gbit/s | 1.020 Gbit/s | +2.00% | 0.00% |",
		"| 1.000 Mbit/s | token_bucket | 128 B | 528.000 Mbit/s | 1.001 Mbit/s | +0.10% | 0.05% |",
		"| 1.000 Gbit/s | token_bucket | 128 B | 528.000 Mbit/s | 527.000 Mbit/s | not limited: offered below 1.2 × MBR | 0.00% |",
		// 200 answered over 2 s; 3 downlink frames lost.
		"| 100 | 200 | 100 | 2.00 | 5.00 | 9.00 | 0 | 0 (0.00) | 190 / 180 | 0 | 3 | 100/0 |",
		"## Scenario my-own",
		"| my-own | downlink | 1.500 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q in\n%s", want, md)
		}
	}
	for _, fig := range []string{"throughput-uplink", "policer", "events-handover"} {
		for _, ext := range []string{".png", ".svg"} {
			if _, err := os.Stat(filepath.Join(dir, ImageDir, fig+ext)); err != nil {
				t.Errorf("figure: %v", err)
			}
		}
		if !strings.Contains(md, "]("+ImageDir+"/"+fig+".svg)") {
			t.Errorf("report does not show %s.svg", fig)
		}
	}
	// The budget table first, then the builders' order, then other scenarios.
	order := []string{"## Cost per packet against the budget", "## Throughput, uplink", "## Policer precision", "## Adaptation: modification", "## Scenario my-own"}
	last := -1
	for _, h := range order {
		i := strings.Index(md, h)
		if i < last {
			t.Errorf("section %q out of order", h)
		}
		last = i
	}
}

func TestWriteRejectsNothing(t *testing.T) {
	if err := Write(Input{}, filepath.Join(t.TempDir(), "b.md")); err == nil || !strings.Contains(err.Error(), "no results") {
		t.Errorf("Write of no results: %v", err)
	}
}
