package datapath

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/testbed"
)

// bufferOwner is the owner of the rule sets the buffering tests install (a PFCP SEID).
const bufferOwner = 1<<32 + 7

// bufferSet is a downlink rule set for ueBuffer with one PDR whose FAR is far.
func bufferSet(far rules.FAR) []rules.RuleSet {
	return []rules.RuleSet{{UE: ueBuffer, PDRs: []rules.PDR{{ID: 3, Precedence: 1, FAR: far}}}}
}

// seqIn is downlink packet number i toward ueBuffer, as it arrives on n6.
func seqIn(t testing.TB, i int) []byte {
	return concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, ueBuffer, 5000, 6000, 64, fmt.Sprintf("packet %04d", i)))
}

// readBuffered collects what the datapath hands over, until the test ends.
func readBuffered(t *testing.T, e *testEnv) chan buffer.Packet {
	ch := make(chan buffer.Packet, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.dp.ReadBuffered(ctx, func(p buffer.Packet) { ch <- p }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ch
}

func nextBuffered(t *testing.T, ch chan buffer.Packet) buffer.Packet {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(2 * time.Second):
		t.Fatal("nothing handed over")
		return buffer.Packet{}
	}
}

// farAction is the datapath's action for the FAR of PDR 3 of bufferSet, where the packets
// read it: the set's one PDR has no filter, so its FAR is in the key's rule_ref.
func (e *testEnv) farAction(t *testing.T) xupfFarAction {
	t.Helper()
	e.dp.mu.Lock()
	defer e.dp.mu.Unlock()
	set := e.dp.owners[bufferOwner][0]
	if set.tables != nil { // classified: PDR 3's FAR is in its slot
		var far xupfFar
		i := slices.IndexFunc(set.rs.PDRs, func(p rules.PDR) bool { return p.ID == 3 })
		if err := e.dp.objs.XupfFars.Lookup(set.slots[i], &far); err != nil {
			t.Fatal(err)
		}
		return xupfFarAction(far.Action)
	}
	var ref xupfRuleRef
	if err := e.dp.objs.XupfRefs.Lookup(set.ref, &ref); err != nil {
		t.Fatal(err)
	}
	return xupfFarAction(ref.Far.Action)
}

// TestBufferThenForward: a BUFF FAR hands each frame over whole, in order; after the FAR
// forwards, a packet that arrives while frames are held is handed over behind them
// (FAR_DRAIN); the frames run through again leave through the new tunnel in order, with the
// new FAR's usage; once nothing is held the FAR forwards directly again, and so does the
// downlink direct cache's copy of the rules, which drained too.
func TestBufferThenForward(t *testing.T) {
	e := newTestEnv(t, 64)
	var rx int
	err := e.do(func() error {
		l, err := testbed.AttachXDPPass("n3p") // a veth peer needs one to take redirected frames
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		rx, err = packetSocket("n3p")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rx)
	got := readBuffered(t, e)
	if err := e.dp.Install(bufferOwner, bufferSet(rules.FAR{Action: rules.Buffer})); err != nil {
		t.Fatal(err)
	}
	before, _ := e.dp.Stats()
	var held []buffer.Packet
	for i := range 3 {
		if v, _ := e.run(t, seqIn(t, i), e.n6); v != xdpDrop {
			t.Fatalf("packet %d: verdict %s, want DROP (handed over)", i, verdictNames[v])
		}
		p := nextBuffered(t, got)
		if !bytes.Equal(p.Frame, seqIn(t, i)) || p.Owner != bufferOwner || p.Uplink || p.PDR != 3 || p.Ifindex != uint32(e.n6) {
			t.Fatalf("handed over %+v\n%s\nwant packet %d of owner 0x%x PDR 3 from ifindex %d", p, dump(p.Frame), i, uint64(bufferOwner), e.n6)
		}
		held = append(held, p)
	}

	ohc := rules.OuterHeader{TEID: 0x777, Peer: addrGNB, Local: addrN3}
	if err := e.dp.Install(bufferOwner, bufferSet(rules.FAR{Action: rules.Forward, OHC: &ohc})); err != nil {
		t.Fatal(err)
	}
	if a := e.farAction(t); a != xupfFarActionFAR_DRAIN {
		t.Fatalf("FAR action %v after BUFF -> FORW with packets held, want FAR_DRAIN", a)
	}
	ueKey := binary.BigEndian.Uint32(ueBuffer.AsSlice())
	cached := func(a xupfFarAction) bool {
		return runtime.GOARCH != "amd64" || e.cachedSuch(directWays[1], ueKey,
			func(r *xupfRuleRef) bool { return r.Far.Action == uint32(a) })
	}
	if !cached(xupfFarActionFAR_DRAIN) {
		t.Fatal("the direct cache does not hold the draining FAR")
	}
	if v, _ := e.run(t, seqIn(t, 3), e.n6); v != xdpDrop {
		t.Fatalf("a packet arriving while three are held: verdict %s, want DROP (handed over behind them)", verdictNames[v])
	}
	held = append(held, nextBuffered(t, got))
	for _, p := range held {
		if err := e.do(func() error { return e.dp.Replay(p) }); err != nil {
			t.Fatal(err)
		}
		if err := e.dp.Release(p.Counter, 1); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 2048)
	for i := range held {
		n, _, err := unix.Recvfrom(rx, buf, 0)
		if err != nil {
			t.Fatalf("packet %d did not leave on n3: %v", i, err)
		}
		inner := innerUDP(t, addrDN, ueBuffer, 5000, 6000, 63, fmt.Sprintf("packet %04d", i))
		want := tunnelled(t, macGNB, ohc, 0, 0x28, inner)
		if n >= 36 {
			copy(want[34:36], buf[34:36]) // the source port is a hash
		}
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("frame %d out of n3 differs\n--- got\n%s\n--- want\n%s", i, dump(buf[:n]), dump(want))
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for e.farAction(t) != xupfFarActionFAR_FORWARD {
		if time.Now().After(deadline) {
			t.Fatal("the FAR still drains with nothing held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v, _ := e.run(t, seqIn(t, 4), e.n6); v != xdpRedirect {
		t.Fatalf("after the drain: verdict %s, want REDIRECT", verdictNames[v])
	}
	// The copy in the direct cache forwards too once written again, not drains still.
	if !cached(xupfFarActionFAR_FORWARD) {
		t.Fatal("the direct cache does not hold the forwarding FAR after the drain")
	}
	if v, _ := e.run(t, seqIn(t, 5), e.n6); v != xdpRedirect {
		t.Fatalf("after the drain, from the direct cache: verdict %s, want REDIRECT", verdictNames[v])
	}
	after, _ := e.dp.Stats()
	checkDeltas(t, "counter", before.Counters, after.Counters,
		map[string]uint64{"dl_rx": 6 + 4, "buffered": 4, "replayed": 4, "dl_tx": 4 + 2})
	checkDeltas(t, "drop", before.Drops, after.Drops, nil)
	usage, err := e.dp.Usage(bufferOwner)
	if err != nil || len(usage) != 1 || usage[0].Packets != 6 {
		t.Errorf("usage %+v %v: want the 4 packets run through again and the last two", usage, err)
	}
}

// TestBufferBounds: a PDR holds at most BufferMaxPackets (more are dropped as buffer_full
// without reaching the ring, and counted for the PDR: its Usage's BufferFull, in IP bytes)
// until xupfd releases some; a frame run through again while the FAR still buffers is handed
// over again.
func TestBufferBounds(t *testing.T) {
	e := newTestEnvOpts(t, Options{MaxSessions: 64, BufferMaxPackets: 2})
	got := readBuffered(t, e)
	if err := e.dp.Install(bufferOwner, bufferSet(rules.FAR{Action: rules.Buffer})); err != nil {
		t.Fatal(err)
	}
	before, _ := e.dp.Stats()
	for i := range 3 {
		e.run(t, seqIn(t, i), e.n6)
	}
	first := nextBuffered(t, got)
	nextBuffered(t, got)
	mid, _ := e.dp.Stats()
	checkDeltas(t, "drop", before.Drops, mid.Drops, map[string]uint64{"buffer_full": 1})
	full := rules.Counts{Packets: 1, Bytes: uint64(len(seqIn(t, 2)) - 14)}
	if u, err := e.dp.Usage(bufferOwner); err != nil || len(u) != 1 || u[0].BufferFull != full || u[0].Packets != 0 {
		t.Errorf("usage %+v %v: want buffer_full %+v and nothing forwarded", u, err, full)
	}
	if err := e.dp.Release(first.Counter, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.do(func() error { return e.dp.Replay(first) }); err != nil {
		t.Fatal(err)
	}
	again := nextBuffered(t, got)
	if !bytes.Equal(again.Frame, first.Frame) {
		t.Errorf("handed over again:\n%s\nwant\n%s", dump(again.Frame), dump(first.Frame))
	}
	after, _ := e.dp.Stats()
	checkDeltas(t, "counter", before.Counters, after.Counters, map[string]uint64{"dl_rx": 4, "buffered": 3, "replayed": 1})
}

// TestDropNotify: a DROP FAR with NOCP hands over its first packet only, and becomes a plain
// DROP FAR doing so; the others are dropped as far_drop. Installing the rules again arms it
// again.
func TestDropNotify(t *testing.T) {
	e := newTestEnv(t, 64)
	got := readBuffered(t, e)
	install := func() {
		t.Helper()
		if err := e.dp.Install(bufferOwner, bufferSet(rules.FAR{Action: rules.DropNotify})); err != nil {
			t.Fatal(err)
		}
		if a := e.farAction(t); a != xupfFarActionFAR_DROP_NOTIFY {
			t.Fatalf("FAR action %v after install, want FAR_DROP_NOTIFY", a)
		}
	}
	install()
	before, _ := e.dp.Stats()
	for i := range 3 {
		if v, _ := e.run(t, seqIn(t, i), e.n6); v != xdpDrop {
			t.Fatalf("packet %d: verdict %s, want DROP", i, verdictNames[v])
		}
	}
	if p := nextBuffered(t, got); !bytes.Equal(p.Frame, seqIn(t, 0)) || p.Owner != bufferOwner || p.PDR != 3 {
		t.Fatalf("handed over %+v\n%s\nwant packet 0 of PDR 3", p, dump(p.Frame))
	}
	if a := e.farAction(t); a != xupfFarActionFAR_DROP {
		t.Errorf("FAR action %v after the first packet, want FAR_DROP", a)
	}
	mid, _ := e.dp.Stats()
	checkDeltas(t, "counter", before.Counters, mid.Counters, map[string]uint64{"dl_rx": 3, "buffered": 1})
	checkDeltas(t, "drop", before.Drops, mid.Drops, map[string]uint64{"far_drop": 2})

	install()
	e.run(t, seqIn(t, 3), e.n6)
	if p := nextBuffered(t, got); !bytes.Equal(p.Frame, seqIn(t, 3)) {
		t.Fatalf("after the rules were installed again, handed over\n%s\nwant packet 3", dump(p.Frame))
	}
	select {
	case p := <-got:
		t.Errorf("a second packet handed over:\n%s", dump(p.Frame))
	case <-time.After(50 * time.Millisecond):
	}
}

// TestDropNotifyAcrossRestart: a DROP FAR with NOCP that handed over its packet before a
// restart stays a plain DROP FAR when the next run installs the same rules: the SMF has had
// its report, and gets no second one. So for a key with that PDR alone and for a classified
// one, with a second PDR whose filter the packets do not match.
func TestDropNotifyAcrossRestart(t *testing.T) {
	classified := bufferSet(rules.FAR{Action: rules.DropNotify})
	classified[0].PDRs[0].Filters = []sdf.Filter{{Protocol: 17}}
	classified[0].PDRs = append(classified[0].PDRs, rules.PDR{ID: 4, Precedence: 2, FAR: rules.FAR{Action: rules.Drop}})
	for _, c := range []struct {
		name string
		set  []rules.RuleSet
	}{{"one PDR", bufferSet(rules.FAR{Action: rules.DropNotify})}, {"classified", classified}} {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, 64)
			got := readBuffered(t, e)
			if err := e.dp.Install(bufferOwner, c.set); err != nil {
				t.Fatal(err)
			}
			e.run(t, seqIn(t, 0), e.n6)
			nextBuffered(t, got)
			opts := e.dp.opts
			if err := e.dp.Close(false); err != nil { // "crash": pins stay
				t.Fatal(err)
			}
			e.dp = e.load(t, opts)
			if err := e.dp.Install(bufferOwner, c.set); err != nil {
				t.Fatal(err)
			}
			if a := e.farAction(t); a != xupfFarActionFAR_DROP {
				t.Errorf("FAR action %v after the restart, want FAR_DROP (the packet was handed over before)", a)
			}
			before, _ := e.dp.Stats()
			if v, _ := e.run(t, seqIn(t, 1), e.n6); v != xdpDrop {
				t.Fatalf("verdict %s, want DROP", verdictNames[v])
			}
			after, _ := e.dp.Stats()
			checkDeltas(t, "counter", before.Counters, after.Counters, map[string]uint64{"dl_rx": 1})
			checkDeltas(t, "drop", before.Drops, after.Drops, map[string]uint64{"far_drop": 1})
		})
	}
}

// BenchmarkReplay: one buffered frame run through again and released, as xupfd flushes.
func BenchmarkReplay(b *testing.B) {
	e := newTestEnv(b, 64)
	if err := e.dp.Install(bufferOwner, bufferSet(rules.FAR{Action: rules.Forward,
		OHC: &rules.OuterHeader{TEID: 0x777, Peer: addrGNB, Local: addrN3}})); err != nil {
		b.Fatal(err)
	}
	p := buffer.Packet{Owner: bufferOwner, PDR: 3, Ifindex: uint32(e.n6), Frame: seqIn(b, 0)}
	err := e.do(func() error {
		l, err := testbed.AttachXDPPass("n3p")
		if err != nil {
			return err
		}
		defer l.Close()
		b.ResetTimer()
		for range b.N {
			if err := e.dp.Replay(p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
