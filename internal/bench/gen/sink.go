package gen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netns"
)

// SampleLen is how many bytes of a frame a sample keeps (SINK_SAMPLE_LEN).
const SampleLen = 128

// MaxMagicOffsets is how many offsets SinkOptions.MagicOffsets may hold (SINK_MAGIC_OFFS).
const MaxMagicOffsets = 4

// sampleHdrLen is the size of struct sink_sample before its data.
const sampleHdrLen = 24

// SinkOptions configures a Sink.
type SinkOptions struct {
	// Ifindex is the interface in Netns the sink attaches to.
	Ifindex int
	// Netns is the interface's network namespace; 0 means the namespace of the thread calling
	// AttachSink.
	Netns netns.NsHandle
	// SampleEvery keeps the head of the first frame and then of one frame in this many, per
	// CPU; 0 keeps none.
	SampleEvery uint64
	// Pass makes the sink pass frames to the stack instead of dropping them.
	Pass bool
	// MagicOffsets, when set (at most MaxMagicOffsets, each above 0), make the sink take
	// only frames with pkt.Magic at one of these offsets, the generator's, and pass every
	// other frame to the stack, counted in Passed only: the traffic of the namespace itself
	// (ARP, a UPF's PFCP answers) must still arrive during a measurement.
	MagicOffsets []int
	// Generic attaches in generic (skb) mode instead of driver mode. A veth only accepts
	// frames redirected or transmitted into its peer by XDP when the receiving end runs a
	// driver-mode program.
	Generic bool
	// SeqBits, with MagicOffsets, checks the sequence numbers of a Generator with SeqCPU:
	// the sink keeps a bit for each of the first 2^SeqBits numbers (1..24) of each of
	// SeqCPUs generator CPUs, counts a number seen twice in SeqDups and one outside in
	// SeqOut, and Missing lists those never seen. 0 checks nothing.
	SeqBits int
	// SeqCPUs is how many generator CPUs (0..SeqCPUs-1) the check has room for; 0 means
	// the possible CPUs.
	SeqCPUs int
}

// Sink counts and samples the frames arriving on an interface. Create it with AttachSink and
// Program is the sink's XDP program: its run time per frame (kernel BPF statistics) is the
// floor every program's figure is read against.
func (s *Sink) Program() *ebpf.Program { return s.objs.XupfBenchSink }

// Close it.
type Sink struct {
	objs    sinkObjects
	link    link.Link
	samples *ringbuf.Reader
	ncpu    int
	seqBits int
	seqCPUs int
}

// SinkCounters are the sink's counters summed over CPUs.
type SinkCounters struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// NonIPv4 counts frames that were not IPv4 (in Packets too): ARP, IPv6 neighbour
	// discovery and such, which a measurement should subtract or prevent.
	NonIPv4 uint64 `json:"non_ipv4"`
	// Passed counts frames without the magic, passed to the stack (with MagicOffsets).
	Passed uint64 `json:"passed"`
	// Samples counts samples written; SampleDrops those lost because the ring was full
	// (read them with Samples during a long run to keep it from filling).
	Samples     uint64 `json:"samples"`
	SampleDrops uint64 `json:"sample_drops"`
	// SeqDups counts frames whose sequence number arrived before; SeqOut frames whose
	// number or CPU lies outside the check (SinkOptions.SeqBits).
	SeqDups uint64 `json:"seq_dups"`
	SeqOut  uint64 `json:"seq_out"`
}

// Sample is the head of one frame that arrived.
type Sample struct {
	// Len is the frame's length (without FCS).
	Len int
	CPU int
	// Time is the kernel's monotonic clock (bpf_ktime_get_ns) when the frame arrived.
	Time time.Duration
	// Data is the frame's first min(Len, SampleLen) bytes.
	Data []byte
}

// AttachSink loads the sink and attaches it to opts.Ifindex.
func AttachSink(opts SinkOptions) (*Sink, error) {
	if opts.Ifindex <= 0 {
		return nil, errors.New("gen: sink: Ifindex is not set")
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("gen: sink: %w", err)
	}
	spec, err := loadSink()
	if err != nil {
		return nil, fmt.Errorf("gen: sink: %w", err)
	}
	if err := spec.Variables[sinkVarSampleEvery].Set(opts.SampleEvery); err != nil {
		return nil, fmt.Errorf("gen: sink: %w", err)
	}
	if err := spec.Variables[sinkVarPass].Set(boolU32(opts.Pass)); err != nil {
		return nil, fmt.Errorf("gen: sink: %w", err)
	}
	if len(opts.MagicOffsets) > MaxMagicOffsets {
		return nil, fmt.Errorf("gen: sink: %d magic offsets, at most %d", len(opts.MagicOffsets), MaxMagicOffsets)
	}
	var offs [MaxMagicOffsets]uint16
	for i, o := range opts.MagicOffsets {
		if o <= 0 || o > MaxTemplateLen-4 {
			return nil, fmt.Errorf("gen: sink: magic offset %d is outside 1..%d", o, MaxTemplateLen-4)
		}
		offs[i] = uint16(o)
	}
	if err := spec.Variables[sinkVarMagicOff].Set(offs); err != nil {
		return nil, fmt.Errorf("gen: sink: %w", err)
	}
	s := &Sink{ncpu: ncpu, seqBits: opts.SeqBits, seqCPUs: opts.SeqCPUs}
	if s.seqCPUs == 0 {
		s.seqCPUs = ncpu
	}
	if err := s.setSeqCheck(spec, len(opts.MagicOffsets) > 0); err != nil {
		return nil, err
	}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("gen: sink: load: %w", err)
	}
	flags := link.XDPDriverMode
	if opts.Generic {
		flags = link.XDPGenericMode
	}
	err = inNetns(opts.Netns, func() error {
		var err error
		s.link, err = link.AttachXDP(link.XDPOptions{Program: s.objs.XupfBenchSink, Interface: opts.Ifindex, Flags: flags})
		return err
	})
	if err != nil {
		s.objs.Close()
		return nil, fmt.Errorf("gen: sink: attach to ifindex %d: %w", opts.Ifindex, err)
	}
	if s.samples, err = ringbuf.NewReader(s.objs.SinkSamples); err != nil {
		s.Close()
		return nil, fmt.Errorf("gen: sink: sample reader: %w", err)
	}
	return s, nil
}

// setSeqCheck sets the sequence check's size in spec.
func (s *Sink) setSeqCheck(spec *ebpf.CollectionSpec, magic bool) error {
	if s.seqBits == 0 {
		return nil
	}
	if !magic {
		return errors.New("gen: sink: SeqBits needs MagicOffsets: the sequence number follows the magic")
	}
	if s.seqBits < 1 || s.seqBits > SeqCPUShift || s.seqCPUs < 1 || s.seqCPUs > 1<<(32-SeqCPUShift) {
		return fmt.Errorf("gen: sink: a check of 2^%d numbers from %d CPUs; use 1..%d bits and 1..%d CPUs",
			s.seqBits, s.seqCPUs, SeqCPUShift, 1<<(32-SeqCPUShift))
	}
	spec.Maps[sinkMapSinkSeen].MaxEntries = uint32(s.words())
	if err := spec.Variables[sinkVarSeqBits].Set(uint32(s.seqBits)); err != nil {
		return fmt.Errorf("gen: sink: %w", err)
	}
	if err := spec.Variables[sinkVarSeqCpus].Set(uint32(s.seqCPUs)); err != nil {
		return fmt.Errorf("gen: sink: %w", err)
	}
	return nil
}

// words is the size of the sequence bitmap in 64-bit words (at least one: an array map
// cannot be empty).
func (s *Sink) words() int { return max(s.seqCPUs<<s.seqBits/64, 1) }

// seen reads the sequence bitmap.
func (s *Sink) seen() ([]uint64, error) {
	out := make([]uint64, s.words())
	keys := make([]uint32, 4096)
	vals := make([]uint64, len(keys))
	var cursor ebpf.MapBatchCursor
	for {
		n, err := s.objs.SinkSeen.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			out[keys[i]] = vals[i]
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("gen: sink: read the sequence numbers seen: %w", err)
		}
	}
}

// boolU32 is a load-time flag's value.
func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// inNetns runs fn on a thread in ns (the calling thread's namespace when ns is unset).
func inNetns(ns netns.NsHandle, fn func() error) error {
	if ns <= 0 {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread leaves its namespace, so the runtime must end it.
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter the network namespace: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Counters returns the counters summed over CPUs.
func (s *Sink) Counters() (SinkCounters, error) {
	per := make([]sinkSinkCounters, s.ncpu)
	if err := s.objs.SinkStats.Lookup(uint32(0), &per); err != nil {
		return SinkCounters{}, fmt.Errorf("gen: sink: read counters: %w", err)
	}
	var c SinkCounters
	for _, p := range per {
		c.Packets += p.Packets
		c.Bytes += p.Bytes
		c.NonIPv4 += p.NonIpv4
		c.Passed += p.Passed
		c.Samples += p.Samples
		c.SampleDrops += p.SampleDrops
		c.SeqDups += p.SeqDups
		c.SeqOut += p.SeqOut
	}
	return c, nil
}

// Reset zeroes the counters (and restarts the sampling countdown) and forgets the sequence
// numbers seen. Frames arriving meanwhile may be lost from the counts: reset between runs.
func (s *Sink) Reset() error {
	zero := make([]sinkSinkCounters, s.ncpu)
	if err := s.objs.SinkStats.Update(uint32(0), zero, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("gen: sink: reset counters: %w", err)
	}
	if s.seqBits == 0 {
		return nil
	}
	keys := make([]uint32, s.words())
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := s.objs.SinkSeen.BatchUpdate(keys, make([]uint64, len(keys)), nil); err != nil {
		return fmt.Errorf("gen: sink: forget the sequence numbers seen: %w", err)
	}
	return nil
}

// Missing returns the sequence numbers below n that never arrived from generator CPU cpu (a
// Generator with SeqCPU numbers each CPU's frames from 0), at most limit of them, and how
// many there are in all.
func (s *Sink) Missing(cpu int, n uint32, limit int) ([]uint32, int, error) {
	if s.seqBits == 0 || cpu < 0 || cpu >= s.seqCPUs || uint64(n) > 1<<s.seqBits {
		return nil, 0, fmt.Errorf("gen: sink: the check has no room for %d numbers of CPU %d: set SeqBits and SeqCPUs larger", n, cpu)
	}
	seen, err := s.seen()
	if err != nil {
		return nil, 0, err
	}
	words := seen[cpu<<s.seqBits/64:]
	var out []uint32
	total := 0
	for i := range n {
		if words[i/64]&(1<<(i%64)) == 0 {
			if len(out) < limit {
				out = append(out, i)
			}
			total++
		}
	}
	return out, total, nil
}

// Samples returns the samples in the ring now, oldest first, and empties it.
func (s *Sink) Samples() ([]Sample, error) {
	s.samples.SetDeadline(time.Now())
	var out []Sample
	var rec ringbuf.Record
	for {
		err := s.samples.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("gen: sink: read samples: %w", err)
		}
		// struct sink_sample: len, cap, cpu, pad (u32 each), ts (u64), data.
		b := rec.RawSample
		if len(b) < sampleHdrLen+SampleLen {
			return out, fmt.Errorf("gen: sink: short sample of %d bytes", len(b))
		}
		e := binary.NativeEndian
		n := min(int(e.Uint32(b[4:])), SampleLen)
		out = append(out, Sample{
			Len:  int(e.Uint32(b[0:])),
			CPU:  int(e.Uint32(b[8:])),
			Time: time.Duration(e.Uint64(b[16:])),
			Data: append([]byte(nil), b[sampleHdrLen:sampleHdrLen+n]...),
		})
	}
}

// Close detaches and unloads the sink.
func (s *Sink) Close() error {
	var errs []error
	if s.samples != nil {
		errs = append(errs, s.samples.Close())
	}
	if s.link != nil {
		errs = append(errs, s.link.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}
