package sdf

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// MaxFlowLabel is the largest IPv6 flow label (20 bits).
const MaxFlowLabel = 0xFFFFF

// String renders f as a flow description, "permit out <proto> from <src> [<ports>] to <dst>
// [<ports>]", followed by " tos 0xVV/0xMM", " spi N" and " flowlabel N" when those are set.
// It is meant for error messages and test output. For a filter without ToS, SPI and flow
// label that passes Validate, ParseFlowDescription(f.String()) gives f back (a zero Remote
// reads "any", a zero Local "assigned", a /32 prefix a bare address). The protocol is
// written as a number, or "ip" for AnyProtocol.
func (f Filter) String() string {
	var b strings.Builder
	b.WriteString("permit out ")
	b.WriteString(protocolString(f.Protocol))
	b.WriteString(" from ")
	b.WriteString(prefixString(f.Remote, "any"))
	writePorts(&b, f.RemotePorts)
	b.WriteString(" to ")
	b.WriteString(prefixString(f.Local, "assigned"))
	writePorts(&b, f.LocalPorts)
	if f.TOSMask != 0 || f.TOSValue != 0 {
		fmt.Fprintf(&b, " tos 0x%02x/0x%02x", f.TOSValue, f.TOSMask)
	}
	if f.HasSPI {
		fmt.Fprintf(&b, " spi %d", f.SPI)
	}
	if f.HasFlowLabel {
		fmt.Fprintf(&b, " flowlabel %d", f.FlowLabel)
	}
	return b.String()
}

// protocolString is "ip" for AnyProtocol, else the number.
func protocolString(proto int) string {
	if proto == AnyProtocol {
		return "ip"
	}
	return strconv.Itoa(proto)
}

// prefixString is zero for the zero Prefix, the bare address for a full-length prefix, else
// the prefix.
func prefixString(p netip.Prefix, zero string) string {
	switch {
	case p == netip.Prefix{}:
		return zero
	case p.IsValid() && p.IsSingleIP():
		return p.Addr().String()
	}
	return p.String()
}

// writePorts writes " a,b-c" for a non-empty list.
func writePorts(b *strings.Builder, ports []PortRange) {
	for i, r := range ports {
		if i == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(r.First)))
		if r.Last != r.First {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(r.Last)))
		}
	}
}

// Validate checks that f is a filter the datapath can match: Protocol is AnyProtocol or
// 0-255; Remote and Local are zero or canonical IPv4 prefixes (no host bits set); ports
// appear only with TCP, UDP or SCTP, each range with First <= Last; TOSMask is zero or a
// run of leading ones (0x80, 0xc0, ..., 0xff) and TOSValue has no bits outside it;
// FlowLabel fits in 20 bits. Every filter ParseFlowDescription returns passes.
func (f Filter) Validate() error {
	if f.Protocol != AnyProtocol && (f.Protocol < 0 || f.Protocol > 255) {
		return fmt.Errorf("sdf filter %q: protocol %d out of range; want 0-255, or %d (AnyProtocol)",
			f, f.Protocol, AnyProtocol)
	}
	for _, side := range []struct {
		name string
		p    netip.Prefix
	}{{"remote", f.Remote}, {"local", f.Local}} {
		if err := validatePrefix(side.p); err != nil {
			return fmt.Errorf("sdf filter %q: %s address: %w", f, side.name, err)
		}
	}
	for _, side := range []struct {
		name  string
		ports []PortRange
	}{{"remote", f.RemotePorts}, {"local", f.LocalPorts}} {
		if len(side.ports) == 0 {
			continue
		}
		if !takesPorts(f.Protocol) {
			return fmt.Errorf("sdf filter %q: %s ports need protocol tcp, udp or sctp, not %s",
				f, side.name, protocolString(f.Protocol))
		}
		for _, r := range side.ports {
			if r.First > r.Last {
				return fmt.Errorf("sdf filter %q: %s port range %d-%d is backwards", f, side.name, r.First, r.Last)
			}
		}
	}
	if n := bits.LeadingZeros8(^f.TOSMask); f.TOSMask != ^uint8(0)<<(8-n) {
		return fmt.Errorf("sdf filter %q: tos mask 0x%02x is not a run of leading ones (like 0xfc); "+
			"the datapath matches the tos as a prefix", f, f.TOSMask)
	}
	if f.TOSValue&^f.TOSMask != 0 {
		return fmt.Errorf("sdf filter %q: tos value 0x%02x has bits outside the mask 0x%02x; "+
			"it could never match; did you mean 0x%02x", f, f.TOSValue, f.TOSMask, f.TOSValue&f.TOSMask)
	}
	if f.FlowLabel > MaxFlowLabel {
		return fmt.Errorf("sdf filter %q: flow label %d does not fit in 20 bits (max %d)",
			f, f.FlowLabel, MaxFlowLabel)
	}
	return nil
}

// validatePrefix accepts the zero Prefix (any address) and canonical IPv4 prefixes.
func validatePrefix(p netip.Prefix) error {
	switch {
	case p == netip.Prefix{}:
		return nil
	case !p.IsValid():
		return fmt.Errorf("invalid prefix: address %s with an out-of-range length", p.Addr())
	case !p.Addr().Is4():
		return fmt.Errorf("%s: IPv6 is not supported yet (the datapath is IPv4 only)", p)
	case p.Masked() != p:
		return fmt.Errorf("%s has host bits set; did you mean %s", p, p.Masked())
	}
	return nil
}
