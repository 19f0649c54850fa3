// Package rules is the datapath's view of a session: rule sets of PDRs, each PDR with its
// precedence, QFI, SDF filters and FAR. A rule set is everything one lookup key leads to, the
// uplink TEID or the downlink UE address.
package rules

import (
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/xupf/xupf/internal/sdf"
)

// Action is what a FAR does with a packet.
type Action int

const (
	Drop    Action = iota
	Forward        // uplink packets lose their outer headers first; then OHC, if any, and routing
	// Buffer (BUFF) holds packets until the FAR forwards again: the datapath hands them to
	// xupfd, which runs them through the datapath again then (datapath.Replay).
	Buffer
	// AccessNoTunnel is FORW toward Access without outer header creation (free5GC's downlink
	// FAR before the gNB's tunnel is known): only a tunnel reaches a UE, and routing the
	// packets as they are would send them back into the data network. The datapath drops
	// them with their own drop reason (far_access_no_tunnel) and counts no usage.
	AccessNoTunnel
	// DropNotify is DROP with NOCP: dropped, except that the first packet after the rules are
	// installed reaches xupfd like a buffered one, which it discards and notifies the SMF of.
	DropNotify
)

// FAR is a Forwarding Action Rule.
type FAR struct {
	Action Action
	// OHC is Outer Header Creation: when set, forwarded packets are tunnelled in GTP-U/UDP/IPv4
	// toward OHC.Peer (a gNB downlink; another UPF or the SMF uplink, as on N9).
	OHC *OuterHeader
	// TOS, when HasTOS, is the transport level marking: the outer header's DSCP (the top six
	// bits; the ECN bits still come from the inner packet). Without it the outer header
	// copies the inner packet's ToS.
	TOS    uint8
	HasTOS bool
	// NetworkInstance is the data network the FAR forwards to (its Forwarding Parameters'),
	// "" when it names none: it selects whether the kernel treats the traffic on N6
	// (flow_cache.kernel_n6_instances).
	NetworkInstance string
}

// OuterHeader is a GTP-U tunnel end: the peer's TEID and address, and our source address.
type OuterHeader struct {
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
	// QERs are the QoS enforcement rules the PDR applies, every one of them: a packet must
	// pass them all (e.g. the session AMBR and the flow MBR). PDRs of one owner naming the
	// same QER id share its meters.
	QERs []QER
	// URRs are the ids (within the session) of the usage reporting rules the PDR counts
	// toward. The datapath counts per PDR, and the control plane adds the PDRs of each URR
	// up (usage reports).
	URRs []uint32
	// BeforeQoS asks for a second counter, taken before the QERs and the policer (a URR
	// measuring before QoS enforcement): Usage.BeforeQoS.
	BeforeQoS bool
	// Quotas are the volume quotas of the PDR's URRs (MaxQuotasPerPDR at most), which the
	// datapath enforces: once one is used up the PDR drops (urr_quota); a packet that passes
	// is charged to all. PDRs of an owner naming the same URR spend one budget.
	Quotas []Quota
}

// NoLimit is a Quota volume without a limit.
const NoLimit = math.MaxUint64

// Quota is a URR's volume quota in bytes of inner IP packets, per direction and in total
// (NoLimit where there is none). The datapath counts from zero for every new Grant: the
// owner changes Grant with each quota the SMF gives, even an equal one, and keeps it to
// carry the count on.
type Quota struct {
	URR                     uint32
	Grant                   uint64
	Uplink, Downlink, Total uint64
}

// Limits of what the datapath applies per PDR and per QER (qos.h, meters.go).
const (
	// MaxMetersPerPDR is how many QERs with an MBR in its direction a PDR may apply.
	MaxMetersPerPDR = 4
	// MaxQuotasPerPDR is how many URRs with a volume quota a PDR may have.
	MaxQuotasPerPDR = 4
	// MaxMBR is the largest MBR in kbit/s: 1 Tbit/s.
	MaxMBR = 1_000_000_000
)

// QER is a QoS Enforcement Rule as the datapath applies it.
type QER struct {
	ID uint32
	// ULClosed and DLClosed close the gate: every packet of the PDR in that direction drops.
	ULClosed, DLClosed bool
	// MBRUL and MBRDL are maximum bit rates in kbit/s as PFCP carries them (0: none), counted
	// on the inner IP packet.
	MBRUL, MBRDL uint64
}

// RuleSet is the PDRs of one uplink TEID or one downlink UE address.
type RuleSet struct {
	Uplink bool
	TEID   uint32     // the key when Uplink
	UE     netip.Addr // the key otherwise
	PDRs   []PDR
	// Source, on an uplink rule set, is the only inner source address its packets may have:
	// the session's UE address. Others are dropped as spoofed_source. The zero value accepts
	// any source (the session allows it, or its UE address is unknown).
	Source netip.Addr
}

// Key is what the datapath looks a packet up by: the uplink TEID or the downlink UE address.
type Key struct {
	Uplink bool
	TEID   uint32
	UE     netip.Addr
}

// LookupKey is the rule set's key.
func (rs RuleSet) LookupKey() Key {
	if rs.Uplink {
		return Key{Uplink: true, TEID: rs.TEID}
	}
	return Key{UE: rs.UE}
}

// ErrNoResources is wrapped by a datapath's install error when a table of its is full: the
// request is right, the UPF has no room for it (PFCP's "No resources available").
var ErrNoResources = errors.New("no resources")

// Usage is what the datapath has counted for one PDR of one rule set.
type Usage struct {
	Uplink  bool
	PDR     uint32
	Packets uint64
	Bytes   uint64
	// BeforeQoS is what the PDR counted before QoS enforcement, when it asked (BeforeQoS).
	BeforeQoS Counts
	// BufferFull is what the datapath dropped of the PDR's packets to buffer because the PDR
	// held its most already or the ring to xupfd was full (drop reason buffer_full): IP bytes.
	BufferFull Counts
}

// QuotaUse is what the datapath counted against the quota of a URR's grant: bytes of inner
// IP packets by direction.
type QuotaUse struct {
	URR              uint32
	Grant            uint64
	Uplink, Downlink uint64
}

// Counts are packets and bytes of inner IP packets.
type Counts struct {
	Packets, Bytes uint64
}

// Key names the rule set's lookup key for messages.
func (rs RuleSet) Key() string {
	if rs.Uplink {
		return fmt.Sprintf("uplink TEID 0x%x", rs.TEID)
	}
	return "downlink UE " + rs.UE.String()
}
