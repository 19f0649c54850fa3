// Package rules is the datapath's view of a session: rule sets of PDRs, each PDR with its
// precedence, QFI, SDF filters and FAR. A rule set is everything one lookup key leads to, the
// uplink TEID or the downlink UE address.
package rules

import (
	"fmt"
	"net/netip"

	"github.com/xupf/xupf/internal/sdf"
)

// Action is what a FAR does with a packet.
type Action int

const (
	Drop    Action = iota
	Forward        // uplink: remove the outer headers and route the inner packet
	Encap          // downlink: add outer IPv4/UDP/GTP-U toward Peer
)

// FAR is a Forwarding Action Rule.
type FAR struct {
	Action Action
	// Outer header creation (Encap): the peer's TEID and address, and our source address.
	TEID  uint32
	Peer  netip.Addr
	Local netip.Addr
}

// PDR is a Packet Detection Rule.
type PDR struct {
	// ID names the PDR within its rule set. It stays the same across modifications, and the
	// PDR's usage counter follows it.
	ID uint32
	// Precedence orders the PDRs: the matching one with the lowest value wins.
	Precedence uint32
	// QFI: on uplink the QFI a packet must carry (0 = any); on downlink the QFI written into
	// the PDU Session Container (0 = none).
	QFI uint8
	// Filters: the PDR matches a packet that any filter matches; no filters match all.
	Filters []sdf.Filter
	FAR     FAR
}

// RuleSet is the PDRs of one uplink TEID or one downlink UE address.
type RuleSet struct {
	Uplink bool
	TEID   uint32     // the key when Uplink
	UE     netip.Addr // the key otherwise
	PDRs   []PDR
}

// Key names the rule set's lookup key for messages.
func (rs RuleSet) Key() string {
	if rs.Uplink {
		return fmt.Sprintf("uplink TEID 0x%x", rs.TEID)
	}
	return "downlink UE " + rs.UE.String()
}
