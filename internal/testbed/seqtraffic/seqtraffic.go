// Package seqtraffic sends sequence-numbered traffic through a testbed's UPF in both
// directions with the benchmark's in-kernel generator and checks every frame at the receivers
// with the benchmark's sink.
package seqtraffic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// frameSize is the size (with FCS) of the frames Traffic sends.
const frameSize = 128

// settle is how long a Traffic run waits, after its generators stop, for the frames
// still in the veth rings to reach the sinks.
const settle = 200 * time.Millisecond

// Traffic sends sequence-numbered traffic through sessions in both directions with the
// benchmark's in-kernel generator (internal/bench/gen), and checks it at the receivers with
// the benchmark's sink: uplink G-PDUs from gnb0 (one template per session, to its uplink
// TEID) and downlink packets from dn0 (to each session's UE address), each direction from a
// generator on a CPU of its own, in bursts at the rate, each frame numbered per generator
// CPU. The sinks on dn0 and gnb0 mark each number seen in a bitmap and drop the frame,
// passing every other frame (ARP, PFCP, a test's own packets) to the stack. Loss and
// duplication are exact and no packet reaches user space, so the rate is not bounded by
// sockets sharing the CPUs with xupfd.
//
// On a topology with one queue per CPU and testbed.Options.StackQueue, each generator's
// frames have receive rings of their own; on one without, a socket's packet may leave the
// UPF's ring to a busy CPU's NAPI and the generator overflow it (counted in the gNB's or DN
// host's tx_xdp_xmit_errors, and here as lost).
//
// Create it with New once the UPF forwards (its neighbours resolved: the frames are
// addressed to n3's and n6's MACs directly) and Close it before the topology.
type Traffic struct {
	t      *testbed.Topology
	dirs   [2]*dir // uplink, downlink
	closed bool
}

// dir is one direction: where its frames start and where they are checked.
type dir struct {
	name   string
	opts   gen.Options // Templates, Ifindex, Netns, SeqCPU
	cpu    int
	sink   *gen.Sink
	sinkIf string // testbed.GNBIf or testbed.DNIf, whose XDP_PASS program the sink replaced
	sinkNS string
}

// Stats is what one direction of a Traffic run sent and what arrived.
type Stats struct {
	Sent      uint64
	Arrived   uint64        // frames the sink took
	Lost      int           // numbers sent that never arrived
	Dups      uint64        // frames whose number had arrived before
	Out       uint64        // frames whose number lies outside the check: never sent
	FirstLost []uint32      // the first few lost numbers
	Elapsed   time.Duration // how long the generator sent
}

// Rate is the frames sent per second.
func (s Stats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Sent) / s.Elapsed.Seconds()
}

// Result is a Traffic run, each way.
type Result struct {
	Uplink, Downlink Stats
}

// NewTraffic prepares the frames of sessions (uplink to each one's UplinkTEID with a PDU
// Session Container when its QFI is set, downlink to its UE) and attaches the sinks.
func New(t *testbed.Topology, sessions []session.Session) (_ *Traffic, err error) {
	if len(sessions) == 0 {
		return nil, errors.New("seqtraffic: sequence traffic needs sessions")
	}
	ifs := map[string]*net.Interface{}
	for _, l := range []struct{ ns, name string }{{t.GNBNS, testbed.GNBIf}, {t.UPFNS, testbed.N3If}, {t.UPFNS, testbed.N6If}, {t.DNNS, testbed.DNIf}} {
		if ifs[l.name], err = t.Interface(l.ns, l.name); err != nil {
			return nil, err
		}
	}
	gnbNS, err := t.Handle(t.GNBNS)
	if err != nil {
		return nil, err
	}
	dnNS, err := t.Handle(t.DNNS)
	if err != nil {
		return nil, err
	}
	s := &Traffic{t: t}
	// Each direction from a CPU of its own, so that a CPU busy with xupfd delays one
	// direction only.
	ul := &dir{name: "uplink", opts: gen.Options{Ifindex: ifs[testbed.GNBIf].Index, Netns: gnbNS, SeqCPU: true},
		cpu: 0, sinkIf: testbed.DNIf, sinkNS: t.DNNS}
	dl := &dir{name: "downlink", opts: gen.Options{Ifindex: ifs[testbed.DNIf].Index, Netns: dnNS, SeqCPU: true},
		cpu: 1 % runtime.NumCPU(), sinkIf: testbed.GNBIf, sinkNS: t.GNBNS}
	for i, se := range sessions {
		tun := &pkt.Tunnel{Src: testbed.GNBAddr, Dst: testbed.N3Addr, TEID: se.UplinkTEID, PSC: se.QFI != 0, QFI: se.QFI, PDUType: pkt.PDUTypeUplink}
		up, err := pkt.Build(pkt.Flow{ID: uint32(i), SrcMAC: ifs[testbed.GNBIf].HardwareAddr, DstMAC: ifs[testbed.N3If].HardwareAddr,
			Src: netip.AddrPortFrom(se.UE, testbed.UESrcPort), Dst: netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort), Tunnel: tun}, frameSize)
		if err != nil {
			return nil, fmt.Errorf("seqtraffic: uplink frame of session %d: %w", i, err)
		}
		down, err := pkt.Build(pkt.Flow{ID: uint32(i), SrcMAC: ifs[testbed.DNIf].HardwareAddr, DstMAC: ifs[testbed.N6If].HardwareAddr,
			Src: netip.AddrPortFrom(testbed.DNAddr, testbed.DNSrcPort), Dst: netip.AddrPortFrom(se.UE, testbed.UEPort)}, frameSize)
		if err != nil {
			return nil, fmt.Errorf("seqtraffic: downlink frame of session %d: %w", i, err)
		}
		ul.opts.Templates = append(ul.opts.Templates, gen.FromFrame(up))
		dl.opts.Templates = append(dl.opts.Templates, gen.FromFrame(down))
	}
	s.dirs = [2]*dir{ul, dl}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	// Uplink arrives decapsulated; downlink encapsulated, with or without a PDU Session
	// Container.
	plain := pkt.EthLen + pkt.IPv4Len + pkt.UDPLen
	offsets := map[*dir][]int{ul: {plain}, dl: {plain + pkt.EncapOverhead(false), plain + pkt.EncapOverhead(true)}}
	for _, d := range s.dirs {
		ns, err := t.Handle(d.sinkNS)
		if err != nil {
			return nil, err
		}
		if err := t.DetachPeerXDP(d.sinkIf); err != nil {
			return nil, err
		}
		d.sink, err = gen.AttachSink(gen.SinkOptions{Ifindex: ifs[d.sinkIf].Index, Netns: ns, MagicOffsets: offsets[d],
			SeqBits: gen.SeqCPUShift, SeqCPUs: d.cpu + 1})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run sends rate frames a second each way, round robin over the sessions, from before fn
// runs (lead) until after it returns (lead again), and returns what was sent and what
// arrived. The frames go in bursts of what is due at the rate, one BPF_PROG_RUN call each,
// as often as the calls' fixed cost allows (gen.RunOptions.Bursts).
func (s *Traffic) Run(ctx context.Context, rate float64, lead time.Duration, fn func()) (Result, error) {
	if s.closed {
		return Result{}, errors.New("seqtraffic: sequence traffic closed")
	}
	gens := make([]*gen.Generator, len(s.dirs))
	defer func() {
		for _, g := range gens {
			if g != nil {
				g.Close()
			}
		}
	}()
	for i, d := range s.dirs {
		if err := d.sink.Reset(); err != nil {
			return Result{}, err
		}
		// A new generator numbers from 0, as the check expects.
		g, err := gen.New(d.opts)
		if err != nil {
			return Result{}, fmt.Errorf("seqtraffic: %s generator: %w", d.name, err)
		}
		gens[i] = g
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	stats := make([]gen.Stats, len(s.dirs))
	errs := make([]error, len(s.dirs))
	var wg sync.WaitGroup
	for i, d := range s.dirs {
		wg.Go(func() {
			// In bursts: paced calls would keep both CPUs busy and starve xupfd.
			stats[i], errs[i] = gens[i].Run(runCtx, gen.RunOptions{CPUs: []int{d.cpu}, Duration: time.Hour, Rate: rate, Bursts: true})
		})
	}
	time.Sleep(lead)
	fn()
	time.Sleep(lead)
	stop()
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return Result{}, fmt.Errorf("seqtraffic: %s generator: %w", s.dirs[i].name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	time.Sleep(settle)
	var res Result
	for i, out := range []*Stats{&res.Uplink, &res.Downlink} {
		d, st := s.dirs[i], stats[i]
		c, err := d.sink.Counters()
		if err != nil {
			return res, err
		}
		*out = Stats{Sent: st.Sent, Arrived: c.Packets, Dups: c.SeqDups, Out: c.SeqOut, Elapsed: st.Elapsed}
		if st.Sent > gen.SeqMax {
			return res, fmt.Errorf("seqtraffic: %s: %d frames sent, more than the check's %d", d.name, st.Sent, gen.SeqMax)
		}
		if out.FirstLost, out.Lost, err = d.sink.Missing(d.cpu, uint32(st.Sent), 10); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Close detaches the sinks and puts the veth peers' XDP_PASS programs back.
func (s *Traffic) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, d := range s.dirs {
		if d == nil || d.sink == nil {
			continue
		}
		errs = append(errs, d.sink.Close(), s.t.AttachPeerXDP(d.sinkIf))
	}
	return errors.Join(errs...)
}
