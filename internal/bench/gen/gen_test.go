package gen

import (
	"context"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xupf/xupf/internal/bench/pkt"
)

func TestLayout(t *testing.T) {
	if off := unsafe.Offsetof(sinkSinkSample{}.Data); off != sampleHdrLen {
		t.Fatalf("sink_sample data at %d, sampleHdrLen %d", off, sampleHdrLen)
	}
	if n := len(sinkSinkSample{}.Data); n != SampleLen {
		t.Fatalf("sample data %d bytes, SampleLen %d", n, SampleLen)
	}
	if n := len(trafficgenGenTmpl{}.Head); n != HeadMax {
		t.Fatalf("template head %d bytes, HeadMax %d", n, HeadMax)
	}
	if n := unsafe.Sizeof(trafficgenGenSlot{}); n != 128 {
		t.Fatalf("slot %d bytes, want two cache lines", n)
	}
}

func TestPrepare(t *testing.T) {
	e := &vethEnv{genMAC: []byte{2, 0, 0, 0, 0, 1}, sinkMAC: []byte{2, 0, 0, 0, 0, 2}}
	_, ts := uplinkFlows(t, e, 3, 200, 128, 300)
	tm, input, head, err := prepare(ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(input) != 296 || string(input) != string(ts[2].Frame) {
		t.Fatalf("input is %d bytes, want the longest template", len(input))
	}
	// The frames differ up to the flow id in the payload header, and every frame is written
	// up to its sequence number after it.
	fr, _ := pkt.Build(pkt.Flow{SrcMAC: e.genMAC, DstMAC: e.sinkMAC, Src: ts0Src(), Dst: ts0Src(), Tunnel: &pkt.Tunnel{Src: ts0Src().Addr(), Dst: ts0Src().Addr(), PSC: true}}, 200)
	if want := fr.PayloadOffset + 12; head != want {
		t.Fatalf("head %d, want %d (up to the sequence number)", head, want)
	}
	for i, x := range tm {
		if int(x.Len) != len(ts[i].Frame) || int(x.HeadLen) != head || int(x.SeqOff) != ts[i].SeqOffset {
			t.Fatalf("template %d: %+v", i, x)
		}
	}
	// One template: its headers are still written, for a datapath under test that changes
	// them in place; without a sequence number nothing is.
	if _, _, h, err := prepare(ts[:1]); err != nil || h != head {
		t.Fatalf("one template: head %d, %v", h, err)
	}
	if _, _, h, err := prepare([]Template{{Frame: ts[0].Frame}}); err != nil || h != 0 {
		t.Fatalf("one template without sequence number: head %d, %v", h, err)
	}

	for _, c := range []struct {
		name string
		ts   []Template
		want string
	}{
		{"none", nil, "no templates"},
		{"short", []Template{{Frame: make([]byte, 10)}}, "template 0 is 10 bytes"},
		{"long", []Template{{Frame: make([]byte, MaxTemplateLen+1)}}, "3001 bytes"},
		{"seq", []Template{{Frame: make([]byte, 60), SeqOffset: 58}}, "sequence offset 58"},
		{"deep", []Template{{Frame: make([]byte, 400)}, {Frame: append(make([]byte, 399), 1)}}, "differ up to byte 400"},
	} {
		if _, _, _, err := prepare(c.ts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func ts0Src() netip.AddrPort { return netip.MustParseAddrPort("1.1.1.1:1") }

// TestSendExact: the generator sends exactly the frames asked for, cycling through the
// templates, and the sink counts them all; sampled frames decode to the right flows with
// increasing sequence numbers.
func TestSendExact(t *testing.T) {
	e := newVethEnv(t)
	flows, ts := uplinkFlows(t, e, 5, 200, 128, 300)
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns, SampleEvery: 97})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	g, err := New(Options{Templates: ts, Ifindex: e.gen, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	const n = 100_003
	st, err := g.Run(context.Background(), RunOptions{Count: n, CPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	var wantBytes uint64
	for i := range n {
		wantBytes += uint64(len(ts[i%len(ts)].Frame))
	}
	if st.Sent != n || st.Over != 0 || st.Errors != 0 || st.Bytes != wantBytes || st.PerCPU[0] != n {
		t.Fatalf("generator stats %+v, want %d frames, %d bytes", st, n, wantBytes)
	}
	c := waitSink(t, sink, n)
	if c.Packets != n || c.Bytes != wantBytes || c.NonIPv4 != 0 {
		t.Fatalf("sink %+v, want %d frames, %d bytes", c, n, wantBytes)
	}
	samples, err := sink.Samples()
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64((n + 96) / 97); c.Samples+c.SampleDrops != want || uint64(len(samples)) != c.Samples {
		t.Fatalf("%d samples read, counters %+v, want %d in all", len(samples), c, want)
	}
	var lastSeq uint32
	for i, s := range samples {
		d, err := pkt.Decode(s.Data)
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if int(d.FlowID) >= len(flows) {
			t.Fatalf("sample %d: flow %d", i, d.FlowID)
		}
		if err := pkt.Check(flows[d.FlowID], d); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if s.Len != len(ts[d.FlowID].Frame) || d.Len != s.Len {
			t.Fatalf("sample %d: %d bytes, flow %d's frames have %d", i, s.Len, d.FlowID, len(ts[d.FlowID].Frame))
		}
		// Frame k of this run carries template k%5; sequence numbers count frames.
		if i > 0 && d.Seq <= lastSeq {
			t.Fatalf("sample %d: sequence %d after %d", i, d.Seq, lastSeq)
		}
		lastSeq = d.Seq
	}

	// A second run continues the sequence and the cycle.
	if err := sink.Reset(); err != nil {
		t.Fatal(err)
	}
	st, err = g.Run(context.Background(), RunOptions{Count: 10})
	if err != nil || st.Sent != 10 {
		t.Fatalf("second run: %+v %v", st, err)
	}
	if c := waitSink(t, sink, 10); c.Packets != 10 {
		t.Fatalf("second run: sink %+v", c)
	}
}

// TestRedirectTwoCPUs: XDP_REDIRECT instead of XDP_TX, one thread per CPU.
func TestRedirectTwoCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	e := newVethEnv(t)
	_, ts := uplinkFlows(t, e, 64)
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	g, err := New(Options{Templates: ts, Ifindex: e.gen, RedirectIfindex: e.gen, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const n = 200_001
	st, err := g.Run(context.Background(), RunOptions{Count: n, CPUs: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != n || st.PerCPU[0] != n/2+1 || st.PerCPU[1] != n/2 {
		t.Fatalf("stats %+v", st)
	}
	if c := waitSink(t, sink, n); c.Packets != n || c.Samples != 0 {
		t.Fatalf("sink %+v", c)
	}
}

// TestPaced: a fixed-rate run never gets ahead of its schedule, and everything sent arrives.
// How close it comes to the rate is a benchmark's business, not a test's.
func TestPaced(t *testing.T) {
	e := newVethEnv(t)
	_, ts := uplinkFlows(t, e, 4)
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	g, err := New(Options{Templates: ts, Ifindex: e.gen, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	const rate, dur = 100_000.0, 200 * time.Millisecond
	st, err := g.Run(context.Background(), RunOptions{Rate: rate, Duration: dur, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent == 0 || float64(st.Sent) > rate*st.Elapsed.Seconds()+rate*0.001+1 {
		t.Fatalf("sent %d in %v at %v/s", st.Sent, st.Elapsed, rate)
	}
	if c := waitSink(t, sink, st.Sent); c.Packets != st.Sent {
		t.Fatalf("sink %+v, generator sent %d", c, st.Sent)
	}

	// A count at a rate stops at the count.
	if err := sink.Reset(); err != nil {
		t.Fatal(err)
	}
	st, err = g.Run(context.Background(), RunOptions{Rate: 1e6, Count: 5000})
	if err != nil || st.Sent != 5000 {
		t.Fatalf("count at a rate: %+v %v", st, err)
	}
	if c := waitSink(t, sink, 5000); c.Packets != 5000 {
		t.Fatalf("count at a rate: sink %+v", c)
	}

	// Max rate for a duration: what was sent arrived.
	if err := sink.Reset(); err != nil {
		t.Fatal(err)
	}
	st, err = g.Run(context.Background(), RunOptions{Duration: 50 * time.Millisecond})
	if err != nil || st.Sent == 0 {
		t.Fatalf("max rate: %+v %v", st, err)
	}
	if c := waitSink(t, sink, st.Sent); c.Packets != st.Sent {
		t.Fatalf("max rate: sink %+v, generator sent %d", c, st.Sent)
	}

	// In bursts: never ahead of the schedule, in several calls, a count stops at the count,
	// and all of it arrives.
	if err := sink.Reset(); err != nil {
		t.Fatal(err)
	}
	st, err = g.Run(context.Background(), RunOptions{Rate: rate, Duration: dur, Bursts: true})
	if err != nil || st.Sent == 0 || st.Calls < 2 || float64(st.Sent) > rate*st.Elapsed.Seconds()+1 || st.Idle != 0 {
		t.Fatalf("bursts: %+v %v, at most %v/s", st, err, rate)
	}
	sent := st.Sent
	st, err = g.Run(context.Background(), RunOptions{Rate: 1e6, Count: 5000, Bursts: true})
	if err != nil || st.Sent != 5000 {
		t.Fatalf("bursts, a count at a rate: %+v %v", st, err)
	}
	if c := waitSink(t, sink, sent+5000); c.Packets != sent+5000 {
		t.Fatalf("bursts: sink %+v, generator sent %d", c, sent+5000)
	}

	// A cancelled context stops a run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Run(ctx, RunOptions{Duration: time.Second}); err == nil {
		t.Fatal("cancelled run: no error")
	}
}

func TestRunOptionErrors(t *testing.T) {
	e := newVethEnv(t)
	_, ts := uplinkFlows(t, e, 1)
	g, err := New(Options{Templates: ts, Ifindex: e.gen, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, c := range []struct {
		opts RunOptions
		want string
	}{
		{RunOptions{}, "set Count, Duration or both"},
		{RunOptions{Count: 1, CPUs: []int{0, 0}}, "listed twice"},
		{RunOptions{Count: 1, CPUs: []int{1 << 20}}, "not a possible CPU"},
		{RunOptions{Count: 1, Rate: -1}, "rate -1"},
	} {
		if _, err := g.Run(context.Background(), c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
	if _, err := New(Options{Templates: ts}); err == nil || !strings.Contains(err.Error(), "Ifindex") {
		t.Errorf("no ifindex: %v", err)
	}
}

// waitSink returns the sink's counters once they reach want, or after a second. Frames
// transmitted into a veth are counted by the peer's NAPI, which normally runs before
// BPF_PROG_RUN returns, but need not.
func waitSink(t testing.TB, s *Sink, want uint64) SinkCounters {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		c, err := s.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if c.Packets >= want || time.Now().After(deadline) {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSinkTakesOnlyMagic: with magic offsets, the sink counts and drops the frames with the
// magic at one of them and passes the others, counted in Passed alone.
func TestSinkTakesOnlyMagic(t *testing.T) {
	e := newVethEnv(t)
	flows, ts := uplinkFlows(t, e, 1)
	plain := flows[0]
	plain.Tunnel = nil
	fr, err := pkt.Build(plain, 128)
	if err != nil {
		t.Fatal(err)
	}
	foreign := append([]byte(nil), ts[0].Frame...)
	off := pkt.EthLen + pkt.EncapOverhead(true) + pkt.IPv4Len + pkt.UDPLen // the tunnelled frame's magic
	copy(foreign[off:], []byte{0, 0, 0, 0})
	ts = append(ts, FromFrame(fr), Template{Frame: foreign})
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns, MagicOffsets: []int{off, fr.PayloadOffset}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	g, err := New(Options{Templates: ts, Ifindex: e.gen, Netns: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const n = 3000
	if st, err := g.Run(context.Background(), RunOptions{Count: n}); err != nil || st.Sent != n {
		t.Fatalf("run: %+v %v", st, err)
	}
	c := waitSink(t, sink, 2*n/3)
	if c.Packets != 2*n/3 || c.Passed != n/3 {
		t.Fatalf("sink %+v, want %d frames taken and %d passed", c, 2*n/3, n/3)
	}
	if _, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns, MagicOffsets: []int{1, 2, 3, 4, 5}}); err == nil {
		t.Fatal("five magic offsets accepted")
	}
}

// TestSinkSequence: with SeqCPU and SeqBits, the sink marks each (CPU, number) it sees: what
// one generator sent is all there, a second generator's numbers (from 0 again) count as
// duplicates, a CPU beyond the check counts as outside it, and Reset forgets them all.
func TestSinkSequence(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	e := newVethEnv(t)
	_, ts := uplinkFlows(t, e, 3)
	off := pkt.EthLen + pkt.EncapOverhead(true) + pkt.IPv4Len + pkt.UDPLen
	sink, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns, MagicOffsets: []int{off}, SeqBits: 12, SeqCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	send := func(cpu int, n uint64) {
		t.Helper()
		g, err := New(Options{Templates: ts, Ifindex: e.gen, Netns: e.ns, SeqCPU: true})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if st, err := g.Run(context.Background(), RunOptions{Count: n, CPUs: []int{cpu}}); err != nil || st.Sent != n {
			t.Fatalf("run on CPU %d: %+v %v", cpu, st, err)
		}
	}
	missing := func(n uint32, want int) {
		t.Helper()
		first, total, err := sink.Missing(0, n, 3)
		if err != nil || total != want || len(first) != min(want, 3) {
			t.Fatalf("missing below %d: %v of %d (%v), want %d", n, first, total, err, want)
		}
	}
	send(0, 1000)
	missing(1000, 0)
	missing(1002, 2) // 1000 and 1001 were never sent
	send(1, 10)      // CPU 1 is outside the check
	send(0, 100)     // 0..99 again
	c := waitSink(t, sink, 1110)
	if c.Packets != 1110 || c.SeqDups != 100 || c.SeqOut != 10 {
		t.Fatalf("sink %+v, want 1110 frames, 100 duplicates, 10 outside the check", c)
	}
	if err := sink.Reset(); err != nil {
		t.Fatal(err)
	}
	missing(1000, 1000)
	if _, _, err := sink.Missing(0, 1<<12+1, 1); err == nil {
		t.Fatal("Missing beyond the check's numbers answered")
	}
	if _, err := AttachSink(SinkOptions{Ifindex: e.sink, Netns: e.ns, SeqBits: 12}); err == nil {
		t.Fatal("a sequence check without magic offsets accepted")
	}
}
