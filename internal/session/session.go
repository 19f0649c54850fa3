// Package session holds the user-plane session model that the control plane (static
// configuration today, PFCP later) hands to the datapath.
package session

import (
	"fmt"
	"net/netip"
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
}

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
	return nil
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
