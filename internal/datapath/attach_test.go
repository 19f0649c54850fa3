package datapath

import (
	"errors"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

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

// TestClassesAcrossTakeOver: classes and contracts set after Load but before Attach go into
// the classifier buffer the earlier run's program does not read, so it classifies and
// polices as before until Attach, and the program Attach swaps in classifies from its first
// packet: a class's packets are counted in it all along, in the counters it had before the
// restart. The earlier program's buffer is retired at the take-over (packets it is handling
// may still read it).
func TestClassesAcrossTakeOver(t *testing.T) {
	e, class, send := classEnv(t)
	if v, n := send(e.dp, e.dp.Program()); v != xdpRedirect || n != 1 {
		t.Fatalf("before the restart: verdict %d, %d class hits; want forwarded, 1", v, n)
	}
	next, earlier := e.restartBeforeAttach(t)
	// As the daemon does before Attach, with the class's contract changed to drop.
	e.setClasses(t, class)
	setContract(t, e, Contract{Class: 1, Action: PoliceDrop})
	if v, n := send(next, earlier); v != xdpRedirect || n != 1 {
		t.Errorf("the earlier run's program, classes and contracts set again before Attach: verdict %d, "+
			"%d class hits; want forwarded (its contract passes), 1", v, n)
	}
	live := 1 - next.prog.clsBuf
	start := time.Now()
	e.takeOver(t, next)
	if at := next.clsBufs[live].retiredAt; at.Before(start) {
		t.Errorf("the earlier program's classifier buffer %d retired at %v, before the take-over at %v", live, at, start)
	}
	if v, n := send(next, next.Program()); v != xdpDrop || n != 1 {
		t.Errorf("this run's program right after Attach: verdict %d, %d class hits; want dropped by the "+
			"class's new contract, 1", v, n)
	}
	if c, err := next.ClassCounters(1); err != nil || c.Packets != 3 {
		t.Errorf("class 1 after the take-over: %+v, %v; want its 3 packets (one before the restart, one "+
			"by the earlier program, one by this run's)", c, err)
	}
	e.setClasses(t, class) // into the earlier program's buffer, a grace after the take-over
	if v, n := send(next, next.Program()); v != xdpDrop || n != 1 {
		t.Errorf("classes set again after the take-over: verdict %d, %d class hits; want dropped, 1", v, n)
	}
}

// TestClassCountersAcrossRestart: a class and a contract set again after a restart take
// over the earlier run's slots, so their counters carry on (only grow) and an unchanged
// contract's meter goes on (no extra burst); a changed contract gets a fresh meter but keeps
// its counters. No slot is handed out twice or leaked, and a class new to this run starts
// from zero.
func TestClassCountersAcrossRestart(t *testing.T) {
	e, class, send := classEnv(t)
	other := classifier.Class{ID: 2, Priority: 2, Protocol: "tcp"}
	e.setClasses(t, class, other)
	setContract(t, e, Contract{Class: 1, Action: PoliceLimit, Rate: 1e9, Burst: 1e6})
	setContract(t, e, Contract{Class: DefaultContractClass, Action: PolicePass})
	for range 2 {
		if v, n := send(e.dp, e.dp.Program()); v != xdpRedirect || n != 1 {
			t.Fatalf("before the restart: verdict %d, %d class hits; want forwarded, 1", v, n)
		}
	}
	meter := e.dp.contracts[1].meter
	next, earlier := e.restartBeforeAttach(t)
	third := classifier.Class{ID: 3, Priority: 3, Protocol: "icmp"}
	e.setClasses(t, class, third) // class 2 is gone, class 3 new
	setContract(t, e, Contract{Class: 1, Action: PoliceLimit, Rate: 1e9, Burst: 1e6})
	setContract(t, e, Contract{Class: DefaultContractClass, Action: PoliceDrop}) // changed
	if got := next.contracts[1].meter; got != meter {
		t.Errorf("the unchanged contract of class 1 took meter slot %d, want the earlier run's %d", got, meter)
	}
	if v, n := send(next, earlier); v != xdpRedirect || n != 1 {
		t.Errorf("the earlier program before Attach: verdict %d, %d class hits; want forwarded, 1", v, n)
	}
	e.takeOver(t, next)
	if v, n := send(next, next.Program()); v != xdpRedirect || n != 1 {
		t.Errorf("this run's program: verdict %d, %d class hits; want forwarded, 1", v, n)
	}
	if c, err := next.ClassCounters(1); err != nil || c.Packets != 4 {
		t.Errorf("class 1 after the restart: %+v, %v; want 4 packets (2 before it, 2 after)", c, err)
	}
	if c, err := next.ClassCounters(3); err != nil || c.Packets != 0 {
		t.Errorf("class 3, new to this run: %+v, %v; want 0 packets", c, err)
	}
	if c := contractCounters(t, e, 1); c.PassedPackets != 4 {
		t.Errorf("the contract of class 1 after the restart: %+v; want 4 passed", c)
	}
	var held [3][]uint32
	for _, v := range next.classSlots {
		held[0] = append(held[0], v)
	}
	for _, st := range next.contracts {
		held[1], held[2] = append(held[1], st.meter), append(held[2], st.stats)
	}
	checkSlots(t, "class counter", next.clsSlots, held[0])
	checkSlots(t, "contract", next.contractSlots, held[1])
	checkSlots(t, "contract counter", next.policeSlots, held[2])
}

// TestClassesAcrossPartialTakeOver: after a start that set its classes before Attach and
// stopped having taken over only n3, the pinned links run two programs reading the two
// classifier buffers. The next start then writes neither before Attach (ClassesWritable is
// false, SetClasses refuses), keeps the slots both programs' class entries name out of its
// allocators, and sets its classes once Attach has taken over every link.
func TestClassesAcrossPartialTakeOver(t *testing.T) {
	e, class, sendOn := classEnv(t)
	heldCls, heldContracts := []uint32{e.dp.classSlots[1]}, []uint32{e.dp.contracts[1].meter}
	second, _ := e.restartBeforeAttach(t)
	e.setClasses(t, class)
	setContract(t, e, Contract{Class: 1, Action: PoliceDrop})
	heldCls, heldContracts = append(heldCls, second.classSlots[1]), append(heldContracts, second.contracts[1].meter)
	if err := e.do(func() error { _, err := second.Attach("n3", XDPNative, false); return err }); err != nil {
		t.Fatal(err)
	}
	third, first := e.restartBeforeAttach(t) // link_n6 runs the first run's program
	send := func(prog *ebpf.Program) (verdict uint32, hits uint64) { return sendOn(third, prog) }
	if third.ClassesWritable() {
		t.Error("classes writable before Attach while the pinned links' programs read both buffers")
	}
	if _, compiled := compileClasses(t, class); third.SetClasses(compiled) == nil {
		t.Error("classes set before Attach while the pinned links' programs read both buffers")
	}
	if v, n := send(first); v != xdpRedirect || n != 1 {
		t.Errorf("the first run's program (link_n6) before Attach: verdict %d, %d class hits; want forwarded "+
			"(its contract passes), 1", v, n)
	}
	if v, n := send(pinnedProgram(t, third.opts, "n3")); v != xdpDrop || n != 1 {
		t.Errorf("the second run's program (link_n3) before Attach: verdict %d, %d class hits; want dropped "+
			"(its contract drops), 1", v, n)
	}
	checkFree(t, "class counter", third.clsSlots, heldCls)
	checkFree(t, "contract", third.contractSlots, heldContracts)
	e.takeOver(t, third)
	if !third.ClassesWritable() {
		t.Error("classes not writable after Attach took over every pinned link")
	}
	e.setClasses(t, class)
	setContract(t, e, Contract{Class: 1, Action: PoliceDrop})
	if v, n := send(third.Program()); v != xdpDrop || n != 1 {
		t.Errorf("this run's program, classes set after Attach: verdict %d, %d class hits; want dropped, 1", v, n)
	}
}

// classEnv is a test environment with a session and class 1 (its UDP packets) under a
// passing contract, and send, which runs a downlink packet of the session through prog and
// gives its verdict and the class hits counted (read through dp).
func classEnv(t *testing.T) (e *testEnv, class classifier.Class,
	send func(dp *Datapath, prog *ebpf.Program) (verdict uint32, hits uint64)) {
	e = newTestEnv(t, 8)
	if err := e.addSession(sessPlain); err != nil { // classes see packets of sessions only
		t.Fatal(err)
	}
	class = classifier.Class{ID: 1, Priority: 1, Protocol: "udp"}
	e.setClasses(t, class)
	setContract(t, e, Contract{Class: 1, Action: PolicePass})
	dl := dlIn(t, sessPlain, 64)
	return e, class, func(dp *Datapath, prog *ebpf.Program) (verdict uint32, hits uint64) {
		t.Helper()
		before, _ := dp.Stats()
		verdict, _ = e.runProgramOn(t, prog, anyCPU, dl, e.n6)
		after, _ := dp.Stats()
		return verdict, after.Counters["cls_hit"] - before.Counters["cls_hit"]
	}
}

// checkFree checks that s hands out none of held, and leaves s as it was but for its order.
func checkFree(t *testing.T, name string, s *slots, held []uint32) {
	t.Helper()
	var got []uint32
	for v, err := s.alloc(); err == nil; v, err = s.alloc() {
		if slices.Contains(held, v) {
			t.Errorf("%s slot %d, which an earlier program's class entries name, handed out", name, v)
		}
		got = append(got, v)
	}
	for _, v := range got {
		s.release(v)
	}
}

// restartBeforeAttach "crashes" e's datapath (its pins stay) and loads the next one as
// e.dp; it returns that one and the earlier run's program, which runs in the pinned links
// until Attach.
func (e *testEnv) restartBeforeAttach(t *testing.T) (*Datapath, *ebpf.Program) {
	t.Helper()
	opts := e.dp.opts
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	e.dp = e.load(t, opts)
	return e.dp, pinnedProgram(t, opts, "n6")
}

// pinnedProgram is the program that runs in the pinned link of interface name.
func pinnedProgram(t *testing.T, opts Options, name string) *ebpf.Program {
	t.Helper()
	l, err := link.LoadPinnedLink(filepath.Join(opts.PinPath, "link_"+name), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// classifiedSets are uplink rule sets of two owners whose keys classify: owner 1's PDRs fit
// compare rules (SDF_LINEAR), owner 2's port ranges make too many (SDF_BITS). Port 2000
// goes to PDR 1, 4000 to PDR 2 (which drops), anything else to PDR 3; owner 2's ports are
// those plus 100.
func classifiedSets(owner uint64) []rules.RuleSet {
	base := uint16(2000 + 100*(owner-1))
	ports := func(first uint16) []sdf.PortRange {
		if owner == 1 {
			return []sdf.PortRange{{First: first, Last: first}}
		}
		var out []sdf.PortRange // every other port from first on: one compare rule each
		for i := range uint16(len(xupfRuleset{}.Rules) + 1) {
			out = append(out, sdf.PortRange{First: first + 2*i, Last: first + 2*i})
		}
		return out
	}
	return []rules.RuleSet{{Uplink: true, TEID: 0x140 + uint32(owner), PDRs: []rules.PDR{
		{ID: 1, Precedence: 10, Filters: []sdf.Filter{{Protocol: 17, RemotePorts: ports(base)}},
			FAR: rules.FAR{Action: rules.Forward}},
		{ID: 2, Precedence: 20, Filters: []sdf.Filter{{Protocol: 17, RemotePorts: ports(base + 2000)}},
			FAR: rules.FAR{Action: rules.Drop}},
		{ID: 3, Precedence: 255, FAR: rules.FAR{Action: rules.Forward}},
	}}}
}

// classifiedEnv is a test environment with the classifiedSets of owners 1 and 2 installed.
func classifiedEnv(t *testing.T) (*testEnv, []uint64) {
	e := newTestEnv(t, 8)
	owners := []uint64{1, 2}
	for _, o := range owners {
		if err := e.dp.Install(o, classifiedSets(o)); err != nil {
			t.Fatal(err)
		}
	}
	return e, owners
}

// TestRestartClassifiedKeys: keys with several PDRs and SDF filters, taken over from an
// earlier run, classify as before between the restart and their re-install (their tables and
// slots are kept, the program takes their fields), their PDRs' counters carry on, sessions
// installed meanwhile get none of their slots, and afterwards they can be modified and
// removed, leaking nothing.
func TestRestartClassifiedKeys(t *testing.T) {
	e, owners := classifiedEnv(t)
	if e.dp.owners[1][0].tables == nil || e.dp.owners[2][0].tables == nil {
		t.Fatal("the rule sets are not classified")
	}
	sent := map[uint64]map[uint32]uint64{1: {}, 2: {}} // owner -> PDR id -> packets
	send := func(when string) {
		t.Helper()
		for _, o := range owners {
			base := uint16(2000 + 100*(o-1))
			for _, c := range []struct {
				port    uint16
				pdr     uint32
				verdict uint32
			}{{base, 1, xdpRedirect}, {base + 2000, 2, xdpDrop}, {base + 1, 3, xdpRedirect}} {
				in := outerGTP(t, gtpHdr(0x30, 255, 0x140+uint32(o), nil,
					innerUDP(t, ueAddr, addrDN, 1000, c.port, 64, payload)), nil)
				if v, _ := e.run(t, in, e.n3); v != c.verdict {
					t.Errorf("%s: owner %d, port %d: verdict %s, want %s", when, o, c.port, verdictNames[v], verdictNames[c.verdict])
				}
				if c.verdict != xdpDrop { // usage counts what passed the FAR
					sent[o][c.pdr]++
				}
			}
		}
	}
	checkUsage := func(when string) {
		t.Helper()
		for _, o := range owners {
			u, err := e.dp.Usage(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range u {
				if p.Packets != sent[o][p.PDR] {
					t.Errorf("%s: owner %d PDR %d counted %d packets, want %d", when, o, p.PDR, p.Packets, sent[o][p.PDR])
				}
			}
		}
	}
	send("before the restart")
	checkUsage("before the restart")
	// What the earlier run's keys hold, which a session new to this run must not get.
	held := map[string]map[uint32]bool{"ref": {}, "rule": {}, "counter": {}, "rule set": {}}
	for _, o := range owners {
		set := e.dp.owners[o][0]
		held["ref"][set.ref] = true
		held["rule set"][set.tables.id-1] = true
		for _, s := range set.slots {
			held["rule"][s] = true
		}
		for s := range counterSlots([]*installedSet{set}) {
			held["counter"][s] = true
		}
	}
	opts := e.dp.opts
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	next := e.load(t, opts)
	e.dp = next
	e.takeOver(t, next)
	send("taken over, not installed again")

	newcomer := classifiedSets(1)
	newcomer[0].TEID = 0x150
	if err := next.Install(9, newcomer); err != nil {
		t.Fatal(err)
	}
	got := next.owners[9][0]
	for name, vs := range map[string][]uint32{"ref": {got.ref}, "rule": got.slots,
		"counter": slices.Collect(maps.Keys(counterSlots([]*installedSet{got}))), "rule set": {got.tables.id - 1}} {
		for _, v := range vs {
			if held[name][v] {
				t.Errorf("a new session got %s slot %d, which an earlier run's key still uses", name, v)
			}
		}
	}
	send("beside a new session")
	for _, o := range owners {
		if err := next.Install(o, classifiedSets(o)); err != nil {
			t.Fatal(err)
		}
	}
	if err := next.Prune(); err != nil {
		t.Fatal(err)
	}
	send("installed again")
	checkUsage("installed again")

	// Modified: PDR 2 forwards now; then removed.
	for _, o := range owners {
		sets := classifiedSets(o)
		sets[0].PDRs[1].FAR = rules.FAR{Action: rules.Forward}
		if err := next.Install(o, sets); err != nil {
			t.Fatal(err)
		}
		base := uint16(2000 + 100*(o-1))
		in := outerGTP(t, gtpHdr(0x30, 255, 0x140+uint32(o), nil, innerUDP(t, ueAddr, addrDN, 1000, base+2000, 64, payload)), nil)
		if v, _ := e.run(t, in, e.n3); v != xdpRedirect {
			t.Errorf("owner %d modified: verdict %s, want REDIRECT", o, verdictNames[v])
		}
		if _, err := next.Uninstall(o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := next.Uninstall(9); err != nil {
		t.Fatal(err)
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	next.reapTables(true)
	checkSlots(t, "ref", next.refs, nil)
	checkSlots(t, "rule", next.rules, nil)
	checkSlots(t, "counter", next.counters, nil)
	checkSlots(t, "rule set", next.rulesets, nil)
	for _, m := range []*ebpf.Map{next.objs.XupfSdfExact, next.objs.XupfSdfLpm} {
		var key []byte
		if err := m.NextKey(nil, &key); !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Errorf("%s holds entries of sessions gone (%v)", m, err)
		}
	}
}

// TestRestartChangedClassifiedKey: the rules restored for a classified key differ from those
// pinned (a crash between an install and its save): the PDRs whose match is unchanged keep
// their counters, the changed one starts from zero, and no counter slot is handed out twice
// or leaked; for a key classified by compare rules (owner 1, SDF_LINEAR) and one classified
// by tables (owner 2, SDF_BITS), whose bits and table entries the change moves.
func TestRestartChangedClassifiedKey(t *testing.T) {
	e, owners := classifiedEnv(t)
	send := func(o uint64, port uint16) {
		t.Helper()
		in := outerGTP(t, gtpHdr(0x30, 255, 0x140+uint32(o), nil, innerUDP(t, ueAddr, addrDN, 1000, port, 64, payload)), nil)
		if v, _ := e.run(t, in, e.n3); v != xdpRedirect {
			t.Errorf("owner %d, port %d: verdict %s, want REDIRECT", o, port, verdictNames[v])
		}
	}
	for _, o := range owners {
		base := uint16(2000 + 100*(o-1))
		send(o, base)   // PDR 1
		send(o, base+1) // PDR 3
		send(o, base+1) // PDR 3
	}
	next, _ := e.restartBeforeAttach(t)
	e.takeOver(t, next)
	for _, o := range owners {
		changed := classifiedSets(o)
		changed[0].PDRs[0].Filters[0].RemotePorts = []sdf.PortRange{{First: 2010, Last: 2010}}
		if err := next.Install(o, changed); err != nil {
			t.Fatal(err)
		}
		var desc xupfRuleset
		if err := next.objs.XupfRulesets.Lookup(next.owners[o][0].tables.id, &desc); err != nil {
			t.Fatal(err)
		}
		if want := []xupfSdfMethod{xupfSdfMethodSDF_LINEAR, xupfSdfMethodSDF_BITS}[o-1]; desc.Method != want {
			t.Fatalf("owner %d's changed rule set is classified by method %d, want %d", o, desc.Method, want)
		}
	}
	if err := next.Prune(); err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		send(o, 2010) // PDR 1, changed
		u, err := next.Usage(o)
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint32]uint64{1: 1, 2: 0, 3: 2} // PDR 1 afresh (the packet since), PDR 3 carried on
		for _, p := range u {
			if p.Packets != want[p.PDR] {
				t.Errorf("owner %d PDR %d counted %d packets after the restart, want %d", o, p.PDR, p.Packets, want[p.PDR])
			}
		}
	}
	var held []uint32
	for _, set := range append(next.owners[1], next.owners[2]...) {
		for _, c := range set.counters {
			held = append(held, c.slots()...)
		}
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	checkSlots(t, "counter", next.counters, held)
}

// TestMACClassesAcrossTakeOver: between Load and Attach the earlier run's program still
// runs in the pinned links, and its classes on MAC fields still match (Load keeps its MAC
// entries); the next classes this run writes into a buffer replace that buffer's entries, so
// none is left behind.
func TestMACClassesAcrossTakeOver(t *testing.T) {
	e := newTestEnv(t, 8)
	if err := e.addSession(sessPlain); err != nil { // classes see packets of sessions only
		t.Fatal(err)
	}
	byMAC := classifier.Class{ID: 1, Priority: 1, SrcMAC: macDN.String()}
	e.setClasses(t, byMAC)
	dl := dlIn(t, sessPlain, 64) // from macDN
	hits := func(dp *Datapath, prog *ebpf.Program) uint64 {
		t.Helper()
		before, _ := dp.Stats()
		e.runProgramOn(t, prog, anyCPU, dl, e.n6)
		after, _ := dp.Stats()
		return after.Counters["cls_hit"] - before.Counters["cls_hit"]
	}
	if n := hits(e.dp, e.dp.Program()); n != 1 {
		t.Fatalf("before the restart: %d class hits, want 1", n)
	}
	next, earlier := e.restartBeforeAttach(t)
	if n := hits(next, earlier); n != 1 {
		t.Errorf("the earlier run's program between Load and Attach: %d class hits, want 1", n)
	}
	e.takeOver(t, next)
	e.setClasses(t, byMAC)
	if n := hits(next, next.Program()); n != 1 {
		t.Errorf("classes set again after the take-over: %d class hits, want 1", n)
	}
	// Both buffers rewritten without MAC classes: no MAC entry may be left.
	byProto := classifier.Class{ID: 2, Priority: 1, Protocol: "udp"}
	e.setClasses(t, byProto)
	e.setClasses(t, byProto)
	var k xupfClsMacKey
	var v xupfClsVref
	n := 0
	for it := next.objs.XupfClsMacs.Iterate(); it.Next(&k, &v); {
		n++
	}
	if n != 0 {
		t.Errorf("%d MAC entries left after both buffers were rewritten without MAC classes", n)
	}
}

// TestRestartQuotaListSlots: a PDR with several quotas points at a quota list whose members
// are the session's quota slots; across a restart the members stay reserved with the list
// (a session new to this run gets none of them while the old entry still charges them), and
// the re-install releases each once.
func TestRestartQuotaListSlots(t *testing.T) {
	e := newTestEnv(t, 8)
	sets := func(teid uint32, ue netip.Addr) []rules.RuleSet {
		q := rules.Quota{URR: 7, Grant: 1, Uplink: rules.NoLimit, Downlink: rules.NoLimit, Total: 1 << 20}
		out := quotaSets(q, false)
		out[0].TEID, out[1].UE = teid, ue
		second := q
		second.URR, second.Total = 8, 1<<30
		for i := range out {
			out[i].PDRs[0].URRs = []uint32{7, 8}
			out[i].PDRs[0].Quotas = []rules.Quota{q, second}
		}
		return out
	}
	if err := e.dp.Install(quotaOwner, sets(teidQuota, ueQuota)); err != nil {
		t.Fatal(err)
	}
	held := map[uint32]bool{}
	for _, q := range e.dp.quotas[quotaOwner] {
		held[q.slot] = true
	}
	for _, set := range e.dp.owners[quotaOwner] {
		for _, s := range set.quotaLists {
			held[s] = true
		}
	}
	if len(held) != 4 { // two quotas, two lists
		t.Fatalf("%d quota slots in use, want 4", len(held))
	}
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	next := e.load(t, e.dp.opts)
	e.dp = next
	const other = quotaOwner + 1
	if err := next.Install(other, sets(teidQuota+0x10, netip.MustParseAddr("10.45.0.77"))); err != nil {
		t.Fatal(err)
	}
	for _, q := range next.quotas[other] {
		if held[q.slot] {
			t.Errorf("a new session got quota slot %d, which the earlier run's entries still charge", q.slot)
		}
	}
	if err := next.Install(quotaOwner, sets(teidQuota, ueQuota)); err != nil {
		t.Fatal(err)
	}
	if err := next.Prune(); err != nil {
		t.Fatal(err)
	}
	var inUse []uint32
	for _, o := range []uint64{quotaOwner, other} {
		for _, q := range next.quotas[o] {
			inUse = append(inUse, q.slot)
		}
		for _, set := range next.owners[o] {
			inUse = append(inUse, set.quotaLists...)
		}
	}
	checkSlots(t, "quota", next.quotaSlots, inUse)
}
