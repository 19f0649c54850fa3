package pfcpclient

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/pfcpclient/pfcptest"
)

// associated returns a client associated with a fresh fake UPF.
func associated(t *testing.T, opts pfcptest.Options, copts Options) (*Client, *pfcptest.UPF) {
	t.Helper()
	upf := pfcptest.Start(t, opts)
	if copts.NodeID == "" {
		copts.NodeID = "smf.test"
	}
	c, err := Dial(upf.Addr(), copts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Associate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c, upf
}

// pdr is what the tests read from one Create PDR.
type pdr struct {
	source     uint8
	ohr        uint8 // 0xff: no Outer Header Removal
	ohrLen     int
	precedence uint32
	fteid      *ie.FTEIDFields
	ue         *ie.UEIPAddressFields
	network    []byte // the Network Instance's octets
	filter     string // the SDF filter's flow description
	qfi        string // "" without a QFI
	far        uint32
	qers, urrs []uint32
}

// decodePDRs decodes the Create PDRs of a request by PDR ID, failing on IEs that do not.
func decodePDRs(t *testing.T, creates []*ie.IE) map[uint16]pdr {
	t.Helper()
	pdrs := map[uint16]pdr{}
	for _, c := range creates {
		id, err := c.PDRID()
		if err != nil {
			t.Fatalf("Create PDR without PDR ID: %v", err)
		}
		var p pdr
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("PDR %d: %v", id, err)
			}
		}
		if p.source, err = pfcptest.One(c, ie.PDI, ie.SourceInterface).SourceInterface(); err != nil {
			t.Fatalf("PDR %d: source interface: %v", id, err)
		}
		p.precedence, err = c.Precedence()
		must(err)
		if f := pfcptest.One(c, ie.PDI, ie.FTEID); f != nil {
			p.fteid, err = f.FTEID()
			must(err)
		}
		if u := pfcptest.One(c, ie.PDI, ie.UEIPAddress); u != nil {
			p.ue, err = u.UEIPAddress()
			must(err)
		}
		if n := pfcptest.One(c, ie.PDI, ie.NetworkInstance); n != nil {
			p.network = n.Payload
		}
		if f := pfcptest.One(c, ie.PDI, ie.SDFFilter); f != nil {
			fields, err := f.SDFFilter()
			must(err)
			p.filter = fields.FlowDescription
		}
		if q := pfcptest.One(c, ie.PDI, ie.QFI); q != nil {
			v, err := q.QFI()
			must(err)
			p.qfi = fmt.Sprint(v)
		}
		if o := pfcptest.One(c, ie.OuterHeaderRemoval); o != nil {
			p.ohrLen = len(o.Payload)
			p.ohr, err = o.OuterHeaderRemovalDescription()
			must(err)
		} else {
			p.ohr = 0xff
		}
		p.far, err = c.FARID()
		must(err)
		for _, q := range pfcptest.Find(c, ie.QERID) {
			v, err := q.QERID()
			must(err)
			p.qers = append(p.qers, v)
		}
		for _, u := range pfcptest.Find(c, ie.URRID) {
			v, err := u.URRID()
			must(err)
			p.urrs = append(p.urrs, v)
		}
		pdrs[id] = p
	}
	return pdrs
}

func TestEstablishOpen5GSStyle(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{})
	spec := SessionSpec{NetworkInstance: "internet", QFI: 9, MBRUplink: 20000, MBRDownlink: 100000,
		VolumeThreshold: 1 << 30, DroppedPackets: 500, QuotaValidityTime: time.Minute, Flows: []Flow{
			{Filter: "permit out 17 from 198.51.100.0/24 to assigned 5060", Precedence: 100, QFI: 5,
				QERIDs: []uint32{FlowQERID(0), SessionQERID}},
			{Filter: "permit out 6 from any 443 to assigned", Precedence: 200, QFI: 6, MBRDownlink: 5000,
				VolumeQuota: 4096},
		}}
	s, err := c.Establish(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	held := upf.Sessions()
	if len(held) != 1 {
		t.Fatalf("the UPF holds %d sessions, want 1", len(held))
	}
	got := held[0]
	// What the UPF chose came back into the Session.
	if s.UPSEID != got.UPSEID || s.CPSEID != got.CPSEID || s.UPF != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("session SEIDs %#x/%#x at %s, the UPF has %#x/%#x", s.CPSEID, s.UPSEID, s.UPF, got.CPSEID, got.UPSEID)
	}
	if s.UplinkTEID != 0x100 || s.N3 != netip.MustParseAddr("192.0.2.1") || s.UE != netip.MustParseAddr("10.60.0.1") {
		t.Errorf("session uplink %#x at %s, UE %s; want 0x100 at 192.0.2.1, UE 10.60.0.1", s.UplinkTEID, s.N3, s.UE)
	}
	if !reflect.DeepEqual(got.TEIDs, []uint32{0x100}) {
		t.Errorf("the UPF chose TEIDs %v; the shared CHOOSE ID should have made it one", got.TEIDs)
	}
	if len(s.CreatedPDRs) != 6 {
		t.Errorf("created PDRs %+v, want all 6 (three F-TEIDs, three UE addresses)", s.CreatedPDRs)
	}
	for _, p := range s.CreatedPDRs {
		uplink := p.ID%2 == 1
		if uplink && (p.TEID != 0x100 || p.UE.IsValid()) || !uplink && (p.TEID != 0 || p.UE != s.UE) {
			t.Errorf("created PDR %+v", p)
		}
	}

	req := got.Establishment
	cp, err := req.CPFSEID.FSEID()
	if err != nil || cp.SEID != s.CPSEID || !cp.IPv4Address.Equal(netip.MustParseAddr("127.0.0.1").AsSlice()) {
		t.Errorf("CP F-SEID %+v, %v", cp, err)
	}
	if id, _ := req.NodeID.NodeID(); id != "smf.test" {
		t.Errorf("node id %q", id)
	}
	if pt, _ := req.PDNType.PDNType(); pt != ie.PDNTypeIPv4 {
		t.Errorf("PDN type %d", pt)
	}
	if req.SEID() != 0 {
		t.Errorf("establishment header SEID %#x, want 0", req.SEID())
	}
	pdrs := decodePDRs(t, req.CreatePDR)
	fqdn := []byte("\x08internet")
	for id, want := range map[uint16]pdr{
		1: {source: ie.SrcInterfaceAccess, ohr: 6, ohrLen: 2, precedence: 65535, network: fqdn, qfi: "9", far: 1, qers: []uint32{1}, urrs: []uint32{1}},
		2: {source: ie.SrcInterfaceCore, ohr: 0xff, precedence: 65535, network: fqdn, far: 2, qers: []uint32{1}, urrs: []uint32{1}},
		3: {source: ie.SrcInterfaceAccess, ohr: 6, ohrLen: 2, precedence: 100, network: fqdn, qfi: "5", far: 1, qers: []uint32{2, 1}, urrs: []uint32{2, 1},
			filter: spec.Flows[0].Filter},
		4: {source: ie.SrcInterfaceCore, ohr: 0xff, precedence: 100, network: fqdn, far: 2, qers: []uint32{2, 1}, urrs: []uint32{2, 1},
			filter: spec.Flows[0].Filter},
		5: {source: ie.SrcInterfaceAccess, ohr: 6, ohrLen: 2, precedence: 200, network: fqdn, qfi: "6", far: 1, qers: []uint32{3}, urrs: []uint32{3, 1},
			filter: spec.Flows[1].Filter},
		6: {source: ie.SrcInterfaceCore, ohr: 0xff, precedence: 200, network: fqdn, far: 2, qers: []uint32{3}, urrs: []uint32{3, 1},
			filter: spec.Flows[1].Filter},
	} {
		p, ok := pdrs[id]
		if !ok {
			t.Errorf("no PDR %d", id)
			continue
		}
		if want.source == ie.SrcInterfaceAccess {
			// CHOOSE with CHOOSE ID 5, no TEID, no address; no UE address.
			if f := p.fteid; f == nil || f.Flags != 0x0d || f.ChooseID != 5 || f.TEID != 0 || f.IPv4Address != nil {
				t.Errorf("PDR %d F-TEID %+v, want flags V4|CH|CHID, CHOOSE ID 5", id, f)
			}
			if p.ue != nil {
				t.Errorf("uplink PDR %d has a UE address %+v", id, p.ue)
			}
		} else {
			if p.fteid != nil {
				t.Errorf("downlink PDR %d has an F-TEID %+v", id, p.fteid)
			}
			// CHV4 with SD and no address: the UPF chooses. V4 would announce an address
			// (TS 29.244 8.2.62), which tshark then reports missing.
			if u := p.ue; u == nil || u.Flags != 0x14 || u.IPv4Address != nil {
				t.Errorf("PDR %d UE IP %+v, want flags SD|CHV4 without an address", id, u)
			}
		}
		p.fteid, p.ue = nil, nil
		if !reflect.DeepEqual(p, want) {
			t.Errorf("PDR %d:\n%+v\nwant\n%+v", id, p, want)
		}
	}
	if len(pdrs) != 6 {
		t.Errorf("%d PDRs, want 6", len(pdrs))
	}

	fars := map[uint32]*ie.IE{}
	for _, f := range req.CreateFAR {
		id, _ := f.FARID()
		fars[id] = f
	}
	if len(fars) != 2 || !fars[1].HasFORW() ||
		dst(t, fars[1], ie.ForwardingParameters) != ie.DstInterfaceCore ||
		string(pfcptest.One(fars[1], ie.ForwardingParameters, ie.NetworkInstance).Payload) != string(fqdn) {
		t.Errorf("uplink FAR %v", fars[1])
	}
	if f := fars[2]; f == nil || !f.HasBUFF() || !f.HasNOCP() || f.HasFORW() || barID(t, f) != 1 ||
		pfcptest.One(f, ie.ForwardingParameters) != nil {
		t.Errorf("downlink FAR without a gNB %v, want BUFF|NOCP with BAR 1", f)
	}
	if b := req.CreateBAR; b == nil || barID(t, b) != 1 {
		t.Errorf("Create BAR %v", b)
	}

	if len(req.CreateQER) != 3 {
		t.Fatalf("%d QERs, want 3", len(req.CreateQER))
	}
	for i, want := range []struct {
		id         uint32
		qfi        uint8
		mbrUL, mbr uint64
	}{{1, 9, 20000, 100000}, {2, 5, 0, 0}, {3, 6, 0, 5000}} {
		q := req.CreateQER[i]
		id, _ := q.QERID()
		qfi, _ := pfcptest.One(q, ie.QFI).QFI()
		gate, err := pfcptest.One(q, ie.GateStatus).GateStatus()
		if id != want.id || qfi != want.qfi || err != nil || gate != 0 {
			t.Errorf("QER %d: id %d, QFI %d, gate %#x (%v)", i, id, qfi, gate, err)
		}
		m := pfcptest.One(q, ie.MBR)
		if want.mbrUL == 0 && want.mbr == 0 {
			if m != nil {
				t.Errorf("QER %d has an MBR", id)
			}
			continue
		}
		ul, _ := m.MBRUL()
		dl, _ := m.MBRDL()
		if ul != want.mbrUL || dl != want.mbr {
			t.Errorf("QER %d MBR %d/%d, want %d/%d", id, ul, dl, want.mbrUL, want.mbr)
		}
	}

	if len(req.CreateURR) != 3 {
		t.Fatalf("%d URRs, want 3", len(req.CreateURR))
	}
	for i, u := range req.CreateURR {
		id, _ := u.URRID()
		if !pfcptest.One(u, ie.MeasurementMethod).HasVOLUM() || id != uint32(i+1) {
			t.Errorf("URR %d (id %d) does not measure volume", i, id)
		}
		trig, _ := pfcptest.One(u, ie.ReportingTriggers).ReportingTriggers()
		th := pfcptest.One(u, ie.VolumeThreshold)
		if id == SessionURRID {
			v, err := th.VolumeThreshold()
			if err != nil || v.TotalVolume != 1<<30 || trig[0] != 0x02|0x40 || trig[1] != 0x80 {
				t.Errorf("session URR threshold %+v (%v), triggers %x; want 1 GiB total, VOLTH, DROTH and QUVTI", v, err, trig)
			}
			if d, err := pfcptest.One(u, ie.QuotaValidityTime).QuotaValidityTime(); err != nil || d != time.Minute {
				t.Errorf("session URR quota validity time %v (%v), want 1m", d, err)
			}
			// Dropped DL Traffic Threshold (TS 29.244 8.2.49): DLPA, then 8 octets of packets.
			if d := pfcptest.One(u, ie.DroppedDLTrafficThreshold); d == nil ||
				string(d.Payload) != "\x01\x00\x00\x00\x00\x00\x00\x01\xf4" {
				t.Errorf("session URR dropped DL traffic threshold %v, want DLPA 500 packets", d)
			}
		} else if q := pfcptest.One(u, ie.VolumeQuota); id == FlowURRID(1) {
			v, err := q.VolumeQuota()
			if err != nil || v.TotalVolume != 4096 || trig[1] != 0x01 {
				t.Errorf("flow URR %d: quota %+v (%v), triggers %x; want 4096 bytes total, VOLQU", id, v, err, trig)
			}
		} else if th != nil || q != nil || trig[0] != 0 {
			t.Errorf("flow URR %d: threshold %v, quota %v, triggers %x; want none", id, th, q, trig)
		}
	}
}

func dst(t *testing.T, far *ie.IE, params uint16) uint8 {
	t.Helper()
	d := pfcptest.One(far, params, ie.DestinationInterface)
	if d == nil {
		t.Errorf("FAR without destination interface: %v", far)
		return 0xff
	}
	v, _ := d.DestinationInterface()
	return v
}

func barID(t *testing.T, g *ie.IE) uint8 {
	t.Helper()
	b := pfcptest.One(g, ie.BARID)
	if b == nil {
		return 0
	}
	v, err := b.BARID()
	if err != nil {
		t.Error(err)
	}
	return v
}

// checkForwarding checks a FAR (Create or Update) forwards toward ACCESS to gnb with teid.
func checkForwarding(t *testing.T, far *ie.IE, params uint16, gnb string, teid uint32, network string) {
	t.Helper()
	if !far.HasFORW() || far.HasBUFF() || far.HasDROP() {
		t.Errorf("FAR does not only forward: %v", far)
	}
	if d := dst(t, far, params); d != ie.DstInterfaceAccess {
		t.Errorf("FAR destination %d, want ACCESS", d)
	}
	o := pfcptest.One(far, params, ie.OuterHeaderCreation)
	if o == nil {
		t.Fatalf("FAR without Outer Header Creation: %v", far)
	}
	ohc, err := o.OuterHeaderCreation()
	if err != nil || ohc.OuterHeaderCreationDescription != 0x0100 || ohc.TEID != teid || ohc.IPv4Address.String() != gnb {
		t.Errorf("Outer Header Creation %+v (%v), want GTP-U/UDP/IPv4 to %s TEID %#x", ohc, err, gnb, teid)
	}
	var got string
	if n := pfcptest.One(far, params, ie.NetworkInstance); n != nil {
		got = string(n.Payload)
	}
	if got != network {
		t.Errorf("FAR network instance %q, want %q", got, network)
	}
}

func TestEstablishFree5GCStyle(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{})
	spec := SessionSpec{Style: Free5GC, UE: netip.MustParseAddr("10.45.0.7"), UplinkTEID: 0x7001,
		N3: netip.MustParseAddr("192.0.2.9"), NetworkInstance: "internet", GNB: netip.MustParseAddr("198.51.100.20"),
		GNBTEID: 0xabc, Flows: []Flow{{Filter: "permit out ip from 203.0.113.0/24 to assigned", Precedence: 10, QFI: 2}}}
	s, err := c.Establish(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	// The UPF chose nothing, so it reported no Created PDR: the session keeps the SMF's choice.
	if s.UplinkTEID != 0x7001 || s.N3 != spec.N3 || s.UE != spec.UE || len(s.CreatedPDRs) != 0 ||
		s.GNB != spec.GNB || s.GNBTEID != 0xabc {
		t.Errorf("session %+v", s)
	}
	got, ok := upf.Session(s.UPSEID)
	if !ok {
		t.Fatal("the UPF lacks the session")
	}
	pdrs := decodePDRs(t, got.Establishment.CreatePDR)
	for _, id := range []uint16{1, 3} {
		p := pdrs[id]
		if f := p.fteid; f == nil || f.Flags != 0x01 || f.TEID != 0x7001 || f.IPv4Address.String() != "192.0.2.9" {
			t.Errorf("PDR %d F-TEID %+v, want V4 0x7001 at 192.0.2.9", id, f)
		}
		if u := p.ue; u == nil || u.Flags != 0x02 || u.IPv4Address.String() != "10.45.0.7" {
			t.Errorf("uplink PDR %d UE IP %+v, want V4 (source) 10.45.0.7", id, u)
		}
		if p.ohr != 0 || string(p.network) != "internet" {
			t.Errorf("PDR %d: OHR %d, network instance %q; want 0, plain \"internet\"", id, p.ohr, p.network)
		}
	}
	for _, id := range []uint16{2, 4} {
		p := pdrs[id]
		if u := p.ue; u == nil || u.Flags != 0x06 || u.IPv4Address.String() != "10.45.0.7" {
			t.Errorf("downlink PDR %d UE IP %+v, want V4|SD 10.45.0.7", id, u)
		}
		if string(p.network) != "internet" {
			t.Errorf("PDR %d network instance %q", id, p.network)
		}
	}
	for _, f := range got.Establishment.CreateFAR {
		if id, _ := f.FARID(); id == DownlinkFARID {
			checkForwarding(t, f, ie.ForwardingParameters, "198.51.100.20", 0xabc, "internet")
			if barID(t, f) != 0 {
				t.Errorf("a forwarding FAR has a BAR")
			}
		}
	}
}

func TestModifyAndDelete(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{})
	ctx := t.Context()
	s, err := c.Establish(ctx, SessionSpec{UE: netip.MustParseAddr("10.45.0.2"), NetworkInstance: "internet"})
	if err != nil {
		t.Fatal(err)
	}
	gnb := netip.MustParseAddr("192.0.2.50")
	if err := c.SetDownlink(ctx, s, gnb, 0x55); err != nil {
		t.Fatal(err)
	}
	if s.GNB != gnb || s.GNBTEID != 0x55 {
		t.Errorf("session downlink %s %#x after SetDownlink", s.GNB, s.GNBTEID)
	}
	handover := netip.MustParseAddr("192.0.2.51")
	if err := c.SetDownlink(ctx, s, handover, 0x66); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDownlinkBuffering(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := c.DropDownlink(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := c.DropDownlinkNotify(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.GNB.IsValid() {
		t.Errorf("session still forwards to %s after DropDownlink", s.GNB)
	}
	resp, err := c.Modify(ctx, s, ie.NewUpdateQER(ie.NewQERID(SessionQERID), ie.NewGateStatus(ie.GateStatusClosed, ie.GateStatusClosed)))
	if err != nil || resp.SEID() != s.CPSEID {
		t.Fatalf("generic modify: %v, response SEID %#x", err, resp.SEID())
	}

	got, _ := upf.Session(s.UPSEID)
	if len(got.Modifications) != 6 {
		t.Fatalf("the UPF got %d modifications, want 6", len(got.Modifications))
	}
	for i, m := range got.Modifications {
		if m.SEID() != s.UPSEID {
			t.Errorf("modification %d header SEID %#x, want the UP SEID %#x", i, m.SEID(), s.UPSEID)
		}
	}
	updateFAR := func(m *message.SessionModificationRequest) *ie.IE {
		t.Helper()
		if len(m.UpdateFAR) != 1 {
			t.Fatalf("%d Update FARs, want 1", len(m.UpdateFAR))
		}
		if id, _ := m.UpdateFAR[0].FARID(); id != DownlinkFARID {
			t.Errorf("Update FAR id %d, want %d", id, DownlinkFARID)
		}
		return m.UpdateFAR[0]
	}
	checkForwarding(t, updateFAR(got.Modifications[0]), ie.UpdateForwardingParameters, "192.0.2.50", 0x55, "\x08internet")
	checkForwarding(t, updateFAR(got.Modifications[1]), ie.UpdateForwardingParameters, "192.0.2.51", 0x66, "\x08internet")
	if f := updateFAR(got.Modifications[2]); !f.HasBUFF() || !f.HasNOCP() || f.HasFORW() || barID(t, f) != BARID {
		t.Errorf("buffering Update FAR %v", f)
	}
	if f := updateFAR(got.Modifications[3]); !f.HasDROP() || f.HasFORW() || f.HasBUFF() {
		t.Errorf("dropping Update FAR %v", f)
	}
	if f := updateFAR(got.Modifications[4]); !f.HasDROP() || !f.HasNOCP() || f.HasFORW() || barID(t, f) != BARID {
		t.Errorf("dropping and notifying Update FAR %v", f)
	}
	if q := got.Modifications[5].UpdateQER; len(q) != 1 {
		t.Errorf("generic modification carried %d Update QERs", len(q))
	}

	if err := c.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n := len(upf.Sessions()); n != 0 {
		t.Errorf("the UPF still has %d sessions", n)
	}
	var ce *CauseError
	err = c.Delete(ctx, s)
	if !errors.As(err, &ce) || ce.Cause != ie.CauseSessionContextNotFound ||
		!strings.Contains(err.Error(), "session deletion: UPF answered cause 65 (Session context not found)") {
		t.Errorf("deleting an unknown session: %v", err)
	}
	if err := c.SetDownlink(ctx, s, gnb, 1); !errors.As(err, &ce) || ce.Cause != ie.CauseSessionContextNotFound {
		t.Errorf("modifying an unknown session: %v", err)
	}
}

func TestEstablishRejected(t *testing.T) {
	c, _ := associated(t, pfcptest.Options{EstablishCause: ie.CauseNoResourcesAvailable}, Options{})
	var ce *CauseError
	_, err := c.Establish(t.Context(), SessionSpec{})
	if !errors.As(err, &ce) || ce.Cause != ie.CauseNoResourcesAvailable || ce.Message != "session establishment" ||
		!strings.HasSuffix(err.Error(), "(No resources available)") {
		t.Errorf("rejected establishment: %v", err)
	}

	// Without an association.
	upf := pfcptest.Start(t, pfcptest.Options{})
	c2, err := Dial(upf.Addr(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Establish(t.Context(), SessionSpec{}); !errors.As(err, &ce) || ce.Cause != ie.CauseNoEstablishedPFCPAssociation {
		t.Errorf("establishment without association: %v", err)
	}
}

func TestSessionSpecCheck(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{})
	for _, tt := range []struct {
		spec SessionSpec
		want string
	}{
		{SessionSpec{Style: Free5GC}, "style free5gc needs the uplink F-TEID the SMF chose"},
		{SessionSpec{UE: netip.MustParseAddr("2001:db8::1")}, "UE 2001:db8::1 is not an IPv4 address"},
		{SessionSpec{QFI: 64}, "QFI 64 is not a QFI"},
		{SessionSpec{Flows: []Flow{{Precedence: 1}}}, "Flows[0].Filter is empty"},
		{SessionSpec{Style: 7}, "unknown style 7"},
	} {
		if _, err := c.Establish(t.Context(), tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Establish(%+v) = %v, want %q", tt.spec, err, tt.want)
		}
	}
	if n := len(upf.Sessions()); n != 0 {
		t.Errorf("bad specs were sent: the UPF has %d sessions", n)
	}
}

func TestParseStyle(t *testing.T) {
	for _, s := range []Style{Open5GS, Free5GC} {
		if got, err := ParseStyle(s.String()); err != nil || got != s {
			t.Errorf("ParseStyle(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseStyle("oai"); err == nil || err.Error() != `"oai" is not a session style; use open5gs or free5gc` {
		t.Errorf("ParseStyle(oai): %v", err)
	}
}

// Sessions established from many goroutines at once get distinct CP SEIDs, and every answer
// reaches the request it belongs to.
func TestEstablishConcurrently(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{})
	const n = 64
	sessions := make([]*Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sessions[i], errs[i] = c.Establish(t.Context(), SessionSpec{})
		})
	}
	wg.Wait()
	cp, up, ue := map[uint64]bool{}, map[uint64]bool{}, map[netip.Addr]bool{}
	for i, s := range sessions {
		if errs[i] != nil {
			t.Fatalf("session %d: %v", i, errs[i])
		}
		cp[s.CPSEID], up[s.UPSEID], ue[s.UE] = true, true, true
		held, ok := upf.Session(s.UPSEID)
		if !ok || held.CPSEID != s.CPSEID || held.UE != s.UE || held.TEIDs[0] != s.UplinkTEID {
			t.Errorf("session %d: CP SEID %#x, UE %s, TEID %#x; the UPF has CP SEID %#x, UE %s, TEIDs %#x",
				i, s.CPSEID, s.UE, s.UplinkTEID, held.CPSEID, held.UE, held.TEIDs)
		}
	}
	if len(cp) != n || len(up) != n || len(ue) != n {
		t.Errorf("distinct CP SEIDs %d, UP SEIDs %d, UEs %d; want %d each", len(cp), len(up), len(ue), n)
	}
}

// A second process with the same Node ID takes over the sessions when it asks to retain them;
// one that does not ask makes the UPF delete them.
func TestRetainSessions(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{NodeID: "smf.test"})
	s, err := c.Establish(t.Context(), SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	c2, err := Dial(upf.Addr(), Options{NodeID: "smf.test", RetainSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	a, err := c2.Associate(t.Context())
	if err != nil || !a.SessionsRetained {
		t.Fatalf("association retaining sessions: %+v, %v", a, err)
	}
	// Only the UP SEID is known to the new process.
	if err := c2.DropDownlink(t.Context(), &Session{UPSEID: s.UPSEID}); err != nil {
		t.Fatalf("modifying a retained session: %v", err)
	}

	c3, err := Dial(upf.Addr(), Options{NodeID: "smf.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if a, err := c3.Associate(t.Context()); err != nil || a.SessionsRetained {
		t.Fatalf("association: %+v, %v", a, err)
	}
	if n := len(upf.Sessions()); n != 0 {
		t.Errorf("the UPF kept %d sessions of a Node ID that associated again without retaining them", n)
	}
}

// Session requests are retransmitted like the others.
func TestEstablishRetransmitted(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{IgnoreEstablishments: 2}, Options{Timeout: 50 * time.Millisecond, Tries: 3})
	s, err := c.Establish(t.Context(), SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := upf.Session(s.UPSEID); !ok {
		t.Errorf("the UPF lacks the session established on the third try")
	}
}

// TestExtraFilters: a flow's further SDF filters follow its Filter in both PDRs' PDIs.
func TestExtraFilters(t *testing.T) {
	c, upf := associated(t, pfcptest.Options{}, Options{})
	spec := SessionSpec{QFI: 9, Flows: []Flow{{Filter: "permit out 17 from any to assigned 40000-40009", Precedence: 100, QFI: 9,
		ExtraFilters: []string{"permit out 17 from any to assigned 50001", "permit out 6 from any to assigned 50002"}}}}
	if _, err := c.Establish(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	want := append([]string{spec.Flows[0].Filter}, spec.Flows[0].ExtraFilters...)
	pdrs := 0
	for _, p := range upf.Sessions()[0].Establishment.CreatePDR {
		id, err := p.PDRID()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range pfcptest.Find(p, ie.PDI, ie.SDFFilter) {
			fields, err := f.SDFFilter()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fields.FlowDescription)
		}
		if up, down := FlowPDRIDs(0); id == up || id == down {
			pdrs++
			if !reflect.DeepEqual(got, want) {
				t.Errorf("PDR %d filters %q, want %q", id, got, want)
			}
		} else if len(got) != 0 {
			t.Errorf("default PDR %d has filters %q", id, got)
		}
	}
	if pdrs != 2 {
		t.Fatalf("%d flow PDRs", pdrs)
	}
}
