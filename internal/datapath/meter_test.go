package datapath

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/meter"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

var meterAlgos = map[string]MeterAlgo{"token bucket": TokenBucket, "sliding window": SlidingWindow, "fixed window": FixedWindow}

// meterEnv is a datapath on the user clock with one downlink rule whose QER has an MBR.
type meterEnv struct {
	*testEnv
	t  *testing.T
	ue netip.Addr
}

func newMeterEnv(t *testing.T, algo MeterAlgo, burst time.Duration, mbrKbps uint64) *meterEnv {
	e := &meterEnv{testEnv: newTestEnvOpts(t, Options{MaxSessions: 16, MeterAlgo: algo, Clock: ClockUser, MBRBurst: burst}),
		t: t, ue: netip.MustParseAddr("10.45.0.9")}
	e.setMBR(mbrKbps)
	return e
}

// setMBR (re)installs the downlink rule with a QER of mbr kbit/s. Its FAR routes the packet
// as it is (no tunnel), so a full-size 1500-byte packet still fits the veth's MTU.
func (e *meterEnv) setMBR(kbps uint64) {
	e.t.Helper()
	rs := rules.RuleSet{UE: e.ue, PDRs: []rules.PDR{{ID: 1, QERs: []rules.QER{{ID: 1, MBRDL: kbps}},
		FAR: rules.FAR{Action: rules.Forward}}}}
	if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err != nil {
		e.t.Fatal(err)
	}
}

// send runs one downlink packet with an inner IPv4 packet of size bytes at clock now on CPU
// 0 and says whether it was forwarded: one CPU, as meter.Model.Pass (a token bucket's credit
// is per CPU).
func (e *meterEnv) send(size uint32, now uint64) bool {
	return e.sendOn(0, size, now)
}

// sendOn is send on CPU cpu.
func (e *meterEnv) sendOn(cpu int, size uint32, now uint64) bool {
	e.t.Helper()
	if err := e.dp.SetClock(now); err != nil {
		e.t.Fatal(err)
	}
	pkt := concat(ethBytes(macDN, macN6), innerUDP(e.t, addrDN, e.ue, 5000, 6000, 64, strings.Repeat("x", int(size)-28)))
	switch ret, _ := e.runOn(e.t, cpu, pkt, e.n6); ret {
	case xdpRedirect:
		return true
	case xdpDrop:
		return false
	default:
		e.t.Fatalf("verdict %s", verdictNames[ret])
		return false
	}
}

// TestMeterSequences: hand-written arrival sequences with the exact pass/drop pattern of each
// algorithm: 8 Mbit/s (1 byte/µs), burst 3 ms (3000 bytes), 1000-byte packets.
func TestMeterSequences(t *testing.T) {
	const ms = uint64(time.Millisecond)
	type step struct {
		at   uint64
		want string // one letter per 1000-byte packet sent at `at`: p passes, d drops
	}
	burstThenIdle := []step{{0, "pppd"}}
	cases := map[MeterAlgo][]step{
		TokenBucket: append(burstThenIdle,
			step{1 * ms, "pd"},         // 1 ms earns one packet
			step{1*ms + ms/2, "d"},     // half a packet
			step{2 * ms, "pd"},         // the other half
			step{100_000 * ms, "pppd"}, // a long idle fills the bucket, no more
			step{50_000 * ms, "d"},     // the clock went back: no credit
			step{50_001 * ms, "pd"}),   // until it moves on
		SlidingWindow: append(burstThenIdle,
			step{1 * ms, "pd"},
			step{1*ms + ms/2, "d"},
			step{2 * ms, "pd"},
			step{100_000 * ms, "pppd"},
			step{50_000 * ms, "d"},
			step{50_001 * ms, "pd"}),
		FixedWindow: append(burstThenIdle,
			step{1 * ms, "d"}, // same 3 ms window: its budget is spent
			step{2*ms + ms/2, "d"},
			step{3 * ms, "pppd"},       // next window
			step{100_000 * ms, "pppd"}, // windows stay aligned to the first
			step{50_000 * ms, "pppd"},  // the clock went back: a window starts now
			step{50_001 * ms, "d"}),
	}
	for name, algo := range meterAlgos {
		t.Run(name, func(t *testing.T) {
			e := newMeterEnv(t, algo, 3*time.Millisecond, 8000)
			for _, s := range cases[algo] {
				var got strings.Builder
				for range s.want {
					if e.send(1000, s.at) {
						got.WriteByte('p')
					} else {
						got.WriteByte('d')
					}
				}
				if got.String() != s.want {
					t.Errorf("at %v: %s, want %s", time.Duration(s.at), got.String(), s.want)
				}
			}
			st, err := e.dp.Stats()
			if err != nil {
				t.Fatal(err)
			}
			drops := uint64(0)
			for _, s := range cases[algo] {
				drops += uint64(strings.Count(s.want, "d"))
			}
			if st.Drops["qer_mbr"] != drops {
				t.Errorf("qer_mbr drops %d, want %d", st.Drops["qer_mbr"], drops)
			}
		})
	}
}

// TestMeterMatchesModel sends random traffic (sizes 64 to 1500, gaps around the packet's
// time at the rate, idle periods and clock jumps back) at rates from 1 kbit/s to 100 Gbit/s,
// each packet on a CPU drawn at random, and checks every verdict against meter.Model: the
// token bucket's per-CPU credits included.
func TestMeterMatchesModel(t *testing.T) {
	cpus := min(runtime.NumCPU(), 2)
	rates := []uint64{1, 64, 1000, 100_000, 10_000_000, 100_000_000} // kbit/s: 1 kbit/s to 100 Gbit/s
	for name, algo := range meterAlgos {
		t.Run(name, func(t *testing.T) {
			e := newMeterEnv(t, algo, 2*time.Millisecond, rates[0])
			for j, kbps := range rates {
				e.setMBR(kbps)
				m, err := mbrMeter(kbps, 2*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				model := meter.Model{Algo: meter.Algo(algo), State: m}
				rng := rand.New(rand.NewPCG(kbps, uint64(algo)))
				// 1000 s after boot, or 208 days: the sliding window's origin (0 for a
				// fresh meter) is then too far behind to shift in one step.
				now := []uint64{1_000_000_000_000, 1 << 54}[j%2]
				for i := range 400 {
					size := uint32(64 + rng.IntN(1437))
					txNS := uint64(size) * 1_000_000_000 / m.Rate
					switch r := rng.IntN(100); {
					case r < 2:
						now += uint64(rng.Int64N(int64(10 * time.Second)))
					case r < 3:
						now -= min(now, uint64(rng.Int64N(int64(time.Second))))
					default:
						now += uint64(rng.Int64N(int64(2*txNS + 2)))
					}
					cpu := rng.IntN(cpus)
					want := model.PassOn(cpu, size, now)
					if got := e.sendOn(cpu, size, now); got != want {
						t.Fatalf("%d kbit/s, packet %d (%d bytes at %d ns on CPU %d): forwarded %v, model says %v",
							kbps, i, size, now, cpu, got, want)
					}
				}
			}
		})
	}
}

// TestMeterCreditsAcrossCPUs: a token bucket drained from both CPUs at once, then refilled
// and drained again, gives meter.Model's verdicts packet by packet: each CPU's credit (a
// chunk, a 64th of the burst, taken at a time) outlives the drain and is spent on top of the
// refilled burst: the burst passes within a chunk per CPU either way. 8 Mbit/s (1 byte/µs), burst 64 ms (64,000 bytes,
// chunks of 1000), 300-byte packets: each chunk leaves 100 bytes on its CPU.
func TestMeterCreditsAcrossCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	const burst = 64 * time.Millisecond
	e := newMeterEnv(t, TokenBucket, burst, 8000)
	m, err := mbrMeter(8000, burst)
	if err != nil {
		t.Fatal(err)
	}
	model := meter.Model{Algo: meter.TokenBucket, State: m}
	now := uint64(1_000_000_000_000)
	for round := range 2 {
		passed := 0
		for i := range 2 * m.Burst / 300 {
			cpu := int(i % 2)
			want := model.PassOn(cpu, 300, now)
			if got := e.sendOn(cpu, 300, now); got != want {
				t.Fatalf("round %d, packet %d on CPU %d: forwarded %v, model says %v", round, i, cpu, got, want)
			}
			if want {
				passed += 300
			}
		}
		t.Logf("round %d: %d bytes passed", round, passed)
		if chunk := int(m.Chunk / 1_000_000_000); passed < int(m.Burst)-2*chunk || passed > int(m.Burst)+2*chunk {
			t.Errorf("round %d: %d bytes passed, want the burst (%d) within a chunk per CPU", round, passed, m.Burst)
		}
		now += uint64(time.Second) // the bucket refills; the CPUs keep their credit
	}
}

// TestMeterPrecision: a long simulated run per algorithm at an offered load of 1.5 times the
// rate, 64- and 1518-byte frames (46- and 1500-byte IP packets, what the meters count), 100
// kbit/s to 10 Gbit/s. The rate passed after the initial
// burst must be within 1 % of the configured rate for the token bucket and the sliding window;
// the fixed window's error is reported (the papers saw more than 10 %).
func TestMeterPrecision(t *testing.T) {
	// A 100 µs burst (at least MinMBRBurst) keeps the runs short: the rate is measured only
	// after the burst is spent.
	const burst = 100 * time.Microsecond
	for name, algo := range meterAlgos {
		t.Run(name, func(t *testing.T) {
			e := newMeterEnv(t, algo, burst, 100)
			worst := 0.0
			for _, kbps := range []uint64{100, 1000, 10_000, 100_000, 1_000_000, 10_000_000} {
				for _, size := range []uint32{46, 1500} {
					e.setMBR(kbps)
					m, _ := mbrMeter(kbps, burst)
					gap := uint64(size) * 1_000_000_000 * 2 / (3 * m.Rate) // offered: 1.5 x rate
					// 3000 packets, or enough for the excess to exceed the burst 6 times over
					packets := max(3000, 12*m.Burst*1_000_000_000/m.Rate/gap)
					// The rate is measured from the first drop (the burst is spent, whatever
					// the meter held before) to the last packet.
					now := uint64(1_000_000_000_000)
					var passed, firstDrop uint64
					for range packets {
						now += gap
						switch {
						case !e.send(size, now):
							if firstDrop == 0 {
								firstDrop = now
							}
						case firstDrop != 0:
							passed += uint64(size)
						}
					}
					if firstDrop == 0 {
						t.Fatalf("%d kbit/s, %d-byte IP packets: nothing dropped at 1.5 times the rate", kbps, size)
					}
					got := float64(passed) / (float64(now-firstDrop) / 1e9)
					want := float64(m.Rate)
					errPct := 100 * (got - want) / want
					if errPct < 0 {
						errPct = -errPct
					}
					worst = max(worst, errPct)
					t.Logf("%s: %d kbit/s, %d-byte IP packets: %d sent, %.6g bytes/s passed after the burst, rate %.6g: error %.3f %%",
						name, kbps, size, packets, got, want, errPct)
					if algo != FixedWindow && errPct > 1 {
						t.Errorf("%d kbit/s, %d-byte IP packets: error %.3f %%, want below 1 %%", kbps, size, errPct)
					}
				}
			}
			t.Logf("%s: worst error %.3f %%", name, worst)
		})
	}
}

// TestQERsOfOnePDR: every QER of a PDR applies and PDRs naming one QER share its meter (a
// session AMBR); a packet one meter refuses is refunded to the meters it passed; a closed gate
// drops. 8 Mbit/s with a 3 ms burst: three 1000-byte packets per meter at t=0.
func TestQERsOfOnePDR(t *testing.T) {
	e := newMeterEnv(t, TokenBucket, 3*time.Millisecond, 8000)
	ambr := rules.QER{ID: 1, MBRDL: 8000}
	flow := rules.QER{ID: 2, MBRDL: 8000}
	gate := rules.QER{ID: 3, DLClosed: true}
	port := func(p uint16) []sdf.Filter {
		return []sdf.Filter{{Protocol: 17, LocalPorts: []sdf.PortRange{{First: p, Last: p}}}}
	}
	fwd := rules.FAR{Action: rules.Forward}
	rs := rules.RuleSet{UE: e.ue, PDRs: []rules.PDR{
		{ID: 1, Precedence: 1, Filters: port(6000), QERs: []rules.QER{flow, ambr}, FAR: fwd},
		{ID: 2, Precedence: 2, Filters: port(7000), QERs: []rules.QER{ambr}, FAR: fwd},
		{ID: 3, Precedence: 3, Filters: port(8000), QERs: []rules.QER{flow}, FAR: fwd},
		{ID: 4, Precedence: 4, Filters: port(9000), QERs: []rules.QER{gate}, FAR: fwd},
	}}
	if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.SetClock(1_000_000_000); err != nil {
		t.Fatal(err)
	}
	send := func(dport uint16) string {
		pkt := concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, e.ue, 5000, dport, 64, strings.Repeat("x", 1000-28)))
		switch ret, _ := e.run(t, pkt, e.n6); ret {
		case xdpRedirect:
			return "p"
		case xdpDrop:
			return "d"
		default:
			return verdictNames[ret]
		}
	}
	for _, step := range []struct {
		port uint16
		want string
		why  string
	}{
		{7000, "pppd", "the AMBR's three packets, spent through PDR 2"},
		{6000, "d", "PDR 1: the flow MBR passes, the AMBR (shared with PDR 2) refuses"},
		{8000, "pppd", "PDR 3 on the flow MBR alone: all three, so the refused packet was refunded"},
		{9000, "dd", "a closed gate"},
	} {
		var got strings.Builder
		for range step.want {
			got.WriteString(send(step.port))
		}
		if got.String() != step.want {
			t.Errorf("port %d: %s, want %s (%s)", step.port, got.String(), step.want, step.why)
		}
	}
	st, err := e.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops["qer_mbr"] != 3 || st.Drops["qer_gate_closed"] != 2 {
		t.Errorf("drops qer_mbr %d, qer_gate_closed %d; want 3 and 2", st.Drops["qer_mbr"], st.Drops["qer_gate_closed"])
	}
	// A modification that keeps the QERs keeps their meters (still spent); a new MBR gets a
	// fresh, full meter.
	if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err != nil {
		t.Fatal(err)
	}
	if got := send(7000); got != "d" {
		t.Errorf("after a modification with the same AMBR: %s, want d (its meter carries on)", got)
	}
	ambr.MBRDL = 16000
	rs.PDRs[0].QERs = []rules.QER{flow, ambr}
	rs.PDRs[1].QERs = []rules.QER{ambr}
	if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err != nil {
		t.Fatal(err)
	}
	if got := send(7000); got != "p" {
		t.Errorf("after the AMBR changed: %s, want p (a new meter starts full)", got)
	}
	if _, err := e.dp.Uninstall(1 << 32); err != nil {
		t.Fatal(err)
	}
	if n := len(e.dp.meters); n != 0 {
		t.Errorf("%d owners still hold meters after uninstall", n)
	}
}

// TestPolicerAfterQERs: the policer charges only packets that will be forwarded (a FAR that
// drops uses none of its tokens), and a packet it refuses gives back the QER's tokens.
func TestPolicerAfterQERs(t *testing.T) {
	e := newMeterEnv(t, TokenBucket, 3*time.Millisecond, 8000) // QER: three 1000-byte packets
	r, err := (classifier.Class{ID: 1, Direction: "egress", Protocol: "udp", DstPort: "6000"}).Parse()
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := classifier.Compile([]classifier.Rule{r})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.dp.SetClasses(compiled); err != nil {
		t.Fatal(err)
	}
	send := func(n int) (got string) {
		for range n {
			if e.send(1000, 1_000_000_000) {
				got += "p"
			} else {
				got += "d"
			}
		}
		return got
	}
	// The policer refuses: the QER's tokens come back.
	setContract(t, e.testEnv, Contract{Class: 1, Action: PoliceDrop})
	if got := send(2); got != "dd" {
		t.Fatalf("DROP contract: %s", got)
	}
	setContract(t, e.testEnv, Contract{Class: 1, Action: PolicePass})
	if got := send(4); got != "pppd" {
		t.Errorf("after the policer's refusals: %s, want pppd (the QER kept its three packets)", got)
	}
	// The QER refuses: the policer's tokens are not touched.
	setContract(t, e.testEnv, Contract{Class: 1, Action: PoliceLimit, Rate: 1, Burst: 2000})
	if got := send(3); got != "ddd" {
		t.Errorf("QER spent: %s, want ddd", got)
	}
	e.setMBR(16000) // a fresh, full QER meter
	if got := send(3); got != "ppd" {
		t.Errorf("policer after the QER's refusals: %s, want ppd (its 2000-byte burst untouched)", got)
	}
	// The class's counters carry on across its contracts: DROP dropped 2, PASS passed 3, the
	// LIMIT passed 2 and dropped 1; the QER's 3 refusals (and its 1 under PASS) never got there.
	if c := contractCounters(t, e.testEnv, 1); c.DroppedPackets != 3 || c.PassedPackets != 5 {
		t.Errorf("contract counters %+v: want 5 passed, 3 dropped", c)
	}
}
