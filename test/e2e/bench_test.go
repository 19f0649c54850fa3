package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/bench/report"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/run"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// benchScenario runs a scenario with xupf-bench's runner and reads back its result files.
func benchScenario(t *testing.T, doc string) []*result.Result {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and XDP")
	}
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	paths, err := run.Run(t.Context(), sc, run.Options{Xupfd: xupfdBin, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(sc.Points) {
		t.Fatalf("%d result files for %d points", len(paths), len(sc.Points))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil || filepath.Dir(p) != filepath.Join(out, sc.Name) {
			t.Fatalf("result file %s: %v", p, err)
		}
	}
	rs, err := result.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Schema != result.SchemaVersion || r.Scenario != sc.Name || r.Source != doc || r.Machine.CPUs == 0 ||
			r.Machine.Kernel == "" || r.Versions.Go == "" || r.Started.IsZero() {
			t.Errorf("%s: record incomplete: %+v %+v %+v", r.Point.Name, r.Machine, r.Versions, r.Started)
		}
		for _, d := range []string{scenario.Uplink, scenario.Downlink} {
			if r.Point.Traffic.Direction != d && r.Point.Traffic.Direction != scenario.Bidirectional {
				continue
			}
			if r.GeneratorMax[d] <= 0 {
				t.Errorf("%s: no generator maximum for %s", r.Point.Name, d)
			}
			if s, ok := r.Summary.Directions[d]; !ok || s.Rate <= 0 || s.Bits <= 0 {
				t.Errorf("%s: %s summary %+v", r.Point.Name, d, s)
			}
		}
		if r.Correctness.Checked == 0 || r.Correctness.Wrong != 0 {
			t.Errorf("%s: correctness %+v", r.Point.Name, r.Correctness)
		}
		for _, tr := range r.Trials {
			if tr.Sent == 0 || tr.Received == 0 || tr.Received > tr.Sent || len(tr.Softirq) == 0 {
				t.Errorf("%s: trial %+v", r.Point.Name, tr)
			}
			// Every frame that arrived went through the datapath's program and the sink's.
			if c := tr.Cost; c == nil || c.Runs < tr.Received || c.SinkRuns < tr.Received || c.RunTime <= 0 || c.SinkRunTime <= 0 {
				t.Errorf("%s: program cost %+v for %d frames received", r.Point.Name, c, tr.Received)
			}
		}
	}
	return rs
}

// TestBenchXUPF: a tiny scenario end to end through xupf-bench's runner: sessions over PFCP
// with SDF filters, QERs and classifier classes, both directions at a low fixed rate while
// sessions are added and deleted and users handed over. The result file records everything,
// every sampled frame is what the UPF should have made of it, no event fails, and no packet
// is lost (at this rate a loss is the UPF's, not the machine's). No speed is judged.
func TestBenchXUPF(t *testing.T) {
	rs := benchScenario(t, `
name: tiny
pipeline: {users: 8, base_stations: 2, servers: 4, routes: 2, flows_per_user: 2, pdrs_per_user: 2,
  qers_per_user: 1, mbr_uplink: 1Gbps, mbr_downlink: 1Gbps, classifier_classes: 2}
traffic: {direction: bidirectional, packet_size: imix}
tester: {mode: fixed_rate, rate: 20kpps, duration: 500ms, warmup: 100ms, sample_every: 10}
events: {session_add: 20, session_delete: 10, handover: 20}
`)
	r := rs[0]
	if r.Setup.Sessions != 8 || r.Setup.Rate <= 0 || r.Setup.Latency.Count != 8 {
		t.Errorf("setup %+v", r.Setup)
	}
	ev := r.Events
	if ev.Added.Count == 0 || ev.Deleted.Count == 0 || ev.Handovers.Count == 0 || ev.Failed != 0 {
		t.Errorf("events %+v", ev)
	}
	if len(r.Trials) != 2 {
		t.Fatalf("%d trials, want one per direction", len(r.Trials))
	}
	for _, tr := range r.Trials {
		if tr.Loss != 0 || tr.Offered != 20000 {
			t.Errorf("%s trial: %d sent, %d received at %v/s", tr.Direction, tr.Sent, tr.Received, tr.Offered)
		}
	}
	// The report reads real result files too: a scenario it has no figure for gets its table.
	doc := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := report.Write(report.Input{Results: rs}, doc); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Scenario tiny", "| tiny | uplink |", "| tiny | downlink |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestBenchSpread: with xupfd's uplink spreading, the runner records the CPU map program's
// cost beside the receiving CPU's: some frames were processed there, not all, and none was
// lost at this rate.
func TestBenchSpread(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: frames are spread from one to the other")
	}
	rs := benchScenario(t, `
name: spread
pipeline: {users: 4, flows_per_user: 8, uplink_spread: flow}
traffic: {direction: uplink, packet_size: 128}
tester: {mode: fixed_rate, rate: 20kpps, duration: 500ms, warmup: 100ms, generator_threads: 1}
`)
	for _, tr := range rs[0].Trials {
		if c := tr.Cost; tr.Loss != 0 || c.SpreadRuns == 0 || c.SpreadRuns >= c.Runs || c.SpreadRunTime <= 0 {
			t.Errorf("trial: %d sent, %d received; %d frames received on CPU 0, %d processed by the CPU map's program in %v",
				tr.Sent, tr.Received, c.Runs, c.SpreadRuns, c.SpreadRunTime)
		}
	}
}

// TestBenchBaselines: the three baselines forward the same frames in the same topology, and
// the RFC 2544 mode records its search.
func TestBenchBaselines(t *testing.T) {
	rs := benchScenario(t, `
name: baselines
pipeline: {users: 4, servers: 2, routes: 2, datapath: [xdp_forwarder, gtpu_minimal, kernel]}
traffic: {direction: [uplink, downlink], packet_size: 128}
tester: {mode: rfc2544, duration: 200ms, warmup: 0s, sample_every: 10,
  rfc2544: {min_rate: 10kpps, max_rate: 50kpps, max_iterations: 2}}
`)
	if len(rs) != 6 {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.Search == nil || !r.Search.Found || len(r.Search.Trials) == 0 || len(r.Trials) != len(r.Search.Trials) {
			t.Errorf("%s: search %+v, %d trials", r.Point.Name, r.Search, len(r.Trials))
		}
	}
}

// TestBenchFlowCache: transit traffic through xupf's flow cache (datapath xupf_flow_cache), no
// session: the kernel forwards each flow's first packet, the cache the rest, every frame
// arrives as the kernel would forward it, and xupfd's counters in the result show the cache
// hitting.
func TestBenchFlowCache(t *testing.T) {
	rs := benchScenario(t, `
name: transit
pipeline: {users: 4, flows_per_user: 4, servers: 2, routes: 2, datapath: xupf_flow_cache}
traffic: {direction: [uplink, downlink], packet_size: 128}
tester: {mode: fixed_rate, rate: 20kpps, duration: 300ms, warmup: 100ms, sample_every: 10}
`)
	for _, r := range rs {
		d := r.Summary.Directions[r.Point.Traffic.Direction]
		if r.Datapath == nil || r.Datapath.Counters["flow_hit"] == 0 || r.Datapath.Counters["flow_learned"] == 0 || d.Loss != 0 {
			t.Errorf("%s: counters %+v, loss %v; want flows learnt, hits and no loss", r.Point.Name, r.Datapath, d.Loss)
		}
	}
}

// TestBenchNAT: the NAT scenario's datapaths masquerade the UEs' uplink frames (every sampled
// frame leaves with n6's address and the UE's port) and translate the replies back (every
// sampled downlink frame reaches the UE, in its tunnel for xupf), xupf without the cache
// hands every packet to the kernel (the replies come back through the return device), and
// with the cache the kernel translates each flow's first packet and the cache the rest,
// replies included.
func TestBenchNAT(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (Debian package nftables; make deps installs it)")
	}
	rs := benchScenario(t, `
name: nat
pipeline: {users: 4, flows_per_user: 4, servers: 16, datapath: [kernel_nat, xupf_kernel_nat, xupf_nat_cache]}
traffic: {direction: [uplink, downlink], packet_size: 128}
tester: {mode: fixed_rate, rate: 20kpps, duration: 300ms, warmup: 100ms, sample_every: 10}
`)
	for _, r := range rs {
		d := r.Summary.Directions[r.Point.Traffic.Direction]
		if d.Loss != 0 || r.Correctness.Checked == 0 || r.Correctness.Wrong != 0 {
			t.Errorf("%s: loss %v, %d samples checked, %d wrong %v", r.Point.Name, d.Loss, r.Correctness.Checked, r.Correctness.Wrong, r.Correctness.Examples)
		}
		var c map[string]uint64
		if r.Datapath != nil {
			c = r.Datapath.Counters
		}
		switch r.Point.Pipeline.Datapath {
		case scenario.DatapathXUPFKernelNAT:
			if c["flow_hit"] != 0 || c["ul_kernel"] == 0 {
				t.Errorf("%s: counters %v; want every packet to the kernel, no hit", r.Point.Name, c)
			}
		case scenario.DatapathXUPFNATCache:
			if c["flow_hit"] == 0 || c["flow_learned"] != 2*16 {
				t.Errorf("%s: counters %v; want hits and 32 entries learnt (16 flows, both ways)", r.Point.Name, c)
			}
		}
		down := r.Point.Traffic.Direction == scenario.Downlink
		switch dp := r.Point.Pipeline.Datapath; {
		case !down || dp == scenario.DatapathKernelNAT:
		case dp == scenario.DatapathXUPFKernelNAT:
			for _, tr := range r.Trials {
				if tr.Cost == nil || tr.Received == 0 || tr.Cost.ReturnRuns != tr.Received {
					t.Errorf("%s: %d replies received, cost %+v; want every reply back through the return device's program",
						r.Point.Name, tr.Received, tr.Cost)
				}
			}
		case dp == scenario.DatapathXUPFNATCache && (c["dl_tx"] == 0 || c["flow_hit"]-c["ul_tx"] != c["dl_tx"]):
			t.Errorf("%s: counters %v; want every reply a cache hit", r.Point.Name, c)
		}
	}
}
