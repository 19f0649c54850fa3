// Package sdf holds Service Data Flow filters (TS 29.244 8.2.5): the flow description (an
// IPFilterRule, RFC 6733 4.3, as 3GPP restricts it in TS 29.212 5.4.2) plus the optional ToS,
// security parameter index and flow label; a parser for them; and a reference matcher that
// checks a packet against filters one by one, the plain truth the datapath's bit vectors are
// tested against.
package sdf

import (
	"errors"
	"net/netip"
)

// Filter is one SDF filter. Addresses and ports are from the UE's point of view: Remote is
// the far end (the "from" side of a "permit out" description), Local is the UE (the "to"
// side, usually "assigned"). A zero field matches anything.
type Filter struct {
	// Protocol is the IP protocol number; AnyProtocol matches every protocol ("ip").
	Protocol int
	// Remote and Local are address prefixes; the zero Prefix matches any address.
	Remote, Local netip.Prefix
	// RemotePorts and LocalPorts list port ranges; empty matches any port, and a packet
	// without ports (not TCP/UDP/SCTP, or any fragment: all fragments of a datagram are
	// classified alike, though only the first carries the ports) matches only empty lists.
	RemotePorts, LocalPorts []PortRange
	// TOS matches (tos & TOSMask) == TOSValue when TOSMask is not zero. The mask must be a
	// run of leading ones (0xfc for DSCP): others are rejected by Validate.
	TOSValue, TOSMask uint8
	// SPI is the IPsec security parameter index (ESP or AH); HasSPI says it is set.
	SPI    uint32
	HasSPI bool
	// FlowLabel is the IPv6 flow label (20 bits); HasFlowLabel says it is set. IPv4 packets
	// have no flow label, so a filter with one never matches them.
	FlowLabel    uint32
	HasFlowLabel bool
	// IPv6 marks a filter whose flow description names IPv6 addresses. The parser rejects
	// those (ErrIPv6); a PFCP session keeps them as filters that never match, because the
	// datapath carries IPv4 only and an SMF sends some (router solicitations) regardless.
	IPv6 bool
}

// ErrIPv6 is the parser's error for IPv6 addresses in a flow description.
var ErrIPv6 = errors.New("IPv6 is not supported yet (the datapath is IPv4 only)")

// MatchesIPv4 reports whether the filter can match an IPv4 packet at all.
func (f Filter) MatchesIPv4() bool { return !f.HasFlowLabel && !f.IPv6 }

// MatchesAll reports whether the filter matches every IPv4 packet, as "permit out ip from any
// to assigned" does: a PDR with such a filter matches as if it had none.
func (f Filter) MatchesAll() bool {
	return f.Protocol == AnyProtocol && f.Remote.Bits() <= 0 && f.Local.Bits() <= 0 &&
		len(f.RemotePorts) == 0 && len(f.LocalPorts) == 0 && f.TOSMask == 0 && !f.HasSPI && f.MatchesIPv4()
}

// AnyProtocol in Filter.Protocol matches every IP protocol.
const AnyProtocol = -1

// PortRange is an inclusive range of ports; a single port has First == Last.
type PortRange struct {
	First, Last uint16
}

// Packet is what a filter looks at, already turned to the UE's point of view: for an uplink
// packet Local is its source, for a downlink packet its destination.
type Packet struct {
	Protocol              uint8
	Remote, Local         netip.Addr
	HasPorts              bool // TCP, UDP or SCTP, and not a fragment
	RemotePort, LocalPort uint16
	TOS                   uint8
	HasSPI                bool // ESP or AH with the SPI present
	SPI                   uint32
}
