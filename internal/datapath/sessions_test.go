package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/session"
)

func TestSessionLifecycle(t *testing.T) {
	e := newTestEnv(t, 16)
	s := sessPlain
	if err := e.addSession(s); err != nil {
		t.Fatal(err)
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, s.UplinkTEID, nil, ulInner(t, 64)), nil)
	for range 3 {
		if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
			t.Fatalf("uplink verdict %s", verdictNames[ret])
		}
	}
	if ret, _ := e.run(t, dlIn(t, s, 64), e.n6); ret != xdpRedirect {
		t.Fatalf("downlink verdict %s", verdictNames[ret])
	}
	innerLen := uint64(len(ulInner(t, 64)))
	wantUsage := session.Usage{
		Uplink:   session.Counters{Packets: 3, Bytes: 3 * innerLen},
		Downlink: session.Counters{Packets: 1, Bytes: innerLen},
	}
	if u, err := e.usage(s.ID); err != nil || u != wantUsage {
		t.Fatalf("usage %+v, %v; want %+v", u, err, wantUsage)
	}

	// Modify: new downlink TEID and QFI, new uplink TEID. Counts carry on.
	m := s
	m.DownlinkTEID, m.QFI, m.UplinkTEID = 0x999, 7, 0x555
	if err := e.addSession(m); err != nil {
		t.Fatal(err)
	}
	ret, out := e.run(t, dlIn(t, m, 64), e.n6)
	want := dlOuter(t, m, innerUDP(t, addrDN, m.UE, 5000, 6000, 63, payload), 0x28)
	copy(want[34:36], out[34:36])
	if ret != xdpRedirect || !bytes.Equal(out, want) {
		t.Fatalf("after modify: verdict %s\n%s\nwant\n%s", verdictNames[ret], dump(out), dump(want))
	}
	if ret, _ := e.run(t, ul, e.n3); ret != xdpDrop {
		t.Errorf("old uplink TEID still accepted after modify: %s", verdictNames[ret])
	}
	ulNew := outerGTP(t, gtpHdr(0x34, 255, m.UplinkTEID, optPSC(7), ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ulNew, e.n3); ret != xdpRedirect {
		t.Errorf("new uplink TEID: %s", verdictNames[ret])
	}
	wantUsage.Uplink = session.Counters{Packets: 4, Bytes: 4 * innerLen}
	wantUsage.Downlink = session.Counters{Packets: 2, Bytes: 2 * innerLen}

	pdrs, err := e.dp.Uninstall(s.ID)
	if u := session.UsageOf(pdrs); err != nil || u != wantUsage {
		t.Fatalf("delete returned %+v, %v; want %+v", u, err, wantUsage)
	}
	if ret, _ := e.run(t, ulNew, e.n3); ret != xdpDrop {
		t.Errorf("deleted session still forwards uplink: %s", verdictNames[ret])
	}
	if ret, _ := e.run(t, dlIn(t, m, 64), e.n6); ret != xdpPass {
		t.Errorf("deleted session still handles downlink: %s", verdictNames[ret])
	}
	if _, err := e.dp.Uninstall(s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}

	// A new session in freed slots starts from zero.
	if err := e.addSession(s); err != nil {
		t.Fatal(err)
	}
	if u, _ := e.usage(s.ID); u != (session.Usage{}) {
		t.Errorf("re-added session starts with usage %+v", u)
	}
}

func TestSessionErrors(t *testing.T) {
	e := newTestEnv(t, 2)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	other := netip.MustParseAddr("10.45.9.9")
	cases := []struct {
		name string
		s    session.Session
		want string
	}{
		{"TEID in use", session.Session{ID: 9, UE: other, UplinkTEID: sessPlain.UplinkTEID, GNB: addrGNB, DownlinkTEID: 1, GTPUAddr: addrN3},
			"uplink TEID 0x100 is used by session 1"},
		{"UE in use", session.Session{ID: 9, UE: sessPlain.UE, UplinkTEID: 7, GNB: addrGNB, DownlinkTEID: 1, GTPUAddr: addrN3},
			"downlink UE 10.45.0.2 is used by session 1"},
	}
	for _, c := range cases {
		err := e.addSession(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// The table holds two sessions (four rule slots): the third is refused, and the refusal
	// leaves the first two working.
	if err := e.addSession(sessQFI); err != nil {
		t.Fatal(err)
	}
	err := e.addSession(sessNoARP)
	if err == nil || !strings.Contains(err.Error(), "limits.max_sessions") {
		t.Errorf("third session in a table of two: %v", err)
	}
	full := sessQFI
	full.DownlinkTEID = 0x777
	if err := e.addSession(full); err != nil {
		t.Errorf("modify with a full table: %v", err)
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Errorf("first session broken by refused ones: %s", verdictNames[ret])
	}
}

// TestDownlinkSourcePortSpreadsFlows checks that the outer UDP source port comes from the
// dynamic range, is the same for every packet of a flow and differs between flows, so that a
// gNB's receive-side scaling spreads them.
func TestDownlinkSourcePortSpreadsFlows(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	sport := func(srcPort uint16) uint16 {
		pkt := concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, sessPlain.UE, srcPort, 6000, 64, payload))
		ret, out := e.run(t, pkt, e.n6)
		if ret != xdpRedirect {
			t.Fatalf("verdict %s", verdictNames[ret])
		}
		return binary.BigEndian.Uint16(out[34:36])
	}
	seen := map[uint16]bool{}
	for p := uint16(1000); p < 1064; p++ {
		sp := sport(p)
		if sp < 0xC000 {
			t.Errorf("source port %d outside the dynamic range", sp)
		}
		if again := sport(p); again != sp {
			t.Errorf("flow %d: source port %d then %d", p, sp, again)
		}
		seen[sp] = true
	}
	if len(seen) < 48 { // 64 flows into 16384 ports: collisions are rare
		t.Errorf("64 flows used only %d source ports", len(seen))
	}
}

// TestDefaultTableHoldsManySessions fills a datapath of the default size (100,000 sessions)
// and checks that the last session forwards both ways.
func TestDefaultTableHoldsManySessions(t *testing.T) {
	const n = 100000
	e := newTestEnv(t, n)
	var last session.Session
	for i := range n {
		last = session.Session{
			ID: uint64(i + 1), UE: netip.AddrFrom4([4]byte{10, 60 + byte(i>>16), byte(i >> 8), byte(i)}),
			UplinkTEID: uint32(0x10000 + i), GNB: addrGNB, DownlinkTEID: uint32(i + 1), GTPUAddr: addrN3,
		}
		if err := e.addSession(last); err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, last.UplinkTEID, nil, innerUDP(t, last.UE, addrDN, 1, 2, 64, payload)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Errorf("uplink of session %d: %s", n, verdictNames[ret])
	}
	if ret, _ := e.run(t, dlIn(t, last, 64), e.n6); ret != xdpRedirect {
		t.Errorf("downlink of session %d: %s", n, verdictNames[ret])
	}
}

// TestInstallOwner drives the owner-level API PFCP sessions use: several rule sets under one
// owner, keys dropped by a replacement, all-or-nothing failures and other owners' keys.
func TestInstallOwner(t *testing.T) {
	e := newTestEnv(t, 16)
	const owner = 1 << 32
	fwd := rules.FAR{Action: rules.Forward}
	encap := rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x77, Peer: addrGNB, Local: addrN3}}
	ulA := rules.RuleSet{Uplink: true, TEID: 0xa, PDRs: []rules.PDR{{ID: 1, FAR: fwd}}}
	ulB := rules.RuleSet{Uplink: true, TEID: 0xb, PDRs: []rules.PDR{{ID: 3, FAR: fwd}}}
	dl := rules.RuleSet{UE: sessPlain.UE, PDRs: []rules.PDR{{ID: 2, FAR: encap}}}
	if err := e.dp.Install(owner, []rules.RuleSet{ulA, ulB, dl}); err != nil {
		t.Fatal(err)
	}
	pkt := func(teid uint32) []byte {
		return outerGTP(t, gtpHdr(0x30, 255, teid, nil, ulInner(t, 64)), nil)
	}
	for _, teid := range []uint32{0xa, 0xb} {
		if ret, _ := e.run(t, pkt(teid), e.n3); ret != xdpRedirect {
			t.Fatalf("TEID 0x%x: verdict %s", teid, verdictNames[ret])
		}
		if o, ok := e.dp.KeyOwner(rules.Key{Uplink: true, TEID: teid}); !ok || o != owner {
			t.Errorf("owner of TEID 0x%x: %d %v", teid, o, ok)
		}
	}
	// Another owner cannot take a key in use, and the refusal changes nothing.
	if err := e.dp.Install(owner+1, []rules.RuleSet{ulB}); err == nil || !strings.Contains(err.Error(), "is used by session") {
		t.Errorf("key of another owner: %v", err)
	}
	// A replacement without TEID 0xb removes its key; PDR 1 keeps counting where it was.
	if err := e.dp.Install(owner, []rules.RuleSet{ulA, dl}); err != nil {
		t.Fatal(err)
	}
	if ret, _ := e.run(t, pkt(0xb), e.n3); ret != xdpDrop {
		t.Errorf("TEID 0xb still forwards after its rule set was dropped: %s", verdictNames[ret])
	}
	if _, ok := e.dp.KeyOwner(rules.Key{Uplink: true, TEID: 0xb}); ok {
		t.Error("TEID 0xb still owned")
	}
	e.run(t, pkt(0xa), e.n3)
	// A replacement whose second set fails (65 filters) leaves the first one unpublished.
	var many []sdf.Filter
	for i := range 65 {
		many = append(many, sdf.Filter{Protocol: 17, LocalPorts: []sdf.PortRange{{First: uint16(i + 1), Last: uint16(i + 1)}}})
	}
	bad := rules.RuleSet{UE: sessPlain.UE, PDRs: []rules.PDR{{ID: 2, FAR: encap, Filters: many}}}
	drop := rules.RuleSet{Uplink: true, TEID: 0xa, PDRs: []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.Drop}}}}
	if err := e.dp.Install(owner, []rules.RuleSet{drop, bad}); err == nil {
		t.Fatal("65 filters accepted")
	}
	if ret, _ := e.run(t, pkt(0xa), e.n3); ret != xdpRedirect {
		t.Errorf("a failed replacement changed TEID 0xa: %s", verdictNames[ret])
	}
	usage, err := e.dp.Uninstall(owner)
	innerLen := uint64(len(ulInner(t, 64)))
	want := []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 3 * innerLen}, {PDR: 2}}
	if err != nil || !slices.Equal(usage, want) {
		t.Errorf("uninstall: %+v %v, want %+v", usage, err, want)
	}
	if ret, _ := e.run(t, pkt(0xa), e.n3); ret != xdpDrop {
		t.Errorf("uninstalled owner still forwards: %s", verdictNames[ret])
	}
	if _, err := e.dp.Uninstall(owner); !errors.Is(err, ErrNotFound) {
		t.Errorf("second uninstall: %v", err)
	}
}

// TestMatchAllFilterNeedsNoRuleSet: a key whose one PDR has a filter matching every packet
// ("permit out ip from any to assigned", as free5GC sends) takes the fast path, without a
// classification rule set; any narrower filter takes one.
func TestMatchAllFilterNeedsNoRuleSet(t *testing.T) {
	e := newTestEnv(t, 16)
	fwd := rules.FAR{Action: rules.Forward}
	all := sdf.Filter{Protocol: sdf.AnyProtocol}
	udp := sdf.Filter{Protocol: 17}
	for _, c := range []struct {
		filters []sdf.Filter
		ruleSet bool
	}{{nil, false}, {[]sdf.Filter{all}, false}, {[]sdf.Filter{udp, all}, false}, {[]sdf.Filter{udp}, true}} {
		rs := rules.RuleSet{Uplink: true, TEID: 0xa, PDRs: []rules.PDR{{ID: 1, FAR: fwd, Filters: c.filters}}}
		if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err != nil {
			t.Fatal(err)
		}
		ref := e.ruleRef(t, rules.Key{Uplink: true, TEID: 0xa})
		if got := ref.Ruleset != 0; got != c.ruleSet {
			t.Errorf("filters %v: rule set %d, want one: %v", c.filters, ref.Ruleset, c.ruleSet)
		}
		if ret, _ := e.run(t, outerGTP(t, gtpHdr(0x30, 255, 0xa, nil, ulInner(t, 64)), nil), e.n3); ret != xdpRedirect {
			t.Errorf("filters %v: verdict %s", c.filters, verdictNames[ret])
		}
	}
}

// TestExpiringNotCharged: a packet whose TTL runs out here goes to the kernel uncharged, in both
// directions alike: usage counts only what is forwarded.
func TestExpiringNotCharged(t *testing.T) {
	e := newTestEnv(t, 16)
	s := sessPlain
	if err := e.addSession(s); err != nil {
		t.Fatal(err)
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, s.UplinkTEID, nil, ulInner(t, 1)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpPass {
		t.Fatalf("uplink TTL 1: verdict %s", verdictNames[ret])
	}
	if ret, _ := e.run(t, dlIn(t, s, 1), e.n6); ret != xdpPass {
		t.Fatalf("downlink TTL 1: verdict %s", verdictNames[ret])
	}
	if u, err := e.usage(s.ID); err != nil || u != (session.Usage{}) {
		t.Fatalf("usage after expiring packets %+v, %v; want none", u, err)
	}
}

// TestOnePDRKeyNeedsNoRuleSlot: a key with one PDR and no filter (every static session, and
// most PFCP ones) keeps its PDR and FAR in the value its key lookup returns, so it takes no
// PDR/FAR slot and a packet makes no lookup beyond its key's; a key with several PDRs does.
func TestOnePDRKeyNeedsNoRuleSlot(t *testing.T) {
	e := newTestEnv(t, 16)
	free := e.dp.rules.n
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	if used := free - e.dp.rules.n; used != 0 {
		t.Errorf("a session of one-PDR keys took %d PDR/FAR slots, want 0", used)
	}
	two := []rules.PDR{
		{ID: 1, Precedence: 1, Filters: []sdf.Filter{{Protocol: 17}}, FAR: rules.FAR{Action: rules.Forward}},
		{ID: 2, Precedence: 2, FAR: rules.FAR{Action: rules.Drop}},
	}
	if err := e.dp.Install(1<<32, []rules.RuleSet{{UE: netip.MustParseAddr("10.45.9.9"), PDRs: two}}); err != nil {
		t.Fatal(err)
	}
	if used := free - e.dp.rules.n; used != 2 {
		t.Errorf("a key of two PDRs took %d PDR/FAR slots, want 2", used)
	}
}

// ownerCounterSlots are the counter slots owner's PDRs use.
func ownerCounterSlots(dp *Datapath, owner uint64) map[uint32]bool {
	out := map[uint32]bool{}
	for _, set := range dp.owners[owner] {
		for _, c := range set.counters {
			for _, slot := range c.slots() {
				out[slot] = true
			}
		}
	}
	return out
}

// countThenDelete installs s, counts an uplink packet in it and deletes it: its counter
// slots go back to the allocator holding counts.
func countThenDelete(t *testing.T, e *testEnv, s session.Session) map[uint32]bool {
	t.Helper()
	if err := e.addSession(s); err != nil {
		t.Fatal(err)
	}
	ul := outerGTP(t, gtpHdr(0x30, 255, s.UplinkTEID, nil, ulInner(t, 64)), nil)
	if ret, _ := e.run(t, ul, e.n3); ret != xdpRedirect {
		t.Fatalf("uplink verdict %s", verdictNames[ret])
	}
	used := ownerCounterSlots(e.dp, s.ID)
	if pdrs, err := e.dp.Uninstall(s.ID); err != nil || session.UsageOf(pdrs).Uplink.Packets != 1 {
		t.Fatalf("delete returned %+v, %v; want 1 uplink packet", pdrs, err)
	}
	return used
}

// TestReusedCounterSlotStartsFromZero: allocCounter skips the reset of slots a fresh map
// holds zero in; a slot handed out again after it counted is still reset, in the same run
// and after a restart (whose maps an earlier run counted in).
func TestReusedCounterSlotStartsFromZero(t *testing.T) {
	e := newTestEnv(t, 2)
	if !reuseCounters(t, e, countThenDelete(t, e, sessPlain)) {
		t.Fatal("no counter slot was handed out again")
	}
	used := countThenDelete(t, e, sessPlain)
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	e.dp = e.load(t, Options{PinPath: e.dp.opts.PinPath, MaxSessions: 2, GTPUAddrs: []netip.Addr{addrN3},
		N3Interfaces: []string{"n3"}})
	if !reuseCounters(t, e, used) {
		t.Fatal("after the restart, no slot the earlier run counted in was handed out")
	}
}

// reuseCounters installs and deletes sessQFI until it is given one of the slots in used (as
// slots hands out every other free slot first, it cycles through them), failing t if it
// counts anything without a packet; false if no slot in used came back.
func reuseCounters(t *testing.T, e *testEnv, used map[uint32]bool) bool {
	t.Helper()
	for range len(e.dp.counters.free) {
		if err := e.addSession(sessQFI); err != nil {
			t.Fatal(err)
		}
		reused := false
		for slot := range ownerCounterSlots(e.dp, sessQFI.ID) {
			reused = reused || used[slot]
		}
		pdrs, err := e.dp.Uninstall(sessQFI.ID)
		if u := session.UsageOf(pdrs); err != nil || u != (session.Usage{}) {
			t.Fatalf("a session in reused slots (one counted in before: %v) counted %+v, %v without a packet", reused, u, err)
		}
		if reused {
			return true
		}
	}
	return false
}
