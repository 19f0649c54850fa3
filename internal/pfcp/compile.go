package pfcp

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// check reports the first rule of s that this UPF cannot apply: a reference to a rule the
// session does not have, or something the datapath does not do.
func (n *Node) check(s *Session) error {
	for _, id := range sortedKeys(s.PDRs) {
		p := s.PDRs[id]
		fail := func(format string, args ...any) error {
			return ruleFailure(ie.RuleIDTypePDR, uint32(id), "PDR %d: "+format, append([]any{id}, args...)...)
		}
		if _, ok := s.FARs[p.FAR]; !ok {
			return fail("FAR %d does not exist", p.FAR)
		}
		for _, q := range p.QERs {
			if _, ok := s.QERs[q]; !ok {
				return fail("QER %d does not exist", q)
			}
		}
		for _, u := range p.URRs {
			if _, ok := s.URRs[u]; !ok {
				return fail("URR %d does not exist", u)
			}
		}
		if n := s.quotaURRs(p); n > rules.MaxQuotasPerPDR {
			return fail("%d of its URRs have quotas; the datapath enforces %d per PDR", n, rules.MaxQuotasPerPDR)
		}
		// One this UPF chose is checked too: the host may have taken it since (a restored
		// session, a modification), and then its downlink would be the host's.
		if p.UE.IsValid() {
			if why := n.unusableUE(p.UE); why != "" {
				chosen := ""
				if p.UEChosen {
					chosen = " (chosen from ue_pools)"
				}
				return &requestError{cause: ie.CauseMandatoryIEIncorrect, offending: ie.UEIPAddress,
					msg: fmt.Sprintf("PDR %d: UE IP address %s%s %s", id, p.UE, chosen, why)}
			}
		}
		if n := s.meteredQERs(p); n > rules.MaxMetersPerPDR {
			return fail("%d of its QERs have an MBR in its direction; at most %d are supported", n, rules.MaxMetersPerPDR)
		}
		switch {
		case p.FTEID != nil && p.OuterHeaderRemoval == nil:
			return fail("forwarding GTP-U packets with their outer headers (an F-TEID without outer header removal) is not supported")
		case p.FTEID != nil && *p.OuterHeaderRemoval != 0 && *p.OuterHeaderRemoval != 6:
			return fail("outer header removal %d is not supported; use 0 (GTP-U/UDP/IPv4) or 6 (GTP-U/UDP/IP)", *p.OuterHeaderRemoval)
		case p.FTEID == nil && !p.UE.IsValid() && !p.UEChosen:
			return fail("it matches neither an F-TEID (uplink) nor a UE IP address (downlink)")
		case p.FTEID != nil && !p.FTEID.Chosen && !slices.Contains(n.opts.GTPUAddrs, p.FTEID.Addr):
			return fail("F-TEID address %s is not a GTP-U address of this UPF (%v)", p.FTEID.Addr, n.opts.GTPUAddrs)
		case !n.knownInstance(p.NetworkInstance):
			return fail("network instance %q is not configured (network_instances)", p.NetworkInstance)
		}
	}
	for _, id := range sortedKeys(s.QERs) {
		q := s.QERs[id]
		if max(q.MBRUL, q.MBRDL) > rules.MaxMBR {
			return ruleFailure(ie.RuleIDTypeQER, id, "QER %d: MBR above %d kbit/s (1 Tbit/s) is not supported", id, rules.MaxMBR)
		}
	}
	for _, id := range sortedKeys(s.URRs) {
		u := s.URRs[id]
		for _, l := range u.LinkedURRs {
			if _, ok := s.URRs[l]; !ok {
				return ruleFailure(ie.RuleIDTypeURR, id, "URR %d: linked URR %d does not exist", id, l)
			}
		}
		if u.QuotaFAR != nil {
			f, ok := s.FARs[*u.QuotaFAR]
			if !ok {
				return ruleFailure(ie.RuleIDTypeURR, id, "URR %d: FAR %d for quota action does not exist", id, *u.QuotaFAR)
			}
			if f.Apply&ApplyForward != 0 {
				if err := checkForwarding(f); err != nil {
					return err
				}
			}
		}
	}
	for _, id := range sortedKeys(s.FARs) {
		f := s.FARs[id]
		if f.BARID != nil {
			if _, ok := s.BARs[*f.BARID]; !ok {
				return ruleFailure(ie.RuleIDTypeFAR, id, "FAR %d: BAR %d does not exist", id, *f.BARID)
			}
		}
		if !n.knownInstance(f.NetworkInstance) {
			return ruleFailure(ie.RuleIDTypeFAR, id, "FAR %d: network instance %q is not configured (network_instances)",
				id, f.NetworkInstance)
		}
		if f.Apply&ApplyForward != 0 {
			if err := checkForwarding(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkForwarding checks what a FAR that forwards needs: a Destination Interface (TS 29.244
// 7.5.2.3: Forwarding Parameters are conditional on FORW) and, if it has one, an outer header
// the datapath can create.
func checkForwarding(f *FAR) error {
	if !f.hasDestination {
		return &requestError{cause: ie.CauseConditionalIEMissing, offending: ie.ForwardingParameters,
			msg: fmt.Sprintf("FAR %d: FORW without Forwarding Parameters (Destination Interface)", f.ID)}
	}
	switch o := f.OHC; {
	case o == nil:
	case o.Description != ohcGTPUIPv4:
		return ruleFailure(ie.RuleIDTypeFAR, f.ID,
			"FAR %d: outer header creation 0x%04x is not supported; only GTP-U/UDP/IPv4 (0x%04x) is",
			f.ID, o.Description, ohcGTPUIPv4)
	case !o.Peer.IsValid() || o.Peer.IsUnspecified() || o.TEID == 0:
		return ruleFailure(ie.RuleIDTypeFAR, f.ID,
			"FAR %d: outer header creation needs an IPv4 address and a TEID other than 0 to forward", f.ID)
	}
	return nil
}

// ohcGTPUIPv4 is the Outer Header Creation Description GTP-U/UDP/IPv4 (TS 29.244 8.2.56,
// octet 5 bit 1), the only one the datapath encapsulates with.
const ohcGTPUIPv4 = 0x0100

// unusableUE says why a UE address cannot be a UE's, or "": an address of this
// UPF (the session would receive what is sent to the UPF), one that is not a unicast
// address of a host, or, with UEPoolsOnly, one outside the UE pools.
func (n *Node) unusableUE(a netip.Addr) string {
	switch {
	case !a.Is4() || a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() ||
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || netip.MustParsePrefix("240.0.0.0/4").Contains(a):
		return "is not a unicast address a UE may have"
	case n.opts.Datapath.IsLocal(a):
		return "is an address of this UPF"
	case n.opts.UEPoolsOnly && !containsAddr(n.opts.UEPools, a):
		return fmt.Sprintf("is outside the UE pools %v (ue_pools_only)", n.opts.UEPools)
	}
	return ""
}

// meteredQERs counts the QERs of p with an MBR in p's direction (uplink: on an F-TEID).
func (s *Session) meteredQERs(p *PDR) int {
	n := 0
	for _, id := range p.QERs {
		if q := s.QERs[id]; q != nil && ((p.FTEID != nil && q.MBRUL != 0) || (p.FTEID == nil && q.MBRDL != 0)) {
			n++
		}
	}
	return n
}

// knownInstance: with network instances configured, only those are accepted.
func (n *Node) knownInstance(name string) bool {
	if name == "" || len(n.opts.NetworkInstances) == 0 {
		return true
	}
	_, ok := n.opts.NetworkInstances[name]
	return ok
}

// ruleSets turns a checked session into the datapath's rule sets: the PDRs on one F-TEID
// form the uplink rule set of that TEID, those on a UE address the downlink rule set of it.
func (n *Node) ruleSets(s *Session) []rules.RuleSet {
	local := n.localAddr(s)
	byKey := map[rules.Key]*rules.RuleSet{}
	var order []rules.Key
	for _, id := range sortedKeys(s.PDRs) {
		p := s.PDRs[id]
		if neverIPv4(p.SDF) {
			// Only IPv6 filters (Open5GS's router solicitations): the PDR can never match a
			// packet of the IPv4 datapath, and leaving it out spares its key a
			// classification step.
			continue
		}
		beforeQoS, quotas, quotaFAR := s.pdrUsage(p, n.ss.usage[s.SEID])
		far := s.FARs[p.FAR]
		if quotaFAR != nil {
			far = quotaFAR
		}
		rp := rules.PDR{ID: uint32(id), Precedence: p.Precedence, QERs: s.qerRules(p), URRs: p.URRs,
			FAR: farRule(far, local), BeforeQoS: beforeQoS, Quotas: quotas}
		if a := rp.FAR.Action; (a == rules.Drop || a == rules.DropNotify) && s.countsDropped(p) {
			// Every packet to the buffer, which discards and counts it (bufferModes).
			rp.FAR.Action = rules.Buffer
		}
		for _, f := range p.SDF {
			rp.Filters = append(rp.Filters, f.Filter)
		}
		var k rules.Key
		if p.FTEID != nil {
			k = rules.Key{Uplink: true, TEID: p.FTEID.TEID}
			rp.QFI = p.QFI
		} else {
			k = rules.Key{UE: p.UE}
			rp.QFI = s.markingQFI(p)
		}
		rs, ok := byKey[k]
		if !ok {
			rs = &rules.RuleSet{Uplink: k.Uplink, TEID: k.TEID, UE: k.UE}
			byKey[k] = rs
			order = append(order, k)
		}
		rs.PDRs = append(rs.PDRs, rp)
	}
	out := make([]rules.RuleSet, len(order))
	ue := sessionUE(s)
	for i, k := range order {
		rs := byKey[k]
		if k.Uplink && !n.opts.AllowAnySource && fromAccess(s, *rs) {
			rs.Source = ue
		}
		if k.Uplink {
			narrowToUE(s, rs)
		}
		out[i] = *rs
	}
	return out
}

// narrowToUE narrows the filters of an uplink rule set's PDRs that name a UE address to packets
// from it: a PDI with both an F-TEID and a UE IP address matches only packets from that UE.
// When the rule set's Source is that address, the datapath already drops every other source
// before it selects a PDR, so the filters stay as they are: a PDR that matches everything
// spares its key the classification step (free5GC's uplink PDR, "permit out ip from any to
// assigned" with the UE's address, is as cheap as Open5GS's).
func narrowToUE(s *Session, rs *rules.RuleSet) {
	for j := range rs.PDRs {
		if ue := s.PDRs[uint16(rs.PDRs[j].ID)].UE; ue.IsValid() && ue != rs.Source {
			rs.PDRs[j].Filters = fromUE(rs.PDRs[j].Filters, ue)
		}
	}
}

// sessionUE is the session's UE IPv4 address when its PDRs name exactly one, else none: with
// several (which a PDU session does not have) no one address is the source of its packets.
func sessionUE(s *Session) netip.Addr {
	var ue netip.Addr
	for _, p := range s.PDRs {
		switch {
		case !p.UE.Is4() || p.UE == ue:
		case ue.IsValid():
			return netip.Addr{}
		default:
			ue = p.UE
		}
	}
	return ue
}

// fromAccess reports whether every PDR of an uplink rule set has source interface Access: only
// then do its packets come from the UE. GTP-U from the core or the CP function (an I-UPF's
// downlink on N9, the SMF's packets to the UE) has other sources.
func fromAccess(s *Session, rs rules.RuleSet) bool {
	for _, p := range rs.PDRs {
		if s.PDRs[uint16(p.ID)].SourceInterface != srcAccess {
			return false
		}
	}
	return true
}

// neverIPv4 reports whether a PDR's filters, present, all fail to match IPv4 packets.
func neverIPv4(filters []SDF) bool {
	return len(filters) > 0 && !slices.ContainsFunc(filters, func(f SDF) bool { return f.Filter.MatchesIPv4() })
}

// fromUE narrows an uplink PDR's filters to packets from the UE's address: a PDI with both an
// F-TEID and a UE IP address matches only packets from that UE.
func fromUE(filters []sdf.Filter, ue netip.Addr) []sdf.Filter {
	if len(filters) == 0 {
		filters = []sdf.Filter{{Protocol: sdf.AnyProtocol}}
	}
	out := make([]sdf.Filter, len(filters))
	for i, f := range filters {
		if !f.Local.IsValid() {
			f.Local = netip.PrefixFrom(ue, 32)
		}
		out[i] = f
	}
	return out
}

// qerRules are the QERs a PDR applies, as the datapath takes them.
func (s *Session) qerRules(p *PDR) []rules.QER {
	var out []rules.QER
	for _, id := range p.QERs {
		q := s.QERs[id]
		out = append(out, rules.QER{ID: id, ULClosed: q.GateUL == gateClosed, DLClosed: q.GateDL == gateClosed,
			MBRUL: q.MBRUL, MBRDL: q.MBRDL})
	}
	return out
}

// gateClosed is the Gate Status value of a closed gate (TS 29.244 8.2.7; 0 is open).
const gateClosed = 1

// markingQFI is the QFI a downlink PDR writes into the PDU Session Container: that of the
// first of its QERs that has one (TS 29.244 5.6.1), 0 for no container.
func (s *Session) markingQFI(p *PDR) uint8 {
	for _, id := range p.QERs {
		if q := s.QERs[id]; q != nil && q.QFI != 0 {
			return q.QFI
		}
	}
	return 0
}

// The interface value Access, of Source Interface (TS 29.244 8.2.2) and Destination Interface
// (8.2.24).
const (
	srcAccess  = 0
	destAccess = 0
)

// action is what f's apply action does with packets: forward, buffer, or drop (and notify
// the first with NOCP).
func (f *FAR) action() rules.Action {
	switch {
	case f.Apply&ApplyForward != 0:
		return rules.Forward
	case f.Apply&ApplyBuffer != 0:
		return rules.Buffer
	case f.Apply&ApplyNotifyCP != 0:
		return rules.DropNotify
	default:
		return rules.Drop
	}
}

// farRule is the datapath's view of a FAR; local is the outer source address of tunnels.
func farRule(f *FAR, local netip.Addr) rules.FAR {
	out := rules.FAR{Action: f.action(), NetworkInstance: f.NetworkInstance}
	switch {
	case out.Action == rules.Forward && f.OHC != nil:
		out.OHC = &rules.OuterHeader{TEID: f.OHC.TEID, Peer: f.OHC.Peer, Local: local}
	case out.Action == rules.Forward && f.DestinationInterface == destAccess:
		// Toward Access only a tunnel reaches the UE: routed as it is, the packet would
		// go back out of N6 (TS 29.244 5.2.3: without OHC there is no tunnel to use).
		out.Action = rules.AccessNoTunnel
	}
	if f.TLM != nil {
		out.TOS, out.HasTOS = uint8(*f.TLM>>8), true
	}
	return out
}

// localAddr is the source address of the session's tunnels: the address of its first local
// F-TEID, or this UPF's first GTP-U address.
func (n *Node) localAddr(s *Session) netip.Addr {
	for _, id := range sortedKeys(s.PDRs) {
		if f := s.PDRs[id].FTEID; f != nil && f.Addr.IsValid() {
			return f.Addr
		}
	}
	return n.opts.GTPUAddrs[0]
}
