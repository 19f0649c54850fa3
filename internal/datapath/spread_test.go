package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/session"
)

// requireCPUs skips a test that needs CPUs 0 and 1 online.
func requireCPUs(t *testing.T) {
	t.Helper()
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(online, 0) || !slices.Contains(online, 1) {
		t.Skipf("needs CPUs 0 and 1 online (online: %v): packets are spread from one to the other", online)
	}
}

// The spreading stage on every packet of the datapath tables, run on CPU 0. With CPU 0 the
// only one to spread to, every packet is processed in place exactly as without spreading.
// With CPU 1 the only one, a G-PDU that would be forwarded leaves unchanged through the CPU
// map (XDP_REDIRECT, counted as ul_spread and nothing else: ul_rx is counted where it is
// processed); a packet that is no G-PDU is processed in place; a malformed G-PDU is one or
// the other, never both or neither.
func TestSpreadDecisionPackets(t *testing.T) {
	requireCPUs(t)
	for _, mode := range []SpreadMode{SpreadTEID, SpreadFlow} {
		for _, cpu := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s to CPU %d", mode, cpu), func(t *testing.T) {
				e := newSessionsEnvOpts(t, Options{MaxSessions: 1024, Spread: mode, SpreadCPUs: []int{cpu}})
				for _, c := range packetCases(t) {
					t.Run(c.name, func(t *testing.T) { spreadCase(t, e, c, cpu != 0) })
				}
			})
		}
	}
}

func spreadCase(t *testing.T, e *testEnv, c pktCase, away bool) {
	before, err := e.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	ret, out := e.runOn(t, 0, c.in, c.ifindex(e))
	after, err := e.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	forwarded := c.counters["ul_rx"] == 1 && c.counters["ul_tx"] == 1
	spread := ret == xdpRedirect && after.Counters["ul_spread"] == before.Counters["ul_spread"]+1
	switch {
	case spread && !away:
		t.Fatalf("spread away from CPU 0, the only CPU to spread to")
	case spread && c.counters["ul_rx"] == 0:
		t.Fatalf("spread, but it is no G-PDU (counters %v)", c.counters)
	case spread:
		if !bytes.Equal(out[:len(c.in)], c.in) {
			t.Errorf("spread packet changed\n--- got\n%s\n--- want\n%s", dump(out[:len(c.in)]), dump(c.in))
		}
		checkDeltas(t, "counter", before.Counters, after.Counters, map[string]uint64{"ul_spread": 1})
		checkDeltas(t, "drop", before.Drops, after.Drops, nil)
	case away && forwarded:
		t.Fatalf("a G-PDU to forward was not spread to CPU 1: verdict %s", verdictNames[ret])
	default: // processed in place: exactly as without spreading
		if ret != c.verdict {
			t.Errorf("verdict %s, want %s", verdictNames[ret], verdictNames[c.verdict])
		}
		want := c.out
		if want == nil {
			want = c.in
		}
		if c.fixSport {
			want = bytes.Clone(want)
			copy(want[34:36], out[34:36])
		}
		if !bytes.Equal(out, want) {
			t.Errorf("output packet differs\n--- got\n%s\n--- want\n%s", dump(out), dump(want))
		}
		checkDeltas(t, "counter", before.Counters, after.Counters, c.counters)
		checkDeltas(t, "drop", before.Drops, after.Drops, c.drops)
	}
}

// With CPUs 0 and 1, a G-PDU run on CPU 0 stays (and is dropped: its TEID is unknown) or
// goes to CPU 1, by its TEID alone (mode teid) or by its inner flow alone (mode flow): over
// 64 TEIDs, or 64 flows of one TEID, both happen, and a repeated packet always goes the
// same way.
func TestSpreadDecisionByKey(t *testing.T) {
	requireCPUs(t)
	inner := func(sport uint16) []byte { return innerUDP(t, ueAddr, addrDN, sport, 2000, 64, payload) }
	for _, c := range []struct {
		mode SpreadMode
		pkt  func(i int) []byte
	}{
		{SpreadTEID, func(i int) []byte { return outerGTP(t, gtpHdr(0x30, 255, 0x10000+uint32(i), nil, inner(1000)), nil) }},
		{SpreadFlow, func(i int) []byte { return outerGTP(t, gtpHdr(0x30, 255, 0x10000, nil, inner(1000+uint16(i))), nil) }},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			e := newTestEnvOpts(t, Options{MaxSessions: 4, Spread: c.mode, SpreadCPUs: []int{0, 1}})
			counts := map[uint32]int{}
			for i := range 64 {
				first, _ := e.runOn(t, 0, c.pkt(i), e.n3)
				for range 3 {
					if again, _ := e.runOn(t, 0, c.pkt(i), e.n3); again != first {
						t.Fatalf("packet %d: verdict %s, then %s", i, verdictNames[first], verdictNames[again])
					}
				}
				counts[first]++
			}
			st, err := e.dp.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if counts[xdpRedirect] == 0 || counts[xdpDrop] == 0 || len(counts) != 2 {
				t.Fatalf("verdicts %v: want both spread (REDIRECT) and kept (DROP)", counts)
			}
			if st.Counters["ul_spread"] != 4*uint64(counts[xdpRedirect]) || st.Drops["unknown_teid"] != 4*uint64(counts[xdpDrop]) {
				t.Errorf("ul_spread %d, unknown_teid %d; want %d and %d", st.Counters["ul_spread"],
					st.Drops["unknown_teid"], 4*counts[xdpRedirect], 4*counts[xdpDrop])
			}
		})
	}
}

// TestSpreadInTraffic sends G-PDUs of one gNB, all from CPU 0 (one outer 5-tuple on one
// queue), into n3 of a datapath spreading over CPUs 0 and 1, and reads what comes out of n6.
// Every packet arrives, each flow's in the order sent (sequence numbers in the payload); each
// is counted once as received and once as forwarded, and the per-CPU counters show both CPUs
// processed packets, CPU 1 exactly those CPU 0 spread.
func TestSpreadInTraffic(t *testing.T) {
	requireCPUs(t)
	const flows, perFlow = 16, 1000
	sessions := make([]session.Session, 8)
	for i := range sessions {
		ue := netip.AddrFrom4([4]byte{10, 46, 0, byte(i + 1)})
		sessions[i] = session.Session{ID: uint64(100 + i), UE: ue, UplinkTEID: uint32(0x1000 + i), GNB: addrGNB,
			DownlinkTEID: uint32(0x2000 + i), GTPUAddr: addrN3}
	}
	for _, mode := range []SpreadMode{SpreadTEID, SpreadFlow} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newTestEnvOpts(t, Options{MaxSessions: 16, Spread: mode, SpreadCPUs: []int{0, 1}})
			for _, s := range sessions {
				if err := e.addSession(s); err != nil {
					t.Fatal(err)
				}
			}
			// Flow f: session f % 8, UE port 40000 + f; payload: flow, sequence number.
			frame := func(f, seq int) []byte {
				s := sessions[f%len(sessions)]
				pl := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(
					binary.BigEndian.AppendUint32(nil, pkt.Magic), uint32(f)), uint32(seq))
				in := innerUDP(t, s.UE, addrDN, uint16(40000+f), 5001, 64, string(pl)+payload)
				return outerGTP(t, gtpHdr(0x30, 255, s.UplinkTEID, nil, in), nil)
			}
			sendAndCheckOrder(t, e, flows, perFlow, frame)

			st, err := e.dp.Stats()
			if err != nil {
				t.Fatal(err)
			}
			const sent = flows * perFlow
			if st.Counters["ul_rx"] != sent || st.Counters["ul_tx"] != sent {
				t.Errorf("ul_rx %d, ul_tx %d; want %d each", st.Counters["ul_rx"], st.Counters["ul_tx"], sent)
			}
			for name, n := range st.Drops {
				if n != 0 {
					t.Errorf("drop %s: %d", name, n)
				}
			}
			rx, spread := e.perCPU(t, "ul_rx"), e.perCPU(t, "ul_spread")
			t.Logf("ul_rx per CPU %v, ul_spread per CPU %v", rx[:2], spread[:2])
			if rx[0] == 0 || rx[1] == 0 {
				t.Errorf("ul_rx per CPU %v: both CPUs should have processed packets", rx)
			}
			if spread[0] != rx[1] || spread[1] != 0 {
				t.Errorf("ul_spread per CPU %v, ul_rx per CPU %v: CPU 0 should spread what CPU 1 receives", spread, rx)
			}
		})
	}
}

// perCPU reads counter name on each CPU.
func (e *testEnv) perCPU(t *testing.T, name string) []uint64 {
	t.Helper()
	i := slices.Index(e.dp.names.stats, name)
	perCPU, err := e.dp.statsPerCPU()
	if err != nil {
		t.Fatalf("read %s per CPU: %v", name, err)
	}
	v := make([]uint64, len(perCPU))
	for cpu, st := range perCPU {
		v[cpu] = st.N[i]
	}
	return v
}

// sendAndCheckOrder sends perFlow frames of each of flows flows, interleaved, into n3 from a
// thread bound to CPU 0, and checks with the benchmark's sink on n6p (which samples every
// frame in XDP, before anything else may touch it) that each flow's frames all come out of
// n6, in the order sent. frame builds a frame whose inner UDP payload starts with pkt.Magic,
// the flow and the sequence number (4 bytes each).
func sendAndCheckOrder(t *testing.T, e *testEnv, flows, perFlow int, frame func(f, seq int) []byte) {
	t.Helper()
	const off = 14 + 20 + 8 // the decapsulated frame's UDP payload
	sink, err := gen.AttachSink(gen.SinkOptions{Ifindex: e.ifindex(t, "n6p"), Netns: e.ns, SampleEvery: 1,
		MagicOffsets: []int{off}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var tx int
	if err := e.do(func() (err error) { tx, err = packetSocket("n3p"); return err }); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)

	total := flows * perFlow
	next := make([]int, flows) // the sequence number expected next, per flow
	var problems []string
	got := 0
	check := func() {
		samples, err := sink.Samples()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			f, seq := int(binary.BigEndian.Uint32(s.Data[off+4:])), int(binary.BigEndian.Uint32(s.Data[off+8:]))
			switch {
			case f >= flows:
				problems = append(problems, fmt.Sprintf("frame of unknown flow %d", f))
			case seq != next[f]:
				problems = append(problems, fmt.Sprintf("flow %d: sequence number %d, want %d", f, seq, next[f]))
			}
			if f < flows {
				next[f] = seq + 1
			}
			got++
		}
	}

	frames := make([][]byte, 0, total)
	for seq := range perFlow {
		for f := range flows {
			frames = append(frames, frame(f, seq))
		}
	}
	err = e.do(func() error {
		return onCPU(0, func() error {
			for i, fr := range frames {
				if err := unix.Send(tx, fr, 0); err != nil {
					return err
				}
				if i%256 == 255 {
					// At most 512 frames in flight: the CPU map's queue (2048) and the
					// sink's ring (about 1,600 samples) never fill, however late a loaded
					// machine lets the kthread run.
					for deadline := time.Now().Add(5 * time.Second); got < i-512 && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
						check()
					}
					check()
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); got < total && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		check()
	}
	c, err := sink.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.SampleDrops != 0 {
		t.Fatalf("the sink lost %d samples: the check is incomplete", c.SampleDrops)
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
	}
	for _, p := range problems {
		t.Error(p)
	}
	if got != total {
		t.Errorf("%d of %d frames came out of n6; next sequence numbers per flow %v", got, total, next)
	}
}

// ifindex is the index of the interface name in the environment's namespace.
func (e *testEnv) ifindex(t *testing.T, name string) int {
	t.Helper()
	var i int
	err := e.do(func() error {
		ifc, err := net.InterfaceByName(name)
		if err == nil {
			i = ifc.Index
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// TestSpreadQueueFullCounted gives each CPU a queue of 4 packets and sends G-PDUs into n3 from
// CPU 0 as fast as it can: CPU 1's kthread cannot keep up, and the kernel drops what does not
// fit, after the program returned. The xdp_cpumap_enqueue tracepoint counts those as
// spread_queue_full, so every packet is still counted once: what CPU 0 spread is what CPU 1
// received plus what its queue dropped.
func TestSpreadQueueFullCounted(t *testing.T) {
	requireCPUs(t)
	e := newTestEnvOpts(t, Options{MaxSessions: 4, Spread: SpreadFlow, SpreadCPUs: []int{0, 1}, SpreadQueue: 4})
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for f := range 64 {
		frames = append(frames, outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil,
			innerUDP(t, ueAddr, addrDN, uint16(40000+f), 5001, 64, payload)), nil))
	}
	const sent = 20000
	err := e.do(func() error {
		tx, err := packetSocket("n3p")
		if err != nil {
			return err
		}
		defer unix.Close(tx)
		return onCPU(0, func() error {
			for i := range sent {
				if err := unix.Send(tx, frames[i%len(frames)], 0); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var rx, spread []uint64
	var full uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := e.dp.Stats()
		if err != nil {
			t.Fatal(err)
		}
		rx, spread, full = e.perCPU(t, "ul_rx"), e.perCPU(t, "ul_spread"), st.Drops["spread_queue_full"]
		if rx[0]+rx[1]+full == sent {
			break
		}
	}
	t.Logf("ul_rx per CPU %v, ul_spread per CPU %v, spread_queue_full %d", rx[:2], spread[:2], full)
	if full == 0 {
		t.Errorf("no spread_queue_full: the 4-packet queue never overflowed, so the count is untested")
	}
	if spread[0] != rx[1]+full || rx[0]+rx[1]+full != sent {
		t.Errorf("CPU 0 spread %d: CPU 1 received %d and its queue dropped %d; of %d sent, %d counted",
			spread[0], rx[1], full, sent, rx[0]+rx[1]+full)
	}
}

// A program swap (here for an SDF field) gives every spreading CPU's entry the CPU map program
// with the new settings: the packets processed there are specialised like the others.
func TestSpreadSwapUpdatesCPUMap(t *testing.T) {
	requireCPUs(t)
	e := newTestEnvOpts(t, Options{MaxSessions: 4, Spread: SpreadTEID, SpreadCPUs: []int{0, 1}})
	entryProg := func(cpu uint32) uint32 {
		var v cpumapVal
		if err := e.dp.objs.XupfCpus.Lookup(cpu, &v); err != nil {
			t.Fatalf("CPU %d's entry: %v", cpu, err)
		}
		return uint32(v.ProgFD) // an id when read
	}
	progID := func() uint32 {
		info, err := e.dp.cpuProg.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		return uint32(id)
	}
	before := progID()
	e.dp.mu.Lock()
	err := e.dp.ensureSDFFields(1 << xupfSdfFieldSDF_PROTO)
	e.dp.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	after := progID()
	if after == before {
		t.Fatalf("the CPU map program was not replaced (id %d)", after)
	}
	for cpu := range uint32(2) {
		if got := entryProg(cpu); got != after {
			t.Errorf("CPU %d runs program %d, want the new %d (the old was %d)", cpu, got, after, before)
		}
	}
}

// Closing a spreading datapath frees the CPU map and so stops its kthreads: the program in
// its entries does not hold it (a reference cycle would keep both for ever).
func TestSpreadCloseFreesCPUMap(t *testing.T) {
	requireCPUs(t)
	e := newTestEnv(t, 4)
	dp := e.load(t, Options{PinPath: fmt.Sprintf("/sys/fs/bpf/xupf-test-%d-spread-close", os.Getpid()), MaxSessions: 4,
		GTPUAddrs: []netip.Addr{addrN3}, N3Interfaces: []string{"n3"}, Spread: SpreadFlow, SpreadCPUs: []int{0, 1}})
	info, err := dp.objs.XupfCpus.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	if err := dp.Close(true); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m, err := ebpf.NewMapFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err == nil {
			m.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CPU map (id %d) is still there 5 s after Close: %v", id, err)
		}
	}
}
