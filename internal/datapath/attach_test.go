package datapath

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/session"
)

func TestAttachErrorsAndFallback(t *testing.T) {
	e := newTestEnv(t, 4)
	err := e.do(func() error {
		if _, err := e.dp.Attach("nosuchif0", XDPNative, true); err == nil ||
			!strings.Contains(err.Error(), "no such interface") {
			t.Errorf("missing interface: %v", err)
		}
		if _, err := e.dp.Attach("n3", XDPNative, true); err == nil ||
			!strings.Contains(err.Error(), "already attached") {
			t.Errorf("second attach: %v", err)
		}
		// The loopback driver has no native XDP.
		if _, err := e.dp.Attach("lo", XDPNative, false); err == nil ||
			!strings.Contains(err.Error(), "native XDP is not supported") {
			t.Errorf("native on lo without fallback: %v", err)
		}
		a, err := e.dp.Attach("lo", XDPNative, true)
		if err != nil {
			t.Fatalf("native on lo with fallback: %v", err)
		}
		if a.Mode != XDPGeneric {
			t.Errorf("fell back to %s, want generic", a.Mode)
		}
		return e.dp.Detach("lo")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRestartTakesOver plays a daemon that died without cleaning up (its links and maps stay
// pinned, so the old program keeps forwarding) and its successor: the new datapath swaps its
// program into the pinned links, re-installs the sessions it knows and prunes the others. A
// session installed first by the new run takes no slot the earlier run's entries still use,
// and a re-installed session's counters carry on.
func TestRestartTakesOver(t *testing.T) {
	e := newTestEnv(t, 8)
	gone := sessQFI // known to the first run only, with a flow: it has classification tables
	gone.Flows = []session.Flow{{Precedence: 1, QFI: 5, SDF: []string{"permit out 17 from any to assigned 5060"}}}
	for _, s := range []session.Session{sessPlain, gone} {
		if err := e.addSession(s); err != nil {
			t.Fatal(err)
		}
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Fatalf("before restart: %s", verdictNames[ret])
	}
	counted, err := e.usage(sessPlain.ID)
	if err != nil || counted.Uplink.Packets != 1 {
		t.Fatalf("before restart: usage %+v, %v; want 1 uplink packet", counted, err)
	}
	pin := e.dp.opts.PinPath
	buckets := func(dp *Datapath) (out [][2]uint32) {
		for k := range uint32(64) {
			b1, b2 := dp.ulKeys.Buckets(k + 1)
			out = append(out, [2]uint32{b1, b2})
		}
		return out
	}
	before := buckets(e.dp)
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}

	next := e.load(t, Options{PinPath: pin, MaxSessions: 8, GTPUAddrs: []netip.Addr{addrN3}, N3Interfaces: []string{"n3"}})
	e.dp = next // the environment's cleanup now closes and unpins this one
	if !slices.Equal(buckets(next), before) {
		t.Error("the key tables' seed changed: the pinned tables' keys cannot be found")
	}
	for _, m := range []*ebpf.Map{next.objs.XupfSdfExact, next.objs.XupfSdfLpm} {
		var key []byte
		if err := m.NextKey(nil, &key); !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Errorf("%s still holds entries of the earlier run (%v)", m, err)
		}
	}
	err = e.do(func() error {
		for _, name := range []string{"n3", "n6"} {
			a, err := next.Attach(name, XDPNative, false)
			if err != nil {
				return err
			}
			if a.Mode != XDPNative {
				t.Errorf("%s: took over a %s link, want native", name, a.Mode)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("take over pinned links: %v", err)
	}
	// A session new to this run, installed before the earlier run's come back, must not
	// take their slots: sessPlain's packets still count toward sessPlain.
	other := sessPlain
	other.ID, other.UE, other.UplinkTEID, other.DownlinkTEID = 9, netip.MustParseAddr("10.45.0.99"), 0x199, 0x299
	if err := installSession(next, other); err != nil {
		t.Fatal(err)
	}
	// Before the sessions are back, the old entries still forward.
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Errorf("between restart and re-install: %s", verdictNames[ret])
	}
	if err := installSession(next, sessPlain); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    session.Session
		want uint64
	}{{sessPlain, 2}, {other, 0}} {
		u, err := next.Usage(c.s.ID)
		if got := session.UsageOf(u); err != nil || got.Uplink.Packets != c.want {
			t.Errorf("session %d after the re-install: usage %+v, %v; want %d uplink packets", c.s.ID, got, err, c.want)
		}
	}
	if err := next.Prune(); err != nil {
		t.Fatal(err)
	}
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Errorf("after restart: %s", verdictNames[ret])
	}
	ulGone := outerGTP(t, gtpHdr(0x34, 255, gone.UplinkTEID, optPSC(9), ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ulGone, e.n3); ret != xdpDrop {
		t.Errorf("session unknown to the new run still forwards uplink: %s", verdictNames[ret])
	}
	if ret, _ := e.run(t, dlIn(t, gone, 64), e.n6); ret != xdpPass {
		t.Errorf("session unknown to the new run still handles downlink: %s", verdictNames[ret])
	}
}

// TestRestartSharedSlots: the keys of one session share its URR's quota slot and its QER's
// meter slot; taking them over from an earlier run and re-installing them with new slots
// frees each shared slot once, so no slot is handed out twice afterwards.
func TestRestartSharedSlots(t *testing.T) {
	e := newTestEnv(t, 8)
	sets := func(grant uint64) []rules.RuleSet {
		q := rules.Quota{URR: 7, Grant: grant, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 1 << 20}
		out := quotaSets(q, false)
		second := out[0] // a second uplink TEID with the same QER and URR
		second.TEID = teidQuota + 1
		out = append(out, second)
		for i := range out {
			out[i].PDRs[0].QERs = []rules.QER{{ID: 1, MBRUL: 1000, MBRDL: 1000}}
		}
		return out
	}
	if err := e.dp.Install(quotaOwner, sets(1)); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	next := e.load(t, Options{PinPath: e.dp.opts.PinPath, MaxSessions: 8, GTPUAddrs: []netip.Addr{addrN3}, N3Interfaces: []string{"n3"}})
	e.dp = next
	if err := next.Install(quotaOwner, sets(2)); err != nil { // a new grant: a new quota slot
		t.Fatal(err)
	}
	if err := next.Prune(); err != nil {
		t.Fatal(err)
	}
	held := map[string][]uint32{}
	for _, q := range next.quotas[quotaOwner] {
		held["quota"] = append(held["quota"], q.slot)
	}
	for _, m := range next.meters[quotaOwner] {
		held["meter"] = append(held["meter"], m.slot)
	}
	checkSlots(t, "quota", next.quotaSlots, held["quota"])
	checkSlots(t, "meter", next.meterSlots, held["meter"])
}

// checkSlots allocates every free slot of s and fails t if one is handed out twice, is also
// in held (in use), or if some are neither free nor held (leaked).
func checkSlots(t *testing.T, name string, s *slots, held []uint32) {
	t.Helper()
	seen := map[uint32]bool{}
	for _, v := range held {
		seen[v] = true
	}
	for {
		v, err := s.alloc()
		if err != nil {
			break
		}
		if seen[v] {
			t.Errorf("%s slot %d handed out twice", name, v)
		}
		seen[v] = true
	}
	if n := len(s.free); len(seen) != n {
		t.Errorf("%s slots: %d distinct in use or free, want all %d", name, len(seen), n)
	}
}

// TestRestartCountersOfRegrownKey: a key the earlier run had with one PDR, re-installed with
// two, cannot carry the counters on; they are released, not leaked.
func TestRestartCountersOfRegrownKey(t *testing.T) {
	e := newTestEnv(t, 8)
	q := rules.Quota{URR: 7, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 1 << 20}
	if err := e.dp.Install(quotaOwner, quotaSets(q, false)); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	next := e.load(t, Options{PinPath: e.dp.opts.PinPath, MaxSessions: 8, GTPUAddrs: []netip.Addr{addrN3}, N3Interfaces: []string{"n3"}})
	e.dp = next
	sets := quotaSets(q, false)
	sets[0].PDRs = append(sets[0].PDRs, sets[0].PDRs[0])
	sets[0].PDRs[0].Filters = []sdf.Filter{{Protocol: 17}}
	sets[0].PDRs[1].ID, sets[0].PDRs[1].Precedence = 2, 2
	if err := next.Install(quotaOwner, sets); err != nil {
		t.Fatal(err)
	}
	if err := next.Prune(); err != nil {
		t.Fatal(err)
	}
	var held []uint32
	for _, set := range next.owners[quotaOwner] {
		for _, c := range set.counters {
			held = append(held, c.slots()...)
		}
	}
	checkSlots(t, "counter", next.counters, held)
}

// TestClassesAfterTakeOver: the earlier run's program reads one of the classifier buffers
// (which one, this run cannot tell) until Attach swaps this run's program into its links, and
// packets it is handling then still may: both buffers count as retired at the take-over, so
// classes set right after it are written only a grace period later.
func TestClassesAfterTakeOver(t *testing.T) {
	e := newTestEnv(t, 8)
	class := classifier.Class{ID: 1, Priority: 1, Protocol: "udp"}
	e.setClasses(t, class)
	pin := e.dp.opts.PinPath
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	next := e.load(t, Options{PinPath: pin, MaxSessions: 8, GTPUAddrs: []netip.Addr{addrN3}, N3Interfaces: []string{"n3"}})
	e.dp = next
	start := time.Now()
	err := e.do(func() error {
		_, err := next.Attach("n3", XDPNative, false)
		return err
	})
	if err != nil {
		t.Fatalf("take over the pinned link: %v", err)
	}
	for i, b := range next.clsBufs {
		if b.retiredAt.Before(start) {
			t.Errorf("classifier buffer %d retired at %v, before the take-over at %v: "+
				"it may be written while the earlier program reads it", i, b.retiredAt, start)
		}
	}
	e.setClasses(t, class)
}
