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
	pass := uint32(0)
	if opts.Pass {
		pass = 1
	}
	if err := spec.Variables[sinkVarPass].Set(pass); err != nil {
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
	s := &Sink{ncpu: ncpu}
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
	}
	return c, nil
}

// Reset zeroes the counters (and restarts the sampling countdown). Frames arriving meanwhile
// may be lost from the counts: reset between runs.
func (s *Sink) Reset() error {
	zero := make([]sinkSinkCounters, s.ncpu)
	if err := s.objs.SinkStats.Update(uint32(0), zero, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("gen: sink: reset counters: %w", err)
	}
	return nil
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
