package run

import (
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/bench/scenario"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

func pipeline(mod func(*scenario.Pipeline)) scenario.Pipeline {
	p := scenario.Default().Pipeline
	mod(&p)
	return p
}

// TestServersAndRoutes: every server lies in exactly the route its number gives, the routes
// do not overlap, and a single route covers every server.
func TestServersAndRoutes(t *testing.T) {
	for _, c := range []struct{ servers, routes int }{{1, 1}, {10, 1}, {10, 3}, {7, 7}, {1000, 100}, {65536, 6554}} {
		pl := newPlan(pipeline(func(p *scenario.Pipeline) { p.Servers, p.Routes = c.servers, c.routes }))
		routes := pl.routes()
		if len(routes) != c.routes {
			t.Fatalf("%+v: %d routes", c, len(routes))
		}
		for i, a := range routes {
			for _, b := range routes[i+1:] {
				if a.Overlaps(b) {
					t.Fatalf("%+v: routes %s and %s overlap", c, a, b)
				}
			}
		}
		seen := map[netip.Addr]bool{}
		for s := range c.servers {
			a := pl.server(s)
			if seen[a] {
				t.Fatalf("%+v: server %d repeats %s", c, s, a)
			}
			seen[a] = true
			if r := routes[s%c.routes]; !r.Contains(a) {
				t.Fatalf("%+v: server %d (%s) is not in its route %s", c, s, a, r)
			}
		}
	}
}

// TestPDRsOfFlows: flows are split into contiguous port ranges, one per PDR, and the session
// spec carries one range filter per PDR beyond the default and the unused extra filters.
func TestPDRsOfFlows(t *testing.T) {
	pl := newPlan(pipeline(func(p *scenario.Pipeline) {
		p.FlowsPerUser, p.PDRsPerUser, p.SDFFiltersPerPDR, p.QERsPerUser = 10, 4, 2, 2
		p.MBRUplink, p.MBRDownlink = 1_000_500, 2_000_000
	}))
	var pdrs []int
	for f := range 10 {
		pdrs = append(pdrs, pl.pdrOf(f))
	}
	if want := []int{0, 0, 0, 1, 1, 2, 2, 2, 3, 3}; !reflect.DeepEqual(pdrs, want) {
		t.Fatalf("PDRs of flows %v, want %v", pdrs, want)
	}
	s := pl.spec(7, testbed.GNBAddr)
	if s.UE != ueAddr(7) || s.GNBTEID != gnbTEIDBase+7 || s.MBRUplink != 1001 || s.MBRDownlink != 2000 || len(s.Flows) != 3 {
		t.Fatalf("spec %+v", s)
	}
	want := []pfcpclient.Flow{
		{Filter: "permit out 17 from any to assigned 40003-40004", Precedence: 101, QFI: qfi,
			QERIDs: []uint32{pfcpclient.SessionQERID, pfcpclient.FlowQERID(0)}, MBRUplink: 1001, MBRDownlink: 2000,
			ExtraFilters: []string{"permit out 17 from any to assigned 50017"}},
		{Filter: "permit out 17 from any to assigned 40005-40007", Precedence: 102, QFI: qfi,
			QERIDs: []uint32{pfcpclient.SessionQERID}, ExtraFilters: []string{"permit out 17 from any to assigned 50033"}},
		{Filter: "permit out 17 from any to assigned 40008-40009", Precedence: 103, QFI: qfi,
			QERIDs: []uint32{pfcpclient.SessionQERID}, ExtraFilters: []string{"permit out 17 from any to assigned 50049"}},
	}
	if !reflect.DeepEqual(s.Flows, want) {
		t.Fatalf("flows\n%+v\nwant\n%+v", s.Flows, want)
	}
	// More PDRs than flows: the PDRs without flows match a port no flow uses.
	few := newPlan(pipeline(func(p *scenario.Pipeline) { p.FlowsPerUser, p.PDRsPerUser = 1, 3 }))
	if lo, hi := few.portRange(2); lo != hi || lo < unusedPort {
		t.Fatalf("port range of an empty PDR %d-%d", lo, hi)
	}
	// Without QERs no MBR is sent.
	if s := newPlan(pipeline(func(p *scenario.Pipeline) { p.MBRUplink = 5000 })).spec(0, testbed.GNBAddr); s.MBRUplink != 0 {
		t.Fatalf("MBR without QERs: %+v", s)
	}
}

// TestFree5GCAndContract: a free5GC SMF chooses the uplink TEID, with ue_address upf the UPF
// chooses the UE address; a contract limits class 1
// with a burst of 50 ms of its rate, bounded.
func TestFree5GCAndContract(t *testing.T) {
	pl := newPlan(pipeline(func(p *scenario.Pipeline) { p.SMF = scenario.SMFFree5GC }))
	if s := pl.spec(7, testbed.GNBAddr); s.Style != pfcpclient.Free5GC || s.UplinkTEID != smfTEIDBase+7 || s.N3 != testbed.N3Addr || s.UE != ueAddr(7) {
		t.Fatalf("free5GC spec %+v", s)
	}
	if s := newPlan(scenario.Default().Pipeline).spec(7, testbed.GNBAddr); s.Style != pfcpclient.Open5GS || s.UplinkTEID != 0 {
		t.Fatalf("Open5GS spec %+v", s)
	}
	// The UPF chooses the address: the SMF sends none.
	if s := newPlan(pipeline(func(p *scenario.Pipeline) { p.UEAddress = scenario.UEByUPF })).spec(7, testbed.GNBAddr); s.UE.IsValid() {
		t.Fatalf("UPF-chosen UE spec %+v", s)
	}
	if _, ok := pl.contract(); ok {
		t.Fatal("a contract without policer_contract")
	}
	for _, c := range []struct{ rate, burst uint64 }{{8_000_000, 50_000}, {1e12, maxContractBurst}, {8000, pkt.MaxFrameSize}} {
		got, ok := newPlan(pipeline(func(p *scenario.Pipeline) { p.PolicerContract = c.rate })).contract()
		if want := (api.Contract{Action: "limit", RateBPS: c.rate, BurstBytes: c.burst}); !ok || got != want {
			t.Errorf("contract %+v, want %+v", got, want)
		}
	}
}

// TestChooseFlows: the choice is deterministic for a seed, has no repeats, stays among the
// active users, and covers every flow when asked for all of them.
func TestChooseFlows(t *testing.T) {
	a, b := chooseFlows(1000, 10, 500, 7), chooseFlows(1000, 10, 500, 7)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, chooseFlows(1000, 10, 500, 8)) {
		t.Fatal("the choice does not follow the seed")
	}
	for _, c := range []struct{ users, n int }{{1000, 500}, {1000, 10000}, {64, 640}} {
		seen := map[flowID]bool{}
		for _, f := range chooseFlows(c.users, 10, c.n, 1) {
			if seen[f] || f.user >= c.users || f.flow >= 10 {
				t.Fatalf("%+v: flow %+v repeated or out of range", c, f)
			}
			seen[f] = true
		}
		if len(seen) != c.n {
			t.Fatalf("%+v: %d flows", c, len(seen))
		}
	}
}

// TestBuild: the frames sent and wanted for each datapath and direction.
func TestBuild(t *testing.T) {
	pl := newPlan(pipeline(func(p *scenario.Pipeline) { p.Users, p.BaseStations, p.FlowsPerUser, p.Servers = 4, 2, 2, 8 }))
	tr := scenario.Default().Traffic
	flows := []flowID{{user: 3, flow: 1}}
	// The frames carry the user's keys as its session has them, the UE address too (which the
	// UPF may have chosen), not the plan's own.
	keys := func(u int) (uint32, netip.Addr) { return 0x100 + uint32(u), ueAddr(1000 + u) }
	m := macs{gnb: [6]byte{2, 0, 0, 0, 0, 1}, n3: [6]byte{2, 0, 0, 0, 0, 2}, n6: [6]byte{2, 0, 0, 0, 0, 3}, dn: [6]byte{2, 0, 0, 0, 0, 4}}
	ue := netip.AddrPortFrom(ueAddr(1003), uePort+1)
	srv := netip.AddrPortFrom(pl.server(7), dnPort)
	for _, c := range []struct {
		dir, datapath    string
		sentTun, wantTun *pkt.Tunnel
		src, dst         netip.AddrPort
	}{
		{scenario.Uplink, scenario.DatapathXUPF,
			&pkt.Tunnel{Src: gnbAddr(1), Dst: testbed.N3Addr, TEID: 0x103, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeUplink}, nil, ue, srv},
		{scenario.Downlink, scenario.DatapathXUPF, nil,
			&pkt.Tunnel{Src: testbed.N3Addr, Dst: gnbAddr(1), TEID: gnbTEIDBase + 3, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeDownlink}, srv, ue},
		{scenario.Uplink, scenario.DatapathXDPForwarder,
			&pkt.Tunnel{Src: gnbAddr(1), Dst: testbed.N3Addr, TEID: 0x103, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeUplink},
			&pkt.Tunnel{Src: gnbAddr(1), Dst: testbed.N3Addr, TEID: 0x103, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeUplink}, ue, srv},
		{scenario.Uplink, scenario.DatapathKernel, nil, nil, ue, srv},
		{scenario.Uplink, scenario.DatapathFlowCache, nil, nil, ue, srv},
		{scenario.Downlink, scenario.DatapathFlowCache, nil, nil, srv, ue},
		// Masqueraded: the UE's port kept, n6's address.
		{scenario.Uplink, scenario.DatapathKernelNAT, nil, nil, ue, srv},
		{scenario.Uplink, scenario.DatapathXUPFKernelNAT,
			&pkt.Tunnel{Src: gnbAddr(1), Dst: testbed.N3Addr, TEID: 0x103, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeUplink}, nil, ue, srv},
		{scenario.Uplink, scenario.DatapathXUPFNATCache,
			&pkt.Tunnel{Src: gnbAddr(1), Dst: testbed.N3Addr, TEID: 0x103, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeUplink}, nil, ue, srv},
		// Their replies: sent to n6's address and the UE's port, wanted to the UE.
		{scenario.Downlink, scenario.DatapathKernelNAT, nil, nil, srv, ue},
		{scenario.Downlink, scenario.DatapathXUPFKernelNAT, nil,
			&pkt.Tunnel{Src: testbed.N3Addr, Dst: gnbAddr(1), TEID: gnbTEIDBase + 3, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeDownlink}, srv, ue},
		{scenario.Downlink, scenario.DatapathXUPFNATCache, nil,
			&pkt.Tunnel{Src: testbed.N3Addr, Dst: gnbAddr(1), TEID: gnbTEIDBase + 3, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeDownlink}, srv, ue},
		{scenario.Uplink, scenario.DatapathGTPU,
			&pkt.Tunnel{Src: gnbAddr(1), Dst: testbed.N3Addr, TEID: 0x103, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeUplink}, nil, ue, srv},
		// One tunnel for every user: to the first base station, not user 3's.
		{scenario.Downlink, scenario.DatapathGTPU, nil,
			&pkt.Tunnel{Src: testbed.N3Addr, Dst: gnbAddr(0), TEID: gnbTEIDBase - 1, PSC: true, QFI: qfi, PDUType: pkt.PDUTypeDownlink}, srv, ue},
	} {
		fr, err := pl.build(c.dir, tr, c.datapath, flows, keys, m)
		if err != nil {
			t.Fatal(err)
		}
		d, err := pkt.Decode(fr.Sent[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		sent := pkt.Flow{Src: c.src, Dst: c.dst, Tunnel: c.sentTun}
		wantSrc := c.src
		masq := c.datapath == scenario.DatapathKernelNAT || c.datapath == scenario.DatapathXUPFKernelNAT || c.datapath == scenario.DatapathXUPFNATCache
		switch translated := netip.AddrPortFrom(testbed.N6Addr, ue.Port()); { // n6's address, the UE's port
		case masq && c.dir == scenario.Uplink:
			wantSrc = translated
		case masq:
			sent.Dst = translated
		}
		if err := pkt.Check(sent, d); err != nil || len(fr.Sent[0].Data) != tr.PacketSize-pkt.FCSLen {
			t.Errorf("%s %s: sent frame: %v (%d bytes)", c.dir, c.datapath, err, len(fr.Sent[0].Data))
		}
		if w := fr.Want[0]; w.Src != wantSrc || w.Dst != c.dst || !reflect.DeepEqual(w.Tunnel, c.wantTun) {
			t.Errorf("%s %s: want %+v tunnel %+v, expected tunnel %+v", c.dir, c.datapath, w, w.Tunnel, c.wantTun)
		}
	}
}

// TestIMIX: the sizes cycle 7:4:1 and are raised to the direction's smallest frame.
func TestIMIX(t *testing.T) {
	tr := scenario.Traffic{PacketSize: scenario.IMIX}
	count := map[int]int{}
	for i := range 24 {
		count[frameSize(tr, i, 102, 1518)]++
	}
	if want := map[int]int{102: 14, 594: 8, 1518: 2}; !reflect.DeepEqual(count, want) {
		t.Fatalf("sizes %v, want %v", count, want)
	}
	if got := frameSize(scenario.Traffic{PacketSize: 256}, 5, 102, 1518); got != 256 {
		t.Fatalf("fixed size %d", got)
	}
}

func TestCPUSets(t *testing.T) {
	got := cpuSets(2, 1)
	if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 1 {
		t.Fatalf("%v", got)
	}
}

// otherCPUs: the CPUs no generator lane uses (uplink_spread_cpus: others).
func TestOtherCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	got := otherCPUs(cpuSets(1, 1))
	if len(got) != runtime.NumCPU()-1 || slices.Contains(got, 0) {
		t.Fatalf("others than CPU 0: %v", got)
	}
	if got := otherCPUs(cpuSets(1, runtime.NumCPU())); got != nil {
		t.Fatalf("the generator on every CPU, others: %v", got)
	}
}

func TestMagicOffsets(t *testing.T) {
	want := []pkt.Flow{{}, {Tunnel: &pkt.Tunnel{PSC: true}}, {}, {Tunnel: &pkt.Tunnel{}}}
	if got := magicOffsets(want); !reflect.DeepEqual(got, []int{42, 86, 78}) {
		t.Fatalf("offsets %v", got)
	}
}

// TestSizeLimits: the daemon a point starts takes all of its sessions from the bench's one
// association (the full profile's 1,000,000 were refused beyond max_sessions_per_association's
// default of 100,000).
func TestSizeLimits(t *testing.T) {
	p := scenario.Default()
	p.Pipeline.Users = 1000000
	var l config.Limits
	sizeLimits(&l, p)
	if l.MaxSessions < p.Pipeline.Users || l.MaxSessionsPerAssociation != l.MaxSessions {
		t.Errorf("%d users: max_sessions %d, per association %d", p.Pipeline.Users, l.MaxSessions,
			l.MaxSessionsPerAssociation)
	}
	if l.MaxRuleSets > config.MaxMaxRuleSets {
		t.Errorf("max_rule_sets %d above the most the config takes", l.MaxRuleSets)
	}
}

// TestUPFRoutesLeavePoolsToXUPF: with kernel_n6, xupfd routes its ue_pools into the return
// device and refuses to start when the main table routes a pool elsewhere, so the upf
// namespace must not route a pool then (more specific routes, as the gNB block's, are not
// the pool's); and its pool is the UE block, whoever chooses the addresses, so that the
// replies the kernel translates back reach the sessions. Otherwise the UE block is routed
// toward the gNB.
func TestUPFRoutesLeavePoolsToXUPF(t *testing.T) {
	for _, datapath := range []string{scenario.DatapathXUPF, scenario.DatapathXUPFKernelNAT, scenario.DatapathXUPFNATCache} {
		for _, ue := range []string{scenario.UEBySMF, scenario.UEByUPF} {
			pt := &point{p: scenario.Default()}
			pt.p.Pipeline.Datapath, pt.p.Pipeline.UEAddress = datapath, ue
			cfg := config.Default()
			if err := pt.configureXUPF(cfg); err != nil {
				t.Fatal(err)
			}
			var routed []netip.Prefix
			for _, r := range newPlan(pt.p.Pipeline).upfRoutes() {
				routed = append(routed, r.dst)
				for _, pool := range cfg.UEPools {
					if cfg.FlowCache.KernelN6.Any() && r.dst == pool {
						t.Errorf("%s, ue_address %s: the upf namespace routes xupfd's pool %s", datapath, ue, pool)
					}
				}
			}
			if cfg.FlowCache.KernelN6.Any() && !slices.Contains(cfg.UEPools, ueNet) {
				t.Errorf("%s, ue_address %s: ue_pools %v, want the UE block %s in the return device", datapath, ue, cfg.UEPools, ueNet)
			}
			if !cfg.FlowCache.KernelN6.Any() && !slices.Contains(routed, ueNet) {
				t.Errorf("%s, ue_address %s: the UE block %s is not routed toward the gNB", datapath, ue, ueNet)
			}
		}
	}
}
