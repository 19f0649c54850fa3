// Package gen is the benchmark's traffic generator and sink, both XDP programs.
//
// The Generator runs an XDP program with BPF_PROG_RUN in live-frames mode
// (BPF_F_TEST_XDP_LIVE_FRAMES, the technique of xdp-trafficgen): the kernel feeds the program
// frames from a page pool set up from one input frame, and transmits what it returns with
// XDP_TX (out of the context's ingress interface) or XDP_REDIRECT. The program cycles through
// a prepared set of frames (templates, one per flow), writing the next one's head into each
// frame and a per-CPU sequence number into its payload. One BPF_PROG_RUN call sends a batch of
// frames (its repeat count); Run makes calls back to back for the maximum rate, or paces them
// (a batch per interval) for a fixed rate, on one pinned thread per CPU.
//
// The Sink is an XDP program attached to the interface the traffic arrives on: it counts
// frames and bytes per CPU, keeps the head of one frame in N in a ring buffer for the
// correctness check, and drops everything (or passes it).
//
// The BPF sources are bpf/bench/; the objects are generated into this package by bpf.go.
//
// # Exact counts
//
// Each CPU's slot holds a budget the program counts down; past it the program drops (counted
// as Over), so a call never sends more than asked, and one cut short by a signal is simply
// followed by another for the rest. Only the thread pinned to a CPU touches that CPU's slot,
// so the counts are exact without atomics.
//
// # Templates
//
// Pages are recycled without being rewritten: a frame starts with what an earlier run left in
// its page. Every template is therefore written from offset 0 up to the last byte where any
// two templates differ (at most 256 bytes), and the rest — the payload filler, which pkt
// makes the same for every frame of a layout — comes from the input frame, the longest
// template. Templates may differ in length (the program trims the frame to each one's
// length). Headers are never moved, so a frame never sees its own output shifted.
package gen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/bench/pkt"
)

// Limits.
const (
	// HeadMax is how far into a frame templates may differ (GEN_HEAD_MAX).
	HeadMax = 256
	// MaxTemplateLen is the longest template: live frames must fit a page with the kernel's
	// headroom and tailroom.
	MaxTemplateLen = 3000
	// MaxTemplates bounds the template map.
	MaxTemplates = 1 << 20
	// DefaultBatchSize is the kernel's batch (frames per page-pool refill and redirect flush).
	DefaultBatchSize = 64
	// DefaultInterval is the pacing interval of a fixed-rate run.
	DefaultInterval = time.Millisecond
	// callTarget is how long one BPF_PROG_RUN call should last: each call pays a fixed cost
	// (see estimator) during which nothing is sent, so calls are long; a run's last call is
	// shortened to end at its deadline.
	callTarget = time.Second
	// firstCall bounds a run's first call.
	firstCall = 100 * time.Millisecond
)

// Template is one prepared frame.
type Template struct {
	// Frame is the frame without FCS (14..MaxTemplateLen bytes).
	Frame []byte
	// SeqOffset is where the generator writes a 32-bit big-endian sequence number into each
	// copy; 0 writes none.
	SeqOffset int
}

// FromFrame returns the template of a frame built by pkt.
func FromFrame(f pkt.Frame) Template {
	return Template{Frame: f.Data, SeqOffset: f.SeqOffset}
}

// Options configures a Generator.
type Options struct {
	// Templates are the frames sent, in order, over and over.
	Templates []Template
	// Ifindex is the interface in Netns the frames leave through with XDP_TX (the context's
	// ingress interface).
	Ifindex int
	// RedirectIfindex, when set, sends frames with XDP_REDIRECT to this interface instead.
	RedirectIfindex int
	// Netns is the network namespace the interfaces are in; 0 means the namespace of the
	// thread calling New.
	Netns netns.NsHandle
	// BatchSize is the kernel's batch; 0 means DefaultBatchSize.
	BatchSize uint32
	// SeqCPU puts the sending CPU's number in the top bits of each sequence number
	// (SeqCPUShift) and that CPU's count, from 0, in the rest: a Sink with SeqBits then
	// checks each CPU's sequence. A CPU then counts to at most SeqMax.
	SeqCPU bool
}

// The sequence numbers of a Generator with SeqCPU (GEN_SEQ_CPU_SHIFT).
const (
	SeqCPUShift = 24
	SeqMax      = 1 << SeqCPUShift
)

// Generator sends frames. Create it with New and Close it.
type Generator struct {
	objs    trafficgenObjects
	ns      netns.NsHandle
	input   []byte
	ctx     []byte // struct xdp_md
	batch   uint32
	ncpu    int
	headLen int
	lens    []uint64    // template lengths, for Stats.Bytes
	est     []estimator // per CPU, kept from run to run
	mu      sync.Mutex  // one Run at a time
}

// xdpMd is struct xdp_md, the context of an XDP BPF_PROG_RUN.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// prepare checks the templates and returns them as the map holds them, with the input frame
// (the longest template) and the head length written.
func prepare(ts []Template) ([]trafficgenGenTmpl, []byte, int, error) {
	if len(ts) == 0 {
		return nil, nil, 0, errors.New("gen: no templates")
	}
	if len(ts) > MaxTemplates {
		return nil, nil, 0, fmt.Errorf("gen: %d templates, at most %d", len(ts), MaxTemplates)
	}
	base := ts[0].Frame
	for i, t := range ts {
		if len(t.Frame) < pkt.EthLen || len(t.Frame) > MaxTemplateLen {
			return nil, nil, 0, fmt.Errorf("gen: template %d is %d bytes; use %d to %d", i, len(t.Frame), pkt.EthLen, MaxTemplateLen)
		}
		if t.SeqOffset != 0 && (t.SeqOffset < pkt.EthLen || t.SeqOffset+4 > len(t.Frame)) {
			return nil, nil, 0, fmt.Errorf("gen: template %d: sequence offset %d is outside the frame after the Ethernet header", i, t.SeqOffset)
		}
		if len(t.Frame) > len(base) {
			base = t.Frame
		}
	}
	head := 0
	for _, t := range ts {
		for j := len(t.Frame) - 1; j >= head; j-- {
			if t.Frame[j] != base[j] {
				head = j + 1
				break
			}
		}
	}
	// Every frame's headers are written, up to its sequence number: the page of a frame
	// comes back to the pool after the device under test has had it, and a datapath that
	// rewrites headers in place (MACs, TTL, a decapsulation's new Ethernet header) leaves
	// them changed for the next frame sent from that page.
	for _, t := range ts {
		if t.SeqOffset != 0 {
			head = max(head, t.SeqOffset+4)
		}
	}
	if head > HeadMax {
		return nil, nil, 0, fmt.Errorf("gen: templates differ up to byte %d, beyond the first %d; only headers and the payload header may differ (build them with pkt, whose payload filler depends on the offset only)", head, HeadMax)
	}
	out := make([]trafficgenGenTmpl, len(ts))
	for i, t := range ts {
		hl := min(head, len(t.Frame))
		out[i] = trafficgenGenTmpl{Len: uint16(len(t.Frame)), HeadLen: uint16(hl), SeqOff: uint16(t.SeqOffset)}
		copy(out[i].Head[:], t.Frame[:hl])
	}
	return out, append([]byte(nil), base...), head, nil
}

// New loads the generator program with opts' templates.
func New(opts Options) (*Generator, error) {
	tmpls, input, head, err := prepare(opts.Templates)
	if err != nil {
		return nil, err
	}
	if opts.Ifindex <= 0 {
		return nil, errors.New("gen: Ifindex is not set")
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	ns, err := dupNetns(opts.Netns)
	if err != nil {
		return nil, err
	}
	g := &Generator{ns: ns, input: input, ncpu: ncpu, headLen: head, batch: opts.BatchSize}
	for _, t := range tmpls {
		g.lens = append(g.lens, uint64(t.Len))
	}
	if g.batch == 0 {
		g.batch = DefaultBatchSize
	}
	g.ctx = ctxBytes(xdpMd{DataEnd: uint32(len(input)), IngressIfindex: uint32(opts.Ifindex)})
	g.est = make([]estimator, ncpu)
	spec, err := loadTrafficgen()
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("gen: %w", err)
	}
	spec.Maps[trafficgenMapGenTemplates].MaxEntries = uint32(len(tmpls))
	spec.Maps[trafficgenMapGenSlots].MaxEntries = uint32(ncpu)
	if err := spec.Variables[trafficgenVarN_templates].Set(uint32(len(tmpls))); err != nil {
		ns.Close()
		return nil, fmt.Errorf("gen: %w", err)
	}
	if err := spec.Variables[trafficgenVarRedirectIfindex].Set(uint32(opts.RedirectIfindex)); err != nil {
		ns.Close()
		return nil, fmt.Errorf("gen: %w", err)
	}
	if err := spec.Variables[trafficgenVarSeqCpu].Set(boolU32(opts.SeqCPU)); err != nil {
		ns.Close()
		return nil, fmt.Errorf("gen: %w", err)
	}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		ns.Close()
		return nil, fmt.Errorf("gen: load the generator program: %w", err)
	}
	keys := make([]uint32, len(tmpls))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := g.objs.GenTemplates.BatchUpdate(keys, tmpls, nil); err != nil {
		// Batch updates of arrays need 5.6; fall back to one at a time.
		for i := range tmpls {
			if err := g.objs.GenTemplates.Update(keys[i], &tmpls[i], ebpf.UpdateAny); err != nil {
				g.Close()
				return nil, fmt.Errorf("gen: write template %d: %w", i, err)
			}
		}
	}
	return g, nil
}

// dupNetns returns a handle of its own on h, or on the calling thread's namespace when h is
// unset.
func dupNetns(h netns.NsHandle) (netns.NsHandle, error) {
	if h <= 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ns, err := netns.Get()
		if err != nil {
			return netns.None(), fmt.Errorf("gen: get the network namespace: %w", err)
		}
		return ns, nil
	}
	fd, err := unix.FcntlInt(uintptr(h), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return netns.None(), fmt.Errorf("gen: duplicate the network namespace handle: %w", err)
	}
	return netns.NsHandle(fd), nil
}

// HeadLen is how many bytes of each frame the program writes (the templates' differing
// head).
func (g *Generator) HeadLen() int { return g.headLen }

// Close unloads the program.
func (g *Generator) Close() error {
	err := g.objs.Close()
	g.ns.Close()
	return err
}

// RunOptions says how much to send and how fast.
type RunOptions struct {
	// CPUs are the CPUs to send from, one pinned thread each; empty means CPU 0.
	CPUs []int
	// Count is the number of frames to send in all, split between the threads; 0 sends until
	// Duration has passed.
	Count uint64
	// Duration bounds the run; 0 means no bound (Count must be set).
	Duration time.Duration
	// Rate is the total rate in frames per second, split between the threads; 0 is as fast
	// as possible.
	Rate float64
	// Interval is the pacing interval when Rate is set: each thread sends its due frames
	// about once per interval. 0 means DefaultInterval.
	Interval time.Duration
	// Bursts, with Rate, sends the frames due at the rate in short calls, each at full speed,
	// instead of pacing every interval inside long calls. A paced call runs the program all
	// the time, dropping the runs between batches, and so keeps its CPU busy at any rate; a
	// burst call ends when its frames are out and its thread sleeps through the call's
	// fixed cost (the page pool's teardown waits for an RCU grace period). The bursts
	// therefore come as often as that cost allows (every ~30 ms on a small VM: 3,000 frames
	// at 100,000/s), for a few percent of a CPU where pacing takes all of it. Interval is
	// then the wait when nothing is due.
	Bursts bool
}

// Stats is what a run sent.
type Stats struct {
	// Sent counts frames the program transmitted (XDP_TX or XDP_REDIRECT). A redirect that
	// fails later in the kernel (a full ring, a peer without XDP) is not seen here: the sink
	// tells what arrived.
	Sent uint64 `json:"sent"`
	// Bytes is the length of the frames sent, without FCS.
	Bytes uint64 `json:"bytes"`
	// Over counts frames dropped past the budget after an interrupted BPF_PROG_RUN.
	Over uint64 `json:"over"`
	// Errors counts frames the program could not build.
	Errors uint64 `json:"errors"`
	// Idle counts runs dropped by pacing.
	Idle uint64 `json:"idle"`
	// Calls counts BPF_PROG_RUN calls.
	Calls uint64 `json:"calls"`
	// Elapsed is the wall time from the start to the last thread's end.
	Elapsed time.Duration `json:"elapsed_ns"`
	// PerCPU is the frames each thread sent, in RunOptions.CPUs order.
	PerCPU []uint64 `json:"per_cpu"`
}

// Rate is Sent per second of Elapsed.
func (s Stats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Sent) / s.Elapsed.Seconds()
}

// Run sends frames as opts says, and returns when done, when ctx ends (with what was sent so
// far and ctx's error), or on the first error.
func (g *Generator) Run(ctx context.Context, opts RunOptions) (Stats, error) {
	cpus := opts.CPUs
	if len(cpus) == 0 {
		cpus = []int{0}
	}
	seen := map[int]bool{}
	for _, c := range cpus {
		if c < 0 || c >= g.ncpu || seen[c] {
			return Stats{}, fmt.Errorf("gen: CPU %d is not a possible CPU (0..%d) or is listed twice", c, g.ncpu-1)
		}
		seen[c] = true
	}
	if opts.Count == 0 && opts.Duration <= 0 {
		return Stats{}, errors.New("gen: set Count, Duration or both")
	}
	if opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0) {
		return Stats{}, fmt.Errorf("gen: rate %v is invalid", opts.Rate)
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	g.mu.Lock()
	defer g.mu.Unlock()

	n := uint64(len(cpus))
	results := make([]threadResult, len(cpus))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range cpus {
		w := worker{g: g, cpu: c, rate: opts.Rate / float64(n), interval: opts.Interval, duration: opts.Duration,
			bursts: opts.Bursts && opts.Rate > 0}
		if opts.Count > 0 {
			w.count = opts.Count / n
			if uint64(i) < opts.Count%n {
				w.count++
			}
			if w.count == 0 {
				continue
			}
		}
		wg.Add(1)
		// The thread is locked and never unlocked: it enters another namespace and is pinned
		// to one CPU, so the runtime must end it rather than reuse it.
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			results[i] = w.run(ctx, start)
		}()
	}
	wg.Wait()
	st := Stats{PerCPU: make([]uint64, len(cpus))}
	var errs []error
	for i, r := range results {
		st.Sent += r.sent
		st.Bytes += r.bytes
		st.Over += r.over
		st.Errors += r.errors
		st.Idle += r.idle
		st.Calls += r.calls
		st.PerCPU[i] = r.sent
		st.Elapsed = max(st.Elapsed, r.end.Sub(start))
		if r.err != nil {
			errs = append(errs, fmt.Errorf("gen: CPU %d: %w", cpus[i], r.err))
		}
	}
	return st, errors.Join(errs...)
}

type worker struct {
	g        *Generator
	cpu      int
	count    uint64 // 0: until duration
	rate     float64
	interval time.Duration
	duration time.Duration
	bursts   bool
}

type threadResult struct {
	sent, bytes, over, errors, idle, calls uint64
	end                                    time.Time
	err                                    error
}

// estimator predicts how long a BPF_PROG_RUN call of k runs takes: a fixed cost (setting up
// and tearing down the page pool, which waits for an RCU grace period: tens of milliseconds
// on a small VM) plus the cost per run, which the kernel reports.
type estimator struct {
	overhead time.Duration
	perRun   time.Duration
	known    bool
}

// probeRuns is the size of a thread's first call, which measures both costs.
const probeRuns = 1 << 16

func (e *estimator) observe(k uint64, took, perRun time.Duration) {
	if perRun <= 0 {
		perRun = time.Nanosecond
	}
	over := max(took-time.Duration(k)*perRun, 0)
	if !e.known {
		e.overhead, e.perRun, e.known = over, perRun, true
		return
	}
	// The cost per run depends on the mix of frames sent and runs dropped by pacing, so the
	// last call is the best guess for the next; the fixed cost is steadier and smoothed.
	e.overhead = (3*e.overhead + over) / 4
	e.perRun = perRun
}

// runs is how many runs fit in target.
func (e *estimator) runs(target time.Duration) uint64 {
	if !e.known {
		return probeRuns
	}
	if target <= e.overhead {
		return probeRuns
	}
	return min(max(uint64((target-e.overhead)/e.perRun), probeRuns), math.MaxUint32)
}

// run is a thread's loop; the calling goroutine is locked to its thread.
func (w *worker) run(ctx context.Context, start time.Time) (r threadResult) {
	defer func() { r.end = time.Now() }()
	if err := netns.Set(w.g.ns); err != nil {
		r.err = fmt.Errorf("enter the network namespace: %w", err)
		return r
	}
	var set unix.CPUSet
	set.Set(w.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		r.err = fmt.Errorf("pin the thread: %w", err)
		return r
	}
	before, err := w.g.slot(w.cpu)
	if err != nil {
		r.err = err
		return r
	}
	var pace pacing
	if w.rate > 0 && !w.bursts {
		pace = pacingFor(w.rate, w.interval)
	}
	est := &w.g.est[w.cpu]
	last := before
	for {
		if err := ctx.Err(); err != nil {
			r.err = err
			break
		}
		el := time.Since(start)
		if w.duration > 0 && el >= w.duration {
			break
		}
		sent := last.Sent - before.Sent
		if w.count > 0 && sent >= w.count {
			break
		}
		target := callTarget
		if w.duration > 0 {
			target = min(target, w.duration-el)
		}
		if w.count > 0 && w.rate > 0 {
			// The time the remaining frames take at the rate, and a window more.
			need := time.Duration(float64(w.count-sent)/w.rate*float64(time.Second)) + time.Duration(pace.periodNs)
			target = min(target, need+est.overhead)
		}
		if r.calls == 0 {
			// The cost per run seen by an earlier run, perhaps at another rate, may be off:
			// a short first call measures it again.
			target = min(target, firstCall)
		}
		k := est.runs(target)
		budget := k
		if w.count > 0 {
			budget = w.count - sent
			if w.rate == 0 {
				k = min(k, budget)
			}
		}
		if w.bursts {
			// What is due since the start, all at once.
			k = min(max(uint64(w.rate*time.Since(start).Seconds()), sent)-sent, math.MaxUint32)
			if w.count > 0 {
				k = min(k, w.count-sent)
			}
			if k == 0 {
				time.Sleep(w.interval)
				continue
			}
			budget, pace = k, pacing{}
		}
		t0 := time.Now()
		perRun, err := w.g.send(w.cpu, k, budget, pace)
		if err != nil {
			r.err = err
			break
		}
		if perRun > 0 { // 0: the call was interrupted and measured nothing
			est.observe(k, time.Since(t0), perRun)
		}

		r.calls++
		if last, err = w.g.slot(w.cpu); err != nil {
			r.err = err
			break
		}
	}
	after, err := w.g.slot(w.cpu)
	if err != nil {
		r.err = errors.Join(r.err, err)
		return r
	}
	r.sent = after.Sent - before.Sent
	r.over = after.Over - before.Over
	r.errors = after.Errors - before.Errors
	r.idle = after.Idle - before.Idle
	r.bytes = w.g.bytesOf(before.Next, r.sent)
	return r
}

// pacing is at most batch frames per periodNs.
type pacing struct {
	periodNs, batch uint64
}

// pacingFor returns the pacing of rate frames/s in batches of about one interval's frames
// (at least one frame); the period is rounded to the nanosecond, so the rate is exact to
// better than 1/period.
func pacingFor(rate float64, interval time.Duration) pacing {
	batch := max(1, uint64(math.Round(rate*interval.Seconds())))
	return pacing{periodNs: max(1, uint64(math.Round(float64(batch)*1e9/rate))), batch: batch}
}

// slot reads the CPU's slot.
func (g *Generator) slot(cpu int) (trafficgenGenSlot, error) {
	var s trafficgenGenSlot
	if err := g.objs.GenSlots.Lookup(uint32(cpu), &s); err != nil {
		return s, fmt.Errorf("read slot: %w", err)
	}
	return s, nil
}

// send runs the program k times on the calling thread, which is pinned to cpu, with a budget
// of frames and pacing. It returns the kernel's time per run.
func (g *Generator) send(cpu int, k, budget uint64, p pacing) (time.Duration, error) {
	s, err := g.slot(cpu)
	if err != nil {
		return 0, err
	}
	s.Budget = budget
	s.PeriodNs, s.Batch = p.periodNs, p.batch
	s.WinStart, s.WinSent = 0, 0
	if err := g.objs.GenSlots.Update(uint32(cpu), &s, ebpf.UpdateExist); err != nil {
		return 0, fmt.Errorf("write slot: %w", err)
	}
	return liveRun(g.objs.XupfBenchGen.FD(), g.input, g.ctx, uint32(k), g.batch)
}

// bytesOf is the length of n frames sent from template next on, cycling.
func (g *Generator) bytesOf(next uint32, n uint64) uint64 {
	var total uint64
	for _, l := range g.lens {
		total += l
	}
	m := uint64(len(g.lens))
	b := n / m * total
	for i := range n % m {
		b += g.lens[(uint64(next)+i)%m]
	}
	return b
}
