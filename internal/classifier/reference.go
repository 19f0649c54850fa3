package classifier

import "net/netip"

// Packet is what a class looks at.
type Packet struct {
	Direction        int // DirUplink or DirDownlink
	SrcMAC, DstMAC   uint64
	EtherType        uint16
	Protocol         uint8
	SrcIP, DstIP     netip.Addr
	HasPorts         bool // TCP, UDP or SCTP, not a fragment
	SrcPort, DstPort uint16
}

// Matches reports whether r accepts p, field by field: the plain truth the datapath's bit
// vectors are tested against.
func (r Rule) Matches(p Packet) bool {
	dir := Ingress
	if p.Direction == DirDownlink {
		dir = Egress
	}
	switch {
	case r.Direction&dir == 0,
		r.SrcMAC != nil && *r.SrcMAC != p.SrcMAC,
		r.DstMAC != nil && *r.DstMAC != p.DstMAC,
		r.EtherType != nil && *r.EtherType != p.EtherType,
		r.Protocol != nil && *r.Protocol != p.Protocol,
		r.SrcIP.IsValid() && !r.SrcIP.Contains(p.SrcIP),
		r.DstIP.IsValid() && !r.DstIP.Contains(p.DstIP),
		r.SrcPort != nil && !(p.HasPorts && p.SrcPort >= r.SrcPort.First && p.SrcPort <= r.SrcPort.Last),
		r.DstPort != nil && !(p.HasPorts && p.DstPort >= r.DstPort.First && p.DstPort <= r.DstPort.Last):
		return false
	}
	return true
}

// Match returns the class of p by trying every rule: the highest priority wins, then the
// lowest id.
func Match(rules []Rule, p Packet) (uint32, bool) {
	var best *Rule
	for i := range rules {
		r := &rules[i]
		if !r.Matches(p) {
			continue
		}
		if best == nil || r.Priority > best.Priority || (r.Priority == best.Priority && r.ID < best.ID) {
			best = r
		}
	}
	if best == nil {
		return 0, false
	}
	return best.ID, true
}
