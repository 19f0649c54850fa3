// Package run is xupf-bench's runner: for each point of a scenario it builds the namespace
// topology, starts the datapath under test (xupfd with its sessions installed over PFCP, or a
// baseline), offers traffic with the live-frames generator from the gnb or dn namespace,
// counts and samples what arrives with an XDP sink on the far veth, checks the samples, and
// writes a result file.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/bench/baseline"
	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/returndev"
	"github.com/xupf/xupf/internal/testbed"
)

// Options configure a run.
type Options struct {
	// Xupfd is the xupfd binary.
	Xupfd string
	// Out is the directory the result files go to, in a directory per scenario.
	Out string
	// Log receives a line per step; nil discards them.
	Log io.Writer
	// DaemonLog receives xupfd's output; nil discards it.
	DaemonLog io.Writer
}

const (
	// httpListen is the daemon's API inside the upf namespace.
	httpListen = "127.0.0.1:9380"
	// drainWait lets frames in flight reach the sink before it is read.
	drainWait = 50 * time.Millisecond
	// calibrationTime is how long the generator's own maximum is measured.
	calibrationTime = time.Second
	// sessionHeadroom is how many sessions beyond the scenario's the daemon is sized for,
	// besides those events add.
	sessionHeadroom = 1024
	// maxExamples bounds the wrong frames a result describes.
	maxExamples = 5
)

// Run measures every point of sc, each repetition in a topology of its own, and returns the
// paths of the result files written. It stops at the first point that fails.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) ([]string, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	machine, versions := result.ThisMachine(), result.TheseVersions(ctx)
	var paths []string
	for _, p := range sc.Points {
		// A profile for bigger machines asks for more generator CPUs than this one may have:
		// such points are left out, said so, rather than measured on shared CPUs.
		if p.Tester.GeneratorThreads > runtime.NumCPU() {
			fmt.Fprintf(opts.Log, "point %d/%d %s: skipped, it needs %d CPUs and this machine has %d\n",
				p.Index+1, len(sc.Points), p.Name, p.Tester.GeneratorThreads, runtime.NumCPU())
			continue
		}
		for rep := range p.Tester.Repetitions {
			fmt.Fprintf(opts.Log, "point %d/%d %s, repetition %d/%d\n", p.Index+1, len(sc.Points), p.Name, rep+1, p.Tester.Repetitions)
			r, err := runPoint(ctx, p, opts)
			if err != nil {
				return paths, fmt.Errorf("bench: %s (repetition %d): %w", p.Name, rep+1, err)
			}
			r.Schema, r.Scenario, r.Source, r.Repetition = result.SchemaVersion, sc.Name, string(sc.Source), rep
			r.Machine, r.Versions = machine, versions
			path := filepath.Join(opts.Out, sc.Name, fmt.Sprintf("%04d-r%d.json", p.Index, rep))
			if err := result.Write(path, r); err != nil {
				return paths, err
			}
			paths = append(paths, path)
			for _, d := range directions(p.Traffic.Direction) {
				s := r.Summary.Directions[d]
				fmt.Fprintf(opts.Log, "  %s: %.3f Mpps, %.3f Gbit/s, loss %.4f%%, softirq %.2f CPUs; %d samples checked, %d wrong\n",
					d, s.Rate/1e6, s.Bits/1e9, 100*s.Loss, s.Softirq, r.Correctness.Checked, r.Correctness.Wrong)
			}
		}
	}
	return paths, nil
}

// directions are the directions traffic flows in.
func directions(d string) []string {
	if d == scenario.Bidirectional {
		return []string{scenario.Uplink, scenario.Downlink}
	}
	return []string{d}
}

// lane is one direction's traffic: its generator, its sink, and the frames it checks.
type lane struct {
	dir   string
	tmpls []gen.Template
	gen   *gen.Generator
	sink  *gen.Sink
	// dut is the datapath's XDP program on the lane's ingress interface in upf.
	dut *ebpf.Program
	// spread is the CPU map's program with xupfd's uplink spreading, else nil.
	spread *ebpf.Program
	// ret is the return device's program on a downlink lane with xupfd's kernel_n6, else
	// nil: the replies the kernel sends back to the UEs run it.
	ret  *ebpf.Program
	want []pkt.Flow
	cpus []int
	// users are the flows' users, by flow id, for the check of handed-over downlink frames.
	users []int
}

// point is one point being measured.
type point struct {
	p     scenario.Point
	opts  Options
	env   *env
	pl    plan
	ctl   *control
	api   *api.Client
	lanes []*lane
	// floor is the empty program whose figure is subtracted from every program's.
	floor  *ebpf.Program
	log    eventLog
	closer []func() error
	res    *result.Result
}

func runPoint(ctx context.Context, p scenario.Point, opts Options) (_ *result.Result, err error) {
	pt := &point{p: p, opts: opts, pl: newPlan(p.Pipeline), res: &result.Result{Point: p, Started: time.Now().UTC(),
		GeneratorMax: map[string]float64{}, Summary: result.Summary{Directions: map[string]result.DirectionSummary{}}}}
	defer func() {
		for i := len(pt.closer) - 1; i >= 0; i-- {
			err = errors.Join(err, pt.closer[i]())
		}
	}()
	if pt.env, err = newEnv(pt.pl); err != nil {
		return nil, err
	}
	pt.closer = append(pt.closer, pt.env.t.Close)
	if err := pt.startDatapath(ctx); err != nil {
		return nil, err
	}
	if err := pt.prepareLanes(ctx); err != nil {
		return nil, err
	}
	if pt.floor, err = newFloorProgram(); err != nil {
		return nil, err
	}
	pt.closer = append(pt.closer, pt.floor.Close)
	if err := pt.calibrate(ctx); err != nil {
		return nil, err
	}
	if err := pt.measure(ctx); err != nil {
		return nil, err
	}
	if pt.api != nil {
		st, err := pt.api.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: xupfd's counters: %w", err)
		}
		pt.res.Datapath = &result.DatapathStats{Counters: nonZero(st.Counters), Drops: nonZero(st.Drops)}
	}
	pt.res.Events = pt.log.stats()
	return pt.res, nil
}

// startDatapath starts what the point measures.
func (pt *point) startDatapath(ctx context.Context) error {
	e := pt.env
	if scenario.Masquerades(pt.p.Pipeline.Datapath) {
		if err := e.t.Masquerade(ctx, ueNet); err != nil {
			return fmt.Errorf("bench: %w (Debian package nftables)", err)
		}
	}
	switch pt.p.Pipeline.Datapath {
	case scenario.DatapathXUPF, scenario.DatapathXUPFKernelNAT, scenario.DatapathXUPFNATCache:
		return pt.startXUPF(ctx)
	case scenario.DatapathFlowCache:
		_, err := pt.startDaemon(func(cfg *config.Config) error {
			cfg.FlowCache.MaxFlows = flowCacheSize
			return nil
		})
		return err
	case scenario.DatapathXDPForwarder:
		return pt.startBaseline(func(o baseline.ForwardOptions, _ bool) (*baseline.Forwarder, error) {
			return baseline.LoadForwarder(o)
		})
	case scenario.DatapathGTPU:
		return pt.startBaseline(func(o baseline.ForwardOptions, uplink bool) (*baseline.Forwarder, error) {
			opts := baseline.GTPUOptions{ForwardOptions: o}
			if !uplink {
				opts.Encap = &gtpuTunnel
			}
			return baseline.LoadGTPU(opts)
		})
	case scenario.DatapathKernel, scenario.DatapathKernelNAT:
		// Frames sent into n3 and n6 by the generator's XDP_TX are only taken by a veth
		// that runs XDP; XDP_PASS hands them to the stack, which forwards them.
		for _, name := range []string{testbed.N3If, testbed.N6If} {
			err := e.t.Do(e.t.UPFNS, func() error {
				l, err := testbed.AttachXDPPass(name)
				if err == nil {
					pt.closer = append(pt.closer, l.Close)
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown datapath %q", pt.p.Pipeline.Datapath)
}

// startBaseline attaches a reference program, loaded by load, to n3 toward n6 (uplink) and
// to n6 toward n3.
func (pt *point) startBaseline(load func(o baseline.ForwardOptions, uplink bool) (*baseline.Forwarder, error)) error {
	e := pt.env
	hops := []struct {
		in, out int
		outMAC  [6]byte
		next    [6]byte
		uplink  bool
	}{{e.n3, e.n6, e.m.n6, e.m.dn, true}, {e.n6, e.n3, e.m.n3, e.m.gnb, false}}
	for _, h := range hops {
		// Inside upf: the devmap resolves the egress ifindex in the namespace of the
		// thread that writes it.
		err := e.t.Do(e.t.UPFNS, func() error {
			f, err := load(baseline.ForwardOptions{Out: h.out, OutMAC: h.outMAC[:], NextHop: h.next[:]}, h.uplink)
			if err != nil {
				return err
			}
			pt.closer = append(pt.closer, f.Close)
			return f.Attach(h.in)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sizeLimits sizes l for p: every session of the point fits (the users, those its events add,
// some headroom), all of them from the one association the bench sets up.
func sizeLimits(l *config.Limits, p scenario.Point) {
	added := int(p.Events.SessionAdd*p.Tester.Duration.D().Seconds()+1) * (p.Tester.RFC2544.MaxIterations + 2)
	l.MaxSessions = p.Pipeline.Users + added + sessionHeadroom
	l.MaxSessionsPerAssociation = l.MaxSessions
	// A user with SDF filters has a rule set per TEID and per UE address.
	l.MaxRuleSets = min(2*l.MaxSessions, config.MaxMaxRuleSets)
}

// flowCacheSize is xupfd's flow table with datapath xupf_flow_cache: room for every flow the
// generator can replay, both ways (gen.MaxTemplates each), with the hash table's slack.
const flowCacheSize = 1 << 18

// startDaemon starts xupfd with the testbed's configuration as set changes it (set may refuse
// the point), and keeps its API for the counters.
func (pt *point) startDaemon(set func(*config.Config) error) (*testbed.Daemon, error) {
	e := pt.env
	dir, err := os.MkdirTemp("", "xupf-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	pt.closer = append(pt.closer, func() error { return os.RemoveAll(dir) })
	cfg := e.t.Config(nil, httpListen)
	if err := set(cfg); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "xupfd.yaml")
	if err := e.t.WriteConfigFile(cfgPath, cfg); err != nil {
		return nil, err
	}
	d, err := e.t.StartDaemon(pt.opts.Xupfd, cfgPath, pt.opts.DaemonLog)
	if err != nil {
		return nil, err
	}
	pt.closer = append(pt.closer, d.Stop)
	pt.api = d.API()
	return d, nil
}

// configureXUPF sets what the point's pipeline asks of xupfd in cfg.
func (pt *point) configureXUPF(cfg *config.Config) error {
	p := pt.p
	cfg.QoSAlgorithm = config.QoSAlgorithm(p.Pipeline.Policer) // the scenario's names are the configuration's
	cfg.UplinkSpread = p.Pipeline.UplinkSpread
	if p.Pipeline.UplinkSpread != config.SpreadOff && p.Pipeline.UplinkSpreadCPUs == scenario.SpreadCPUsOthers {
		if cfg.UplinkSpreadCPUs = otherCPUs(cpuSets(len(directions(p.Traffic.Direction)), p.Tester.GeneratorThreads)); cfg.UplinkSpreadCPUs == nil {
			return fmt.Errorf("bench: uplink_spread_cpus: others: the generator uses every CPU; lower tester.generator_threads")
		}
	}
	if p.Pipeline.UEAddress == scenario.UEByUPF || kernelN6(p.Pipeline.Datapath) {
		// From the block routed toward the gNB, like the addresses the SMF gives. With
		// kernel_n6, whichever chooses them: xupfd routes its pools into the return
		// device, which is how the replies the kernel translates back reach the sessions.
		cfg.UEPools = []netip.Prefix{ueNet}
	}
	switch p.Pipeline.Datapath {
	case scenario.DatapathXUPFKernelNAT:
		cfg.FlowCache.MaxFlows, cfg.FlowCache.KernelN6.Default = 1, true
	case scenario.DatapathXUPFNATCache:
		cfg.FlowCache.MaxFlows, cfg.FlowCache.KernelN6.Default = flowCacheSize, true
	}
	sizeLimits(&cfg.Limits, p)
	return nil
}

// startXUPF starts xupfd with a configuration sized for the point and installs its sessions,
// classifier classes and policer contract.
func (pt *point) startXUPF(ctx context.Context) error {
	e, p := pt.env, pt.p
	d, err := pt.startDaemon(pt.configureXUPF)
	if err != nil {
		return err
	}
	var c *pfcpclient.Client
	err = e.t.Do(e.t.GNBNS, func() error {
		c, err = pfcpclient.Dial(testbed.PFCPAddr, pfcpclient.Options{NodeID: testbed.GNBAddr.String()})
		return err
	})
	if err != nil {
		return err
	}
	pt.closer = append(pt.closer, c.Close)
	if _, err := c.Associate(ctx); err != nil {
		return fmt.Errorf("bench: associate: %w", err)
	}
	pt.ctl = &control{c: c, pl: pt.pl}
	fmt.Fprintf(pt.opts.Log, "  establishing %d sessions over PFCP\n", p.Pipeline.Users)
	if pt.res.Setup, err = pt.ctl.install(ctx, p.Pipeline.Users); err != nil {
		return fmt.Errorf("%w\n--- xupfd log (tail) ---\n%s", err, d.LogTail())
	}
	for _, class := range pt.pl.classes() {
		if _, err := pt.api.AddClass(ctx, class); err != nil {
			return fmt.Errorf("bench: classifier class %d: %w", class.ID, err)
		}
	}
	if c, ok := pt.pl.contract(); ok {
		if _, err := pt.api.SetContract(ctx, 1, c); err != nil {
			return fmt.Errorf("bench: policer contract of class 1: %w", err)
		}
	}
	return nil
}

// prepareLanes builds each direction's frames, generator and sink, and opens the
// masqueraded connections a downlink lane's frames reply to.
func (pt *point) prepareLanes(ctx context.Context) error {
	e, p := pt.env, pt.p
	flows := chooseFlows(p.Traffic.ActiveUsers, p.Pipeline.FlowsPerUser, min(p.Traffic.Flows, gen.MaxTemplates), p.Traffic.Seed)
	keys := func(u int) (uint32, netip.Addr) { return uint32(u + 1), ueAddr(u) }
	if pt.ctl != nil {
		pt.ctl.setTraffic(flows, p.Pipeline.Users)
		keys = pt.ctl.keys
	}
	users := make([]int, len(flows))
	for i, f := range flows {
		users[i] = f.user
	}
	dirs := directions(p.Traffic.Direction)
	cpus := cpuSets(len(dirs), p.Tester.GeneratorThreads)
	for i, dir := range dirs {
		uplink := dir == scenario.Uplink
		fr, err := pt.pl.build(dir, p.Traffic, p.Pipeline.Datapath, flows, keys, e.m)
		if err != nil {
			return err
		}
		tmpls := make([]gen.Template, len(fr.Sent))
		for j, f := range fr.Sent {
			tmpls[j] = gen.FromFrame(f)
		}
		near, far := e.near(uplink), e.far(uplink)
		g, err := gen.New(gen.Options{Templates: tmpls, Ifindex: near.ifindex, Netns: near.handle})
		if err != nil {
			return err
		}
		pt.closer = append(pt.closer, g.Close)
		s, err := e.attachSink(far, p.Tester.SampleEvery, magicOffsets(fr.Want))
		if err != nil {
			return err
		}
		pt.closer = append(pt.closer, s.Close)
		in := e.n6
		if uplink {
			in = e.n3
		}
		dut, err := e.attachedProgram(in)
		if err != nil {
			return err
		}
		pt.closer = append(pt.closer, dut.Close)
		spread, err := cpuMapProgram(dut)
		if err != nil {
			return err
		}
		if spread != nil {
			pt.closer = append(pt.closer, spread.Close)
		}
		var ret *ebpf.Program
		if !uplink && kernelN6(p.Pipeline.Datapath) {
			// The bench leaves flow_cache.return_device at its default.
			idx, err := e.ifindex(returndev.Peer(config.DefaultReturnDevice))
			if err == nil {
				ret, err = e.attachedProgram(idx)
			}
			if err != nil {
				return err
			}
			pt.closer = append(pt.closer, ret.Close)
		}
		pt.lanes = append(pt.lanes, &lane{dir: dir, tmpls: tmpls, gen: g, sink: s, dut: dut, spread: spread, ret: ret,
			want: fr.Want, cpus: cpus[i], users: users})
	}
	if scenario.Masquerades(p.Pipeline.Datapath) && slices.Contains(dirs, scenario.Downlink) {
		return pt.connect(ctx, flows, keys)
	}
	return nil
}

// connectRounds is how many uplink packets each flow sends before a masqueraded downlink is
// measured, at connectRate: the first sets up the translation, the kernel's and with the
// flow cache its pair of entries; the others make up for one the kernel dropped.
const (
	connectRounds = 3
	connectRate   = 20_000
)

// connect sends every flow's uplink packets from the gNB side, connectRounds each: a
// masqueraded flow's replies go to n6's address and the port masquerade gave it, which only
// the flow's uplink sets up (the conntrack entry, and with the flow cache its entries both
// ways). What arrives on the DN side is not counted: no sink is there.
func (pt *point) connect(ctx context.Context, flows []flowID, keys userKeys) error {
	e, p := pt.env, pt.p
	fr, err := pt.pl.build(scenario.Uplink, p.Traffic, p.Pipeline.Datapath, flows, keys, e.m)
	if err != nil {
		return err
	}
	tmpls := make([]gen.Template, len(fr.Sent))
	for i, f := range fr.Sent {
		tmpls[i] = gen.FromFrame(f)
	}
	g, err := gen.New(gen.Options{Templates: tmpls, Ifindex: e.gnb.ifindex, Netns: e.gnb.handle})
	if err != nil {
		return err
	}
	fmt.Fprintf(pt.opts.Log, "  opening %d masqueraded connections with uplink packets\n", len(flows))
	st, err := g.Run(ctx, gen.RunOptions{Count: uint64(connectRounds * len(tmpls)), Rate: connectRate})
	if err = errors.Join(err, g.Close()); err != nil {
		return fmt.Errorf("bench: open the masqueraded connections: %w", err)
	}
	if st.Sent < uint64(connectRounds*len(tmpls)) {
		return fmt.Errorf("bench: open the masqueraded connections: %d uplink packets sent of %d", st.Sent, connectRounds*len(tmpls))
	}
	time.Sleep(drainWait)
	return nil
}

// nonZero is m without its zero entries.
func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// magicOffsets are the distinct payload offsets of frames like want.
func magicOffsets(want []pkt.Flow) []int {
	var offs []int
	for _, f := range want {
		off := pkt.EthLen + pkt.IPv4Len + pkt.UDPLen
		if f.Tunnel != nil {
			off += pkt.EncapOverhead(f.Tunnel.PSC)
		}
		if !slices.Contains(offs, off) {
			offs = append(offs, off)
		}
	}
	return offs
}

// otherCPUs lists the machine's CPUs that none of the lanes' sets has.
func otherCPUs(sets [][]int) []int {
	var out []int
	for c := range runtime.NumCPU() {
		if !slices.ContainsFunc(sets, func(s []int) bool { return slices.Contains(s, c) }) {
			out = append(out, c)
		}
	}
	return out
}

// cpuSets gives each of n lanes threads CPUs, round robin over the machine's: with one lane
// and two threads on two CPUs, CPUs 0 and 1; with two lanes of one thread, CPU 0 for the
// first and CPU 1 for the second.
func cpuSets(n, threads int) [][]int {
	out := make([][]int, n)
	c := 0
	for i := range out {
		for range threads {
			out[i] = append(out[i], c%runtime.NumCPU())
			c++
		}
	}
	return out
}

// calibrate measures each lane's generator into a dropping sink on a veth pair of its own:
// the generator's maximum with these frames, on these CPUs.
func (pt *point) calibrate(ctx context.Context) error {
	cal, err := pt.env.calibrationPair()
	if err != nil {
		return err
	}
	pt.closer = append(pt.closer, cal.sink.Close)
	for _, l := range pt.lanes {
		g, err := gen.New(gen.Options{Templates: l.tmpls, Ifindex: cal.send, Netns: cal.ns})
		if err != nil {
			return err
		}
		st, err := g.Run(ctx, gen.RunOptions{CPUs: l.cpus, Duration: calibrationTime})
		err = errors.Join(err, g.Close())
		if err != nil {
			return fmt.Errorf("bench: calibrate the %s generator: %w", l.dir, err)
		}
		pt.res.GeneratorMax[l.dir] = st.Rate()
	}
	return nil
}
