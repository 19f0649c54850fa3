// Package result is the record xupf-bench writes for every measured point: what was asked
// (the scenario point and file), where it ran (machine, versions), and what happened (every
// trial's counters, the correctness sample, the control-plane events). Plots and tables are
// drawn from these files alone, so a result can be re-read long after the run.
package result

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/bench/rfc2544"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// SchemaVersion changes when a field changes meaning.
const SchemaVersion = 1

// Result is one repetition of one scenario point.
type Result struct {
	Schema int `json:"schema"`
	// Scenario is the scenario's name and Source the file it came from, byte for byte.
	Scenario   string         `json:"scenario"`
	Source     string         `json:"source"`
	Point      scenario.Point `json:"point"`
	Repetition int            `json:"repetition"`
	Started    time.Time      `json:"started"`
	Machine    Machine        `json:"machine"`
	Versions   Versions       `json:"versions"`
	// Setup is the installation of the point's sessions before the trials.
	Setup Setup `json:"setup"`
	// GeneratorMax is the generator's own rate with this point's frames into a dropping sink
	// on a veth pair of its own, in frames/s per direction: what the measured rates are
	// read against.
	GeneratorMax map[string]float64 `json:"generator_max"`
	// Trials are every trial run, in order (one for max_rate and fixed_rate; the search's
	// for rfc2544).
	Trials []Trial `json:"trials"`
	// Search is the RFC 2544 search of mode rfc2544.
	Search *rfc2544.Result `json:"search,omitempty"`
	// Summary is the point's answer: the trial a reader should look at.
	Summary Summary `json:"summary"`
	// Correctness is the check of the frames the sinks sampled.
	Correctness Correctness `json:"correctness"`
	// Events are the control-plane events during the trials.
	Events EventStats `json:"events"`
	// Datapath is xupfd's own count of what it did with the packets, after the trials: the
	// counters by path and the drops by reason, those that are not zero (xupf only).
	Datapath *DatapathStats `json:"datapath,omitempty"`
}

// DatapathStats are xupfd's counters (GET /api/v1/stats), without the zeros.
type DatapathStats struct {
	Counters map[string]uint64 `json:"counters"`
	Drops    map[string]uint64 `json:"drops"`
}

// Machine is where the result was measured.
type Machine struct {
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	Kernel   string `json:"kernel"`
	Hostname string `json:"hostname"`
}

// Versions are the software the result was measured with.
type Versions struct {
	// XUPF is the commit xupf-bench was built from, with "-dirty" for uncommitted changes.
	XUPF string `json:"xupf"`
	Go   string `json:"go"`
	// Clang is the installed clang; the committed BPF objects may have been built by
	// another.
	Clang      string `json:"clang"`
	CiliumEBPF string `json:"cilium_ebpf"`
}

// Setup is how the point's sessions were installed.
type Setup struct {
	Sessions int `json:"sessions"`
	// Elapsed is the time from the first request to the last answer.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Rate is Sessions per second of Elapsed.
	Rate    float64 `json:"rate"`
	Latency Latency `json:"latency"`
}

// Latency summarises request latencies.
type Latency struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Trial is one run of the generator at one offered rate.
type Trial struct {
	// Direction is scenario.Uplink or scenario.Downlink.
	Direction string `json:"direction"`
	// Offered is the rate asked of the generator (frames/s; 0 = as fast as it can).
	Offered float64 `json:"offered"`
	// Sent and Received are frames; Loss is (Sent−Received)/Sent, 0 when more arrived.
	Sent     uint64  `json:"sent"`
	Received uint64  `json:"received"`
	Loss     float64 `json:"loss"`
	// Rate is Received per second of the generator's elapsed time, and Bits the same in
	// bit/s of received frame bytes (without FCS, preamble or gap).
	Rate      float64          `json:"rate"`
	Bits      float64          `json:"bits"`
	Generator gen.Stats        `json:"generator"`
	Sink      gen.SinkCounters `json:"sink"`
	// Softirq is each CPU's share of time in softirq (where XDP and the veth NAPI run)
	// during the trial, 0..1.
	Softirq []float64 `json:"softirq"`
	// Middle is what arrived during the middle half of the trial, read from the sink while
	// the generator ran: a rate without the trial's start and end, where a meter spends the
	// burst it saved while idle.
	Middle Window `json:"middle"`
	// Cost is what the datapath's XDP program and the sink cost during the trial; nil when
	// the kernel's BPF statistics could not be turned on.
	Cost *ProgramCost `json:"cost,omitempty"`
}

// ProgramCost is the in-traffic cost of one lane's programs during a trial, from the kernel's
// BPF statistics (kernel.bpf_stats_enabled, on for the trial only): the total run time and
// the runs of the XDP program on the lane's ingress interface in the UPF and of the far
// end's sink, and the accounting's own cost per run.
type ProgramCost struct {
	RunTime     time.Duration `json:"run_time_ns"`
	Runs        uint64        `json:"runs"`
	SinkRunTime time.Duration `json:"sink_run_time_ns"`
	SinkRuns    uint64        `json:"sink_runs"`
	// SpreadRunTime and SpreadRuns are the CPU map's program's, with xupfd's uplink
	// spreading: the packets the receiving CPU handed to the others, processed there.
	SpreadRunTime time.Duration `json:"spread_run_time_ns,omitempty"`
	SpreadRuns    uint64        `json:"spread_runs,omitempty"`
	// ReturnRunTime and ReturnRuns are the return device's program's, on a downlink lane
	// with xupfd's kernel_n6: the packets the kernel sent to UEs, the replies it
	// translated back among them.
	ReturnRunTime time.Duration `json:"return_run_time_ns,omitempty"`
	ReturnRuns    uint64        `json:"return_runs,omitempty"`
	// FloorNs is the figure of a program that only returns, right after the trial: the
	// statistics' two clock reads, which every program's figure includes (ns per run, the
	// median of a few BPF_PROG_TEST_RUN rounds with the statistics on).
	FloorNs float64 `json:"floor_ns"`
}

// NsPerPacket is the program's mean run time less the floor; 0 when it ran no packet.
func (c ProgramCost) NsPerPacket() float64 {
	if c.Runs == 0 {
		return 0
	}
	return float64(c.RunTime)/float64(c.Runs) - c.FloorNs
}

// SpreadNsPerPacket is the same of the CPU map's program, per packet it processed.
func (c ProgramCost) SpreadNsPerPacket() float64 {
	if c.SpreadRuns == 0 {
		return 0
	}
	return float64(c.SpreadRunTime)/float64(c.SpreadRuns) - c.FloorNs
}

// SinkNsPerPacket is the same of the sink.
func (c ProgramCost) SinkNsPerPacket() float64 {
	if c.SinkRuns == 0 {
		return 0
	}
	return float64(c.SinkRunTime)/float64(c.SinkRuns) - c.FloorNs
}

// Window is what a sink counted between two readings.
type Window struct {
	Packets uint64        `json:"packets"`
	Bytes   uint64        `json:"bytes"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Summary is the answer of a point, per direction.
type Summary struct {
	Directions map[string]DirectionSummary `json:"directions"`
}

// DirectionSummary is the answer for one direction.
type DirectionSummary struct {
	// Rate is the received frames/s: of the one trial (max_rate, fixed_rate) or of the
	// highest passing rate (rfc2544; 0 if none passed).
	Rate float64 `json:"rate"`
	Bits float64 `json:"bits"`
	// Loss is that trial's loss.
	Loss float64 `json:"loss"`
	// Softirq is that trial's softirq share summed over CPUs (1 = one CPU's full time).
	Softirq float64 `json:"softirq"`
}

// Correctness is the check of the sampled frames.
type Correctness struct {
	Checked int `json:"checked"`
	Wrong   int `json:"wrong"`
	// Examples are the first few wrong frames, each with what was wrong.
	Examples []string `json:"examples,omitempty"`
}

// EventStats are the control-plane events injected during trials.
type EventStats struct {
	Added     Latency `json:"added"`
	Deleted   Latency `json:"deleted"`
	Handovers Latency `json:"handovers"`
	// Failed counts events the UPF refused or did not answer; Errors holds the first few
	// distinct ones. Skipped counts deletions that found no session without traffic.
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
	Errors  []string `json:"errors,omitempty"`
}

// Summarise returns the latency summary of ds.
func Summarise(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return Latency{Count: len(s), P50: at(0.50), P99: at(0.99), Max: s[len(s)-1]}
}

// Write writes r as indented JSON to path, creating its directory.
func Write(path string, r *Result) error {
	return writeJSON(path, r)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("result: encode: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// Read reads a result file, refusing another schema.
func Read(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("result: %s: %w", path, err)
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("result: %s has schema %d; this xupf-bench reads %d", path, r.Schema, SchemaVersion)
	}
	return &r, nil
}

// ReadDir reads every *.json result under dir (recursively), in path order.
func ReadDir(dir string) ([]*Result, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	sort.Strings(paths)
	out := make([]*Result, 0, len(paths))
	for _, p := range paths {
		r, err := Read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ThisMachine describes the machine the process runs on.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	m.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// BuildCommit is the commit the binary was built from, set by `make build` with -ldflags -X
// (git describe --always --dirty): where GOFLAGS holds -buildvcs=false, as on this
// project's machines, Go records no VCS information of its own.
var BuildCommit string

// TheseVersions describes the software in use; what cannot be found is left empty.
func TheseVersions(ctx context.Context) Versions {
	v := Versions{Go: runtime.Version(), XUPF: BuildCommit}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cilium/ebpf" {
				v.CiliumEBPF = d.Version
			}
		}
		// go build records the commit when it builds inside the repository with VCS
		// stamping on.
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" && v.XUPF == "" {
			v.XUPF = rev
			if dirty {
				v.XUPF += "-dirty"
			}
		}
	}
	v.Clang = firstLine(ctx, "clang", "--version")
	return v
}

// firstLine is the first line a command prints, or "" if it fails.
func firstLine(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	return strings.TrimSpace(string(line))
}
