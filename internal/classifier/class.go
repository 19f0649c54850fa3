// Package classifier is the traffic classifier's control: classes (the papers' traffic
// classes: MACs, ethertype, IPv4 prefixes, protocol, ports, direction, priority), their
// validation, their compilation into Linear Bit Vector Search tables for the datapath
// (bpf/lib/classifier.h) and a reference matcher.
package classifier

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// MaxClasses is how many classes the datapath holds (XUPF_MAX_CLASSES).
const MaxClasses = 10240

// Class is a traffic class as the API and the CLI write it. Empty fields match anything.
type Class struct {
	// ID names the class (1 or more); the datapath writes it into the packet's metadata.
	ID uint32 `json:"id" yaml:"id"`
	// Priority orders overlapping classes: the highest wins; equal priorities go to the
	// lower id.
	Priority uint32 `json:"priority" yaml:"priority"`
	// Direction is "ingress" (uplink: from the UE), "egress" (downlink: toward the UE) or
	// "both" (the default).
	Direction string `json:"direction,omitempty" yaml:"direction,omitempty"`
	// SrcMAC and DstMAC are the received frame's addresses, e.g. "02:00:00:00:01:02".
	SrcMAC string `json:"src_mac,omitempty" yaml:"src_mac,omitempty"`
	DstMAC string `json:"dst_mac,omitempty" yaml:"dst_mac,omitempty"`
	// EtherType is the received frame's ethertype, e.g. "0x0800".
	EtherType string `json:"ethertype,omitempty" yaml:"ethertype,omitempty"`
	// SrcIP and DstIP are IPv4 prefixes or addresses of the user packet.
	SrcIP string `json:"src_ip,omitempty" yaml:"src_ip,omitempty"`
	DstIP string `json:"dst_ip,omitempty" yaml:"dst_ip,omitempty"`
	// Protocol is tcp, udp, sctp, icmp or a number 0-255.
	Protocol string `json:"protocol,omitempty" yaml:"protocol,omitempty"`
	// SrcPort and DstPort are a port ("80") or a range ("1000-2000"); they need protocol
	// tcp, udp or sctp.
	SrcPort string `json:"src_port,omitempty" yaml:"src_port,omitempty"`
	DstPort string `json:"dst_port,omitempty" yaml:"dst_port,omitempty"`
}

// Direction values of a parsed class.
const (
	Ingress = 1 << iota
	Egress
	Both = Ingress | Egress
)

// Rule is a class parsed: what the compiler and the reference matcher work on. A nil
// pointer or zero Prefix means any value.
type Rule struct {
	ID, Priority     uint32
	Direction        int // Ingress, Egress or Both
	SrcMAC, DstMAC   *uint64
	EtherType        *uint16
	SrcIP, DstIP     netip.Prefix
	Protocol         *uint8
	SrcPort, DstPort *PortRange
}

// PortRange is an inclusive range of ports.
type PortRange struct{ First, Last uint16 }

var protocols = map[string]uint8{"icmp": 1, "tcp": 6, "udp": 17, "sctp": 132}

// Parse checks c and returns its rule; the error names the field and says what to write.
func (c Class) Parse() (Rule, error) {
	r := Rule{ID: c.ID, Priority: c.Priority}
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.ID == 0 {
		fail("id", "0 is not a class id; use 1 to 4294967295")
	}
	switch strings.ToLower(c.Direction) {
	case "", "both":
		r.Direction = Both
	case "ingress":
		r.Direction = Ingress
	case "egress":
		r.Direction = Egress
	default:
		fail("direction", "%q is not a direction; use ingress (uplink), egress (downlink) or both", c.Direction)
	}
	for _, m := range []struct {
		name, s string
		dst     **uint64
	}{{"src_mac", c.SrcMAC, &r.SrcMAC}, {"dst_mac", c.DstMAC, &r.DstMAC}} {
		if m.s == "" {
			continue
		}
		hw, err := net.ParseMAC(m.s)
		if err != nil || len(hw) != 6 {
			fail(m.name, "%q is not an Ethernet address; write six hex bytes such as 02:00:00:00:01:02", m.s)
			continue
		}
		v := uint64(hw[0])<<40 | uint64(hw[1])<<32 | uint64(hw[2])<<24 | uint64(hw[3])<<16 | uint64(hw[4])<<8 | uint64(hw[5])
		*m.dst = &v
	}
	if c.EtherType != "" {
		v, err := strconv.ParseUint(c.EtherType, 0, 16)
		if err != nil {
			fail("ethertype", "%q is not a 16-bit number; write it like 0x0800", c.EtherType)
		} else {
			e := uint16(v)
			r.EtherType = &e
		}
	}
	for _, p := range []struct {
		name, s string
		dst     *netip.Prefix
	}{{"src_ip", c.SrcIP, &r.SrcIP}, {"dst_ip", c.DstIP, &r.DstIP}} {
		if p.s == "" {
			continue
		}
		pfx, err := parsePrefix(p.s)
		if err != nil {
			fail(p.name, "%v", err)
			continue
		}
		*p.dst = pfx
	}
	if c.Protocol != "" {
		if v, ok := protocols[strings.ToLower(c.Protocol)]; ok {
			r.Protocol = &v
		} else if n, err := strconv.ParseUint(c.Protocol, 10, 8); err == nil {
			v := uint8(n)
			r.Protocol = &v
		} else {
			fail("protocol", "%q is not a protocol; use tcp, udp, sctp, icmp or a number 0-255", c.Protocol)
		}
	}
	for _, p := range []struct {
		name, s string
		dst     **PortRange
	}{{"src_port", c.SrcPort, &r.SrcPort}, {"dst_port", c.DstPort, &r.DstPort}} {
		if p.s == "" {
			continue
		}
		pr, err := parsePorts(p.s)
		if err != nil {
			fail(p.name, "%v", err)
			continue
		}
		if r.Protocol == nil || (*r.Protocol != 6 && *r.Protocol != 17 && *r.Protocol != 132) {
			fail(p.name, "ports need protocol tcp, udp or sctp; set protocol too")
			continue
		}
		*p.dst = &pr
	}
	if len(errs) > 0 {
		return Rule{}, fmt.Errorf("class %d: %w", c.ID, errors.Join(errs...))
	}
	return r, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 address or prefix; write 10.0.0.1 or 10.0.0.0/8", s)
		}
		return netip.PrefixFrom(a, 32), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 prefix; write it like 10.0.0.0/8", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s", s, p.Masked())
	}
	return p, nil
}

func parsePorts(s string) (PortRange, error) {
	first, last, isRange := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(strings.TrimSpace(first), 10, 16)
	b := a
	var err2 error
	if isRange {
		b, err2 = strconv.ParseUint(strings.TrimSpace(last), 10, 16)
	}
	if err1 != nil || err2 != nil {
		return PortRange{}, fmt.Errorf("%q is not a port or range; write 80 or 1000-2000 (0 to 65535)", s)
	}
	if a > b {
		return PortRange{}, fmt.Errorf("%q is backwards; write the lower port first", s)
	}
	return PortRange{First: uint16(a), Last: uint16(b)}, nil
}
