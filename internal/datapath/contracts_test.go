package datapath

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/meter"
)

// The policer's tests: classes over sessPlain's traffic, contracts on them, packets through
// BPF_PROG_TEST_RUN on the user clock.
//
//	class 10: uplink UDP to port 2000 (ulInner's, and policedUL's by default)
//	class 20: downlink UDP to port 6000 (dlIn's)
//	class 30: uplink UDP to port 4000; never given a contract
//	uplink UDP to port 3000 matches no class
const (
	classUL       = 10
	classDL       = 20
	classNoPolicy = 30
	portUL        = 2000
	portNoPolicy  = 4000
	portNoClass   = 3000
)

func newPolicerEnv(t *testing.T, algo MeterAlgo) *testEnv {
	t.Helper()
	e := newTestEnvOpts(t, Options{MaxSessions: 16, Clock: ClockUser, MeterAlgo: algo})
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	e.setClasses(t,
		classifier.Class{ID: classUL, Direction: "ingress", Protocol: "udp", DstPort: "2000"},
		classifier.Class{ID: classDL, Direction: "egress", Protocol: "udp", DstPort: "6000"},
		classifier.Class{ID: classNoPolicy, Direction: "ingress", Protocol: "udp", DstPort: "4000"})
	return e
}

// policedUL is an uplink packet of sessPlain whose inner packet (what the policer counts) is
// size bytes, to UDP port dport, and the packet the datapath forwards for it on N6.
func policedUL(t testing.TB, dport uint16, size int) (in, out []byte) {
	pad := strings.Repeat("x", size-28)
	inner := innerUDP(t, ueAddr, addrDN, 1000, dport, 64, pad)
	return outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, inner), nil),
		concat(ethBytes(macN6, macDN), innerUDP(t, ueAddr, addrDN, 1000, dport, 63, pad))
}

func setContract(t testing.TB, e *testEnv, c Contract) {
	t.Helper()
	if err := e.dp.SetContract(c); err != nil {
		t.Fatal(err)
	}
}

func contractCounters(t testing.TB, e *testEnv, class uint32) PoliceCounters {
	t.Helper()
	info, err := e.dp.Contract(class)
	if err != nil {
		t.Fatal(err)
	}
	return info.Counters
}

// TestPolicerActions: PASS and DROP, both directions, the default contract for packets with
// no class and for a class without a contract, each packet compared whole.
func TestPolicerActions(t *testing.T) {
	e := newPolicerEnv(t, TokenBucket)
	ulIn, ulOut := policedUL(t, portUL, 1000)
	noClassIn, noClassOut := policedUL(t, portNoClass, 100)
	noPolicyIn, noPolicyOut := policedUL(t, portNoPolicy, 200)
	dlOut := dlOuter(t, sessPlain, innerUDP(t, addrDN, sessPlain.UE, 5000, 6000, 63, payload), 0x28)
	dlLen := uint64(len(payload) + 28)

	ulPass := map[string]uint64{"ul_rx": 1, "ul_tx": 1, "cls_hit": 1}
	ulPassNoClass := map[string]uint64{"ul_rx": 1, "ul_tx": 1, "cls_miss": 1}
	ulPolicedHit := map[string]uint64{"ul_rx": 1, "cls_hit": 1}
	ulPolicedMiss := map[string]uint64{"ul_rx": 1, "cls_miss": 1}
	policed := map[string]uint64{"policer": 1}
	steps := []struct {
		name   string
		before func()
		c      pktCase
	}{
		{name: "no contract at all: everything passes", c: pktCase{in: ulIn, out: ulOut, verdict: xdpRedirect, counters: ulPass}},
		{name: "class 10 pass", before: func() { setContract(t, e, Contract{Class: classUL, Action: PolicePass}) },
			c: pktCase{in: ulIn, out: ulOut, verdict: xdpRedirect, counters: ulPass}},
		{name: "class 20 (downlink) drop", before: func() { setContract(t, e, Contract{Class: classDL, Action: PoliceDrop}) },
			c: pktCase{in: dlIn(t, sessPlain, 64), ifindex: n6, verdict: xdpDrop,
				counters: map[string]uint64{"dl_rx": 1, "cls_hit": 1}, drops: policed}},
		{name: "no class, no default contract: passes",
			c: pktCase{in: noClassIn, out: noClassOut, verdict: xdpRedirect, counters: ulPassNoClass}},
		{name: "class without a contract, no default contract: passes",
			c: pktCase{in: noPolicyIn, out: noPolicyOut, verdict: xdpRedirect, counters: ulPass}},
		{name: "default drop: no class", before: func() {
			setContract(t, e, Contract{Class: DefaultContractClass, Action: PoliceDrop})
		}, c: pktCase{in: noClassIn, verdict: xdpDrop, counters: ulPolicedMiss, drops: policed}},
		{name: "default drop: class without a contract",
			c: pktCase{in: noPolicyIn, verdict: xdpDrop, counters: ulPolicedHit, drops: policed}},
		{name: "default drop: a class's own contract wins",
			c: pktCase{in: ulIn, out: ulOut, verdict: xdpRedirect, counters: ulPass}},
		{name: "class 20 pass (replaced), under a default drop", before: func() {
			setContract(t, e, Contract{Class: classDL, Action: PolicePass})
		}, c: pktCase{in: dlIn(t, sessPlain, 64), ifindex: n6, out: dlOut, fixSport: true, verdict: xdpRedirect,
			counters: map[string]uint64{"dl_rx": 1, "dl_tx": 1, "cls_hit": 1}}},
		{name: "class 10 deleted: the default applies", before: func() {
			if err := e.dp.DeleteContract(classUL); err != nil {
				t.Fatal(err)
			}
		}, c: pktCase{in: ulIn, verdict: xdpDrop, counters: ulPolicedHit, drops: policed}},
		{name: "default deleted: passes again", before: func() {
			if err := e.dp.DeleteContract(DefaultContractClass); err != nil {
				t.Fatal(err)
			}
		}, c: pktCase{in: noClassIn, out: noClassOut, verdict: xdpRedirect, counters: ulPassNoClass}},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		s.c.name = s.name
		if s.c.ifindex == nil {
			s.c.ifindex = n3
		}
		if !t.Run(s.name, func(t *testing.T) { runCase(t, e, s.c) }) {
			return // the next steps build on this one
		}
	}

	// Class 20: one dropped while DROP, one passed once replaced by PASS; both counted on the
	// same counters. Class 10 and the default contract went with their counters.
	want := PoliceCounters{PassedPackets: 1, PassedBytes: dlLen, DroppedPackets: 1, DroppedBytes: dlLen}
	if got := contractCounters(t, e, classDL); got != want {
		t.Errorf("class %d counters %+v, want %+v", classDL, got, want)
	}
	list, err := e.dp.Contracts()
	if err != nil {
		t.Fatal(err)
	}
	if want := []ContractInfo{{Contract: Contract{Class: classDL, Action: PolicePass}, Counters: want}}; !equalContracts(list, want) {
		t.Errorf("Contracts() = %+v, want %+v", list, want)
	}
}

func equalContracts(a, b []ContractInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPolicerDefaultCounters: the default contract counts the packets it decides, whether
// they had no class or a class without a contract.
func TestPolicerDefaultCounters(t *testing.T) {
	e := newPolicerEnv(t, TokenBucket)
	setContract(t, e, Contract{Class: DefaultContractClass, Action: PoliceLimit, Rate: 1_000_000, Burst: 1000})
	setContract(t, e, Contract{Class: classUL, Action: PolicePass})
	noClassIn, noClassOut := policedUL(t, portNoClass, 600)
	noPolicyIn, _ := policedUL(t, portNoPolicy, 600)
	ulIn, _ := policedUL(t, portUL, 1000)

	ret, out := e.run(t, noClassIn, e.n3) // 600 of the 1000 bytes of burst
	if ret != xdpRedirect || string(out) != string(noClassOut) {
		t.Fatalf("unclassified packet: %s\n%s\nwant redirect of\n%s", verdictNames[ret], dump(out), dump(noClassOut))
	}
	if ret, _ := e.run(t, noPolicyIn, e.n3); ret != xdpDrop { // 600 more: over
		t.Fatalf("class without a contract, over the default's burst: %s, want DROP", verdictNames[ret])
	}
	for range 3 {
		if ret, _ := e.run(t, ulIn, e.n3); ret != xdpRedirect {
			t.Fatalf("class with a PASS contract: %s", verdictNames[ret])
		}
	}
	if got, want := contractCounters(t, e, DefaultContractClass),
		(PoliceCounters{PassedPackets: 1, PassedBytes: 600, DroppedPackets: 1, DroppedBytes: 600}); got != want {
		t.Errorf("default counters %+v, want %+v", got, want)
	}
	if got, want := contractCounters(t, e, classUL), (PoliceCounters{PassedPackets: 3, PassedBytes: 3000}); got != want {
		t.Errorf("class %d counters %+v, want %+v", classUL, got, want)
	}
}

// policeSeq sends n 1000-byte class 10 packets at clock now and returns what happened to
// each: p (forwarded; the output is compared whole) or d (dropped).
func policeSeq(t *testing.T, e *testEnv, now uint64, n int) string {
	t.Helper()
	if err := e.dp.SetClock(now); err != nil {
		t.Fatal(err)
	}
	in, want := policedUL(t, portUL, 1000)
	var got strings.Builder
	for range n {
		switch ret, out := e.run(t, in, e.n3); ret {
		case xdpRedirect:
			if string(out) != string(want) {
				t.Fatalf("forwarded packet differs\n%s\nwant\n%s", dump(out), dump(want))
			}
			got.WriteByte('p')
		case xdpDrop:
			got.WriteByte('d')
		default:
			t.Fatalf("verdict %s", verdictNames[ret])
		}
	}
	return got.String()
}

var policerAlgos = []struct {
	name string
	algo MeterAlgo
}{{"token bucket", TokenBucket}, {"sliding window", SlidingWindow}, {"fixed window", FixedWindow}}

// TestPolicerLimit: a LIMIT contract of 1,000,000 bytes/s (8 Mbit/s) and a burst of 3000
// bytes on 1000-byte packets gives each algorithm's exact pattern; every drop is a "policer"
// drop and every packet is on the contract's counters.
func TestPolicerLimit(t *testing.T) {
	const ms = uint64(time.Millisecond)
	type step struct {
		at   uint64
		want string // one letter per packet sent at `at`: p passes, d drops
	}
	refilling := []step{
		{0, "pppd"},         // the burst, then nothing left
		{1 * ms, "pd"},      // 1 ms earns 1000 bytes: one packet
		{1*ms + ms/2, "d"},  // half a packet
		{2*ms + ms/2, "pd"}, // 1.5 ms since the last: one, and half of the next
		{3 * ms, "pd"},      // the other half
		{100 * ms, "pppd"},  // a long idle earns the burst, no more
	}
	cases := map[MeterAlgo][]step{
		TokenBucket:   refilling,
		SlidingWindow: refilling,
		FixedWindow: {
			{0, "pppd"},        // 3000 bytes per 3 ms window
			{1 * ms, "d"},      // the same window: spent
			{2*ms + ms/2, "d"}, // still
			{3 * ms, "pppd"},   // the next window
			{5 * ms, "d"},
			{100 * ms, "pppd"}, // windows aligned to the first: [99 ms, 102 ms)
			{101 * ms, "d"},
			{102 * ms, "pppd"},
		},
	}
	for _, a := range policerAlgos {
		t.Run(a.name, func(t *testing.T) {
			e := newPolicerEnv(t, a.algo)
			setContract(t, e, Contract{Class: classUL, Action: PoliceLimit, Rate: 1_000_000, Burst: 3000})
			var want PoliceCounters
			for _, s := range cases[a.algo] {
				if got := policeSeq(t, e, s.at, len(s.want)); got != s.want {
					t.Errorf("at %v: %s, want %s", time.Duration(s.at), got, s.want)
				}
				want.PassedPackets += uint64(strings.Count(s.want, "p"))
				want.DroppedPackets += uint64(strings.Count(s.want, "d"))
			}
			want.PassedBytes, want.DroppedBytes = 1000*want.PassedPackets, 1000*want.DroppedPackets
			if got := contractCounters(t, e, classUL); got != want {
				t.Errorf("counters %+v, want %+v", got, want)
			}
			st, err := e.dp.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Drops["policer"] != want.DroppedPackets {
				t.Errorf("policer drops %d, want %d", st.Drops["policer"], want.DroppedPackets)
			}
		})
	}
}

// TestPolicerReplace: a contract replaced between packets applies from the next packet: LIMIT
// -> PASS -> LIMIT, the last with a fresh burst. Setting the contract a class already has
// keeps its meter (no fresh burst). The counters carry on throughout, and go with the
// contract.
func TestPolicerReplace(t *testing.T) {
	for _, a := range policerAlgos {
		t.Run(a.name, func(t *testing.T) {
			e := newPolicerEnv(t, a.algo)
			limit := Contract{Class: classUL, Action: PoliceLimit, Rate: 1_000_000, Burst: 2000}
			seq := func(want string) {
				t.Helper()
				if got := policeSeq(t, e, 0, len(want)); got != want {
					t.Fatalf("%s, want %s", got, want)
				}
			}
			setContract(t, e, limit)
			seq("ppd")
			setContract(t, e, limit) // the same: the meter carries on, still empty
			seq("d")
			setContract(t, e, Contract{Class: classUL, Action: PolicePass})
			seq("pppp")
			setContract(t, e, limit) // a new meter: a full burst
			seq("ppd")
			setContract(t, e, Contract{Class: classUL, Action: PoliceLimit, Rate: 1_000_000, Burst: 1000})
			seq("pd")
			setContract(t, e, Contract{Class: classUL, Action: PoliceDrop})
			seq("dd")
			want := PoliceCounters{PassedPackets: 9, PassedBytes: 9000, DroppedPackets: 6, DroppedBytes: 6000}
			if got := contractCounters(t, e, classUL); got != want {
				t.Errorf("counters %+v, want %+v", got, want)
			}

			// Deleted with its counters; a new contract starts from zero.
			if err := e.dp.DeleteContract(classUL); err != nil {
				t.Fatal(err)
			}
			if _, err := e.dp.Contract(classUL); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Contract after delete: %v, want ErrNotFound", err)
			}
			seq("pp") // no contract, no default: passes, counted nowhere
			setContract(t, e, Contract{Class: classUL, Action: PolicePass})
			seq("p")
			if got, want := contractCounters(t, e, classUL), (PoliceCounters{PassedPackets: 1, PassedBytes: 1000}); got != want {
				t.Errorf("counters of the new contract %+v, want %+v", got, want)
			}
		})
	}
}

// A contract set while no class exists is kept, and polices once classes exist: the policer
// runs after the classifier, only when there are classes.
func TestPolicerWaitsForClasses(t *testing.T) {
	e := newTestEnvOpts(t, Options{MaxSessions: 16, Clock: ClockUser})
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	setContract(t, e, Contract{Class: DefaultContractClass, Action: PoliceDrop})
	in, out := policedUL(t, portNoClass, 100)
	runCase(t, e, pktCase{in: in, out: out, ifindex: n3, verdict: xdpRedirect,
		counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1}})
	e.setClasses(t, classifier.Class{ID: 1, Protocol: "tcp"})
	runCase(t, e, pktCase{in: in, ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1, "cls_miss": 1}, drops: map[string]uint64{"policer": 1}})
}

func TestContractErrors(t *testing.T) {
	e := newTestEnvOpts(t, Options{MaxSessions: 16})
	for _, tt := range []struct {
		c    Contract
		want string
	}{
		{Contract{Class: 1, Action: PoliceLimit},
			"contract for class 1: rate: a limit needs a rate in bytes/s\nburst: a limit needs a burst in bytes"},
		{Contract{Class: 1, Action: PoliceLimit, Rate: 1000},
			"contract for class 1: burst: a limit needs a burst in bytes"},
		{Contract{Class: 1, Action: PoliceLimit, Rate: meter.MaxRate + 1, Burst: 1},
			"contract for class 1: rate 125000000001 bytes/s: use 1 to 125000000000 (1 Tbit/s)"},
		{Contract{Class: 1, Action: PoliceLimit, Rate: 1, Burst: meter.MaxBurst + 1},
			"contract for class 1: burst 4611686019 bytes: use 1 to 4611686018"},
		{Contract{Class: 2, Action: PolicePass, Rate: 1000},
			"contract for class 2: rate: a pass contract has no rate; set one with Limit only"},
		{Contract{Class: 0, Action: PoliceDrop, Rate: 1, Burst: 1},
			"contract for class 0: rate: a drop contract has no rate; set one with Limit only\n" +
				"burst: a drop contract has no burst; set one with Limit only"},
		{Contract{Class: 3, Action: 7}, "contract for class 3: action 7: use Pass, Drop or Limit"},
	} {
		if err := e.dp.SetContract(tt.c); err == nil || err.Error() != tt.want {
			t.Errorf("SetContract(%+v) = %v, want %q", tt.c, err, tt.want)
		}
	}
	if list, err := e.dp.Contracts(); err != nil || len(list) != 0 {
		t.Errorf("after invalid contracts: Contracts() = %+v, %v; want none", list, err)
	}
	if err := e.dp.DeleteContract(5); !errors.Is(err, ErrNotFound) || err.Error() != "class 5 has no contract" {
		t.Errorf("DeleteContract(5) = %v, want ErrNotFound, \"class 5 has no contract\"", err)
	}
	if _, err := e.dp.Contract(5); !errors.Is(err, ErrNotFound) {
		t.Errorf("Contract(5) = %v, want ErrNotFound", err)
	}
}

// Contracts are listed by class with what they were set to; a load over the pinned maps of
// an earlier run starts with none (contracts live in the daemon's memory, the maps hold only
// slots).
func TestContractsListAndReload(t *testing.T) {
	e := newTestEnvOpts(t, Options{MaxSessions: 16})
	set := []Contract{
		{Class: 7, Action: PoliceLimit, Rate: 1_250_000, Burst: 65536},
		{Class: DefaultContractClass, Action: PolicePass},
		{Class: 4_000_000_000, Action: PoliceDrop},
		{Class: 3, Action: PoliceLimit, Rate: 125, Burst: 1500},
	}
	for _, c := range set {
		setContract(t, e, c)
	}
	list, err := e.dp.Contracts()
	if err != nil {
		t.Fatal(err)
	}
	want := []ContractInfo{{Contract: set[1]}, {Contract: set[3]}, {Contract: set[0]}, {Contract: set[2]}}
	if !equalContracts(list, want) {
		t.Errorf("Contracts() = %+v, want %+v", list, want)
	}

	dp2 := e.load(t, e.dp.opts) // the same maps
	defer dp2.Close(false)
	if list, err := dp2.Contracts(); err != nil || len(list) != 0 {
		t.Errorf("after a new load: Contracts() = %+v, %v; want none", list, err)
	}
}

// The policer has its own load-time switch: it is in the program only while a contract and
// classes exist. Classes without contracts leave it out; the first contract swaps it in, the
// last one's deletion out again; packets are policed only while it is in.
func TestPolicerSwitch(t *testing.T) {
	e := newPolicerEnv(t, TokenBucket)
	policer := func(want bool) {
		t.Helper()
		e.dp.mu.Lock()
		got := e.dp.prog.policer
		e.dp.mu.Unlock()
		if got != want {
			t.Fatalf("policer in the program: %v, want %v", got, want)
		}
	}
	in, out := policedUL(t, portUL, 100)
	passes := pktCase{in: in, out: out, ifindex: n3, verdict: xdpRedirect,
		counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1, "cls_hit": 1}}
	policer(false)
	runCase(t, e, passes)
	setContract(t, e, Contract{Class: classUL, Action: PoliceDrop})
	policer(true)
	runCase(t, e, pktCase{in: in, ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1, "cls_hit": 1}, drops: map[string]uint64{"policer": 1}})
	setContract(t, e, Contract{Class: DefaultContractClass, Action: PolicePass})
	if err := e.dp.DeleteContract(classUL); err != nil {
		t.Fatal(err)
	}
	policer(true) // the default contract is left
	if err := e.dp.DeleteContract(DefaultContractClass); err != nil {
		t.Fatal(err)
	}
	policer(false)
	runCase(t, e, passes)
	// Without classes it goes out even with a contract; classes bring it back.
	setContract(t, e, Contract{Class: classUL, Action: PoliceDrop})
	policer(true)
	none, err := classifier.Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.dp.SetClasses(none); err != nil {
		t.Fatal(err)
	}
	policer(false)
	e.setClasses(t, classifier.Class{ID: classUL, Direction: "ingress", Protocol: "udp", DstPort: "2000"})
	policer(true)
	runCase(t, e, pktCase{in: in, ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1, "cls_hit": 1}, drops: map[string]uint64{"policer": 1}})
}

// TestPolicerFollowsClassChanges: contracts ride on the class entries of the classifier's
// buffers. A contract set before its class exists polices the class once it does; a class
// change that moves the class's bit keeps its contract's meter (still empty) and counters.
func TestPolicerFollowsClassChanges(t *testing.T) {
	e := newPolicerEnv(t, TokenBucket)
	const later = 40 // no class has this id yet
	setContract(t, e, Contract{Class: later, Action: PoliceDrop})
	setContract(t, e, Contract{Class: classUL, Action: PoliceLimit, Rate: 1_000_000, Burst: 2000})
	if got := policeSeq(t, e, 0, 3); got != "ppd" {
		t.Fatalf("%s, want ppd", got)
	}
	ul := classifier.Class{ID: classUL, Direction: "ingress", Protocol: "udp", DstPort: "2000"}
	// Class 40 takes port 4000 at a higher priority: class 10's bit moves.
	e.setClasses(t, classifier.Class{ID: later, Priority: 9, Direction: "ingress", Protocol: "udp", DstPort: "4000"}, ul)
	if got := policeSeq(t, e, 0, 1); got != "d" {
		t.Fatalf("after the class change: %s, want d (the meter carries on, empty)", got)
	}
	want := PoliceCounters{PassedPackets: 2, PassedBytes: 2000, DroppedPackets: 2, DroppedBytes: 2000}
	if got := contractCounters(t, e, classUL); got != want {
		t.Errorf("class %d counters %+v, want %+v", classUL, got, want)
	}
	in, _ := policedUL(t, portNoPolicy, 200)
	runCase(t, e, pktCase{in: in, ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1, "cls_hit": 1}, drops: map[string]uint64{"policer": 1}})
	if got := contractCounters(t, e, later); got.DroppedPackets != 1 {
		t.Errorf("class %d counters %+v, want one dropped packet", later, got)
	}
}
