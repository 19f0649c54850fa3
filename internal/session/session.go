// Package session holds the user-plane session model that the control plane (static
// configuration today, PFCP later) hands to the datapath.
package session

import (
	"fmt"
	"math"
	"net/netip"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

// Session is one PDU session with one uplink and one downlink rule: the uplink packets arrive
// on UplinkTEID and leave decapsulated toward the data network; the downlink packets to UE are
// encapsulated toward GNB with DownlinkTEID (and a PDU Session Container carrying QFI when QFI
// is not zero).
type Session struct {
	ID           uint64     `json:"id" yaml:"id"`
	UE           netip.Addr `json:"ue_ipv4" yaml:"ue_ipv4"`
	UplinkTEID   uint32     `json:"uplink_teid" yaml:"uplink_teid"`
	GNB          netip.Addr `json:"gnb_ipv4" yaml:"gnb_ipv4"`
	DownlinkTEID uint32     `json:"downlink_teid" yaml:"downlink_teid"`
	// QFI is the QoS Flow Identifier (1..63) of the session's one QoS flow. Downlink packets
	// carry it in a PDU Session Container, and uplink packets must carry it in theirs (others
	// match no PDR and are dropped). 0 means no container downlink and any QFI, or none, uplink.
	QFI uint8 `json:"qfi,omitempty" yaml:"qfi,omitempty"`
	// GTPUAddr is the local N3 address: the destination of uplink packets and the source of
	// downlink packets.
	GTPUAddr netip.Addr `json:"gtpu_address" yaml:"gtpu_address"`
	// Flows are further QoS flows of the session, each selected by SDF filters. A packet that
	// no flow matches uses the session's own rule (TEIDs and QFI above).
	Flows []Flow `json:"flows,omitempty" yaml:"flows,omitempty"`
	// AllowAnySource turns anti-spoofing off for this session: its uplink packets may have any
	// inner source address (a router behind the UE, say), not only UE. Off, the others are
	// dropped as spoofed_source.
	AllowAnySource bool `json:"allow_any_source,omitempty" yaml:"allow_any_source,omitempty"`
}

// Flow is a QoS flow with its own uplink and downlink PDR: packets matching one of its SDF
// filters (both ways) are detected by it instead of by the session's default rule.
type Flow struct {
	// Precedence orders the flows: the matching one with the lowest value wins.
	Precedence uint32 `json:"precedence" yaml:"precedence"`
	// QFI is required on the flow's uplink packets and written on its downlink ones (1..63).
	QFI uint8 `json:"qfi" yaml:"qfi"`
	// SDF lists 3GPP flow descriptions, e.g. "permit out 17 from any to assigned 5060".
	SDF []string `json:"sdf" yaml:"sdf"`
	// DownlinkTEID, when set, tunnels the flow's downlink packets with this TEID instead of
	// the session's.
	DownlinkTEID uint32 `json:"downlink_teid,omitempty" yaml:"downlink_teid,omitempty"`
}

// DefaultPrecedence is the precedence of a session's own rule: after every flow.
const DefaultPrecedence = math.MaxUint32

// MaxQFI is the largest QoS Flow Identifier (6 bits, TS 38.415).
const MaxQFI = 63

// Validate reports the first field that makes s unusable, naming the field and the fix.
func (s Session) Validate() error {
	switch {
	case !s.UE.Is4():
		return fmt.Errorf("ue_ipv4: %q is not an IPv4 address; give the UE's IPv4 address", s.UE)
	case s.UplinkTEID == 0:
		return fmt.Errorf("uplink_teid: 0 is reserved for GTP-U signalling; use a TEID from 1 to 4294967295")
	case !s.GNB.Is4():
		return fmt.Errorf("gnb_ipv4: %q is not an IPv4 address; give the gNB's N3 IPv4 address", s.GNB)
	case s.DownlinkTEID == 0:
		return fmt.Errorf("downlink_teid: 0 is reserved for GTP-U signalling; use a TEID from 1 to 4294967295")
	case s.QFI > MaxQFI:
		return fmt.Errorf("qfi: %d is out of range; use 1 to %d, or 0 for no PDU Session Container", s.QFI, MaxQFI)
	case !s.GTPUAddr.Is4():
		return fmt.Errorf("gtpu_address: %q is not an IPv4 address; give one of the local GTP-U addresses", s.GTPUAddr)
	}
	_, err := s.RuleSets()
	return err
}

// RuleSets turns the session into its uplink and downlink rule sets: one PDR per flow (ID =
// position + 1) and the session's own rule (ID 0, DefaultPrecedence). Uplink packets must come
// from UE unless AllowAnySource.
func (s Session) RuleSets() ([]rules.RuleSet, error) {
	ul := rules.RuleSet{Uplink: true, TEID: s.UplinkTEID}
	if !s.AllowAnySource {
		ul.Source = s.UE
	}
	dl := rules.RuleSet{UE: s.UE}
	ohc := rules.OuterHeader{TEID: s.DownlinkTEID, Peer: s.GNB, Local: s.GTPUAddr}
	encap := rules.FAR{Action: rules.Forward, OHC: &ohc}
	for i, f := range s.Flows {
		path := fmt.Sprintf("flows[%d]", i)
		if f.QFI == 0 || f.QFI > MaxQFI {
			return nil, fmt.Errorf("%s.qfi: %d is out of range; use 1 to %d", path, f.QFI, MaxQFI)
		}
		if f.Precedence == DefaultPrecedence {
			return nil, fmt.Errorf("%s.precedence: %d is the session's own rule's; use a smaller one", path, f.Precedence)
		}
		if len(f.SDF) == 0 {
			return nil, fmt.Errorf("%s.sdf: empty; give at least one flow description, "+
				"e.g. \"permit out 17 from any to assigned 5060\"", path)
		}
		filters := make([]sdf.Filter, len(f.SDF))
		for j, d := range f.SDF {
			var err error
			if filters[j], err = sdf.ParseFlowDescription(d); err != nil {
				return nil, fmt.Errorf("%s.sdf[%d]: %w", path, j, err)
			}
		}
		far := encap
		if f.DownlinkTEID != 0 {
			flowOHC := ohc
			flowOHC.TEID = f.DownlinkTEID
			far.OHC = &flowOHC
		}
		id := uint32(i + 1)
		ul.PDRs = append(ul.PDRs, rules.PDR{ID: id, Precedence: f.Precedence, QFI: f.QFI, Filters: filters,
			FAR: rules.FAR{Action: rules.Forward}})
		dl.PDRs = append(dl.PDRs, rules.PDR{ID: id, Precedence: f.Precedence, QFI: f.QFI, Filters: filters, FAR: far})
	}
	ul.PDRs = append(ul.PDRs, rules.PDR{Precedence: DefaultPrecedence, QFI: s.QFI, FAR: rules.FAR{Action: rules.Forward}})
	dl.PDRs = append(dl.PDRs, rules.PDR{Precedence: DefaultPrecedence, QFI: s.QFI, FAR: encap})
	return []rules.RuleSet{ul, dl}, nil
}

// Counters are the packets and bytes a rule has forwarded.
type Counters struct {
	Packets uint64 `json:"packets" yaml:"packets"`
	Bytes   uint64 `json:"bytes" yaml:"bytes"`
}

// Usage is what the datapath has counted for one session.
type Usage struct {
	Uplink   Counters `json:"uplink" yaml:"uplink"`
	Downlink Counters `json:"downlink" yaml:"downlink"`
}

// UsageOf sums the usage of a session's PDRs per direction.
func UsageOf(pdrs []rules.Usage) Usage {
	var u Usage
	for _, p := range pdrs {
		dir := &u.Downlink
		if p.Uplink {
			dir = &u.Uplink
		}
		dir.Packets += p.Packets
		dir.Bytes += p.Bytes
	}
	return u
}
