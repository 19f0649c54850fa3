package sdf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol numbers that take ports.
const (
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

// protocolNames are the protocol names ParseFlowDescription accepts besides numbers and "ip".
var protocolNames = map[string]int{
	"icmp": 1,
	"tcp":  protoTCP,
	"udp":  protoUDP,
	"esp":  50,
	"ah":   51,
	"sctp": protoSCTP,
}

// rfc6733Options are the IPFilterRule options of RFC 6733 4.3 that may follow the
// destination; 3GPP SDF filters use none of them.
var rfc6733Options = map[string]bool{
	"frag":        true,
	"ipoptions":   true,
	"tcpoptions":  true,
	"established": true,
	"setup":       true,
	"tcpflags":    true,
	"icmptypes":   true,
}

// flowDescriptionSyntax is what ParseFlowDescription expects, for error messages.
const flowDescriptionSyntax = "permit out <proto> from <src> [<ports>] to <dst> [<ports>]"

// takesPorts reports whether packets of protocol proto carry ports a filter can match.
func takesPorts(proto int) bool {
	return proto == protoTCP || proto == protoUDP || proto == protoSCTP
}

// ParseFlowDescription parses a 3GPP flow description (TS 29.214 5.4.2, TS 29.212 5.4.2),
// an IPFilterRule of RFC 6733 4.3 as 3GPP restricts it:
//
//	permit out <proto> from <src> [<ports>] to <dst> [<ports>]
//
// proto is a number 0-255, "ip" for any protocol, or one of the names tcp, udp, icmp, esp,
// ah and sctp. src and dst are "any", an IPv4 address or an IPv4 prefix; dst may also be
// "assigned", the UE's address. ports is a comma-separated list of ports and ranges
// ("1000-2000,3000"), allowed only with tcp, udp or sctp. Keywords are case-insensitive
// and words may be separated by any amount of white space.
//
// The "from" side becomes Filter.Remote and the "to" side Filter.Local: "out" descriptions
// are written from the network toward the UE. "any" and "assigned" leave the prefix zero
// (match any address). The result passes Validate. Not supported, each with an error
// saying so: "deny", "in", IPv6, "!" (negated addresses) and the RFC 6733 options (frag,
// ipoptions, tcpoptions, established, setup, tcpflags, icmptypes).
func ParseFlowDescription(s string) (Filter, error) {
	p := &descParser{words: strings.Fields(s)}
	if len(p.words) == 0 {
		return Filter{}, fmt.Errorf("flow description: empty; want %q", flowDescriptionSyntax)
	}
	var f Filter
	if err := p.action(); err != nil {
		return Filter{}, err
	}
	if err := p.direction(); err != nil {
		return Filter{}, err
	}
	var err error
	if f.Protocol, err = p.protocol(); err != nil {
		return Filter{}, err
	}
	if err := p.keyword("from", `"from" and the source`); err != nil {
		return Filter{}, err
	}
	if f.Remote, err = p.address("source", false); err != nil {
		return Filter{}, err
	}
	if w, ok := p.peek(); ok && !strings.EqualFold(w, "to") {
		if !startsWithDigit(w) {
			return Filter{}, p.errorf(`want "to" or source ports (e.g. 80,1000-2000)`)
		}
		if f.RemotePorts, err = p.ports("source", f.Protocol); err != nil {
			return Filter{}, err
		}
	}
	if err := p.keyword("to", `"to" and the destination`); err != nil {
		return Filter{}, err
	}
	if f.Local, err = p.address("destination", true); err != nil {
		return Filter{}, err
	}
	if w, ok := p.peek(); ok && startsWithDigit(w) {
		if f.LocalPorts, err = p.ports("destination", f.Protocol); err != nil {
			return Filter{}, err
		}
	}
	if err := p.end(); err != nil {
		return Filter{}, err
	}
	return f, nil
}

// descParser walks the words of a flow description; next is the index of the next word.
type descParser struct {
	words []string
	next  int
}

// peek returns the next word, if there is one.
func (p *descParser) peek() (string, bool) {
	if p.next >= len(p.words) {
		return "", false
	}
	return p.words[p.next], true
}

// errorf describes a problem with the next word (or with the description ending early),
// naming the word, its position and the whole description's expected form.
func (p *descParser) errorf(format string, args ...any) error {
	msg := fmt.Errorf(format, args...)
	if p.next >= len(p.words) {
		return fmt.Errorf("flow description: ends after word %d %q; %w (the form is %q)",
			len(p.words), p.words[len(p.words)-1], msg, flowDescriptionSyntax)
	}
	return fmt.Errorf("flow description: word %d %q: %w", p.next+1, p.words[p.next], msg)
}

func (p *descParser) action() error {
	w, _ := p.peek()
	switch {
	case strings.EqualFold(w, "permit"):
	case strings.EqualFold(w, "deny"):
		return p.errorf(`action must be "permit"; "deny" is not used by 3GPP sdf filters`)
	default:
		return p.errorf(`want the action "permit" (the form is %q)`, flowDescriptionSyntax)
	}
	p.next++
	return nil
}

func (p *descParser) direction() error {
	w, ok := p.peek()
	switch {
	case !ok:
		return p.errorf(`want the direction "out"`)
	case strings.EqualFold(w, "out"):
	case strings.EqualFold(w, "in"):
		return p.errorf(`direction must be "out"; 3GPP does not use "in" ` +
			`(flow descriptions are written from the network toward the UE, for both directions)`)
	default:
		return p.errorf(`want the direction "out"`)
	}
	p.next++
	return nil
}

func (p *descParser) protocol() (int, error) {
	const want = `want a protocol: a number 0-255, "ip" (any) or one of tcp, udp, icmp, esp, ah, sctp`
	w, ok := p.peek()
	if !ok {
		return 0, p.errorf("%s", want)
	}
	if strings.EqualFold(w, "ip") {
		p.next++
		return AnyProtocol, nil
	}
	if n, ok := protocolNames[strings.ToLower(w)]; ok {
		p.next++
		return n, nil
	}
	if isDigits(w) {
		n, err := strconv.ParseUint(w, 10, 8)
		if err != nil {
			return 0, p.errorf("protocol number out of range; want 0-255, or \"ip\" for any protocol")
		}
		p.next++
		return int(n), nil
	}
	return 0, p.errorf("%s", want)
}

// keyword consumes the keyword kw; want says what should follow, for errors.
func (p *descParser) keyword(kw, want string) error {
	w, ok := p.peek()
	if !ok || !strings.EqualFold(w, kw) {
		return p.errorf("want %s", want)
	}
	p.next++
	return nil
}

// address parses a source or destination: "any", "assigned" (destination only), an IPv4
// address or an IPv4 prefix. "any" and "assigned" give the zero Prefix.
func (p *descParser) address(side string, dst bool) (netip.Prefix, error) {
	want := `"any", an IPv4 address or an IPv4 prefix`
	if dst {
		want = `"assigned", ` + want
	}
	w, ok := p.peek()
	if !ok {
		return netip.Prefix{}, p.errorf("want the %s: %s", side, want)
	}
	switch {
	case strings.EqualFold(w, "any"):
		p.next++
		return netip.Prefix{}, nil
	case strings.EqualFold(w, "assigned"):
		if !dst {
			return netip.Prefix{}, p.errorf(`"assigned" (the UE's address) is only valid as the destination, `+
				`after "to"; want the source: %s`, want)
		}
		p.next++
		return netip.Prefix{}, nil
	case strings.HasPrefix(w, "!"):
		return netip.Prefix{}, p.errorf(`negated addresses ("!") are not supported; want the %s: %s`, side, want)
	case strings.EqualFold(w, "to") && !dst:
		return netip.Prefix{}, p.errorf("the source is missing; want %s", want)
	}
	var pfx netip.Prefix
	if strings.Contains(w, "/") {
		var err error
		if pfx, err = netip.ParsePrefix(w); err != nil {
			if a, aerr := netip.ParseAddr(w[:strings.Index(w, "/")]); aerr == nil && !a.Is4() {
				return netip.Prefix{}, p.errorf("%w", ErrIPv6)
			}
			return netip.Prefix{}, p.errorf("not a valid prefix; want the %s: %s", side, want)
		}
	} else {
		a, err := netip.ParseAddr(w)
		if err != nil {
			return netip.Prefix{}, p.errorf("want the %s: %s", side, want)
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if !pfx.Addr().Is4() {
		return netip.Prefix{}, p.errorf("%w", ErrIPv6)
	}
	if m := pfx.Masked(); m != pfx {
		return netip.Prefix{}, p.errorf("host bits set in the prefix; did you mean %s", m)
	}
	p.next++
	return pfx, nil
}

// ports parses the port list of side ("source" or "destination"), given the protocol.
func (p *descParser) ports(side string, proto int) ([]PortRange, error) {
	w, _ := p.peek()
	if !takesPorts(proto) {
		return nil, p.errorf("%s ports need protocol tcp, udp or sctp, not %s", side, protocolString(proto))
	}
	var list []PortRange
	for i, item := range strings.Split(w, ",") {
		r, err := parsePortRange(item)
		if err != nil {
			return nil, p.errorf("%s port list item %d %q: %v; want ports and ranges like 80,1000-2000",
				side, i+1, item, err)
		}
		list = append(list, r)
	}
	p.next++
	return list, nil
}

// parsePortRange parses "a" or "a-b".
func parsePortRange(s string) (PortRange, error) {
	first, last, isRange := strings.Cut(s, "-")
	if s == "" {
		return PortRange{}, fmt.Errorf("empty")
	}
	a, err := parsePort(first)
	if err != nil {
		return PortRange{}, err
	}
	if !isRange {
		return PortRange{a, a}, nil
	}
	b, err := parsePort(last)
	if err != nil {
		return PortRange{}, err
	}
	if a > b {
		return PortRange{}, fmt.Errorf("range is backwards, %d > %d", a, b)
	}
	return PortRange{a, b}, nil
}

func parsePort(s string) (uint16, error) {
	if !isDigits(s) {
		if s == "" {
			return 0, fmt.Errorf("missing port number")
		}
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %s out of range 0-65535", s)
	}
	return uint16(n), nil
}

// end checks nothing follows the destination.
func (p *descParser) end() error {
	w, ok := p.peek()
	if !ok {
		return nil
	}
	lw := strings.ToLower(w)
	switch {
	case rfc6733Options[lw]:
		return p.errorf("option %s is not supported", lw)
	case lw == "tos" || lw == "spi" || lw == "flowlabel":
		return p.errorf("%s is not part of a flow description (the tos, spi and flow label "+
			"are separate sdf filter fields); the description ends with the destination and its ports", lw)
	}
	return p.errorf("unexpected word after the destination; the description ends with the destination "+
		"and its optional ports (the form is %q)", flowDescriptionSyntax)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func startsWithDigit(s string) bool {
	return s != "" && s[0] >= '0' && s[0] <= '9'
}
