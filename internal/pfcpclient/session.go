package pfcpclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// Style is the way an SMF lays out the rules of a PDU session. xupf has to work with the
// SMFs in use, which differ in how they ask for the uplink F-TEID, where they put the UE
// address, which Outer Header Removal they ask for and how they encode the Network Instance.
type Style uint8

const (
	// Open5GS lays a session out as the Open5GS SMF does: the UPF chooses the uplink F-TEID
	// (CHOOSE with a CHOOSE ID, so that every uplink PDR of the session gets the same TEID);
	// only the downlink PDRs carry the UE address; Outer Header Removal is GTP-U/UDP/IP (6),
	// what Open5GS asks for in IPv4v6 sessions; the Network Instance is the DNN in DNS label
	// encoding ("\x08internet").
	Open5GS Style = iota
	// Free5GC lays a session out as the free5GC SMF does: the SMF chooses the uplink F-TEID
	// (SessionSpec.UplinkTEID at SessionSpec.N3); both PDRs of a pair carry the UE address
	// when it is known; Outer Header Removal is GTP-U/UDP/IPv4 (0); the Network Instance is
	// the DNN as a plain string.
	Free5GC
)

// Styles are the names ParseStyle accepts, in the order of the constants.
var Styles = []string{"open5gs", "free5gc"}

func (s Style) String() string {
	if int(s) < len(Styles) {
		return Styles[s]
	}
	return fmt.Sprintf("Style(%d)", uint8(s))
}

// ParseStyle returns the Style named name: "open5gs" or "free5gc".
func ParseStyle(name string) (Style, error) {
	for i, n := range Styles {
		if n == name {
			return Style(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a session style; use open5gs or free5gc", name)
}

// The rule ids Establish gives a session's rules. They are fixed so that another process
// can change the session knowing only its UP SEID: SetDownlink, SetDownlinkBuffering and
// DropDownlink update DownlinkFARID. The rules of SessionSpec.Flows[i] follow, from
// FlowPDRIDs, FlowQERID and FlowURRID.
const (
	UplinkPDRID   uint16 = 1 // the default uplink PDR: from ACCESS, by the uplink F-TEID
	DownlinkPDRID uint16 = 2 // the default downlink PDR: from CORE, by the UE address
	UplinkFARID   uint32 = 1 // forwards to CORE; every uplink PDR uses it
	DownlinkFARID uint32 = 2 // forwards, buffers or drops toward ACCESS; every downlink PDR uses it
	SessionQERID  uint32 = 1 // the default QoS flow's QER: gate, MBR and QFI
	SessionURRID  uint32 = 1 // the session's URR: volume, with SessionSpec.VolumeThreshold
	BARID         uint8  = 1 // buffering of the downlink FAR while there is no gNB
)

// FlowPDRIDs returns the uplink and downlink PDR ids of SessionSpec.Flows[i]: 3+2i and 4+2i.
func FlowPDRIDs(i int) (uplink, downlink uint16) {
	return uint16(3 + 2*i), uint16(4 + 2*i)
}

// FlowQERID returns the id of the QER of SessionSpec.Flows[i]: 2+i.
func FlowQERID(i int) uint32 { return uint32(2 + i) }

// FlowURRID returns the id of the URR of SessionSpec.Flows[i]: 2+i.
func FlowURRID(i int) uint32 { return uint32(2 + i) }

// maxFlows is how many flows fit in 16-bit PDR ids after the default pair.
const maxFlows = (65535 - 2) / 2

// DefaultChooseID is the CHOOSE ID of the uplink F-TEIDs when SessionSpec.ChooseID is 0: the
// one Open5GS uses.
const DefaultChooseID = 5

// DefaultPrecedence is the precedence of the default PDRs when SessionSpec.Precedence is 0:
// the lowest an SMF gives (TS 29.244 D.2), so that every flow's PDRs take precedence.
const DefaultPrecedence = 65535

// SessionSpec describes one IPv4 PDU session the way an SMF sends it in a Session
// Establishment Request. Establish creates:
//
//   - PDR UplinkPDRID: source ACCESS, the uplink F-TEID (chosen by the UPF or the SMF,
//     after Style), the QFI, Outer Header Removal, Network Instance; FAR UplinkFARID;
//   - PDR DownlinkPDRID: source CORE, the UE address as destination (flag SD) or a request
//     to choose it (CHV4), Network Instance; FAR DownlinkFARID;
//   - FAR UplinkFARID: FORW to CORE;
//   - FAR DownlinkFARID: FORW toward ACCESS with Outer Header Creation GTP-U/UDP/IPv4 to GNB
//     and GNBTEID, or, without GNB, BUFF and NOCP with BAR BARID (an SMF's state before the
//     gNB has answered);
//   - QER SessionQERID (gate open, MBRUplink and MBRDownlink, QFI), URR SessionURRID (volume
//     measurement, VolumeThreshold) and BAR BARID;
//   - per flow, a pair of PDRs like the default ones with the flow's SDF filter, precedence
//     and QFI, the same FARs, its own QER and its own URR.
//
// Every PDR references its QERs and URRs by id; the default PDRs reference SessionQERID and
// SessionURRID.
type SessionSpec struct {
	// Style is the SMF whose layout the request follows; the zero value is Open5GS.
	Style Style
	// UE is the UE's IPv4 address. The zero value asks the UPF to choose one from its pool:
	// the downlink PDRs carry a UE IP Address with CHV4 instead (the uplink PDRs none), and
	// the UPF reports the address it chose in the Created PDRs.
	UE netip.Addr
	// UplinkTEID and N3 are the uplink F-TEID the SMF chose, TEID and the UPF's N3 IPv4
	// address, which Style Free5GC needs. Style Open5GS ignores them: the UPF chooses.
	UplinkTEID uint32
	N3         netip.Addr
	// ChooseID is the CHOOSE ID of the uplink F-TEIDs in Style Open5GS, which makes the UPF
	// give all uplink PDRs of the session one TEID; 0 means DefaultChooseID.
	ChooseID uint8
	// NetworkInstance is the DNN, e.g. "internet", carried in every PDI and in the FARs'
	// forwarding parameters, encoded after Style; empty: no Network Instance IE.
	NetworkInstance string
	// QFI is the default QoS flow's QFI (0 to 63), in the uplink PDR's PDI and in QER
	// SessionQERID; 0: none.
	QFI uint8
	// GNB and GNBTEID are the gNB's N3 IPv4 address and downlink TEID. Without GNB the
	// downlink FAR buffers until SetDownlink.
	GNB     netip.Addr
	GNBTEID uint32
	// MBRUplink and MBRDownlink are QER SessionQERID's maximum bit rates in kbit/s; both 0:
	// no MBR IE.
	MBRUplink, MBRDownlink uint64
	// VolumeThreshold is URR SessionURRID's total volume threshold in bytes, with the VOLTH
	// reporting trigger; VolumeQuota its total volume quota, with VOLQU; MeasurementPeriod
	// its period (whole seconds), with PERIO. All 0: the URR only measures.
	VolumeThreshold   uint64
	VolumeQuota       uint64
	MeasurementPeriod time.Duration
	// DroppedPackets is URR SessionURRID's Dropped DL Traffic Threshold in downlink packets,
	// with the DROTH reporting trigger; 0: none.
	DroppedPackets uint64
	// QuotaValidityTime is URR SessionURRID's Quota Validity Time (whole seconds), with the
	// QUVTI reporting trigger; 0: none.
	QuotaValidityTime time.Duration
	// Monitoring are URR SessionURRID's Monitoring Times and what it takes at each, with VOLTH
	// for a subsequent volume threshold and VOLQU for a subsequent volume quota; the second
	// and later ones go as Additional Monitoring Times; none: no monitoring time.
	Monitoring []Monitoring
	// NotificationDelay and SuggestedBufferingPackets are BAR BARID's Downlink Data
	// Notification Delay (in steps of 50 ms) and Suggested Buffering Packets Count; 0: the IE
	// is left out.
	NotificationDelay         time.Duration
	SuggestedBufferingPackets uint8
	// Precedence is the precedence of the default PDRs; 0 means DefaultPrecedence.
	Precedence uint32
	// Flows are further QoS flows, each a pair of PDRs picked out by an SDF filter.
	Flows []Flow
}

// Flow is a QoS flow beside the default one: an uplink and a downlink PDR with an SDF
// filter. Its uplink PDR asks for the same F-TEID as the default one (the same CHOOSE ID,
// or UplinkTEID in Style Free5GC), so the session keeps one uplink TEID.
type Flow struct {
	// Filter is the SDF filter's flow description, an IPFilterRule (TS 29.244 8.2.5), e.g.
	// "permit out 17 from 198.51.100.0/24 to assigned 5060". Both PDRs carry it.
	Filter string
	// ExtraFilters are further SDF filters of both PDRs (a PDR matches a packet that any of
	// its filters matches), sent after Filter.
	ExtraFilters []string
	// Precedence of both PDRs; lower wins, so below the default PDRs' (e.g. 100).
	Precedence uint32
	// QFI of the flow (1 to 63), in the uplink PDR's PDI and in the flow's QER.
	QFI uint8
	// MBRUplink and MBRDownlink are the flow's QER's maximum bit rates in kbit/s; both 0: no
	// MBR IE.
	MBRUplink, MBRDownlink uint64
	// VolumeQuota is the flow's URR's total volume quota in bytes, with VOLQU; 0: none. With
	// the session's VolumeQuota the flow's PDRs have two URRs with quotas.
	VolumeQuota uint64
	// QERIDs and URRIDs are the QERs and URRs both PDRs of the flow reference. nil means the
	// flow's own QER (FlowQERID) and URR (FlowURRID) and the session's URR (SessionURRID), so
	// that the flow's usage counts toward the session's too.
	QERIDs, URRIDs []uint32
}

// Session is a PDU session the UPF accepted. The Client's methods may change it (e.g.
// SetDownlink records the new gNB), so one Session is not for concurrent use; different
// Sessions are. A process that did not establish the session can still modify or delete it
// with a Session holding only its UPSEID (and the Spec's Style and NetworkInstance, which
// SetDownlink encodes).
type Session struct {
	Spec SessionSpec
	// CPSEID is the SEID this client allocated (its CP F-SEID); UPSEID and UPF the UP F-SEID
	// the UPF answered with. Requests about the session carry UPSEID in their header.
	CPSEID uint64
	UPSEID uint64
	UPF    netip.Addr
	// UplinkTEID and N3 are the uplink F-TEID of PDR UplinkPDRID: the one the UPF reported
	// in its Created PDR, else (Style Free5GC) the one the SMF chose.
	UplinkTEID uint32
	N3         netip.Addr
	// UE is the UE's address: SessionSpec.UE, or the one the UPF chose.
	UE netip.Addr
	// CreatedPDRs are the Created PDR IEs of the answer, in its order.
	CreatedPDRs []CreatedPDR
	// GNB and GNBTEID are where downlink traffic is sent, as last set through this Session;
	// GNB is the zero Addr while it is buffered or dropped.
	GNB     netip.Addr
	GNBTEID uint32
}

// CreatedPDR is what the UPF reported about one PDR it created: the F-TEID it allocated
// and the UE address it chose, each zero when absent.
type CreatedPDR struct {
	ID   uint16
	TEID uint32
	N3   netip.Addr
	UE   netip.Addr
}

// Apply Action flags (TS 29.244 8.2.26), octet 5.
const (
	actionDROP = 0x01
	actionFORW = 0x02
	actionBUFF = 0x04
	actionNOCP = 0x08
)

// Flags of the F-TEID (TS 29.244 8.2.3) and UE IP Address (8.2.62) IEs.
const (
	fteidV4   = 0x01
	fteidCH   = 0x04
	fteidCHID = 0x08

	ueV4   = 0x02
	ueSD   = 0x04
	ueCHV4 = 0x10
)

// Outer Header Removal and Creation descriptions (TS 29.244 8.2.64, 8.2.56).
const (
	ohrGTPUUDPIPv4 = 0
	ohrGTPUUDPIP   = 6
	ohcGTPUUDPIPv4 = 0x0100
)

// check reports what is wrong with the spec, naming the field.
func (s *SessionSpec) check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("pfcp client: session spec: "+format, args...))
	}
	switch s.Style {
	case Open5GS:
	case Free5GC:
		if !s.N3.Is4() || s.UplinkTEID == 0 {
			bad("style free5gc needs the uplink F-TEID the SMF chose: UplinkTEID (not 0) and N3 (an IPv4 address)")
		}
	default:
		bad("unknown style %d", s.Style)
	}
	if s.UE.IsValid() && !s.UE.Is4() {
		bad("UE %s is not an IPv4 address", s.UE)
	}
	if s.GNB.IsValid() && !s.GNB.Is4() {
		bad("GNB %s is not an IPv4 address", s.GNB)
	}
	if s.QFI > 63 {
		bad("QFI %d is not a QFI; use 0 to 63", s.QFI)
	}
	if len(s.Flows) > maxFlows {
		bad("%d flows are too many for 16-bit PDR ids; use at most %d", len(s.Flows), maxFlows)
	}
	for i, f := range s.Flows {
		if f.Filter == "" {
			bad("Flows[%d].Filter is empty; give an SDF filter, e.g. \"permit out ip from any to assigned\"", i)
		}
		if f.QFI > 63 {
			bad("Flows[%d].QFI %d is not a QFI; use 0 to 63", i, f.QFI)
		}
	}
	return errors.Join(errs...)
}

// networkInstance encodes the DNN after the style, or returns nil for none.
func (s *SessionSpec) networkInstance() *ie.IE {
	switch {
	case s.NetworkInstance == "":
		return nil
	case s.Style == Open5GS:
		return ie.NewNetworkInstanceFQDN(s.NetworkInstance)
	default:
		return ie.NewNetworkInstance(s.NetworkInstance)
	}
}

// uplinkFTEID is the F-TEID every uplink PDR asks for.
func (s *SessionSpec) uplinkFTEID() *ie.IE {
	if s.Style == Free5GC {
		return ie.NewFTEID(fteidV4, s.UplinkTEID, s.N3.AsSlice(), nil, 0)
	}
	id := s.ChooseID
	if id == 0 {
		id = DefaultChooseID
	}
	return ie.NewFTEID(fteidV4|fteidCH|fteidCHID, 0, nil, nil, id)
}

// ueAddress is the UE IP Address IE of a PDR, nil if the PDR carries none.
func (s *SessionSpec) ueAddress(downlink bool) *ie.IE {
	switch {
	case !s.UE.IsValid() && downlink:
		return ie.NewUEIPAddress(ueCHV4|ueSD, "", "", 0, 0) // no V4: it would announce an address (8.2.62)
	case !s.UE.IsValid():
		return nil
	case downlink:
		return ie.NewUEIPAddress(ueV4|ueSD, s.UE.String(), "", 0, 0)
	case s.Style == Free5GC:
		return ie.NewUEIPAddress(ueV4, s.UE.String(), "", 0, 0)
	default:
		return nil
	}
}

// pdrPair returns the Create PDR IEs of one uplink and one downlink PDR.
func (s *SessionSpec) pdrPair(upID, downID uint16, precedence uint32, filters []string, qfi uint8, qers, urrs []uint32) []*ie.IE {
	ohr := uint8(ohrGTPUUDPIP)
	if s.Style == Free5GC {
		ohr = ohrGTPUUDPIPv4
	}
	up := []*ie.IE{ie.NewSourceInterface(ie.SrcInterfaceAccess), s.uplinkFTEID()}
	down := []*ie.IE{ie.NewSourceInterface(ie.SrcInterfaceCore)}
	if ni := s.networkInstance(); ni != nil {
		up = append(up, ni)
		down = append(down, s.networkInstance())
	}
	if ue := s.ueAddress(false); ue != nil {
		up = append(up, ue)
	}
	down = append(down, s.ueAddress(true))
	for _, f := range filters {
		up = append(up, ie.NewSDFFilter(f, "", "", "", 0))
		down = append(down, ie.NewSDFFilter(f, "", "", "", 0))
	}
	if qfi != 0 {
		up = append(up, ie.NewQFI(qfi))
	}
	refs := func(ies []*ie.IE) []*ie.IE {
		for _, id := range qers {
			ies = append(ies, ie.NewQERID(id))
		}
		for _, id := range urrs {
			ies = append(ies, ie.NewURRID(id))
		}
		return ies
	}
	return []*ie.IE{
		ie.NewCreatePDR(refs([]*ie.IE{ie.NewPDRID(upID), ie.NewPrecedence(precedence), ie.NewPDI(up...),
			ie.NewOuterHeaderRemoval(ohr, 0), ie.NewFARID(UplinkFARID)})...),
		ie.NewCreatePDR(refs([]*ie.IE{ie.NewPDRID(downID), ie.NewPrecedence(precedence), ie.NewPDI(down...),
			ie.NewFARID(DownlinkFARID)})...),
	}
}

// qer returns a Create QER IE with the gate open.
func qer(id uint32, qfi uint8, mbrUL, mbrDL uint64) *ie.IE {
	ies := []*ie.IE{ie.NewQERID(id), ie.NewGateStatus(ie.GateStatusOpen, ie.GateStatusOpen)}
	if mbrUL != 0 || mbrDL != 0 {
		ies = append(ies, ie.NewMBR(mbrUL, mbrDL))
	}
	if qfi != 0 {
		ies = append(ies, ie.NewQFI(qfi))
	}
	return ie.NewCreateQER(ies...)
}

// urrSpec is what a URR asks for besides measuring volume; each part unless it is 0.
type urrSpec struct {
	threshold, quota uint64        // total volume threshold and quota, bytes
	period, validity time.Duration // measurement period, quota validity time
	dropped          uint64        // dropped downlink packets threshold
	monitoring       []Monitoring
}

// urr returns a Create URR IE measuring volume, with the reporting triggers and values of u.
func urr(id uint32, u urrSpec) *ie.IE {
	// Reporting Triggers (TS 29.244 8.2.19): octet 5 PERIO bit 1, VOLTH bit 2, DROTH bit 7;
	// octet 6 VOLQU bit 1, QUVTI bit 8.
	const perio, volth, droth, volqu, quvti = 0x01, 0x02, 0x40, 0x01, 0x80
	var octet5, octet6 uint8
	ies := []*ie.IE{ie.NewURRID(id), ie.NewMeasurementMethod(0, 1, 0), nil}
	if u.threshold != 0 {
		octet5 |= volth
	}
	if u.quota != 0 {
		octet6 |= volqu
	}
	for _, m := range u.monitoring {
		if m.VolumeThreshold != 0 {
			octet5 |= volth
		}
		if m.VolumeQuota != 0 {
			octet6 |= volqu
		}
	}
	if u.threshold != 0 {
		ies = append(ies, ie.NewVolumeThreshold(0x01, u.threshold, 0, 0)) // TOVOL
	}
	if u.quota != 0 {
		ies = append(ies, ie.NewVolumeQuota(0x01, u.quota, 0, 0)) // TOVOL
	}
	if u.period != 0 {
		octet5 |= perio
		ies = append(ies, ie.NewMeasurementPeriod(u.period))
	}
	if u.validity != 0 {
		octet6 |= quvti
		ies = append(ies, ie.NewQuotaValidityTime(u.validity))
	}
	if u.dropped != 0 {
		octet5 |= droth
		ies = append(ies, ie.NewDroppedDLTrafficThreshold(true, false, u.dropped, 0)) // DLPA
	}
	ies[2] = ie.NewReportingTriggers(octet5, octet6)
	return ie.NewCreateURR(append(ies, monitoringIEs(u.monitoring)...)...)
}

// downlinkFAR returns the IEs of the downlink FAR after its ID: forwarding to gnb, or
// buffering without it. update selects Update Forwarding Parameters, for an Update FAR, with
// extra among them.
func (s *SessionSpec) downlinkFAR(gnb netip.Addr, teid uint32, update bool, extra ...*ie.IE) []*ie.IE {
	if !gnb.IsValid() {
		return []*ie.IE{ie.NewApplyAction(actionBUFF | actionNOCP), ie.NewBARID(BARID)}
	}
	params := []*ie.IE{ie.NewDestinationInterface(ie.DstInterfaceAccess)}
	if ni := s.networkInstance(); ni != nil {
		params = append(params, ni)
	}
	params = append(params, ie.NewOuterHeaderCreation(ohcGTPUUDPIPv4, teid, gnb.String(), "", 0, 0, 0))
	if update {
		return []*ie.IE{ie.NewApplyAction(actionFORW), ie.NewUpdateForwardingParameters(append(params, extra...)...)}
	}
	return []*ie.IE{ie.NewApplyAction(actionFORW), ie.NewForwardingParameters(params...)}
}

// rules returns the Create PDR, FAR, QER, URR and BAR IEs of the session.
func (s *SessionSpec) rules() []*ie.IE {
	precedence := s.Precedence
	if precedence == 0 {
		precedence = DefaultPrecedence
	}
	ies := s.pdrPair(UplinkPDRID, DownlinkPDRID, precedence, nil, s.QFI, []uint32{SessionQERID}, []uint32{SessionURRID})
	for i, f := range s.Flows {
		up, down := FlowPDRIDs(i)
		qers, urrs := f.QERIDs, f.URRIDs
		if qers == nil {
			qers = []uint32{FlowQERID(i)}
		}
		if urrs == nil {
			urrs = []uint32{FlowURRID(i), SessionURRID}
		}
		var filters []string
		if f.Filter != "" {
			filters = append(filters, f.Filter)
		}
		filters = append(filters, f.ExtraFilters...)
		ies = append(ies, s.pdrPair(up, down, f.Precedence, filters, f.QFI, qers, urrs)...)
	}
	uplink := []*ie.IE{ie.NewDestinationInterface(ie.DstInterfaceCore)}
	if ni := s.networkInstance(); ni != nil {
		uplink = append(uplink, ni)
	}
	ies = append(ies,
		ie.NewCreateFAR(ie.NewFARID(UplinkFARID), ie.NewApplyAction(actionFORW), ie.NewForwardingParameters(uplink...)),
		ie.NewCreateFAR(append([]*ie.IE{ie.NewFARID(DownlinkFARID)}, s.downlinkFAR(s.GNB, s.GNBTEID, false)...)...),
		qer(SessionQERID, s.QFI, s.MBRUplink, s.MBRDownlink),
		urr(SessionURRID, urrSpec{threshold: s.VolumeThreshold, quota: s.VolumeQuota, period: s.MeasurementPeriod,
			validity: s.QuotaValidityTime, dropped: s.DroppedPackets, monitoring: s.Monitoring}))
	for i, f := range s.Flows {
		ies = append(ies, qer(FlowQERID(i), f.QFI, f.MBRUplink, f.MBRDownlink), urr(FlowURRID(i), urrSpec{quota: f.VolumeQuota}))
	}
	bar := []*ie.IE{ie.NewBARID(BARID)}
	if s.NotificationDelay != 0 {
		bar = append(bar, ie.NewDownlinkDataNotificationDelay(s.NotificationDelay))
	}
	if s.SuggestedBufferingPackets != 0 {
		bar = append(bar, ie.NewSuggestedBufferingPacketsCount(s.SuggestedBufferingPackets))
	}
	return append(ies, ie.NewCreateBAR(bar...))
}

// Establish sends a Session Establishment Request for spec, with a CP SEID of its own, and
// returns the session the UPF created. A rejection is a *CauseError. If the UPF accepts but
// does not report what the session needs (its UP F-SEID; the uplink F-TEID it chose; the
// UE address it chose), Establish deletes the session again and returns an error.
//
// Establish may be called from several goroutines at once.
func (c *Client) Establish(ctx context.Context, spec SessionSpec) (*Session, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	cpSEID := c.seid.Add(1)
	v4, v6 := c.localIPs()
	ies := append([]*ie.IE{ie.NewNodeIDHeuristic(c.opts.NodeID), ie.NewFSEID(cpSEID, v4, v6)}, spec.rules()...)
	ies = append(ies, ie.NewPDNType(ie.PDNTypeIPv4))
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewSessionEstablishmentRequest(0, 0, 0, seq, 0, ies...)
	})
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*message.SessionEstablishmentResponse)
	if !ok {
		return nil, fmt.Errorf("pfcp client: session establishment answered with %s", resp.MessageTypeName())
	}
	if err := checkCause("session establishment", r.Cause); err != nil {
		return nil, err
	}
	if r.UPFSEID == nil {
		// Without the UP SEID the session cannot even be deleted.
		return nil, errors.New("pfcp client: session establishment accepted without a UP F-SEID; the session is left on the UPF")
	}
	fseid, err := r.UPFSEID.FSEID()
	if err != nil {
		return nil, fmt.Errorf("pfcp client: session establishment: UP F-SEID: %w; the session is left on the UPF", err)
	}
	s := &Session{Spec: spec, CPSEID: cpSEID, UPSEID: fseid.SEID, UPF: addrOf(fseid.IPv4Address, fseid.IPv6Address),
		UE: spec.UE, GNB: spec.GNB, GNBTEID: spec.GNBTEID}
	if err := s.readCreatedPDRs(r.CreatedPDR); err != nil {
		if derr := c.Delete(ctx, s); derr != nil {
			err = fmt.Errorf("%w; deleting it again: %w", err, derr)
		}
		return nil, err
	}
	return s, nil
}

// readCreatedPDRs records the Created PDRs and takes the uplink F-TEID and UE address from
// them, reporting what is missing.
func (s *Session) readCreatedPDRs(created []*ie.IE) error {
	for _, c := range created {
		var p CreatedPDR
		var err error
		if p.ID, err = c.PDRID(); err != nil {
			return fmt.Errorf("pfcp client: session establishment: Created PDR without a PDR ID: %w", err)
		}
		if f, err := c.FTEID(); err == nil {
			p.TEID, p.N3 = f.TEID, addrOf(f.IPv4Address, f.IPv6Address)
		}
		if u, err := c.UEIPAddress(); err == nil {
			p.UE = addrOf(u.IPv4Address, nil)
		}
		s.CreatedPDRs = append(s.CreatedPDRs, p)
		if p.ID == UplinkPDRID && p.TEID != 0 {
			s.UplinkTEID, s.N3 = p.TEID, p.N3
		}
		if !s.UE.IsValid() && p.UE.IsValid() {
			s.UE = p.UE
		}
	}
	if s.UplinkTEID == 0 {
		if s.Spec.Style != Free5GC {
			return fmt.Errorf("pfcp client: session establishment: the UPF did not report the F-TEID it chose for PDR %d", UplinkPDRID)
		}
		s.UplinkTEID, s.N3 = s.Spec.UplinkTEID, s.Spec.N3
	}
	if !s.UE.IsValid() {
		return errors.New("pfcp client: session establishment: the UPF did not report the UE address it chose")
	}
	return nil
}

// addrOf converts an address go-pfcp decoded, preferring IPv4; the zero Addr if neither.
func addrOf(v4, v6 net.IP) netip.Addr {
	if a, ok := netip.AddrFromSlice(v4.To4()); ok && v4 != nil {
		return a
	}
	if a, ok := netip.AddrFromSlice(v6); ok {
		return a
	}
	return netip.Addr{}
}

// Modify sends a Session Modification Request for s carrying ies, e.g. Update FAR or
// Create PDR IEs, and returns the UPF's answer. A rejection is a *CauseError.
func (c *Client) Modify(ctx context.Context, s *Session, ies ...*ie.IE) (*message.SessionModificationResponse, error) {
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewSessionModificationRequest(0, 0, s.UPSEID, seq, 0, ies...)
	})
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*message.SessionModificationResponse)
	if !ok {
		return nil, fmt.Errorf("pfcp client: session modification answered with %s", resp.MessageTypeName())
	}
	if err := checkCause("session modification", r.Cause); err != nil {
		return nil, err
	}
	return r, nil
}

// SetDownlink makes the downlink FAR forward to the gNB at gnb with TEID teid: when the gNB
// has answered, or at a handover to another gNB.
func (c *Client) SetDownlink(ctx context.Context, s *Session, gnb netip.Addr, teid uint32) error {
	if !gnb.Is4() {
		return fmt.Errorf("pfcp client: gNB address %s is not an IPv4 address", gnb)
	}
	if err := c.updateDownlinkFAR(ctx, s, s.Spec.downlinkFAR(gnb, teid, true)...); err != nil {
		return err
	}
	s.GNB, s.GNBTEID = gnb, teid
	return nil
}

// Handover makes the downlink FAR forward to the gNB at gnb with TEID teid, as SetDownlink,
// and asks the UPF to send an End Marker on the old tunnel (SNDEM), as an SMF does at a
// handover.
func (c *Client) Handover(ctx context.Context, s *Session, gnb netip.Addr, teid uint32) error {
	if !gnb.Is4() {
		return fmt.Errorf("pfcp client: gNB address %s is not an IPv4 address", gnb)
	}
	sndem := ie.NewPFCPSMReqFlags(0x02)
	if err := c.updateDownlinkFAR(ctx, s, s.Spec.downlinkFAR(gnb, teid, true, sndem)...); err != nil {
		return err
	}
	s.GNB, s.GNBTEID = gnb, teid
	return nil
}

// SetDownlinkBuffering makes the downlink FAR buffer (BUFF and NOCP, with BAR BARID), as an
// SMF does when the UE goes idle.
func (c *Client) SetDownlinkBuffering(ctx context.Context, s *Session) error {
	if err := c.updateDownlinkFAR(ctx, s, s.Spec.downlinkFAR(netip.Addr{}, 0, true)...); err != nil {
		return err
	}
	s.GNB, s.GNBTEID = netip.Addr{}, 0
	return nil
}

// DropDownlink makes the downlink FAR drop.
func (c *Client) DropDownlink(ctx context.Context, s *Session) error {
	return c.dropDownlink(ctx, s, ie.NewApplyAction(actionDROP))
}

// DropDownlinkNotify makes the downlink FAR drop and ask for a Downlink Data Report of the
// first packet it drops (DROP and NOCP, with BAR BARID).
func (c *Client) DropDownlinkNotify(ctx context.Context, s *Session) error {
	return c.dropDownlink(ctx, s, ie.NewApplyAction(actionDROP|actionNOCP), ie.NewBARID(BARID))
}

func (c *Client) dropDownlink(ctx context.Context, s *Session, ies ...*ie.IE) error {
	if err := c.updateDownlinkFAR(ctx, s, ies...); err != nil {
		return err
	}
	s.GNB, s.GNBTEID = netip.Addr{}, 0
	return nil
}

func (c *Client) updateDownlinkFAR(ctx context.Context, s *Session, ies ...*ie.IE) error {
	_, err := c.Modify(ctx, s, ie.NewUpdateFAR(append([]*ie.IE{ie.NewFARID(DownlinkFARID)}, ies...)...))
	return err
}

// Delete sends a Session Deletion Request for s. A rejection, e.g. for a session the UPF
// does not have, is a *CauseError.
func (c *Client) Delete(ctx context.Context, s *Session) error {
	_, err := c.DeleteWithUsage(ctx, s)
	return err
}

// DeleteWithUsage is Delete, returning the usage reports of the Deletion Response.
func (c *Client) DeleteWithUsage(ctx context.Context, s *Session) ([]UsageReport, error) {
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewSessionDeletionRequest(0, 0, s.UPSEID, seq, 0)
	})
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*message.SessionDeletionResponse)
	if !ok {
		return nil, fmt.Errorf("pfcp client: session deletion answered with %s", resp.MessageTypeName())
	}
	if err := checkCause("session deletion", r.Cause); err != nil {
		return nil, err
	}
	return ParseUsageReports(r.UsageReport)
}
