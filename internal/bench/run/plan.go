package run

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/bench/baseline"
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/bench/scenario"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// Address plan of a benchmark topology, beside internal/testbed's own addresses. The blocks
// are large enough for the scenario limits (2^20 users, 2^16 gNBs and servers) and are
// routed in the upf namespace; nothing in the gnb or dn namespaces owns them, because the
// generator writes frames directly and the sink takes every frame that arrives.
var (
	ueBase     = netip.MustParseAddr("10.64.0.0") // /10: UE addresses, chosen by the SMF
	ueNet      = netip.MustParsePrefix("10.64.0.0/10")
	gnbBase    = netip.MustParseAddr("10.112.0.0") // /12: base station N3 addresses
	gnbNet     = netip.MustParsePrefix("10.112.0.0/12")
	serverBase = netip.MustParseAddr("10.192.0.0") // /10: DN servers, in Routes prefixes
)

// Ports of the generated flows: flow f of a user uses UE port uePort+f and the server's
// dnPort, in both directions, so that one SDF filter (on the UE's port) picks it out
// uplink and downlink.
const (
	uePort = 40000
	dnPort = 5001
	// unusedPort starts the ports of SDF filters that match no flow: they make the
	// classification as large as the scenario asks without changing where packets go.
	unusedPort = 50000
	// qfi is every QoS flow's QFI.
	qfi = 9
	// gnbTEIDBase + user is the user's downlink TEID.
	gnbTEIDBase = 0x10000000
	// smfTEIDBase + user is the user's uplink TEID when the SMF chooses it (free5GC).
	smfTEIDBase = 0x20000000
	// contractBurst is how long a policer contract's burst lasts at its rate, and
	// maxContractBurst its largest size (the API allows a little more).
	contractBurst    = 50 * time.Millisecond
	maxContractBurst = 1 << 30
	// eventUserBase numbers the users of sessions added during trials, after any scenario's.
	eventUserBase = scenario.MaxUsers
)

// gtpuTunnel is the one tunnel the minimal GTP-U datapath puts downlink frames in: to the
// first base station, with a TEID of its own.
var gtpuTunnel = baseline.Tunnel{Src: testbed.N3Addr, Dst: gnbAddr(0), TEID: gnbTEIDBase - 1, QFI: qfi}

// addrAt returns base + n.
func addrAt(base netip.Addr, n int) netip.Addr {
	b := base.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ueAddr is user u's address.
func ueAddr(u int) netip.Addr { return addrAt(ueBase, u+1) }

// gnbAddr is base station b's N3 address.
func gnbAddr(b int) netip.Addr { return addrAt(gnbBase, b+1) }

// plan is the layout a point asks for: who is where and what each flow looks like.
type plan struct {
	p scenario.Pipeline
	// block is the number of server addresses in each route's prefix: a power of two at
	// least servers/routes.
	block int
}

func newPlan(p scenario.Pipeline) plan {
	per := (p.Servers + p.Routes - 1) / p.Routes
	return plan{p: p, block: 1 << bits.Len(uint(per-1))}
}

// server is server s's address: route s%Routes, position s/Routes in the route's block.
func (pl plan) server(s int) netip.Addr {
	r := s % pl.p.Routes
	return addrAt(serverBase, r*pl.block+s/pl.p.Routes)
}

// upfRoute is a route of the upf namespace: via the gNB, or via the DN host if toDN.
type upfRoute struct {
	dst  netip.Prefix
	toDN bool
}

// upfRoutes are the routes of the upf namespace: the gNB and UE blocks via the gNB, the N6
// prefixes via the DN host. Not the UE block when xupfd routes it into its return device
// (kernel NAT, whose kernel_n6 routes ue_pools, the UE block: configureXUPF): xupfd
// refuses to start when the main table routes a pool elsewhere.
func (pl plan) upfRoutes() []upfRoute {
	out := []upfRoute{{dst: gnbNet}}
	if !kernelN6(pl.p.Datapath) {
		out = append(out, upfRoute{dst: ueNet})
	}
	for _, r := range pl.routes() {
		out = append(out, upfRoute{dst: r, toDN: true})
	}
	return out
}

// kernelN6 reports whether the datapath is xupfd with flow_cache.kernel_n6.
func kernelN6(datapath string) bool {
	return datapath == scenario.DatapathXUPFKernelNAT || datapath == scenario.DatapathXUPFNATCache
}

// routes are the N6 prefixes the servers are spread over.
func (pl plan) routes() []netip.Prefix {
	out := make([]netip.Prefix, pl.p.Routes)
	for r := range out {
		out[r] = netip.PrefixFrom(addrAt(serverBase, r*pl.block), 32-bits.Len(uint(pl.block-1)))
	}
	return out
}

// gnbOf is user u's base station.
func (pl plan) gnbOf(u int) int { return u % pl.p.BaseStations }

// pdrOf is the PDR (0 = the default one) that flow f of a user matches: the flows are split
// into PDRsPerUser contiguous ranges of UE ports, so that each PDR's SDF filter is one range.
func (pl plan) pdrOf(f int) int { return f * pl.p.PDRsPerUser / pl.p.FlowsPerUser }

// spec is the PFCP session of user u, sent to the UPF as the point's SMF would: Open5GS lets
// the UPF choose the uplink TEID, free5GC chooses it (smfTEIDBase + u) and puts the UE
// address on the uplink PDRs too; the SMF chooses the UE address (ueAddr), or asks the UPF
// to with ue_address upf. Each PDR beyond the default one has
// SDFFiltersPerPDR filters: the first matches its flows' UE port range, the others ports
// no flow uses. QERs: the session's QER (every PDR's) carries the MBRs when QERsPerUser ≥ 1;
// with QERsPerUser = q ≥ 2 the first q−1 flow PDRs also apply a QER of their own with the
// same MBRs; without QERs no MBR is sent (the session still has its gate-only QER, which
// every SMF sends).
func (pl plan) spec(u int, gnb netip.Addr) pfcpclient.SessionSpec {
	kbps := func(bps uint64) uint64 { return (bps + 999) / 1000 }
	var ul, dl uint64
	if pl.p.QERsPerUser > 0 {
		ul, dl = kbps(pl.p.MBRUplink), kbps(pl.p.MBRDownlink)
	}
	s := pfcpclient.SessionSpec{
		UE: ueAddr(u), QFI: qfi, GNB: gnb, GNBTEID: uint32(gnbTEIDBase + u),
		MBRUplink: ul, MBRDownlink: dl,
		VolumeThreshold: pl.p.VolumeQuota / 2, VolumeQuota: pl.p.VolumeQuota,
	}
	if pl.p.UEAddress == scenario.UEByUPF {
		s.UE = netip.Addr{}
	}
	if pl.p.SMF == scenario.SMFFree5GC {
		s.Style, s.UplinkTEID, s.N3 = pfcpclient.Free5GC, uint32(smfTEIDBase+u), testbed.N3Addr
	}
	for j := 1; j < pl.p.PDRsPerUser; j++ {
		lo, hi := pl.portRange(j)
		f := pfcpclient.Flow{
			Filter:     fmt.Sprintf("permit out 17 from any to assigned %d-%d", lo, hi),
			Precedence: uint32(100 + j),
			QFI:        qfi,
			QERIDs:     []uint32{pfcpclient.SessionQERID},
		}
		if j-1 < pl.p.QERsPerUser-1 {
			f.QERIDs = append(f.QERIDs, pfcpclient.FlowQERID(j-1))
			f.MBRUplink, f.MBRDownlink = ul, dl
		}
		for k := 1; k < pl.p.SDFFiltersPerPDR; k++ {
			port := unusedPort + j*scenario.MaxSDFFiltersPerPDR + k
			f.ExtraFilters = append(f.ExtraFilters, fmt.Sprintf("permit out 17 from any to assigned %d", port))
		}
		s.Flows = append(s.Flows, f)
	}
	return s
}

// portRange is the UE port range of PDR j's flows; a PDR without flows (fewer flows than
// PDRs) gets an unused port.
func (pl plan) portRange(j int) (lo, hi int) {
	first, last := -1, -1
	for f := range pl.p.FlowsPerUser {
		if pl.pdrOf(f) == j {
			if first < 0 {
				first = f
			}
			last = f
		}
	}
	if first < 0 {
		p := unusedPort + j*scenario.MaxSDFFiltersPerPDR
		return p, p
	}
	return uePort + first, uePort + last
}

// classes are the classifier classes of ClassifierClasses: class 1 takes every UDP packet
// (the generated ones), the others match ports no flow uses, at higher priority, so that
// each packet is looked up against all of them.
func (pl plan) classes() []classifier.Class {
	out := make([]classifier.Class, pl.p.ClassifierClasses)
	for i := range out {
		id := uint32(i + 1)
		c := classifier.Class{ID: id, Priority: 1, Protocol: "udp"}
		if i > 0 {
			c.Priority = 2
			c.DstPort = fmt.Sprint(unusedPort - i%10000)
			c.SrcIP = addrAt(serverBase, i).String()
		}
		out[i] = c
	}
	return out
}

// contract is the policer contract of class 1 (the generated packets' class), if the point
// has one: a limit at PolicerContract with a burst of contractBurst at that rate.
func (pl plan) contract() (api.Contract, bool) {
	rate := pl.p.PolicerContract
	if rate == 0 {
		return api.Contract{}, false
	}
	burst := min(uint64(float64(rate/8)*contractBurst.Seconds()), maxContractBurst)
	return api.Contract{Action: "limit", RateBPS: rate, BurstBytes: max(burst, pkt.MaxFrameSize)}, true
}

// flowID identifies flow f of user u in the generated frames.
type flowID struct{ user, flow int }

// chooseFlows returns n of the first users' users × perUser flows, chosen and ordered with
// seed: all of them, shuffled, when n covers them.
func chooseFlows(users, perUser, n int, seed uint64) []flowID {
	total := users * perUser
	rng := rand.New(rand.NewPCG(seed, 0x78755042))
	var idx []int
	if n >= total {
		idx = rng.Perm(total)
	} else {
		// Floyd's algorithm: n distinct indexes without a total-sized permutation.
		seen := make(map[int]bool, n)
		for j := total - n; j < total; j++ {
			t := rng.IntN(j + 1)
			if seen[t] {
				t = j
			}
			seen[t] = true
			idx = append(idx, t)
		}
		rng.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
	}
	out := make([]flowID, len(idx))
	for i, x := range idx {
		out[i] = flowID{user: x / perUser, flow: x % perUser}
	}
	return out
}

// endpoints are the UE's and the server's address and port of flow id, whose user has the
// address ue.
func (pl plan) endpoints(id flowID, ue netip.Addr) (netip.AddrPort, netip.AddrPort) {
	s := (id.user*pl.p.FlowsPerUser + id.flow) % pl.p.Servers
	return netip.AddrPortFrom(ue, uint16(uePort+id.flow)), netip.AddrPortFrom(pl.server(s), dnPort)
}

// userKeys are the keys a user's frames carry: its uplink TEID and its address, chosen by
// the UPF or the SMF.
type userKeys func(user int) (teid uint32, ue netip.Addr)

// imix is the simple IMIX (64, 594 and 1518-byte frames, 7:4:1), clamped to what the
// layout allows: frame i of the set takes imix[i%12].
var imix = [12]int{64, 64, 64, 64, 64, 64, 64, 594, 594, 594, 594, 1518}

// frameSize is the size of the i-th generated frame for traffic tr, at least min and at
// most max.
func frameSize(tr scenario.Traffic, i, lo, hi int) int {
	size := tr.PacketSize
	if size == scenario.IMIX {
		size = imix[i%len(imix)]
	}
	return min(max(size, lo), hi)
}

// frames are the generated frames of one direction with, for each, the frame the sink
// should see: Sent[i] leaves the generator, Want[i] (by flow id i) is checked against the
// samples.
type frames struct {
	Sent []pkt.Frame
	Want []pkt.Flow
}

// macs are the Ethernet addresses of the links a frame crosses.
type macs struct {
	gnb, n3, n6, dn [6]byte
}

// build makes the frames of direction dir for flows, for the datapath of the point, with
// each user's keys:
// GTP-U on uplink into all but the kernel and the flow cache, plain IPv4 otherwise; the wanted frames are what
// leaves the far side: xupf decapsulates uplink and encapsulates downlink (to the user's gNB
// with its TEID and a PDU Session Container with the QFI), the minimal GTP-U datapath the
// same but into its one tunnel, the forwarder, the kernel and the flow cache change only MACs
// (and TTL). With masquerade, uplink leaves from n6's address, and downlink is sent to it
// and arrives to the UE's.
func (pl plan) build(dir string, tr scenario.Traffic, datapath string, flows []flowID, keys userKeys, m macs) (frames, error) {
	var out frames
	for i, id := range flows {
		teid, addr := keys(id.user)
		ue, srv := pl.endpoints(id, addr)
		f := pkt.Flow{ID: uint32(i)}
		var lo int
		if dir == scenario.Uplink {
			f.SrcMAC, f.DstMAC = m.gnb[:], m.n3[:]
			f.Src, f.Dst = ue, srv
			if !scenario.PlainFrames(datapath) {
				f.Tunnel = &pkt.Tunnel{Src: gnbAddr(pl.gnbOf(id.user)), Dst: testbed.N3Addr, TEID: teid, PSC: tr.PDUSessionContainer, QFI: qfi, PDUType: pkt.PDUTypeUplink}
			}
			lo = scenario.MinPacketSize(dir, tr.PDUSessionContainer)
		} else {
			f.SrcMAC, f.DstMAC = m.dn[:], m.n6[:]
			f.Src, f.Dst = srv, ue
			lo = scenario.MinPacketSize(dir, false)
		}
		size := frameSize(tr, i, lo, scenario.MaxPacketSize(dir))
		want := f
		// Each flow has a server of its own (scenario.checkPoint), so masquerade keeps its
		// UE port: uplink leaves from n6's address and that port, and the replies, sent
		// there, reach the UE translated back.
		switch translated := netip.AddrPortFrom(testbed.N6Addr, ue.Port()); {
		case !scenario.Masquerades(datapath):
		case dir == scenario.Uplink:
			want.Src = translated
		default:
			f.Dst = translated
		}
		switch {
		case !scenario.HasSessions(datapath) && datapath != scenario.DatapathGTPU:
		case dir == scenario.Uplink:
			want.Tunnel = nil
		case datapath == scenario.DatapathGTPU:
			want.Tunnel = &pkt.Tunnel{Src: gtpuTunnel.Src, Dst: gtpuTunnel.Dst, TEID: gtpuTunnel.TEID, PSC: true, QFI: gtpuTunnel.QFI, PDUType: pkt.PDUTypeDownlink}
		default:
			want.Tunnel = &pkt.Tunnel{Src: testbed.N3Addr, Dst: gnbAddr(pl.gnbOf(id.user)), TEID: uint32(gnbTEIDBase + id.user), PSC: true, QFI: qfi, PDUType: pkt.PDUTypeDownlink}
		}
		fr, err := pkt.Build(f, size)
		if err != nil {
			return frames{}, fmt.Errorf("flow %d (user %d): %w", i, id.user, err)
		}
		out.Sent = append(out.Sent, fr)
		out.Want = append(out.Want, want)
	}
	return out, nil
}
