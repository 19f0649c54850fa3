package pfcp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/rules"
)

// fakeDatapath keeps installed rule sets in memory, refusing what the real one refuses
// (a key another session owns) and failing on demand.
type fakeDatapath struct {
	sets  map[uint64][]rules.RuleSet
	keys  map[rules.Key]uint64
	usage map[uint64][]rules.Usage
	fail  error // returned by the next Install
	panic bool  // the next Install panics
	local map[netip.Addr]bool
	// quotaUsed is what QuotaUsed returns, by owner.
	quotaUsed map[uint64][]rules.QuotaUse
	// cacheable is what TEIDCacheable answers; nil: true.
	cacheable func(teid uint32) bool
}

func newFakeDatapath() *fakeDatapath {
	return &fakeDatapath{sets: map[uint64][]rules.RuleSet{}, keys: map[rules.Key]uint64{},
		usage: map[uint64][]rules.Usage{}}
}

func (f *fakeDatapath) Install(owner uint64, sets []rules.RuleSet) error {
	if f.panic {
		f.panic = false
		panic("fake datapath: install")
	}
	if err := f.fail; err != nil {
		f.fail = nil
		return err
	}
	for _, rs := range sets {
		if o, ok := f.keys[rs.LookupKey()]; ok && o != owner {
			return fmt.Errorf("%s is used by session %d", rs.Key(), o)
		}
	}
	for _, rs := range f.sets[owner] {
		delete(f.keys, rs.LookupKey())
	}
	for _, rs := range sets {
		f.keys[rs.LookupKey()] = owner
	}
	f.sets[owner] = sets
	return nil
}

func (f *fakeDatapath) Uninstall(owner uint64) ([]rules.Usage, error) {
	sets, ok := f.sets[owner]
	if !ok {
		return nil, errors.New("not found")
	}
	for _, rs := range sets {
		delete(f.keys, rs.LookupKey())
	}
	delete(f.sets, owner)
	return f.usage[owner], nil
}

func (f *fakeDatapath) Usage(owner uint64) ([]rules.Usage, error) { return f.usage[owner], nil }

func (f *fakeDatapath) QuotaUsed(owner uint64) ([]rules.QuotaUse, error) {
	return f.quotaUsed[owner], nil
}

func (f *fakeDatapath) IsLocal(a netip.Addr) bool { return f.local[a] }

func (f *fakeDatapath) TEIDCacheable(teid uint32) bool {
	return f.cacheable == nil || f.cacheable(teid)
}

func (f *fakeDatapath) KeyOwner(k rules.Key) (uint64, bool) {
	o, ok := f.keys[k]
	return o, ok
}

var (
	n3      = netip.MustParseAddr("10.100.1.1")
	gnb     = netip.MustParseAddr("10.100.1.2")
	gnb2    = netip.MustParseAddr("10.100.1.3")
	ue1     = netip.MustParseAddr("10.45.0.7")
	uePool  = netip.MustParsePrefix("10.46.0.0/30")
	smfIPv4 = net.ParseIP("192.0.2.10").To4()
)

func newSessionNode(dp *fakeDatapath, opts ...func(*Options)) *Node {
	o := Options{NodeID: "10.100.3.1", HeartbeatInterval: time.Second, HeartbeatRetries: 3, Datapath: dp,
		AllowedPeers: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("127.0.0.0/8")},
		Address:      netip.MustParseAddr("10.100.3.1"), GTPUAddrs: []netip.Addr{n3}, UEPools: []netip.Prefix{uePool}}
	for _, f := range opts {
		f(&o)
	}
	return NewNode(o)
}

// pfcpTest drives a node as one SMF.
type pfcpTest struct {
	t   *testing.T
	n   *Node
	dp  *fakeDatapath
	seq uint32
}

func newPFCPTest(t *testing.T, opts ...func(*Options)) *pfcpTest {
	dp := newFakeDatapath()
	p := &pfcpTest{t: t, n: newSessionNode(dp, opts...), dp: dp, seq: 100}
	if _, got, _ := cause(t, p.n.Handle(smf, bytesOf(t, smfSetup(1)))); got != ie.CauseRequestAccepted {
		t.Fatalf("association setup: cause %d", got)
	}
	return p
}

// send sends a message built with the next sequence number and returns the response.
func (p *pfcpTest) send(build func(seq uint32) message.Message) message.Message {
	p.t.Helper()
	p.seq++
	m, err := message.Parse(p.n.Handle(smf, bytesOf(p.t, build(p.seq))))
	if err != nil {
		p.t.Fatalf("response: %v", err)
	}
	if m.Sequence() != p.seq {
		p.t.Fatalf("response sequence %d, want %d", m.Sequence(), p.seq)
	}
	return m
}

func (p *pfcpTest) establish(cpSEID uint64, ies ...*ie.IE) *message.SessionEstablishmentResponse {
	p.t.Helper()
	return p.send(func(seq uint32) message.Message { return establishment(seq, cpSEID, ies...) }).(*message.SessionEstablishmentResponse)
}

// mustEstablish establishes a session and returns its UP SEID.
func (p *pfcpTest) mustEstablish(cpSEID uint64, ies ...*ie.IE) (uint64, *message.SessionEstablishmentResponse) {
	p.t.Helper()
	r := p.establish(cpSEID, ies...)
	if c, _ := r.Cause.Cause(); c != ie.CauseRequestAccepted {
		p.t.Fatalf("establishment: cause %d", c)
	}
	if r.SEID() != cpSEID {
		p.t.Errorf("response header SEID 0x%x, want the SMF's 0x%x", r.SEID(), cpSEID)
	}
	f, err := r.UPFSEID.FSEID()
	if err != nil {
		p.t.Fatalf("UP F-SEID: %v", err)
	}
	return f.SEID, r
}

func (p *pfcpTest) modify(seid uint64, ies ...*ie.IE) *message.SessionModificationResponse {
	p.t.Helper()
	return p.send(func(seq uint32) message.Message {
		return message.NewSessionModificationRequest(0, 0, seid, seq, 0, ies...)
	}).(*message.SessionModificationResponse)
}

func establishment(seq uint32, cpSEID uint64, ies ...*ie.IE) *message.SessionEstablishmentRequest {
	return message.NewSessionEstablishmentRequest(0, 0, 0, seq, 0, append([]*ie.IE{
		ie.NewNodeID(smfNode, "", ""), ie.NewFSEID(cpSEID, smfIPv4, nil), ie.NewPDNType(ie.PDNTypeIPv4)}, ies...)...)
}

// Open5GS-style rules: an uplink PDR on a chosen TEID, a downlink PDR on the UE address.
func chosenULPDR(id uint16, chooseID, qfi uint8, far uint32, extra ...*ie.IE) *ie.IE {
	pdi := ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceAccess), ie.NewFTEID(0x0c, 0, nil, nil, chooseID),
		ie.NewNetworkInstance("internet"), ie.NewQFI(qfi))
	return ie.NewCreatePDR(append([]*ie.IE{ie.NewPDRID(id), ie.NewPrecedence(255), pdi,
		ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(far)}, extra...)...)
}

func dlPDR(id uint16, ue netip.Addr, far uint32, extra ...*ie.IE) *ie.IE {
	pdi := ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCore), ie.NewNetworkInstance("internet"),
		ie.NewUEIPAddress(0x02|0x04, ue.String(), "", 0, 0))
	return ie.NewCreatePDR(append([]*ie.IE{ie.NewPDRID(id), ie.NewPrecedence(65535), pdi, ie.NewFARID(far)}, extra...)...)
}

func forwardFAR(id uint32, dst uint8, fp ...*ie.IE) *ie.IE {
	return ie.NewCreateFAR(ie.NewFARID(id), ie.NewApplyAction(0x02),
		ie.NewForwardingParameters(append([]*ie.IE{ie.NewDestinationInterface(dst)}, fp...)...))
}

func ohc(teid uint32, peer netip.Addr) *ie.IE {
	return ie.NewOuterHeaderCreation(0x0100, teid, peer.String(), "", 0, 0, 0)
}

// basicSession is one uplink PDR (chosen TEID, CHOOSE ID 1) and one downlink PDR toward gnb.
func basicSession(ue netip.Addr) []*ie.IE {
	return []*ie.IE{
		chosenULPDR(1, 1, 9, 1, ie.NewQERID(1), ie.NewURRID(1)),
		dlPDR(2, ue, 2, ie.NewQERID(1), ie.NewURRID(1)),
		forwardFAR(1, ie.DstInterfaceCore),
		forwardFAR(2, ie.DstInterfaceAccess, ohc(0x500, gnb)),
		ie.NewCreateQER(ie.NewQERID(1), ie.NewGateStatus(0, 0), ie.NewMBR(100000, 200000), ie.NewQFI(9)),
		ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x01, 0)),
	}
}

// createdTEIDs maps each Created PDR's PDR ID to its F-TEID.
func createdTEIDs(t *testing.T, created []*ie.IE) map[uint16]uint32 {
	t.Helper()
	out := map[uint16]uint32{}
	for _, c := range created {
		id, err := c.PDRID()
		if err != nil {
			t.Fatalf("Created PDR without PDR ID: %v", err)
		}
		if f, err := c.FTEID(); err == nil {
			if a, _ := netip.AddrFromSlice(f.IPv4Address.To4()); a != n3 {
				t.Errorf("PDR %d: F-TEID address %s, want %s", id, a, n3)
			}
			out[id] = f.TEID
		}
	}
	return out
}

// TestChosenTEIDsCacheable: the TEIDs this UPF chooses are those the datapath finds in its
// direct cache when one of the first few free ones is.
func TestChosenTEIDsCacheable(t *testing.T) {
	p := newPFCPTest(t)
	p.dp.cacheable = func(teid uint32) bool { return teid%4 == 0 }
	for i := range 8 {
		ue := netip.AddrFrom4([4]byte{10, 45, 1, byte(1 + i)})
		_, r := p.mustEstablish(0x100+uint64(i), basicSession(ue)...)
		if teid := createdTEIDs(t, r.CreatedPDR)[1]; teid%4 != 0 {
			t.Errorf("session %d: TEID %#x, want one TEIDCacheable accepts", i, teid)
		}
	}
}

func TestEstablishmentOpen5GS(t *testing.T) {
	p := newPFCPTest(t)
	seid, r := p.mustEstablish(0x51,
		chosenULPDR(1, 1, 1, 1, ie.NewQERID(1), ie.NewURRID(1)),
		dlPDR(2, ue1, 2, ie.NewQERID(1), ie.NewURRID(1)),
		// CP-function PDR: GTP-U from the SMF to the UE, on its own chosen TEID.
		ie.NewCreatePDR(ie.NewPDRID(3), ie.NewPrecedence(1000), ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCPFunction),
			ie.NewFTEID(0x0c, 0, nil, nil, 2)), ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(3)),
		// Router solicitations to the SMF: same CHOOSE ID as PDR 1, an IPv6 SDF filter.
		ie.NewCreatePDR(ie.NewPDRID(4), ie.NewPrecedence(1000), ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceAccess),
			ie.NewFTEID(0x0c, 0, nil, nil, 1), ie.NewSDFFilter("permit out 58 from ff02::2/128 to assigned", "", "", "", 1)),
			ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(4)),
		forwardFAR(1, ie.DstInterfaceCore, ie.NewNetworkInstance("internet")),
		ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(0x04|0x08), ie.NewBARID(1)), // BUFF+NOCP
		forwardFAR(3, ie.DstInterfaceAccess),
		forwardFAR(4, ie.DstInterfaceCPFunction, ohc(0x77, netip.MustParseAddr("192.0.2.10"))),
		ie.NewCreateQER(ie.NewQERID(1), ie.NewGateStatus(0, 0), ie.NewMBR(1000000, 2000000), ie.NewQFI(1)),
		ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x02, 0),
			ie.NewVolumeThreshold(0x01, 100<<20, 0, 0)),
		ie.NewCreateBAR(ie.NewBARID(1), ie.NewSuggestedBufferingPacketsCount(10)),
	)
	if seid < FirstSEID {
		t.Errorf("SEID 0x%x below FirstSEID", seid)
	}
	teids := createdTEIDs(t, r.CreatedPDR)
	if len(teids) != 3 || teids[1] == 0 || teids[1] != teids[4] || teids[3] == teids[1] {
		t.Fatalf("created TEIDs %v: want PDRs 1 and 4 sharing one, PDR 3 another", teids)
	}
	qer1 := []rules.QER{{ID: 1, MBRUL: 1000000, MBRDL: 2000000}}
	// PDR 4 matches IPv6 packets only, which the datapath does not carry: it is left out, so
	// TEID 1's one PDR needs no classification step.
	want := []rules.RuleSet{
		{Uplink: true, TEID: teids[1], PDRs: []rules.PDR{
			{ID: 1, Precedence: 255, QFI: 1, QERs: qer1, URRs: []uint32{1}, FAR: rules.FAR{Action: rules.Forward, NetworkInstance: "internet"}},
		}, Source: ue1}, // from Access: only the UE's address may send
		{UE: ue1, PDRs: []rules.PDR{{ID: 2, Precedence: 65535, QFI: 1, QERs: qer1, URRs: []uint32{1},
			FAR: rules.FAR{Action: rules.Buffer}}}},
		// FAR 3 forwards toward Access without a tunnel: nowhere to go yet. Its packets come
		// from the SMF, not the UE: any source.
		{Uplink: true, TEID: teids[3], PDRs: []rules.PDR{{ID: 3, Precedence: 1000, FAR: rules.FAR{Action: rules.AccessNoTunnel}}}},
	}
	if got := p.dp.sets[seid]; !reflect.DeepEqual(got, want) {
		t.Errorf("rule sets\n got %+v\nwant %+v", got, want)
	}
	if f := p.n.ss.byID[seid].PDRs[4].SDF[0].Filter; !f.IPv6 || f.MatchesIPv4() {
		t.Errorf("the IPv6 SDF filter must be kept and never match IPv4: %+v", f)
	}
	s, ok := p.n.Session(seid)
	if !ok || s.CPSEID != 0x51 || s.Peer != smfNode || len(s.PDRs) != 4 || len(s.FARs) != 4 || len(s.QERs) != 1 ||
		len(s.URRs) != 1 || len(s.BARs) != 1 || s.URRs[1].VolumeThreshold != 100<<20 || s.QERs[1].MBRDL != 2000000 ||
		s.BARs[1].SuggestedPackets != 10 || s.PDRs[1].NetworkInstance != "internet" {
		t.Errorf("session %+v", s)
	}
}

func TestEstablishmentFree5GC(t *testing.T) {
	p := newPFCPTest(t, func(o *Options) { o.NetworkInstances = map[string]string{"internet.apn": "n6", "internet": "n6"} })
	ulPDR := ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(32),
		ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceAccess), ie.NewFTEID(0x01, 0x1234, n3.AsSlice(), nil, 0),
			ie.NewNetworkInstanceFQDN("internet.apn"), ie.NewUEIPAddress(0x02, ue1.String(), "", 0, 0),
			ie.NewSDFFilter("permit out ip from any to assigned", "", "", "", 1)),
		// One-octet Outer Header Removal, as TS 29.244 before V15.4.0 had it.
		ie.New(ie.OuterHeaderRemoval, []byte{0}),
		ie.NewFARID(1), ie.NewQERID(1), ie.NewQERID(2), ie.NewURRID(1), ie.NewURRID(2))
	dl := dlPDR(2, ue1, 2, ie.NewQERID(2), ie.NewQERID(1), ie.NewURRID(1), ie.NewURRID(2))
	seid, r := p.mustEstablish(0x52, ulPDR, dl,
		forwardFAR(1, ie.DstInterfaceCore),
		ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(0x01)), // DROP until the gNB is known
		ie.NewCreateQER(ie.NewQERID(1), ie.NewGateStatus(0, 0), ie.NewMBR(5000, 5000)),
		ie.NewCreateQER(ie.NewQERID(2), ie.NewGateStatus(0, 0), ie.NewMBR(1000, 1000), ie.NewQFI(5)),
		ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0)),
		ie.NewCreateURR(ie.NewURRID(2), ie.NewMeasurementMethod(0, 1, 1), ie.NewReportingTriggers(0, 0)),
	)
	if len(r.CreatedPDR) != 0 {
		t.Errorf("Created PDR IEs for SMF-chosen F-TEIDs: %v", r.CreatedPDR)
	}
	got := p.dp.sets[seid]
	if len(got) != 2 || got[0].TEID != 0x1234 || !got[0].Uplink || got[1].UE != ue1 {
		t.Fatalf("rule sets %+v", got)
	}
	ul := got[0].PDRs[0]
	wantQERs := []rules.QER{{ID: 1, MBRUL: 5000, MBRDL: 5000}, {ID: 2, MBRUL: 1000, MBRDL: 1000}}
	// The UE address on the uplink PDR is the rule set's Source, which the datapath checks
	// before it selects a PDR: the filter is left matching everything, with no classification.
	if !slices.Equal(ul.QERs, wantQERs) || !slices.Equal(ul.URRs, []uint32{1, 2}) || len(ul.Filters) != 1 ||
		ul.Filters[0].Local.IsValid() || !ul.Filters[0].MatchesAll() || got[0].Source != ue1 {
		t.Errorf("uplink PDR %+v, source %s: want both QERs and URRs, a filter matching all and the UE as source", ul, got[0].Source)
	}
	dlRule := got[1].PDRs[0]
	if dlRule.QFI != 5 || dlRule.FAR.Action != rules.Drop {
		t.Errorf("downlink PDR %+v: want QFI 5 from QER 2 and a dropping FAR", dlRule)
	}
	if ni := p.n.ss.byID[seid].PDRs[1].NetworkInstance; ni != "internet.apn" {
		t.Errorf("DNS-encoded network instance decoded as %q", ni)
	}
}

// TestUplinkUEFilterWithoutSourceCheck: with anti-spoofing off (pfcp_allow_any_source), an
// uplink PDR naming the UE address must narrow its filters to it itself.
func TestUplinkUEFilterWithoutSourceCheck(t *testing.T) {
	p := newPFCPTest(t, func(o *Options) { o.AllowAnySource = true })
	ul := ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(32),
		ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceAccess), ie.NewFTEID(0x01, 0x1234, n3.AsSlice(), nil, 0),
			ie.NewUEIPAddress(0x02, ue1.String(), "", 0, 0), ie.NewSDFFilter("permit out ip from any to assigned", "", "", "", 1)),
		ie.NewOuterHeaderRemoval(0, 0), ie.NewFARID(1))
	seid, _ := p.mustEstablish(0x53, ul, dlPDR(2, ue1, 2), forwardFAR(1, ie.DstInterfaceCore),
		forwardFAR(2, ie.DstInterfaceAccess, ohc(0x500, gnb)))
	rs := p.dp.sets[seid][0]
	if f := rs.PDRs[0].Filters; rs.Source.IsValid() || len(f) != 1 || f[0].Local != netip.PrefixFrom(ue1, 32) {
		t.Errorf("uplink rule set %+v: want no source check and the filter narrowed to the UE", rs)
	}
}

func TestNetworkInstanceEncodings(t *testing.T) {
	for in, want := range map[string]string{"internet": "internet", "\x08internet": "internet",
		"\x03ims\x03apn": "ims.apn", "\x09short": "\x09short", "a.b": "a.b"} {
		if got := networkInstance([]byte(in)); got != want {
			t.Errorf("networkInstance(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUEAddressChosen(t *testing.T) {
	p := newPFCPTest(t)
	// A /30 holds two usable addresses.
	var got []netip.Addr
	for i := range 2 {
		seid, r := p.mustEstablish(uint64(0x60+i), chv4PDR(1), chv4PDR(2), forwardFAR(1, ie.DstInterfaceAccess, ohc(9, gnb)))
		if len(r.CreatedPDR) != 2 {
			t.Fatalf("Created PDRs %v", r.CreatedPDR)
		}
		u, err := r.CreatedPDR[0].UEIPAddress()
		if err != nil {
			t.Fatal(err)
		}
		a, _ := netip.AddrFromSlice(u.IPv4Address.To4())
		got = append(got, a)
		if sets := p.dp.sets[seid]; len(sets) != 1 || sets[0].UE != a {
			t.Errorf("rule sets %+v: want one downlink set on %s", sets, a)
		}
	}
	if got[0] != netip.MustParseAddr("10.46.0.1") || got[1] != netip.MustParseAddr("10.46.0.2") {
		t.Errorf("chosen UE addresses %v", got)
	}
	r := p.establish(0x70, chv4PDR(1), forwardFAR(1, ie.DstInterfaceAccess, ohc(9, gnb)))
	if c, _ := r.Cause.Cause(); c != ie.CauseNoResourcesAvailable {
		t.Errorf("pool exhausted: cause %d, want %d", c, ie.CauseNoResourcesAvailable)
	}
}

// chv4PDR is a downlink PDR asking this UPF to choose the UE address (CHV4).
func chv4PDR(id uint16) *ie.IE {
	return ie.NewCreatePDR(ie.NewPDRID(id), ie.NewPrecedence(1), ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCore),
		ie.NewUEIPAddress(0x10|0x04, "", "", 0, 0)), ie.NewFARID(1))
}

// chosenUE is the UE address the Created PDRs of r give.
func chosenUE(t *testing.T, r *message.SessionEstablishmentResponse) netip.Addr {
	t.Helper()
	if len(r.CreatedPDR) == 0 {
		t.Fatal("no Created PDR")
	}
	u, err := r.CreatedPDR[0].UEIPAddress()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := netip.AddrFromSlice(u.IPv4Address.To4())
	return a
}

// TestUEAddressChosenNotLocal: the pools never give an address of the UPF (its downlink would
// be the host's), and a chosen address the host has taken since is refused like one an SMF
// gives.
func TestUEAddressChosenNotLocal(t *testing.T) {
	p := newPFCPTest(t)
	local := netip.MustParseAddr("10.46.0.1") // the first of uePool
	p.dp.local = map[netip.Addr]bool{local: true}
	seid, r := p.mustEstablish(0x60, chv4PDR(1), forwardFAR(1, ie.DstInterfaceAccess, ohc(9, gnb)))
	if got := chosenUE(t, r); got != netip.MustParseAddr("10.46.0.2") {
		t.Errorf("chosen UE address %s, want 10.46.0.2 (10.46.0.1 is the UPF's)", got)
	}
	r = p.establish(0x61, chv4PDR(1), forwardFAR(1, ie.DstInterfaceAccess, ohc(9, gnb)))
	if c, _ := r.Cause.Cause(); c != ie.CauseNoResourcesAvailable {
		t.Errorf("pool left with the UPF's address only: cause %d, want %d", c, ie.CauseNoResourcesAvailable)
	}

	p.dp.local[netip.MustParseAddr("10.46.0.2")] = true
	m := p.modify(seid, ie.NewUpdateFAR(ie.NewFARID(1), ie.NewApplyAction(0x04)))
	c, _ := m.Cause.Cause()
	var off uint16
	if m.OffendingIE != nil {
		off, _ = m.OffendingIE.OffendingIE()
	}
	if c != ie.CauseMandatoryIEIncorrect || off != ie.UEIPAddress {
		t.Errorf("modification with the chosen address the host's: cause %d offending IE %d, want %d and %d",
			c, off, ie.CauseMandatoryIEIncorrect, ie.UEIPAddress)
	}
}

// TestEstablishmentErrors: every refusal names its cause, and leaves nothing behind.
func TestEstablishmentErrors(t *testing.T) {
	ok := basicSession(ue1)
	replace := func(i int, x *ie.IE) []*ie.IE {
		out := slices.Clone(ok)
		out[i] = x
		return out
	}
	fiveQuotas := replace(0, chosenULPDR(1, 1, 9, 1, ie.NewQERID(1), ie.NewURRID(1), ie.NewURRID(2), ie.NewURRID(3),
		ie.NewURRID(4), ie.NewURRID(5)))
	fiveQuotas[5] = ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x01),
		ie.NewVolumeQuota(0x01, 1000, 0, 0))
	for id := uint32(2); id <= 5; id++ {
		fiveQuotas = append(fiveQuotas, ie.NewCreateURR(ie.NewURRID(id), ie.NewMeasurementMethod(0, 1, 0),
			ie.NewReportingTriggers(0, 0x02), ie.NewTimeQuota(60*time.Second)))
	}
	cases := []struct {
		name     string
		ies      []*ie.IE
		dpFail   error
		pools    []netip.Prefix // ue_pools, when not nil
		cause    uint8
		off      uint16
		failRule *[2]uint32 // rule type, id
	}{
		{name: "no Create PDR", ies: ok[2:], cause: ie.CauseMandatoryIEMissing, off: ie.CreatePDR},
		{name: "no Create FAR", ies: ok[:2], cause: ie.CauseMandatoryIEMissing, off: ie.CreateFAR},
		{name: "PDR without PDR ID", ies: replace(0, ie.NewCreatePDR(ie.NewPrecedence(1))),
			cause: ie.CauseMandatoryIEMissing, off: ie.PDRID},
		{name: "PDR without PDI", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(1), ie.NewFARID(1))),
			cause: ie.CauseMandatoryIEMissing, off: ie.PDI},
		{name: "PDI without source interface", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(1),
			ie.NewPDI(ie.NewFTEID(0x0c, 0, nil, nil, 1)), ie.NewFARID(1))),
			cause: ie.CauseMandatoryIEMissing, off: ie.SourceInterface},
		{name: "FAR without apply action", ies: replace(2, ie.NewCreateFAR(ie.NewFARID(1))),
			cause: ie.CauseMandatoryIEMissing, off: ie.ApplyAction},
		{name: "QER without gate status", ies: replace(4, ie.NewCreateQER(ie.NewQERID(1))),
			cause: ie.CauseMandatoryIEMissing, off: ie.GateStatus},
		{name: "precedence too short", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.New(ie.Precedence, []byte{1}),
			ie.NewPDI(ie.NewSourceInterface(0), ie.NewFTEID(0x0c, 0, nil, nil, 1)), ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(1))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.Precedence},
		{name: "no free UE address", ies: replace(1, ie.NewCreatePDR(ie.NewPDRID(2), ie.NewPrecedence(1),
			ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCore), ie.NewUEIPAddress(0x10|0x04, "", "", 0, 0)), ie.NewFARID(2))),
			pools: []netip.Prefix{}, cause: ie.CauseNoResourcesAvailable},
		{name: "PDR naming a FAR that does not exist", ies: replace(0, chosenULPDR(1, 1, 9, 7)),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "PDR naming a QER that does not exist", ies: replace(0, chosenULPDR(1, 1, 9, 1, ie.NewQERID(3))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "a failing Create FAR (IPv6 outer header) beside PDRs",
			ies:   replace(3, forwardFAR(2, ie.DstInterfaceAccess, ie.NewOuterHeaderCreation(0x0200, 5, "", "2001:db8::1", 0, 0, 0))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeFAR), 2}},
		{name: "two FARs with one id", ies: append(slices.Clone(ok), forwardFAR(1, ie.DstInterfaceCore)),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeFAR), 1}},
		{name: "apply action FORW and DROP", ies: replace(2, ie.NewCreateFAR(ie.NewFARID(1), ie.NewApplyAction(0x03))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeFAR), 1}},
		{name: "F-TEID without outer header removal", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(1),
			ie.NewPDI(ie.NewSourceInterface(0), ie.NewFTEID(0x0c, 0, nil, nil, 1)), ie.NewFARID(1))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "F-TEID on another UPF's address", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(1),
			ie.NewPDI(ie.NewSourceInterface(0), ie.NewFTEID(0x01, 5, net.ParseIP("198.51.100.1"), nil, 0)),
			ie.NewOuterHeaderRemoval(0, 0), ie.NewFARID(1))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "malformed SDF filter", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(1),
			ie.NewPDI(ie.NewSourceInterface(0), ie.NewFTEID(0x0c, 0, nil, nil, 1),
				ie.NewSDFFilter("permit out 17 from nowhere", "", "", "", 1)),
			ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(1))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		// go-pfcp v0.0.24's accessors panic on these two (the daemon used to die of one datagram).
		{name: "SDF filter whose flow description runs past the IE", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1),
			ie.NewPrecedence(1), ie.NewPDI(ie.NewSourceInterface(0), ie.NewFTEID(0x0c, 0, nil, nil, 1),
				ie.New(ie.SDFFilter, []byte{0x01, 0, 0x00, 0xff, 'p', 'e', 'r', 'm', 'i', 't'})),
			ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(1))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.SDFFilter},
		{name: "outer header creation with a tag go-pfcp reads as 4 octets", ies: replace(3, forwardFAR(2, ie.DstInterfaceAccess,
			ie.New(ie.OuterHeaderCreation, []byte{0x01, 0x40, 0, 0, 5, 0, 10, 100, 1, 2, 0, 0, 7}))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.OuterHeaderCreation},
		{name: "outer header creation cut short", ies: replace(3, forwardFAR(2, ie.DstInterfaceAccess,
			ie.New(ie.OuterHeaderCreation, []byte{0x01, 0x00, 0, 0, 5, 0, 10}))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.OuterHeaderCreation},
		{name: "outer header creation with a C-TAG", ies: replace(3, forwardFAR(2, ie.DstInterfaceAccess,
			ie.New(ie.OuterHeaderCreation, []byte{0x41, 0x00, 0, 0, 5, 0, 10, 100, 1, 2, 0, 0, 7}))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeFAR), 2}},
		{name: "FORW without Forwarding Parameters", ies: replace(2, ie.NewCreateFAR(ie.NewFARID(1), ie.NewApplyAction(0x02))),
			cause: ie.CauseConditionalIEMissing, off: ie.ForwardingParameters},
		{name: "FORW toward a placeholder tunnel", ies: replace(3, forwardFAR(2, ie.DstInterfaceAccess,
			ie.NewOuterHeaderCreation(0x0100, 0, "0.0.0.0", "", 0, 0, 0))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeFAR), 2}},
		{name: "network instance not configured", ies: replace(0, ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(1),
			ie.NewPDI(ie.NewSourceInterface(0), ie.NewFTEID(0x0c, 0, nil, nil, 1), ie.NewNetworkInstance("ims")),
			ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(1))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "MBR above 1 Tbit/s", ies: replace(4, ie.NewCreateQER(ie.NewQERID(1), ie.NewGateStatus(0, 0), ie.NewMBR(1_000_000_001, 1))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeQER), 1}},
		{name: "five MBRs on one PDR", ies: append(replace(0, chosenULPDR(1, 1, 9, 1, ie.NewQERID(1), ie.NewQERID(2), ie.NewQERID(3),
			ie.NewQERID(4), ie.NewQERID(5))),
			ie.NewCreateQER(ie.NewQERID(2), ie.NewGateStatus(0, 0), ie.NewMBR(1, 1)),
			ie.NewCreateQER(ie.NewQERID(3), ie.NewGateStatus(0, 0), ie.NewMBR(1, 1)),
			ie.NewCreateQER(ie.NewQERID(4), ie.NewGateStatus(0, 0), ie.NewMBR(1, 1)),
			ie.NewCreateQER(ie.NewQERID(5), ie.NewGateStatus(0, 0), ie.NewMBR(1, 1))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "URR without measurement method", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1), ie.NewReportingTriggers(0, 0))),
			cause: ie.CauseMandatoryIEMissing, off: ie.MeasurementMethod},
		{name: "URR LIUSA without a linked URR", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x80, 0))),
			cause: ie.CauseConditionalIEMissing, off: ie.LinkedURRID},
		{name: "URR linked to itself", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
			ie.NewReportingTriggers(0x80, 0), ie.NewLinkedURRID(1))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.LinkedURRID},
		{name: "URR linked to a missing URR", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
			ie.NewReportingTriggers(0x80, 0), ie.NewLinkedURRID(9))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeURR), 1}},
		{name: "volume quota without a volume flag", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x01), ie.NewVolumeQuota(0, 0, 0, 0))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.VolumeQuota},
		{name: "volume quota cut short", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x01), ie.New(ie.VolumeQuota, []byte{0x01, 0, 0}))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.VolumeQuota},
		{name: "dropped DL traffic threshold empty", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x40, 0), ie.New(ie.DroppedDLTrafficThreshold, nil))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.DroppedDLTrafficThreshold},
		{name: "dropped DL traffic threshold without a flag", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x40, 0), ie.NewDroppedDLTrafficThreshold(false, false, 0, 0))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.DroppedDLTrafficThreshold},
		{name: "dropped DL traffic threshold cut short", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x40, 0),
			ie.New(ie.DroppedDLTrafficThreshold, []byte{0x03, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0}))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.DroppedDLTrafficThreshold},
		{name: "quota validity time cut short", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x80), ie.New(ie.QuotaValidityTime, []byte{0, 1}))),
			cause: ie.CauseMandatoryIEIncorrect, off: ie.QuotaValidityTime},
		{name: "FAR for quota action missing", ies: replace(5, ie.NewCreateURR(ie.NewURRID(1),
			ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x01), ie.NewVolumeQuota(0x01, 1000, 0, 0),
			ie.NewFARID(9))),
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypeURR), 1}},
		{name: "five quotas on one PDR", ies: fiveQuotas,
			cause: ie.CauseRuleCreationModificationFailure, failRule: &[2]uint32{uint32(ie.RuleIDTypePDR), 1}},
		{name: "datapath failure", ies: ok, dpFail: errors.New("PDR id 1 appears twice"),
			cause: ie.CauseRuleCreationModificationFailure},
		{name: "datapath table full", ies: ok, dpFail: fmt.Errorf("key table full (%w)", rules.ErrNoResources),
			cause: ie.CauseNoResourcesAvailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPFCPTest(t, func(o *Options) {
				o.NetworkInstances = map[string]string{"internet": "n6"}
				if c.pools != nil {
					o.UEPools = c.pools
				}
			})
			p.dp.fail = c.dpFail
			r := p.establish(0x99, c.ies...)
			got, _ := r.Cause.Cause()
			var off uint16
			if r.OffendingIE != nil {
				off, _ = r.OffendingIE.OffendingIE()
			}
			if got != c.cause || off != c.off {
				t.Errorf("cause %d offending IE %d, want %d and %d", got, off, c.cause, c.off)
			}
			if c.failRule != nil && r.FailedRuleID == nil {
				t.Errorf("no Failed Rule ID, want %v", *c.failRule)
			} else if c.failRule != nil {
				typ, err1 := r.FailedRuleID.RuleIDType()
				id, err2 := r.FailedRuleID.FailedRuleID()
				if err1 != nil || err2 != nil || uint32(typ) != c.failRule[0] || id != c.failRule[1] {
					t.Errorf("failed rule %d/%d (%v %v), want %v", typ, id, err1, err2, *c.failRule)
				}
			}
			if r.UPFSEID != nil || len(p.n.Sessions()) != 0 || len(p.dp.sets) != 0 || len(p.n.ss.alloc.teids) != 0 {
				t.Errorf("a refused establishment left a trace: F-SEID %v, sessions %d, datapath %v, TEIDs %v",
					r.UPFSEID, len(p.n.Sessions()), p.dp.sets, p.n.ss.alloc.teids)
			}
			// The same SMF SEID works once the request is right.
			p.mustEstablish(0x99, ok...)
		})
	}
}

// A panic anywhere in handling a message is answered as a malformed message, logged with its
// stack once per peer, and the node keeps serving.
func TestPanicAnsweredAndServingGoesOn(t *testing.T) {
	var log strings.Builder
	p := newPFCPTest(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	for range 2 {
		p.dp.panic = true
		r := p.establish(0x20, basicSession(ue1)...)
		if c, _ := r.Cause.Cause(); c != ie.CauseMandatoryIEIncorrect {
			t.Errorf("cause %d, want %d", c, ie.CauseMandatoryIEIncorrect)
		}
	}
	if n := strings.Count(log.String(), "stack="); n != 1 {
		t.Errorf("%d stacks logged for two panics of one peer, want 1:\n%s", n, log.String())
	}
	if n := len(p.n.ss.alloc.teids); n != 0 {
		t.Errorf("%d TEIDs held after two establishments that panicked", n)
	}
	p.mustEstablish(0x20, basicSession(ue1)...)
}

// TestPlaceholderForwardingParameters: a FAR that buffers may carry Forwarding Parameters
// with a placeholder tunnel (TEID 0, 0.0.0.0), as pfcpsim sends them; they are stored, and
// checked when an update makes the FAR forward.
func TestPlaceholderForwardingParameters(t *testing.T) {
	p := newPFCPTest(t)
	ies := basicSession(ue1)
	ies[3] = ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(0x04), ie.NewForwardingParameters(
		ie.NewDestinationInterface(ie.DstInterfaceAccess), ie.NewOuterHeaderCreation(0x0100, 0, "0.0.0.0", "", 0, 0, 0)))
	seid, _ := p.mustEstablish(0x30, ies...)
	r := p.modify(seid, ie.NewUpdateFAR(ie.NewFARID(2), ie.NewApplyAction(0x02)))
	if c, _ := r.Cause.Cause(); c != ie.CauseRuleCreationModificationFailure || r.FailedRuleID == nil {
		t.Errorf("FORW toward the placeholder: cause %d, failed rule %v", c, r.FailedRuleID)
	}
	r = p.modify(seid, ie.NewUpdateFAR(ie.NewFARID(2), ie.NewApplyAction(0x02), ie.NewUpdateForwardingParameters(ohc(0x500, gnb))))
	if c, _ := r.Cause.Cause(); c != ie.CauseRequestAccepted {
		t.Fatalf("FORW toward the gNB: cause %d", c)
	}
	want := rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x500, Peer: gnb, Local: n3}}
	if f := p.dp.sets[seid][1].PDRs[0].FAR; !reflect.DeepEqual(f, want) {
		t.Errorf("downlink FAR %+v, want %+v", f, want)
	}
}

func TestUnknownIEsIgnored(t *testing.T) {
	p := newPFCPTest(t)
	ies := basicSession(ue1)
	ies[0] = chosenULPDR(1, 1, 9, 1, ie.New(0x7ff0, []byte{1, 2, 3}))
	p.mustEstablish(0x10, append(ies, ie.New(0x7ff1, []byte{4}))...)
}

func TestModification(t *testing.T) {
	p := newPFCPTest(t)
	ies := basicSession(ue1)
	ies[3] = ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(0x04|0x08), ie.NewBARID(1))
	seid, r := p.mustEstablish(0x20, append(ies, ie.NewCreateBAR(ie.NewBARID(1)))...)
	teid := createdTEIDs(t, r.CreatedPDR)[1]
	downlinkFAR := func() rules.FAR { return p.dp.sets[seid][1].PDRs[0].FAR }
	if f := downlinkFAR(); f.Action != rules.Buffer {
		t.Fatalf("downlink FAR %+v, want buffering", f)
	}
	accepted := func(r *message.SessionModificationResponse) {
		t.Helper()
		if c, _ := r.Cause.Cause(); c != ie.CauseRequestAccepted {
			t.Fatalf("modification: cause %d", c)
		}
		if r.SEID() != 0x20 {
			t.Errorf("response SEID 0x%x, want the SMF's", r.SEID())
		}
	}
	// The gNB answers: BUFF -> FORW with outer header creation and a DSCP marking.
	accepted(p.modify(seid, ie.NewUpdateFAR(ie.NewFARID(2), ie.NewApplyAction(0x02),
		ie.NewUpdateForwardingParameters(ie.NewDestinationInterface(ie.DstInterfaceAccess), ohc(0x500, gnb),
			ie.NewTransportLevelMarking(0xb8fc)))))
	want := rules.FAR{Action: rules.Forward, OHC: &rules.OuterHeader{TEID: 0x500, Peer: gnb, Local: n3}, TOS: 0xb8, HasTOS: true}
	if f := downlinkFAR(); !reflect.DeepEqual(f, want) {
		t.Errorf("downlink FAR %+v, want %+v", f, want)
	}
	// Handover: a new gNB address and TEID; the marking stays.
	accepted(p.modify(seid, ie.NewUpdateFAR(ie.NewFARID(2),
		ie.NewUpdateForwardingParameters(ohc(0x600, gnb2)), ie.NewPFCPSMReqFlags(0x02))))
	want.OHC = &rules.OuterHeader{TEID: 0x600, Peer: gnb2, Local: n3}
	if f := downlinkFAR(); !reflect.DeepEqual(f, want) {
		t.Errorf("after handover: downlink FAR %+v, want %+v", f, want)
	}
	// A dedicated flow on the same TEID (CHOOSE ID 1) with its own FAR and QER.
	r2 := p.modify(seid,
		ie.NewCreatePDR(ie.NewPDRID(5), ie.NewPrecedence(10), ie.NewPDI(ie.NewSourceInterface(0),
			ie.NewFTEID(0x0c, 0, nil, nil, 1), ie.NewSDFFilter("permit out 17 from any 5060 to assigned", "", "", "", 2)),
			ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(5), ie.NewQERID(5)),
		forwardFAR(5, ie.DstInterfaceCore),
		ie.NewCreateQER(ie.NewQERID(5), ie.NewGateStatus(0, 0), ie.NewQFI(5)))
	accepted(r2)
	if got := createdTEIDs(t, r2.CreatedPDR); len(got) != 1 || got[5] != teid {
		t.Errorf("created %v: want PDR 5 on TEID 0x%x shared with PDR 1", got, teid)
	}
	if ul := p.dp.sets[seid][0]; ul.TEID != teid || len(ul.PDRs) != 2 || ul.PDRs[1].ID != 5 {
		t.Errorf("uplink rule set %+v", ul)
	}

	// A modification that fails half-way changes nothing: the new PDR is fine, the update
	// names a FAR that does not exist.
	before, _ := p.n.Session(seid)
	beforeSets := p.dp.sets[seid]
	r3 := p.modify(seid, ie.NewRemovePDR(ie.NewPDRID(5)), chosenULPDR(6, 1, 9, 1),
		ie.NewUpdateFAR(ie.NewFARID(9), ie.NewApplyAction(0x01)))
	if c, _ := r3.Cause.Cause(); c != ie.CauseRuleCreationModificationFailure {
		t.Errorf("bad modification: cause %d", c)
	}
	if id, _ := r3.FailedRuleID.FailedRuleID(); id != 9 {
		t.Errorf("failed rule id %d, want FAR 9", id)
	}
	after, _ := p.n.Session(seid)
	if !reflect.DeepEqual(before, after) || !reflect.DeepEqual(beforeSets, p.dp.sets[seid]) {
		t.Errorf("a refused modification changed the session")
	}
	// Also when the datapath refuses.
	p.dp.fail = errors.New("no slots")
	if c, _ := p.modify(seid, ie.NewRemovePDR(ie.NewPDRID(5))).Cause.Cause(); c != ie.CauseRuleCreationModificationFailure {
		t.Errorf("datapath failure: cause %d", c)
	}
	if after, _ := p.n.Session(seid); !reflect.DeepEqual(before, after) {
		t.Errorf("a modification the datapath refused changed the session")
	}

	// Remove the flow and its rules.
	accepted(p.modify(seid, ie.NewRemovePDR(ie.NewPDRID(5)), ie.NewRemoveFAR(ie.NewFARID(5)), ie.NewRemoveQER(ie.NewQERID(5))))
	if s, _ := p.n.Session(seid); len(s.PDRs) != 2 || len(s.FARs) != 2 || len(s.QERs) != 1 {
		t.Errorf("after removal: %d PDRs %d FARs %d QERs", len(s.PDRs), len(s.FARs), len(s.QERs))
	}
	// Removing a FAR a PDR still uses is refused.
	if c, _ := p.modify(seid, ie.NewRemoveFAR(ie.NewFARID(1))).Cause.Cause(); c != ie.CauseRuleCreationModificationFailure {
		t.Errorf("removing a FAR in use: cause %d", c)
	}
	if c, _ := p.modify(seid + 1000).Cause.Cause(); c != ie.CauseSessionContextNotFound {
		t.Errorf("unknown SEID: cause %d", c)
	}
}

// TestRulesScopedToSession: two sessions with the same rule ids; changing one leaves the
// other alone.
func TestRulesScopedToSession(t *testing.T) {
	p := newPFCPTest(t)
	a, _ := p.mustEstablish(1, basicSession(ue1)...)
	b, _ := p.mustEstablish(2, basicSession(netip.MustParseAddr("10.45.0.8"))...)
	bSets := p.dp.sets[b]
	if c, _ := p.modify(a, ie.NewRemovePDR(ie.NewPDRID(2)), ie.NewRemoveFAR(ie.NewFARID(2))).Cause.Cause(); c != ie.CauseRequestAccepted {
		t.Fatalf("modify a: cause %d", c)
	}
	if !reflect.DeepEqual(p.dp.sets[b], bSets) {
		t.Error("modifying session a changed session b")
	}
	// Same UE address twice is refused by the datapath: nothing changes.
	r := p.establish(3, basicSession(netip.MustParseAddr("10.45.0.8"))...)
	if c, _ := r.Cause.Cause(); c != ie.CauseRuleCreationModificationFailure {
		t.Errorf("a UE address in use: cause %d", c)
	}
	// The same SMF SEID twice from one peer names a session already there.
	if c, _ := p.establish(1, basicSession(netip.MustParseAddr("10.45.0.9"))...).Cause.Cause(); c != ie.CauseRequestRejected {
		t.Errorf("SMF SEID reused: cause %d", c)
	}
}

// deletionVolume is the Volume Measurement of the one usage report of a deletion response.
func deletionVolume(t *testing.T, d *message.SessionDeletionResponse) *ie.VolumeMeasurementFields {
	t.Helper()
	if len(d.UsageReport) != 1 {
		t.Fatalf("%d usage reports, want 1", len(d.UsageReport))
	}
	var vol *ie.VolumeMeasurementFields
	for _, x := range d.UsageReport[0].ChildIEs {
		if x.Type == ie.VolumeMeasurement {
			vol, _ = x.VolumeMeasurement()
		}
	}
	return vol
}

func TestDeletionReportsUsage(t *testing.T) {
	p := newPFCPTest(t)
	seid, r := p.mustEstablish(0x30, basicSession(ue1)...)
	teid := createdTEIDs(t, r.CreatedPDR)[1]
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 300}, {PDR: 2, Packets: 5, Bytes: 1000}}
	d := p.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid, seq, 0) }).(*message.SessionDeletionResponse)
	if c, _ := d.Cause.Cause(); c != ie.CauseRequestAccepted || d.SEID() != 0x30 {
		t.Fatalf("deletion: cause %d SEID 0x%x", c, d.SEID())
	}
	if vol := deletionVolume(t, d); vol == nil || vol.TotalVolume != 1300 || vol.UplinkVolume != 300 || vol.DownlinkVolume != 1000 ||
		vol.TotalNumberOfPackets != 8 {
		t.Errorf("volume %+v", vol)
	}
	if len(p.n.Sessions()) != 0 || len(p.dp.sets) != 0 || len(p.n.ss.alloc.teids) != 0 {
		t.Error("deleted session left state behind")
	}
	if c, _ := p.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid, seq, 0) }).(*message.SessionDeletionResponse).Cause.Cause(); c != ie.CauseSessionContextNotFound {
		t.Errorf("second deletion: cause %d", c)
	}
	// A released TEID is not handed out again at once.
	_, r2 := p.mustEstablish(0x31, basicSession(ue1)...)
	if t2 := createdTEIDs(t, r2.CreatedPDR)[1]; t2 == teid {
		t.Errorf("TEID 0x%x reused right away", teid)
	}
}

// TestSequenceNumberReused: only the same message again is a retransmission. Another
// request with a sequence number already answered is applied, and a new association of the
// peer starts afresh (pfcpsim and restarted SMFs number from 1 again).
func TestSequenceNumberReused(t *testing.T) {
	p := newPFCPTest(t)
	_, c, _ := cause(t, p.n.Handle(smf, bytesOf(t, establishment(500, 0x40, basicSession(ue1)...))))
	if c != ie.CauseRequestAccepted || len(p.n.Sessions()) != 1 {
		t.Fatalf("establishment: cause %d, %d sessions", c, len(p.n.Sessions()))
	}
	seid := p.n.Sessions()[0].SEID
	m, c, _ := cause(t, p.n.Handle(smf, bytesOf(t, message.NewSessionDeletionRequest(0, 0, seid, 500, 0))))
	if _, ok := m.(*message.SessionDeletionResponse); !ok || c != ie.CauseRequestAccepted || len(p.n.Sessions()) != 0 {
		t.Fatalf("deletion with a reused sequence number: %s, cause %d, %d sessions", m.MessageTypeName(), c, len(p.n.Sessions()))
	}

	est := bytesOf(t, establishment(7, 0x41, basicSession(ue1)...))
	p.n.Handle(smf, est)
	p.n.Handle(smf, bytesOf(t, smfSetup(1))) // set up again, without retention: the session goes
	if n := len(p.n.Sessions()); n != 0 {
		t.Fatalf("%d sessions after the association was set up again", n)
	}
	if _, c, _ := cause(t, p.n.Handle(smf, est)); c != ie.CauseRequestAccepted || len(p.n.Sessions()) != 1 {
		t.Errorf("the same establishment in the new association: cause %d, %d sessions, want a new session",
			c, len(p.n.Sessions()))
	}
}

// TestResponseCacheOnlyForSMFs: requests from an address without an association leave the
// cache alone, so a flood of them cannot push an SMF's responses out.
func TestResponseCacheOnlyForSMFs(t *testing.T) {
	p := newPFCPTest(t)
	p.mustEstablish(0x42, basicSession(ue1)...)
	for i := range 1000 {
		p.n.Handle(stranger, bytesOf(t, message.NewSessionDeletionRequest(0, 0, FirstSEID, uint32(i), 0)))
	}
	if got := len(p.n.answered.byKey); got != 1 {
		t.Errorf("%d responses kept, want the SMF's one", got)
	}
}

func TestRetransmittedRequestAppliedOnce(t *testing.T) {
	p := newPFCPTest(t)
	b := bytesOf(t, establishment(500, 0x40, basicSession(ue1)...))
	first := p.n.Handle(smf, b)
	second := p.n.Handle(smf, b)
	if !slices.Equal(first, second) {
		t.Error("a retransmission got another response")
	}
	if n := len(p.n.Sessions()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

func TestSessionsGoWithTheirPeer(t *testing.T) {
	p := newPFCPTest(t)
	p.mustEstablish(0x41, basicSession(ue1)...)
	if _, c, _ := cause(t, p.n.Handle(smf, bytesOf(t, message.NewAssociationReleaseRequest(600, ie.NewNodeID(smfNode, "", ""))))); c != ie.CauseRequestAccepted {
		t.Fatalf("release: cause %d", c)
	}
	if len(p.n.Sessions()) != 0 || len(p.dp.sets) != 0 {
		t.Error("sessions kept after the association was released")
	}

	// A lost peer's sessions keep forwarding by default, and are deleted when configured so.
	for _, del := range []bool{false, true} {
		p := newPFCPTest(t, func(o *Options) { o.DeleteSessionsOfLostPeers = del })
		p.mustEstablish(0x42, basicSession(ue1)...)
		var lost []string
		for range 4 { // sent, then three misses
			_, lost = p.n.beat()
		}
		if !slices.Equal(lost, []string{smfNode}) {
			t.Fatalf("lost %v", lost)
		}
		p.n.peerLost(lost)
		if got, want := len(p.n.Sessions()), map[bool]int{false: 1, true: 0}[del]; got != want {
			t.Errorf("delete=%v: %d sessions after the peer was lost, want %d", del, got, want)
		}
	}
}

// TestReassociation: setting an association up again ends the peer's sessions unless the SMF
// asks to retain them (TS 29.244 6.2.6.2.2); after a lost association, the same SMF coming
// back keeps them and a restarted one (new Recovery Time Stamp) does not.
func TestReassociation(t *testing.T) {
	retention := ie.NewPFCPSessionRetentionInformation(ie.NewCPPFCPEntityIPAddress(smfIPv4, nil))
	setup := func(p *pfcpTest, ts time.Time, ies ...*ie.IE) *message.AssociationSetupResponse {
		return p.send(func(seq uint32) message.Message {
			return setupRequest(seq, append([]*ie.IE{ie.NewNodeID(smfNode, "", ""), ie.NewRecoveryTimeStamp(ts)}, ies...)...)
		}).(*message.AssociationSetupResponse)
	}
	lose := func(p *pfcpTest) {
		for range 4 {
			p.n.beat()
		}
		if len(p.n.Associations()) != 0 {
			t.Fatal("association not lost")
		}
	}
	cases := []struct {
		name string
		run  func(p *pfcpTest) *message.AssociationSetupResponse
		kept bool
		// psrei: the response says the sessions were retained (only when asked to)
		psrei bool
	}{
		{"again without retention", func(p *pfcpTest) *message.AssociationSetupResponse { return setup(p, peerTS) }, false, false},
		{"again with retention", func(p *pfcpTest) *message.AssociationSetupResponse { return setup(p, peerTS, retention) }, true, true},
		{"after loss, same SMF", func(p *pfcpTest) *message.AssociationSetupResponse { lose(p); return setup(p, peerTS) }, true, false},
		{"after loss, restarted SMF", func(p *pfcpTest) *message.AssociationSetupResponse {
			lose(p)
			return setup(p, peerTS.Add(time.Hour))
		}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPFCPTest(t)
			p.mustEstablish(0x80, basicSession(ue1)...)
			r := c.run(p)
			if got, _ := r.Cause.Cause(); got != ie.CauseRequestAccepted {
				t.Fatalf("setup: cause %d", got)
			}
			if kept := len(p.n.Sessions()) == 1; kept != c.kept {
				t.Errorf("session kept %v, want %v", kept, c.kept)
			}
			if psrei := r.PFCPASRspFlags != nil && r.PFCPASRspFlags.HasPSREI(); psrei != c.psrei {
				t.Errorf("PSREI %v, want %v", psrei, c.psrei)
			}
		})
	}
}

// TestOnlyTheSMFChangesItsSessions: requests about a session, and an association release,
// from another address than the SMF's are refused and change nothing.
func TestOnlyTheSMFChangesItsSessions(t *testing.T) {
	p := newPFCPTest(t)
	seid, _ := p.mustEstablish(0x90, basicSession(ue1)...)
	other := netip.MustParseAddrPort("192.0.2.66:8805")
	ask := func(m message.Message) uint8 {
		_, c, _ := cause(t, p.n.Handle(other, bytesOf(t, m)))
		return c
	}
	if c := ask(message.NewSessionModificationRequest(0, 0, seid, 900, 0, ie.NewRemovePDR(ie.NewPDRID(1)))); c != ie.CauseSessionContextNotFound {
		t.Errorf("modification from another peer: cause %d", c)
	}
	if c := ask(message.NewSessionDeletionRequest(0, 0, seid, 901, 0)); c != ie.CauseSessionContextNotFound {
		t.Errorf("deletion from another peer: cause %d", c)
	}
	if c := ask(message.NewAssociationReleaseRequest(902, ie.NewNodeID(smfNode, "", ""))); c != ie.CauseNoEstablishedPFCPAssociation {
		t.Errorf("release from another peer: cause %d", c)
	}
	// The CP F-SEID address is the SMF's to choose: naming another host there gives it nothing.
	m := establishment(903, 0x91, basicSession(netip.MustParseAddr("10.45.0.8"))...)
	m.CPFSEID = ie.NewFSEID(0x91, other.Addr().AsSlice(), nil)
	if _, c, _ := cause(t, p.n.Handle(smf, bytesOf(t, m))); c != ie.CauseRequestAccepted {
		t.Fatalf("establishment naming another CP address: cause %d", c)
	}
	if c := ask(message.NewSessionDeletionRequest(0, 0, FirstSEID+1, 904, 0)); c != ie.CauseSessionContextNotFound {
		t.Errorf("deletion from the session's CP F-SEID address: cause %d", c)
	}
	if s, ok := p.n.Session(seid); !ok || len(s.PDRs) != 2 || len(p.n.Associations()) != 1 {
		t.Error("a stranger changed the session or the association")
	}
}

// TestUPFInitiatedReassociationAfterRestart: the association this UPF asks for again after
// losing its SMF ends the sessions of an SMF that restarted meanwhile, as an SMF-initiated
// one does.
func TestUPFInitiatedReassociationAfterRestart(t *testing.T) {
	p := newPFCPTest(t)
	p.mustEstablish(0x91, basicSession(ue1)...)
	for range 4 {
		p.n.beat()
	}
	req, err := message.Parse(p.n.setupRequest(smf))
	if err != nil {
		t.Fatal(err)
	}
	resp := message.NewAssociationSetupResponse(req.Sequence(), ie.NewNodeID(smfNode, "", ""),
		ie.NewCause(ie.CauseRequestAccepted), ie.NewRecoveryTimeStamp(peerTS.Add(time.Hour)))
	p.n.Handle(smf, bytesOf(t, resp))
	if len(p.n.Associations()) != 1 {
		t.Fatal("association not recorded")
	}
	if n := len(p.n.Sessions()); n != 0 {
		t.Errorf("%d sessions of the restarted SMF kept", n)
	}
}

// TestResponseCacheBounded: the retransmission cache keeps at most maxResponses responses,
// dropping the oldest, even within their lifetime.
func TestResponseCacheBounded(t *testing.T) {
	c := newResponseCache(time.Hour)
	now := time.Now()
	for i := range maxResponses + 10 {
		c.put(requestKey{smf, uint32(i)}, 0, []byte{1}, now)
	}
	if len(c.byKey) != maxResponses || len(c.order) != maxResponses {
		t.Errorf("%d responses kept (%d in order), want %d", len(c.byKey), len(c.order), maxResponses)
	}
	if _, ok := c.get(requestKey{smf, 0}, 0, now); ok {
		t.Error("the oldest response was kept")
	}
	if _, ok := c.get(requestKey{smf, maxResponses + 9}, 0, now); !ok {
		t.Error("the newest response was dropped")
	}
}
