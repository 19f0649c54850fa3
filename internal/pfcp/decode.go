package pfcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/usage"
)

// requestError is why a session request is refused: the cause to answer with, the IE to name
// as offending (Mandatory IE missing/incorrect) or the rule that failed (Rule creation/
// modification failure), and a message for the log.
type requestError struct {
	cause     uint8
	offending uint16 // IE type, 0 for none
	ruleType  uint8  // ie.RuleIDType* of the failed rule, when hasRule
	ruleID    uint32
	hasRule   bool
	msg       string
}

func (e *requestError) Error() string { return e.msg }

// ies are the response IEs that say why.
func (e *requestError) ies() []*ie.IE {
	out := []*ie.IE{ie.NewCause(e.cause)}
	if e.offending != 0 {
		out = append(out, ie.NewOffendingIE(e.offending))
	}
	if e.hasRule {
		out = append(out, ie.NewFailedRuleID(e.ruleType, e.ruleID))
	}
	return out
}

// ieNames name the IEs this package checks, for log messages.
var ieNames = map[uint16]string{
	ie.NodeID: "Node ID", ie.FSEID: "CP F-SEID", ie.CreatePDR: "Create PDR", ie.CreateFAR: "Create FAR",
	ie.PDRID: "PDR ID", ie.Precedence: "Precedence", ie.PDI: "PDI", ie.SourceInterface: "Source Interface",
	ie.FARID: "FAR ID", ie.ApplyAction: "Apply Action", ie.DestinationInterface: "Destination Interface",
	ie.QERID: "QER ID", ie.GateStatus: "Gate Status", ie.URRID: "URR ID",
	ie.MeasurementMethod: "Measurement Method", ie.ReportingTriggers: "Reporting Triggers", ie.BARID: "BAR ID",
	ie.FTEID: "F-TEID", ie.UEIPAddress: "UE IP Address", ie.SDFFilter: "SDF Filter",
	ie.OuterHeaderCreation: "Outer Header Creation", ie.OuterHeaderRemoval: "Outer Header Removal",
	ie.NetworkInstance: "Network Instance", ie.QFI: "QFI", ie.MBR: "MBR", ie.GBR: "GBR",
	ie.TransportLevelMarking: "Transport Level Marking", ie.ForwardingParameters: "Forwarding Parameters",
	ie.UpdateForwardingParameters: "Update Forwarding Parameters", ie.VolumeThreshold: "Volume Threshold",
	ie.VolumeQuota: "Volume Quota", ie.MeasurementPeriod: "Measurement Period", ie.LinkedURRID: "Linked URR ID",
	ie.MeasurementInformation: "Measurement Information", ie.TimeThreshold: "Time Threshold",
	ie.TimeQuota: "Time Quota", ie.QuotaHoldingTime: "Quota Holding Time",
	ie.InactivityDetectionTime: "Inactivity Detection Time", ie.QueryURR: "Query URR",
	ie.PFCPSMReqFlags: "PFCPSMReq-Flags", ie.DroppedDLTrafficThreshold: "Dropped DL Traffic Threshold",
	ie.QuotaValidityTime: "Quota Validity Time", ie.MonitoringTime: "Monitoring Time",
	ie.SubsequentVolumeThreshold: "Subsequent Volume Threshold", ie.SubsequentTimeThreshold: "Subsequent Time Threshold",
	ie.SubsequentVolumeQuota: "Subsequent Volume Quota", ie.SubsequentTimeQuota: "Subsequent Time Quota",
	ie.AdditionalMonitoringTime: "Additional Monitoring Time", ie.EventThreshold: "Event Threshold",
	ie.EventQuota: "Event Quota", ie.SubsequentEventThreshold: "Subsequent Event Threshold",
	ie.SubsequentEventQuota: "Subsequent Event Quota",
}

func ieName(t uint16) string {
	if n, ok := ieNames[t]; ok {
		return n
	}
	return fmt.Sprintf("IE type %d", t)
}

func missingIE(t uint16, where string) *requestError {
	return &requestError{cause: ie.CauseMandatoryIEMissing, offending: t,
		msg: fmt.Sprintf("%s: mandatory IE %s missing", where, ieName(t))}
}

func incorrectIE(t uint16, where string, err error) *requestError {
	return &requestError{cause: ie.CauseMandatoryIEIncorrect, offending: t,
		msg: fmt.Sprintf("%s: IE %s incorrect: %v", where, ieName(t), err)}
}

func ruleFailure(ruleType uint8, id uint32, format string, args ...any) *requestError {
	return &requestError{cause: ie.CauseRuleCreationModificationFailure, ruleType: ruleType, ruleID: id,
		hasRule: true, msg: fmt.Sprintf(format, args...)}
}

// children are a grouped IE's children, in order; unknown IEs are kept and ignored by the
// callers, as TS 29.244 7.2.2 asks. A grouped IE has a handful of children, so the lookups
// scan them: cheaper than indexing them by type, which cost a map per grouped IE of every
// request.
type children []*ie.IE

func childrenOf(g *ie.IE) children { return g.ChildIEs }

func (c children) first(t uint16) *ie.IE {
	for _, x := range c {
		if x.Type == t {
			return x
		}
	}
	return nil
}

// all returns the children of type t, in order.
func (c children) all(t uint16) []*ie.IE {
	var out []*ie.IE
	for _, x := range c {
		if x.Type == t {
			out = append(out, x)
		}
	}
	return out
}

// required returns the first child of type t, or a Mandatory IE missing error.
func (c children) required(t uint16, where string) (*ie.IE, error) {
	if x := c.first(t); x != nil {
		return x, nil
	}
	return nil, missingIE(t, where)
}

// decode reads a child with fn, turning a decoding error into Mandatory IE incorrect. The
// payload's length is checked first where go-pfcp's accessor would index past it, and a panic
// in an accessor is caught here too, so that a crafted IE is refused with its Offending IE.
// Such a panic is a length check missing from lengthChecks: it is counted in
// accessorPanics, which FuzzHandle watches.
func decode[T any](x *ie.IE, where string, fn func(*ie.IE) (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			accessorPanics.Add(1)
			var zero T
			v, err = zero, incorrectIE(x.Type, where, fmt.Errorf("undecodable (go-pfcp panicked: %v)", r))
		}
	}()
	if check := lengthChecks[x.Type]; check != nil {
		if err := check(x.Payload); err != nil {
			var zero T
			return zero, incorrectIE(x.Type, where, err)
		}
	}
	v, err = fn(x)
	if err != nil {
		var zero T
		return zero, incorrectIE(x.Type, where, err)
	}
	return v, nil
}

// lengthChecks validate the payloads whose go-pfcp (v0.0.24) accessors slice past the end
// instead of returning an error.
var lengthChecks = map[uint16]func([]byte) error{
	ie.SDFFilter:           checkSDFFilter,
	ie.OuterHeaderCreation: checkOuterHeaderCreation,
	// go-pfcp slices the first four octets unchecked: within a message's buffer a shorter
	// IE reads the next IE's octets instead of panicking.
	ie.SubsequentTimeQuota: atLeast(4),
}

// atLeast checks that a payload has n octets.
func atLeast(n int) func([]byte) error {
	return func(b []byte) error {
		if len(b) < n {
			return errShort
		}
		return nil
	}
}

var errShort = errors.New("shorter than its fields (length)")

// accessorPanics counts the panics of go-pfcp's accessors decode caught.
var accessorPanics atomic.Uint64

// checkSDFFilter checks that the flow description's length (TS 29.244 8.2.5) stays within
// the IE, and that the optional fields the flags announce are all there.
func checkSDFFilter(b []byte) error {
	if len(b) < 2 {
		return errShort
	}
	flags, rest := b[0], b[2:]
	if flags&0x01 != 0 { // FD: a 2-octet length, then the description
		if len(rest) < 2 || len(rest)-2 < int(binary.BigEndian.Uint16(rest)) {
			return fmt.Errorf("flow description runs past the IE")
		}
		rest = rest[2+int(binary.BigEndian.Uint16(rest)):]
	}
	need := 0
	for _, f := range []struct {
		bit  uint8
		size int
	}{{0x02, 2}, {0x04, 4}, {0x08, 3}, {0x10, 4}} { // TTC, SPI, FL, BID
		if flags&f.bit != 0 {
			need += f.size
		}
	}
	if len(rest) < need {
		return errShort
	}
	return nil
}

// checkOuterHeaderCreation checks that every field the description's octet 5 announces
// (TS 29.244 8.2.56) fits in the IE. go-pfcp reads a C-TAG and an S-TAG where octet 6 has its
// spare bits 7 and 8, four octets from a 3-octet slice, which always panics: such a
// description is refused too.
func checkOuterHeaderCreation(b []byte) error {
	if len(b) < 2 {
		return errShort
	}
	d5, d6 := b[0], b[1]
	need := 2
	for _, f := range []struct {
		bits uint8
		size int
	}{
		{0x03, 4},  // GTP-U over IPv4 or IPv6: the TEID
		{0x15, 4},  // an IPv4 address
		{0x2a, 16}, // an IPv6 address
		{0x0c, 2},  // UDP: the port
		{0x40, 3},  // C-TAG
		{0x80, 3},  // S-TAG
	} {
		if d5&f.bits != 0 {
			need += f.size
		}
	}
	if len(b) < need {
		return errShort
	}
	if d6&0xc0 != 0 {
		return errors.New("spare bits 7 and 8 of octet 6 are set")
	}
	return nil
}

// ruleID reads the id IE of a Create/Update/Remove rule IE.
func ruleID[T any](g *ie.IE, t uint16, what string, fn func(*ie.IE) (T, error)) (T, children, error) {
	c := childrenOf(g)
	x, err := c.required(t, what)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	id, err := decode(x, what, fn)
	return id, c, err
}

// decodePDR applies a Create PDR (p is a fresh PDR) or an Update PDR (p is a copy of the
// PDR being updated) to p.
func decodePDR(c children, p *PDR, create bool) error {
	where := fmt.Sprintf("PDR %d", p.ID)
	if x := c.first(ie.Precedence); x != nil {
		v, err := decode(x, where, (*ie.IE).Precedence)
		if err != nil {
			return err
		}
		p.Precedence = v
	} else if create {
		return missingIE(ie.Precedence, where)
	}
	if x := c.first(ie.PDI); x != nil {
		if err := decodePDI(childrenOf(x), p, where); err != nil {
			return err
		}
	} else if create {
		return missingIE(ie.PDI, where)
	}
	if x := c.first(ie.OuterHeaderRemoval); x != nil {
		// One octet up to TS 29.244 V15.3.0, two since: only the first is needed.
		if len(x.Payload) < 1 {
			return incorrectIE(x.Type, where, errors.New("empty"))
		}
		v := x.Payload[0]
		p.OuterHeaderRemoval = &v
	}
	if x := c.first(ie.FARID); x != nil {
		v, err := decode(x, where, (*ie.IE).FARID)
		if err != nil {
			return err
		}
		p.FAR = v
	} else if create {
		return missingIE(ie.FARID, where)
	}
	if l := c.all(ie.QERID); len(l) > 0 || create {
		ids, err := decodeIDs(l, where, (*ie.IE).QERID)
		if err != nil {
			return err
		}
		p.QERs = ids
	}
	if l := c.all(ie.URRID); len(l) > 0 || create {
		ids, err := decodeIDs(l, where, (*ie.IE).URRID)
		if err != nil {
			return err
		}
		p.URRs = ids
	}
	if c.first(ie.ActivatePredefinedRules) != nil {
		return ruleFailure(ie.RuleIDTypePDR, uint32(p.ID), "%s: predefined rules are not supported", where)
	}
	return nil
}

func decodeIDs(l []*ie.IE, where string, fn func(*ie.IE) (uint32, error)) ([]uint32, error) {
	var ids []uint32
	for _, x := range l {
		id, err := decode(x, where, fn)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// decodePDI replaces p's packet detection information with the PDI's.
func decodePDI(c children, p *PDR, where string) error {
	x, err := c.required(ie.SourceInterface, where+" PDI")
	if err != nil {
		return err
	}
	if p.SourceInterface, err = decode(x, where, (*ie.IE).SourceInterface); err != nil {
		return err
	}
	p.FTEID, p.UE, p.UEChosen, p.NetworkInstance, p.QFI, p.SDF = nil, netip.Addr{}, false, "", 0, nil
	if x := c.first(ie.FTEID); x != nil {
		f, err := decode(x, where, (*ie.IE).FTEID)
		if err != nil {
			return err
		}
		p.FTEID = &FTEID{TEID: f.TEID}
		if f.HasCh() {
			p.FTEID.Chosen = true
			if f.HasChID() {
				p.FTEID.ChooseID = f.ChooseID
			}
		} else {
			a, ok := netip.AddrFromSlice(f.IPv4Address.To4())
			if !f.HasIPv4() || !ok {
				return ruleFailure(ie.RuleIDTypePDR, uint32(p.ID), "%s: the F-TEID has no IPv4 address (IPv6 is not supported)", where)
			}
			if f.TEID == 0 {
				return ruleFailure(ie.RuleIDTypePDR, uint32(p.ID), "%s: TEID 0 is reserved for GTP-U signalling", where)
			}
			p.FTEID.Addr = a
		}
	}
	if x := c.first(ie.UEIPAddress); x != nil {
		u, err := decode(x, where, (*ie.IE).UEIPAddress)
		if err != nil {
			return err
		}
		switch {
		case x.HasCHV4():
			p.UEChosen = true
		case u.Flags&0x02 != 0: // V4
			a, ok := netip.AddrFromSlice(u.IPv4Address.To4())
			if !ok {
				return incorrectIE(x.Type, where, errors.New("no IPv4 address"))
			}
			p.UE = a
		default:
			return ruleFailure(ie.RuleIDTypePDR, uint32(p.ID), "%s: the UE IP address is not IPv4 (IPv6 is not supported)", where)
		}
	}
	if x := c.first(ie.NetworkInstance); x != nil {
		p.NetworkInstance = networkInstance(x.Payload)
	}
	if x := c.first(ie.QFI); x != nil {
		if p.QFI, err = decode(x, where, (*ie.IE).QFI); err != nil {
			return err
		}
	}
	for _, x := range c.all(ie.SDFFilter) {
		s, err := decodeSDF(x, p.ID, where)
		if err != nil {
			return err
		}
		p.SDF = append(p.SDF, s)
	}
	if c.first(ie.ApplicationID) != nil {
		return ruleFailure(ie.RuleIDTypePDR, uint32(p.ID), "%s: application detection (Application ID) is not supported", where)
	}
	return nil
}

// decodeSDF turns an SDF Filter IE into a filter. An IPv6 flow description (Open5GS sends one
// for router solicitations) is kept but can never match: the datapath carries IPv4 only.
func decodeSDF(x *ie.IE, pdr uint16, where string) (SDF, error) {
	f, err := decode(x, where, (*ie.IE).SDFFilter)
	if err != nil {
		return SDF{}, err
	}
	out := SDF{FlowDescription: f.FlowDescription, Filter: sdf.Filter{Protocol: sdf.AnyProtocol}}
	if f.HasFD() {
		out.Filter, err = sdf.ParseFlowDescription(f.FlowDescription)
		switch {
		case errors.Is(err, sdf.ErrIPv6):
			out.Filter = sdf.Filter{Protocol: sdf.AnyProtocol, IPv6: true}
		case err != nil:
			return SDF{}, ruleFailure(ie.RuleIDTypePDR, uint32(pdr), "%s: SDF filter: %v", where, err)
		}
	}
	if f.HasTTC() && len(f.ToSTrafficClass) == 2 {
		out.Filter.TOSValue, out.Filter.TOSMask = f.ToSTrafficClass[0], f.ToSTrafficClass[1]
	}
	if f.HasSPI() && len(f.SecurityParameterIndex) == 4 {
		out.Filter.SPI, out.Filter.HasSPI = binary.BigEndian.Uint32([]byte(f.SecurityParameterIndex)), true
	}
	if f.HasFL() && len(f.FlowLabel) == 3 {
		b := []byte(f.FlowLabel)
		out.Filter.FlowLabel = (uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])) & sdf.MaxFlowLabel
		out.Filter.HasFlowLabel = true
	}
	if err := out.Filter.Validate(); err != nil {
		return SDF{}, ruleFailure(ie.RuleIDTypePDR, uint32(pdr), "%s: SDF filter: %v", where, err)
	}
	return out, nil
}

// networkInstance decodes a Network Instance in either encoding SMFs use: DNS labels
// ("\x08internet") or a plain string ("internet").
func networkInstance(b []byte) string {
	var labels []string
	for i := 0; i < len(b); {
		n := int(b[i])
		if n == 0 || i+1+n > len(b) {
			return string(b)
		}
		labels = append(labels, string(b[i+1:i+1+n]))
		i += 1 + n
	}
	for _, l := range labels {
		for _, r := range l {
			if r < 0x21 || r > 0x7e {
				return string(b)
			}
		}
	}
	return strings.Join(labels, ".")
}

// decodeFAR applies a Create FAR (f fresh) or an Update FAR (f a copy) to f.
func decodeFAR(c children, f *FAR, create bool) error {
	where := fmt.Sprintf("FAR %d", f.ID)
	if x := c.first(ie.ApplyAction); x != nil {
		if len(x.Payload) < 1 {
			return incorrectIE(x.Type, where, errors.New("empty"))
		}
		a := x.Payload[0]
		if n := countBits(a & (ApplyDrop | ApplyForward | ApplyBuffer)); n != 1 {
			return ruleFailure(ie.RuleIDTypeFAR, f.ID, "%s: the apply action must have exactly one of DROP, FORW and BUFF", where)
		}
		f.Apply = a
	} else if create {
		return missingIE(ie.ApplyAction, where)
	}
	fp := c.first(ie.ForwardingParameters)
	if !create {
		fp = c.first(ie.UpdateForwardingParameters)
	}
	if fp != nil {
		if create {
			f.DestinationInterface, f.hasDestination, f.NetworkInstance, f.OHC, f.TLM = 0, false, "", nil, nil
		}
		if err := decodeForwarding(childrenOf(fp), f, where, create); err != nil {
			return err
		}
	}
	if x := c.first(ie.BARID); x != nil {
		v, err := decode(x, where, (*ie.IE).BARID)
		if err != nil {
			return err
		}
		f.BARID = &v
	}
	return nil
}

func countBits(b uint8) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// decodeForwarding applies Forwarding Parameters (or, in an update, the parameters given).
func decodeForwarding(c children, f *FAR, where string, create bool) error {
	if x := c.first(ie.DestinationInterface); x != nil {
		v, err := decode(x, where, (*ie.IE).DestinationInterface)
		if err != nil {
			return err
		}
		f.DestinationInterface, f.hasDestination = v, true
	} else if create {
		return missingIE(ie.DestinationInterface, where+" Forwarding Parameters")
	}
	if x := c.first(ie.NetworkInstance); x != nil {
		f.NetworkInstance = networkInstance(x.Payload)
	}
	if x := c.first(ie.OuterHeaderCreation); x != nil {
		o, err := decode(x, where, (*ie.IE).OuterHeaderCreation)
		if err != nil {
			return err
		}
		peer, _ := netip.AddrFromSlice(o.IPv4Address.To4())
		f.OHC = &OHC{Description: o.OuterHeaderCreationDescription, TEID: o.TEID, Peer: peer}
	}
	if x := c.first(ie.TransportLevelMarking); x != nil {
		v, err := decode(x, where, (*ie.IE).TransportLevelMarking)
		if err != nil {
			return err
		}
		f.TLM = &v
	}
	return nil
}

// decodeQER applies a Create QER (q fresh) or an Update QER (q a copy) to q.
func decodeQER(c children, q *QER, create bool) error {
	where := fmt.Sprintf("QER %d", q.ID)
	if x := c.first(ie.GateStatus); x != nil {
		ul, dl, err := x.GateStatusULDL()
		if err != nil {
			return incorrectIE(x.Type, where, err)
		}
		q.GateUL, q.GateDL = ul, dl
	} else if create {
		return missingIE(ie.GateStatus, where)
	}
	if x := c.first(ie.MBR); x != nil {
		ul, err1 := x.MBRUL()
		dl, err2 := x.MBRDL()
		if err := errors.Join(err1, err2); err != nil {
			return incorrectIE(x.Type, where, err)
		}
		q.MBRUL, q.MBRDL = ul, dl
	}
	if x := c.first(ie.GBR); x != nil {
		ul, err1 := x.GBRUL()
		dl, err2 := x.GBRDL()
		if err := errors.Join(err1, err2); err != nil {
			return incorrectIE(x.Type, where, err)
		}
		q.GBRUL, q.GBRDL = ul, dl
	}
	if x := c.first(ie.QFI); x != nil {
		v, err := decode(x, where, (*ie.IE).QFI)
		if err != nil {
			return err
		}
		q.QFI = v
	}
	return nil
}

// decodeURR applies a Create URR (u fresh) or an Update URR (u a copy) to u.
func decodeURR(c children, u *URR, create bool) error {
	where := fmt.Sprintf("URR %d", u.ID)
	if x := c.first(ie.MeasurementMethod); x != nil {
		v, err := decode(x, where, (*ie.IE).MeasurementMethod)
		if err != nil {
			return err
		}
		u.Method = v
	} else if create {
		return missingIE(ie.MeasurementMethod, where)
	}
	if x := c.first(ie.ReportingTriggers); x != nil {
		v, err := decode(x, where, (*ie.IE).ReportingTriggers)
		if err != nil {
			return err
		}
		u.Triggers = append([]byte(nil), v...)
	} else if create {
		return missingIE(ie.ReportingTriggers, where)
	}
	if x := c.first(ie.MeasurementInformation); x != nil {
		v, err := decode(x, where, (*ie.IE).MeasurementInformation)
		if err != nil {
			return err
		}
		u.MeasurementInformation = v
	}
	if x := c.first(ie.VolumeThreshold); x != nil {
		v, err := decode(x, where, (*ie.IE).VolumeThreshold)
		if err != nil {
			return err
		}
		u.VolumeThreshold, u.VolumeThresholdUL, u.VolumeThresholdDL = v.TotalVolume, v.UplinkVolume, v.DownlinkVolume
	}
	if x := c.first(ie.VolumeQuota); x != nil {
		v, err := decode(x, where, (*ie.IE).VolumeQuota)
		if err != nil {
			return err
		}
		u.VolumeQuota, u.VolumeQuotaUL, u.VolumeQuotaDL = v.TotalVolume, v.UplinkVolume, v.DownlinkVolume
		u.VolumeQuotaFlags = v.Flags & (volumeTotal | volumeUplink | volumeDownlink)
		if u.VolumeQuotaFlags == 0 {
			return incorrectIE(ie.VolumeQuota, where, errors.New("no volume flag (TOVOL, ULVOL, DLVOL) set"))
		}
		u.Grant++
	}
	seconds := func(t uint16, fn func(*ie.IE) (time.Duration, error), dst *uint32) error {
		if x := c.first(t); x != nil {
			v, err := decode(x, where, fn)
			if err != nil {
				return err
			}
			*dst = uint32(v / time.Second)
		}
		return nil
	}
	counter := func(t uint16, fn func(*ie.IE) (uint32, error), dst *uint32) error {
		if x := c.first(t); x != nil {
			v, err := decode(x, where, fn)
			if err != nil {
				return err
			}
			*dst = v
		}
		return nil
	}
	if c.first(ie.TimeQuota) != nil {
		u.Grant++
	}
	if err := errors.Join(
		seconds(ie.TimeThreshold, (*ie.IE).TimeThreshold, &u.TimeThreshold),
		seconds(ie.TimeQuota, (*ie.IE).TimeQuota, &u.TimeQuota),
		seconds(ie.MeasurementPeriod, (*ie.IE).MeasurementPeriod, &u.MeasurementPeriod),
		seconds(ie.QuotaHoldingTime, (*ie.IE).QuotaHoldingTime, &u.QuotaHoldingTime),
		seconds(ie.QuotaValidityTime, (*ie.IE).QuotaValidityTime, &u.QuotaValidityTime),
		counter(ie.InactivityDetectionTime, (*ie.IE).InactivityDetectionTime, &u.InactivityTime)); err != nil {
		return err
	}
	if l := c.all(ie.LinkedURRID); len(l) > 0 {
		ids, err := decodeIDs(l, where, (*ie.IE).LinkedURRID)
		if err != nil {
			return err
		}
		u.LinkedURRs = ids
	}
	if x := c.first(ie.DroppedDLTrafficThreshold); x != nil {
		if err := decodeDroppedThreshold(x, u); err != nil {
			return incorrectIE(x.Type, where, err)
		}
	}
	if x := c.first(ie.FARID); x != nil { // FAR ID for Quota Action
		v, err := decode(x, where, (*ie.IE).FARID)
		if err != nil {
			return err
		}
		u.QuotaFAR = &v
	}
	if err := refuseEvents(c, u, where); err != nil {
		return err
	}
	if err := decodeMonitoring(c, where, &u.MonitoringTime, &u.Subsequent); err != nil {
		return err
	}
	if l := c.all(ie.AdditionalMonitoringTime); len(l) > 0 {
		// The Additional Monitoring Times of an Update URR replace those given before.
		u.Additional = nil
		for _, x := range l {
			if err := refuseEvents(childrenOf(x), u, where); err != nil {
				return err
			}
			var m Monitoring
			cc, in := childrenOf(x), where+": Additional Monitoring Time"
			if _, err := cc.required(ie.MonitoringTime, in); err != nil {
				return err
			}
			if err := decodeMonitoring(cc, in, &m.Time, &m.Subsequent); err != nil {
				return err
			}
			u.Additional = append(u.Additional, m)
		}
	}
	if err := checkURR(u, where); err != nil {
		return err
	}
	return orderMonitoring(u, where)
}

// decodeMonitoring reads a Monitoring Time and the subsequent values that go with it, from a
// Create or Update URR or from one of its Additional Monitoring Time IEs, into at and sub.
// What is not given is left as it was.
func decodeMonitoring(c children, where string, at *time.Time, sub *Subsequent) error {
	if x := c.first(ie.MonitoringTime); x != nil {
		v, err := decode(x, where, (*ie.IE).MonitoringTime)
		if err != nil {
			return err
		}
		*at = v
	}
	for _, v := range []struct {
		t   uint16
		fn  func(*ie.IE) (time.Duration, error)
		dst *uint32
	}{
		{ie.SubsequentTimeThreshold, (*ie.IE).SubsequentTimeThreshold, &sub.TimeThreshold},
		{ie.SubsequentTimeQuota, (*ie.IE).SubsequentTimeQuota, &sub.TimeQuota},
	} {
		if x := c.first(v.t); x != nil {
			d, err := decode(x, where, v.fn)
			if err != nil {
				return err
			}
			*v.dst = uint32(d / time.Second)
		}
	}
	for _, v := range []struct {
		t     uint16
		flags *uint8
		dst   [3]*uint64
	}{
		{ie.SubsequentVolumeThreshold, &sub.VolumeThresholdFlags,
			[3]*uint64{&sub.VolumeThreshold, &sub.VolumeThresholdUL, &sub.VolumeThresholdDL}},
		{ie.SubsequentVolumeQuota, &sub.VolumeQuotaFlags,
			[3]*uint64{&sub.VolumeQuota, &sub.VolumeQuotaUL, &sub.VolumeQuotaDL}},
	} {
		if x := c.first(v.t); x != nil {
			f, err := decode(x, where, volumeFields)
			if err != nil {
				return err
			}
			if *v.flags = f.Flags & (volumeTotal | volumeUplink | volumeDownlink); *v.flags == 0 {
				return incorrectIE(v.t, where, errors.New("no volume flag (TOVOL, ULVOL, DLVOL) set"))
			}
			*v.dst[0], *v.dst[1], *v.dst[2] = f.TotalVolume, f.UplinkVolume, f.DownlinkVolume
		}
	}
	return nil
}

// maxMonitoringTimes bounds a URR's pending monitoring times (its Monitoring Time and
// Additional Monitoring Times): each is kept in the session's record, and a tariff changes
// a few times a day.
const maxMonitoringTimes = 8

// orderMonitoring makes u's Monitoring Time the earliest of its monitoring times, with its
// subsequent values, and keeps the others in time order in u.Additional, for
// passMonitoringTimes to take one after the other. Two at the same second, or more than
// maxMonitoringTimes, are refused.
func orderMonitoring(u *URR, where string) error {
	all := slices.Clone(u.Additional)
	if !u.MonitoringTime.IsZero() {
		all = append(all, Monitoring{Time: u.MonitoringTime, Subsequent: u.Subsequent})
	}
	if len(all) > maxMonitoringTimes {
		return &requestError{cause: ie.CauseRuleCreationModificationFailure, offending: ie.AdditionalMonitoringTime,
			ruleType: ie.RuleIDTypeURR, ruleID: u.ID, hasRule: true,
			msg: fmt.Sprintf("%s: %d monitoring times; at most %d are kept", where, len(all), maxMonitoringTimes)}
	}
	slices.SortStableFunc(all, func(a, b Monitoring) int { return a.Time.Compare(b.Time) })
	for i := 1; i < len(all); i++ {
		if all[i].Time.Equal(all[i-1].Time) {
			return incorrectIE(ie.AdditionalMonitoringTime, where,
				fmt.Errorf("two monitoring times at %s", all[i].Time.UTC().Format(time.RFC3339)))
		}
	}
	if len(all) == 0 {
		return nil
	}
	u.MonitoringTime, u.Subsequent, u.Additional = all[0].Time, all[0].Subsequent, nil
	if len(all) > 1 {
		u.Additional = all[1:]
	}
	return nil
}

// methodEvent is the Measurement Method's EVENT bit (TS 29.244 8.2.40).
const methodEvent = 0x04

// eventIEs are the IEs of event measurement (TS 29.244 8.2.112, 8.2.113, 8.2.106, 8.2.107).
var eventIEs = []uint16{ie.EventThreshold, ie.EventQuota, ie.SubsequentEventThreshold, ie.SubsequentEventQuota}

// refuseEvents refuses event measurement in URR u: the events a UPF counts are the starts of
// an application's traffic its application detection finds, and this UPF detects no
// applications, so it has nothing to count. A threshold it would never reach or a quota it
// would never use up would leave the SMF charging wrongly unaware, so an Event Threshold or
// Event Quota (or a Subsequent one), and a Measurement Method of EVENT alone, are refused
// (Rule creation/modification failure, with the URR and the IE); EVENT beside VOLUM or DURAT
// measures those, and the EVETH and EVEQU triggers alone never fire, as any trigger without
// its value.
func refuseEvents(c children, u *URR, where string) error {
	refuse := func(t uint16, why string) error {
		return &requestError{cause: ie.CauseRuleCreationModificationFailure, offending: t,
			ruleType: ie.RuleIDTypeURR, ruleID: u.ID, hasRule: true,
			msg: fmt.Sprintf("%s: %s: this UPF detects no applications, so it has no events to measure", where, why)}
	}
	for _, t := range eventIEs {
		if c.first(t) != nil {
			return refuse(t, ieName(t))
		}
	}
	if u.Method&(methodEvent|methodVolume|methodDuration) == methodEvent {
		return refuse(ie.MeasurementMethod, "Measurement Method EVENT")
	}
	return nil
}

// volumeFields reads a volume IE: a Volume Threshold or Quota or a Subsequent one, which
// share one layout (TS 29.244 8.2.13: flags, then an 8-octet volume for each flag set).
func volumeFields(x *ie.IE) (*ie.VolumeThresholdFields, error) {
	return ie.ParseVolumeThresholdFields(x.Payload)
}

// Flags of the Dropped DL Traffic Threshold IE (TS 29.244 8.2.49): which counts follow.
const (
	droppedPackets = 0x01 // DLPA: Downlink Packets
	droppedBytes   = 0x02 // DLBY: Number of Bytes of Downlink Data
)

// decodeDroppedThreshold takes a Dropped DL Traffic Threshold IE (TS 29.244 8.2.49: flags,
// then an 8-octet count for each flag set, packets before bytes) into u. go-pfcp reads only
// its flags. A new threshold counts the dropped traffic afresh.
func decodeDroppedThreshold(x *ie.IE, u *URR) error {
	b := x.Payload
	if len(b) < 1 {
		return errors.New("empty")
	}
	flags := b[0] & (droppedPackets | droppedBytes)
	if flags == 0 {
		return errors.New("no flag (DLPA, DLBY) set")
	}
	rest := b[1:]
	var packets, bytes uint64
	for _, f := range []struct {
		bit uint8
		dst *uint64
	}{{droppedPackets, &packets}, {droppedBytes, &bytes}} {
		if flags&f.bit == 0 {
			continue
		}
		if len(rest) < 8 {
			return errShort
		}
		*f.dst, rest = binary.BigEndian.Uint64(rest), rest[8:]
	}
	u.DroppedThresholdFlags, u.DroppedPackets, u.DroppedBytes = flags, packets, bytes
	return nil
}

// Volume flags of the Volume Threshold and Volume Quota IEs (TS 29.244 8.2.13, 8.2.14).
const (
	volumeTotal    = 0x01 // TOVOL
	volumeUplink   = 0x02 // ULVOL
	volumeDownlink = 0x04 // DLVOL
)

// checkURR refuses a URR whose IEs do not go together (TS 29.244 7.5.2.4): a linked trigger
// without a Linked URR ID, a URR linked to itself. A trigger without its value (free5GC's
// VOLTH without a Volume Threshold, PERIO without a Measurement Period as the SMFs' test
// layouts send it) is accepted and never fires: SMFs send them, and refusing would fail the
// session.
func checkURR(u *URR, where string) error {
	t := reportingTriggers(u.Triggers)
	switch {
	case t&usage.Linked != 0 && len(u.LinkedURRs) == 0:
		return &requestError{cause: ie.CauseConditionalIEMissing, offending: ie.LinkedURRID,
			msg: where + ": LIUSA without a Linked URR ID"}
	case slices.Contains(u.LinkedURRs, u.ID):
		return incorrectIE(ie.LinkedURRID, where, errors.New("a URR cannot be linked to itself"))
	case u.Subsequent != (Subsequent{}) && u.MonitoringTime.IsZero():
		return &requestError{cause: ie.CauseConditionalIEMissing, offending: ie.MonitoringTime,
			msg: where + ": a subsequent threshold or quota without a Monitoring Time"}
	}
	return nil
}

// decodeBAR applies a Create BAR or an Update BAR to b.
func decodeBAR(c children, b *BAR) error {
	where := fmt.Sprintf("BAR %d", b.ID)
	if x := c.first(ie.DownlinkDataNotificationDelay); x != nil {
		if len(x.Payload) < 1 {
			return incorrectIE(x.Type, where, errors.New("empty"))
		}
		b.NotificationDelay = x.Payload[0]
	}
	if x := c.first(ie.SuggestedBufferingPacketsCount); x != nil {
		v, err := decode(x, where, (*ie.IE).SuggestedBufferingPacketsCount)
		if err != nil {
			return err
		}
		b.SuggestedPackets = v
	}
	if x := c.first(ie.DLBufferingDuration); x != nil {
		if len(x.Payload) < 1 {
			return incorrectIE(x.Type, where, errors.New("empty"))
		}
		d := bufferingDuration(x.Payload[0])
		b.BufferingDuration = &d
		b.BufferingUntil = time.Time{}
		if d != InfiniteBuffering {
			b.BufferingUntil = time.Now().Add(d)
		}
	}
	if x := c.first(ie.DLBufferingSuggestedPacketCount); x != nil {
		var v uint16
		switch len(x.Payload) { // one octet, or two for counts above 255
		case 1:
			v = uint16(x.Payload[0])
		case 2:
			v = binary.BigEndian.Uint16(x.Payload)
		default:
			return incorrectIE(x.Type, where, errors.New("not one or two octets"))
		}
		b.BufferingPackets = &v
	}
	return nil
}

// bufferingDuration decodes a DL Buffering Duration octet (TS 29.244 8.2.29, as GPRS Timer
// in TS 24.008): a unit in bits 6-8 and a value in bits 1-5.
func bufferingDuration(b uint8) time.Duration {
	value := time.Duration(b & 0x1f)
	switch b >> 5 {
	case 0:
		return value * 2 * time.Second
	case 2:
		return value * 10 * time.Minute
	case 3:
		return value * time.Hour
	case 4:
		return value * 10 * time.Hour
	case 7:
		return InfiniteBuffering
	default: // 1, and the values the specification reads as 1
		return value * time.Minute
	}
}
