package sdf

import "net/netip"

// This file is the reference matcher: plain field-by-field checks, written to be obviously
// right rather than fast. The datapath's classifier is tested against it.

// Rule is a set of SDF filters with a precedence, as a PDR's PDI holds them.
type Rule struct {
	// Precedence orders rules: the lowest value wins (TS 29.244 8.2.11).
	Precedence uint32
	// Filters are alternatives: the rule matches a packet that any of them matches. A rule
	// without filters matches every packet.
	Filters []Filter
}

// Match returns the index of the rule that classifies p: among the rules that match it, the
// one with the lowest Precedence, and of those the first. ok is false when none matches.
func Match(rules []Rule, p Packet) (index int, ok bool) {
	best := -1
	for i, r := range rules {
		if !r.Matches(p) {
			continue
		}
		if best == -1 || r.Precedence < rules[best].Precedence {
			best = i
		}
	}
	return best, best != -1
}

// Matches reports whether r matches p: it has no filters, or any of them matches p.
func (r Rule) Matches(p Packet) bool {
	if len(r.Filters) == 0 {
		return true
	}
	for _, f := range r.Filters {
		if f.Matches(p) {
			return true
		}
	}
	return false
}

// Matches reports whether p passes every condition of f. A zero (or empty) field matches
// anything; a filter with a flow label matches nothing, as Packet is IPv4.
func (f Filter) Matches(p Packet) bool {
	if f.Protocol != AnyProtocol && f.Protocol != int(p.Protocol) {
		return false
	}
	if !prefixMatches(f.Remote, p.Remote) || !prefixMatches(f.Local, p.Local) {
		return false
	}
	if !portsMatch(f.RemotePorts, p.HasPorts, p.RemotePort) || !portsMatch(f.LocalPorts, p.HasPorts, p.LocalPort) {
		return false
	}
	if f.TOSMask != 0 && p.TOS&f.TOSMask != f.TOSValue {
		return false
	}
	if f.HasSPI && (!p.HasSPI || p.SPI != f.SPI) {
		return false
	}
	return f.MatchesIPv4()
}

// prefixMatches: the zero Prefix matches any address, another prefix the addresses in it.
func prefixMatches(pfx netip.Prefix, a netip.Addr) bool {
	if pfx == (netip.Prefix{}) {
		return true
	}
	return pfx.Contains(a)
}

// portsMatch: an empty list matches any packet, even one without ports; a non-empty list
// matches a packet with ports whose port is in one of the ranges.
func portsMatch(ranges []PortRange, hasPorts bool, port uint16) bool {
	if len(ranges) == 0 {
		return true
	}
	if !hasPorts {
		return false
	}
	for _, r := range ranges {
		if r.First <= port && port <= r.Last {
			return true
		}
	}
	return false
}
