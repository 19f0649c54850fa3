// Package modules is measurement 3 of the evaluation: what each module of the datapath adds
// to the time of one packet, with the modules added one by one, for a simple and a complex
// configuration, uplink and downlink (after figure 5.11 of the eBPF mobile gateway thesis,
// which timed Router, +Classifier, +Policer, +GTP Handler downlink).
//
// The datapath is one XDP program, not a chain of separate ones, so a "module" here is the
// configuration that makes the program run that code for the measured packet. Each stage
// holds everything of the stages before it:
//
//  1. routing: the FIB route, nothing of GTP-U. The datapath routes a plain IPv4 packet only
//     when its destination has an entry in the UE table, so this stage installs one entry
//     per direction whose one PDR has a FAR that forwards without outer header creation
//     (and no SDF filter, QER or counter): Ethernet/IPv4 parse, the local GTP-U address
//     check, one UE-table hash lookup, the PDR and FAR reads, bpf_fib_lookup, TTL decrement,
//     MAC rewrite and a devmap redirect. Uplink is the UE's packet as it leaves the tunnel
//     (UE to a data network server), keyed by the server's address; downlink is a server's
//     packet to the UE, keyed by the UE's address and routed to the gNB. No sessions.
//  2. gtpu: the sessions instead of those entries. Uplink: a G-PDU with a PDU Session
//     Container, the TEID lookup, PDR selection (SDF classification in the complex
//     configuration), decapsulation, routing. Downlink: the UE lookup, PDR selection, GTP-U
//     encapsulation with a PDU Session Container, routing of the outer packet.
//  3. classifier: traffic classes installed; the packet is classified in its direction (it
//     matches the lowest-priority class, so every vector word is looked at) and the class
//     counters updated. With classes the program also calls the policer, which here finds
//     no contract (two misses in an empty hash) and passes the packet.
//  4. policer: every PDR applies a session AMBR QER and, for a QoS flow's PDR, the flow's
//     MBR QER (token bucket meters at 10 Gbit/s, ktime clock), and every class has a LIMIT
//     contract at 10 Gbit/s (the complex configuration adds a default one): nothing drops,
//     so this is the meters' cost, not drops'.
//  5. usage: per-PDR usage counting (packets and bytes of the PDR's counter slot), the
//     datapath as it ships. The datapath always counts, so stages 1 to 4 point the measured
//     session's counter slots outside the table (datapath.StopUsageCounting): their lookup
//     misses and nothing is counted. This stage is what the counter update costs; the
//     lookup stays in every stage. URRs add nothing per packet: the control plane sums a
//     URR's PDRs' counters.
//
// The configurations, both with every stage:
//
//   - simple: one session with one PDR per direction (no SDF filter), one gNB, one remote
//     route, one class (UDP, both directions) with one contract.
//   - complex: 10,000 sessions (Options.Sessions) over 10 gNBs, each session with three QoS
//     flows selected by SDF filters (protocol, remote /16, UE port) beside its default rule,
//     so four PDRs per direction; 100 remote routes toward 10 next hops; 1,000 classes
//     (Options.Classes), half uplink on a UE's source address, half downlink on its
//     destination, each with its contract; the packet belongs to the last session and
//     matches a flow's PDR and the last classes.
//
// Every (configuration, stage) has its own network namespace and datapath, loaded side by
// side and measured in turn round after round, so that the machine's noise falls on all
// of them alike; a row is the median over the rounds.
//
// Timing is the kernel's own, from BPF_PROG_TEST_RUN in repeat mode (Options.Repeat runs
// per measurement). In repeat mode the kernel runs the program again on the frame the run
// before left, decapsulated or encapsulated, so every run goes through a wrapper program
// (restore.go) that moves the head back, writes the frame again and tail-calls the datapath.
// The wrapper alone, tail-calling a program that returns at once, is timed right after the
// same way and subtracted: a sample is (datapath through the wrapper) - (wrapper alone), and
// a row the median of Options.Rounds samples. The kernel's timer stops while the thread is
// rescheduled, and its own clock reads are spread over the repeats. (internal/datapath's
// BenchmarkDatapath runs one packet per syscall instead: each packet then runs cold after a
// syscall and carries the timer's cost, so its numbers are higher.) The frame arrives on the
// namespace's loopback device (no context is passed), which the FIB lookup does not depend
// on here.
//
// Nothing is timed unchecked: before timing, each stage's output frame is compared byte for
// byte with the expected one, after a run of the datapath alone and after a second run
// through the wrapper (on a restored frame), and the wrapper alone must give the frame back
// unchanged; while timing, the datapath's drop and hand-to-kernel counters must not move and
// its redirect counters must rise by Repeat at least.
package modules

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Row is one measurement: the median ns per packet of one configuration, direction and stage.
type Row struct {
	Config      string  `json:"config"`    // "simple" or "complex"
	Direction   string  `json:"direction"` // "uplink" or "downlink"
	Stage       string  `json:"stage"`     // one of Stages()
	NsPerPacket float64 `json:"ns_per_packet"`
	// Packets is how many runs of the datapath were timed for the row: Rounds × Repeat.
	Packets uint64 `json:"packets"`
}

// Options configure Measure; zero values take the defaults.
type Options struct {
	// Repeat is the BPF_PROG_TEST_RUN repeat count of one measurement (of the datapath
	// through the wrapper, and of the wrapper alone); default 50,000.
	Repeat int
	// Rounds is how many measurements each row is the median of; default 11.
	Rounds int
	// Sessions and Classes size the complex configuration; defaults 10,000 and 1,000.
	Sessions int
	Classes  int
}

func (o Options) withDefaults() Options {
	if o.Repeat <= 0 {
		o.Repeat = 50000
	}
	if o.Rounds <= 0 {
		o.Rounds = 11
	}
	if o.Sessions <= 0 {
		o.Sessions = 10000
	}
	if o.Classes <= 0 {
		o.Classes = 1000
	}
	return o
}

// The stages, in the order they are added.
const (
	stageRouting = iota
	stageGTPU
	stageClassifier
	stagePolicer
	stageUsage
	numStages
)

var stageNames = [numStages]string{"routing", "gtpu", "classifier", "policer", "usage"}

// Stages returns the stage names in order; each includes the ones before it.
func Stages() []string { return slices.Clone(stageNames[:]) }

// Directions of a row.
const (
	Uplink   = "uplink"
	Downlink = "downlink"
)

// config is the size of a configuration.
type config struct {
	name     string
	sessions int // the measured one is the last
	flows    int // QoS flows with SDF filters per session, beside its default rule
	gnbs     int
	routes   int // remote routes on N6, over min(routes, 10) next hops
	classes  int
}

func configs(o Options) []config {
	return []config{
		{name: "simple", sessions: 1, gnbs: 1, routes: 1, classes: 1},
		{name: "complex", sessions: o.Sessions, flows: 3, gnbs: 10, routes: 100, classes: o.Classes},
	}
}

// Measure builds every configuration at every stage, checks each one's output frames, then
// times them round after round and returns a row per configuration, direction and stage
// (configurations, then directions, then stages, in order). It needs root and BPF.
func Measure(ctx context.Context, opts Options) (_ []Row, err error) {
	opts = opts.withDefaults()
	var benches []*bench
	defer func() {
		for _, b := range benches {
			err = errors.Join(err, b.close())
		}
	}()
	for _, c := range configs(opts) {
		for stage := range numStages {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			b, err := newBench(c, stage)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", c.name, stageNames[stage], err)
			}
			benches = append(benches, b)
			for _, dir := range b.cases {
				if err := b.check(dir); err != nil {
					return nil, fmt.Errorf("%s/%s/%s: %w", c.name, dir.name, stageNames[stage], err)
				}
			}
		}
	}
	samples := make([][][]float64, len(benches)) // bench, case, round
	for i, b := range benches {
		samples[i] = make([][]float64, len(b.cases))
	}
	// Round 0 warms caches, branch predictors and the JIT images up and is not kept: the
	// first runs of a program just loaded are slower.
	for round := range opts.Rounds + 1 {
		for i, b := range benches {
			for j, dir := range b.cases {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				ns, err := b.time(dir, opts.Repeat)
				if err != nil {
					return nil, fmt.Errorf("%s/%s/%s: %w", b.cfg.name, dir.name, stageNames[b.stage], err)
				}
				if round > 0 {
					samples[i][j] = append(samples[i][j], ns)
				}
			}
		}
	}
	var rows []Row
	for _, c := range configs(opts) {
		for _, dir := range []string{Uplink, Downlink} {
			for i, b := range benches {
				if b.cfg.name != c.name {
					continue
				}
				for j, bc := range b.cases {
					if bc.name == dir {
						rows = append(rows, Row{Config: c.name, Direction: dir, Stage: stageNames[b.stage],
							NsPerPacket: median(samples[i][j]), Packets: uint64(opts.Rounds * opts.Repeat)})
					}
				}
			}
		}
	}
	return rows, nil
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// xdpRedirect is XDP_REDIRECT, the verdict of every measured packet.
const xdpRedirect = 4
