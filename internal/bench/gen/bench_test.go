package gen

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/bench/pkt"
)

// plainFlows returns n IPv4/UDP frames of frameSize bytes (with FCS), one per destination.
func plainFlows(b testing.TB, e *vethEnv, n, frameSize int) []Template {
	var ts []Template
	for i := range n {
		fr, err := pkt.Build(pkt.Flow{
			ID: uint32(i), SrcMAC: e.genMAC, DstMAC: e.sinkMAC,
			Src: netip.MustParseAddrPort("10.100.6.2:5002"),
			Dst: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 45, byte(i >> 8), byte(i)}), 6000),
		}, frameSize)
		if err != nil {
			b.Fatal(err)
		}
		ts = append(ts, FromFrame(fr))
	}
	return ts
}

// BenchmarkGenerator measures the generator's maximum rate into a dropping sink on a veth
// pair in a namespace of its own: b.N frames per sub-benchmark, reported as Mpps (frames
// sent over the wall time of the run, the fixed cost of each BPF_PROG_RUN call included) and
// ns/frame. Run with a large -benchtime, e.g. `-benchtime 50000000x`: each call costs tens of
// milliseconds of setup and teardown, which short runs do not amortise.
func BenchmarkGenerator(b *testing.B) {
	e := newVethEnv(b)
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns, SampleEvery: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	type variant struct {
		name string
		ts   []Template
		cpus []int
	}
	var variants []variant
	variants = append(variants,
		variant{"plain64/flows=1/cpus=1", plainFlows(b, e, 1, 64), []int{0}},
		variant{"plain64/flows=1024/cpus=1", plainFlows(b, e, 1024, 64), []int{0}},
	)
	_, ul := uplinkFlows(b, e, 1024, 128)
	variants = append(variants, variant{"gtpu128/flows=1024/cpus=1", ul, []int{0}})
	_, ul1500 := uplinkFlows(b, e, 1024, 1518)
	variants = append(variants, variant{"gtpu1518/flows=1024/cpus=1", ul1500, []int{0}})
	if runtime.NumCPU() >= 2 {
		variants = append(variants, variant{"plain64/flows=1024/cpus=2", plainFlows(b, e, 1024, 64), []int{0, 1}})
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			g, err := New(Options{Templates: v.ts, Ifindex: e.gen, Netns: e.ns})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			if err := sink.Reset(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			st, err := g.Run(context.Background(), RunOptions{Count: uint64(b.N), CPUs: v.cpus})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			c := waitSink(b, sink, st.Sent)
			if c.Packets != st.Sent {
				b.Errorf("sink counted %d of %d frames", c.Packets, st.Sent)
			}
			b.ReportMetric(st.Rate()/1e6, "Mpps")
			b.ReportMetric(float64(st.Calls), "calls")
		})
	}
}

// BenchmarkGeneratorPaced reports how close a fixed-rate run comes to its rate over one
// second (achieved/target), at a few rates. b.N is ignored: each iteration is a one-second
// run.
func BenchmarkGeneratorPaced(b *testing.B) {
	e := newVethEnv(b)
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	g, err := New(Options{Templates: plainFlows(b, e, 64, 64), Ifindex: e.gen, Netns: e.ns})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	for _, rate := range []float64{1e5, 1e6, 5e6} {
		b.Run(fmt.Sprintf("rate=%gMpps", rate/1e6), func(b *testing.B) {
			var ratio float64
			for range b.N {
				st, err := g.Run(context.Background(), RunOptions{Rate: rate, Duration: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				ratio = st.Rate() / rate
			}
			b.ReportMetric(ratio, "achieved/target")
		})
	}
}

// BenchmarkLiveFramesBaseline is the ceiling the generator is measured against: a program
// that only returns XDP_TX, run the same way (one pinned thread, live frames, b.N runs in
// calls of at most 2^24) into the same dropping sink. Reported as Mpps like
// BenchmarkGenerator.
func BenchmarkLiveFramesBaseline(b *testing.B) {
	e := newVethEnv(b)
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xupf_bench_tx", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 3), asm.Return()}, // XDP_TX
	})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	frame := plainFlows(b, e, 1, 64)[0].Frame
	errc := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() {
		runtime.LockOSThread() // never unlocked: the thread enters the namespace
		if err := netns.Set(e.ns); err != nil {
			errc <- err
			return
		}
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		for left := uint64(b.N); left > 0; {
			k := min(left, 1<<24)
			_, err := prog.Run(&ebpf.RunOptions{
				Data: frame, Repeat: uint32(k), Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
				Context: xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(e.gen)},
			})
			if err != nil {
				errc <- err
				return
			}
			left -= k
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	if c := waitSink(b, sink, uint64(b.N)); c.Packets < uint64(b.N) {
		b.Errorf("sink counted %d of %d frames", c.Packets, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mpps")
}
