package sdf

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func TestParseFlowDescription(t *testing.T) {
	tests := []struct {
		in   string
		want Filter
	}{
		{"permit out 17 from 198.51.100.0/24 1000-2000 to assigned 5060", Filter{
			Protocol: 17, Remote: pfx("198.51.100.0/24"),
			RemotePorts: []PortRange{{1000, 2000}}, LocalPorts: []PortRange{{5060, 5060}},
		}},
		{"permit out ip from any to assigned", Filter{Protocol: AnyProtocol}},
		{"permit out 6 from 10.1.0.0/16 80,443,8000-8080 to 10.45.0.0/16 1024-65535", Filter{
			Protocol: 6, Remote: pfx("10.1.0.0/16"), Local: pfx("10.45.0.0/16"),
			RemotePorts: []PortRange{{80, 80}, {443, 443}, {8000, 8080}},
			LocalPorts:  []PortRange{{1024, 65535}},
		}},
		// Protocols: numbers, "ip", names in any case.
		{"permit out 0 from any to assigned", Filter{Protocol: 0}},
		{"permit out 255 from any to assigned", Filter{Protocol: 255}},
		{"permit out 017 from any to assigned", Filter{Protocol: 17}},
		{"permit out IP from any to assigned", Filter{Protocol: AnyProtocol}},
		{"permit out tcp from any to assigned", Filter{Protocol: 6}},
		{"permit out UDP from any to assigned", Filter{Protocol: 17}},
		{"permit out Icmp from any to assigned", Filter{Protocol: 1}},
		{"permit out esp from any to assigned", Filter{Protocol: 50}},
		{"permit out ah from any to assigned", Filter{Protocol: 51}},
		{"permit out sctp from any to assigned", Filter{Protocol: 132}},
		{"permit out 58 from any to assigned", Filter{Protocol: 58}},
		// Addresses: bare addresses are /32; "any" on both sides; prefixes of any length.
		{"permit out 1 from 192.0.2.1 to 10.45.0.7", Filter{
			Protocol: 1, Remote: pfx("192.0.2.1/32"), Local: pfx("10.45.0.7/32"),
		}},
		{"permit out 1 from 192.0.2.1/32 to any", Filter{Protocol: 1, Remote: pfx("192.0.2.1/32")}},
		{"permit out 1 from 0.0.0.0/0 to 10.0.0.0/8", Filter{
			Protocol: 1, Remote: pfx("0.0.0.0/0"), Local: pfx("10.0.0.0/8"),
		}},
		{"permit out 1 from 128.0.0.0/1 to 255.255.255.254/31", Filter{
			Protocol: 1, Remote: pfx("128.0.0.0/1"), Local: pfx("255.255.255.254/31"),
		}},
		// Ports: single, ranges, port 0, 65535, only on one side, with sctp.
		{"permit out 17 from any 0 to assigned", Filter{Protocol: 17, RemotePorts: []PortRange{{0, 0}}}},
		{"permit out 17 from any to assigned 65535", Filter{Protocol: 17, LocalPorts: []PortRange{{65535, 65535}}}},
		{"permit out 17 from any to assigned 0-65535", Filter{Protocol: 17, LocalPorts: []PortRange{{0, 65535}}}},
		{"permit out 17 from any to assigned 7-7", Filter{Protocol: 17, LocalPorts: []PortRange{{7, 7}}}},
		{"permit out 17 from any to assigned 2000-3000,1000", Filter{
			Protocol: 17, LocalPorts: []PortRange{{2000, 3000}, {1000, 1000}},
		}},
		{"permit out sctp from 10.0.0.0/8 36412 to assigned 0080", Filter{
			Protocol: 132, Remote: pfx("10.0.0.0/8"),
			RemotePorts: []PortRange{{36412, 36412}}, LocalPorts: []PortRange{{80, 80}},
		}},
		// White space and keyword case.
		{"  permit\tout  6   from any\t80 to  assigned \n", Filter{Protocol: 6, RemotePorts: []PortRange{{80, 80}}}},
		{"PERMIT OUT TCP FROM ANY TO ASSIGNED", Filter{Protocol: 6}},
		{"Permit Out 6 From 10.0.0.1 To Any", Filter{Protocol: 6, Remote: pfx("10.0.0.1/32")}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFlowDescription(tt.in)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			again, err := ParseFlowDescription(got.String())
			if err != nil {
				t.Fatalf("String() %q does not parse: %v", got.String(), err)
			}
			if !reflect.DeepEqual(again, got) {
				t.Errorf("String() %q parses to %#v, not %#v", got.String(), again, got)
			}
		})
	}
}

func TestParseFlowDescriptionErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the error
	}{
		// Empty and missing parts.
		{"", []string{"empty", "permit out <proto> from <src> [<ports>] to <dst> [<ports>]"}},
		{"   \t ", []string{"empty"}},
		{"permit", []string{`ends after word 1 "permit"`, `want the direction "out"`}},
		{"permit out", []string{`ends after word 2 "out"`, "want a protocol"}},
		{"permit out 17", []string{`ends after word 3 "17"`, `want "from" and the source`}},
		{"permit out 17 from", []string{`ends after word 4 "from"`, "want the source"}},
		{"permit out 17 from any", []string{`ends after word 5 "any"`, `want "to" and the destination`}},
		{"permit out 17 from any 80", []string{`ends after word 6 "80"`, `want "to"`}},
		{"permit out 17 from any to", []string{`ends after word 6 "to"`, "want the destination", `"assigned"`}},
		// Action and direction.
		{"deny out ip from any to assigned", []string{`word 1 "deny"`, `"deny" is not used by 3GPP sdf filters`}},
		{"DENY out ip from any to assigned", []string{`word 1 "DENY"`, `"deny" is not used`}},
		{"allow out ip from any to assigned", []string{`word 1 "allow"`, `want the action "permit"`}},
		{"permit in ip from any to assigned", []string{`word 2 "in"`, `direction must be "out"`, `3GPP does not use "in"`}},
		{"permit up ip from any to assigned", []string{`word 2 "up"`, `want the direction "out"`}},
		// Protocol.
		{"permit out 256 from any to assigned", []string{`word 3 "256"`, "out of range", "0-255"}},
		{"permit out 99999999999999999999 from any to assigned", []string{`word 3 "99999999999999999999"`, "out of range"}},
		{"permit out -1 from any to assigned", []string{`word 3 "-1"`, "want a protocol"}},
		{"permit out +6 from any to assigned", []string{`word 3 "+6"`, "want a protocol"}},
		{"permit out icmpv6 from any to assigned", []string{`word 3 "icmpv6"`, "want a protocol", "tcp, udp"}},
		{"permit out from any to assigned", []string{`word 3 "from"`, "want a protocol"}},
		// Keywords.
		{"permit out 17 form any to assigned", []string{`word 4 "form"`, `want "from" and the source`}},
		{"permit out 17 from any too assigned", []string{`word 6 "too"`, `want "to" or source ports`}},
		{"permit out 17 from any 80 2000 to assigned", []string{`word 7 "2000"`, `want "to" and the destination`}},
		// Addresses.
		{"permit out 58 from ff02::2/128 to assigned", []string{`word 5 "ff02::2/128"`, "IPv6 is not supported yet"}},
		{"permit out 17 from 2001:db8::1 to assigned", []string{`word 5 "2001:db8::1"`, "IPv6 is not supported yet"}},
		{"permit out 17 from ::ffff:10.0.0.1 to assigned", []string{"IPv6 is not supported yet"}},
		{"permit out 17 from fe80::1%eth0 to assigned", []string{"IPv6 is not supported yet"}},
		{"permit out 17 from any to 2001:db8::/32", []string{`word 7 "2001:db8::/32"`, "IPv6 is not supported yet"}},
		{"permit out 17 from any to 2001:db8::/200", []string{`word 7 "2001:db8::/200"`, "IPv6 is not supported yet"}},
		{"permit out 17 from 10.0.0.1/8 to assigned", []string{`word 5 "10.0.0.1/8"`, "host bits set", "10.0.0.0/8"}},
		{"permit out 17 from any to 10.45.0.1/16", []string{`word 7 "10.45.0.1/16"`, "host bits set", "10.45.0.0/16"}},
		{"permit out 17 from 10.0.0.0/33 to assigned", []string{`word 5 "10.0.0.0/33"`, "not a valid prefix", "want the source"}},
		{"permit out 17 from 10.0.0.0/ to assigned", []string{`word 5 "10.0.0.0/"`, "not a valid prefix"}},
		{"permit out 17 from 10.0.0 to assigned", []string{`word 5 "10.0.0"`, "want the source", "an IPv4 address"}},
		{"permit out 17 from 010.0.0.1 to assigned", []string{`word 5 "010.0.0.1"`, "want the source"}},
		{"permit out 17 from example.com to assigned", []string{`word 5 "example.com"`, "want the source"}},
		{"permit out 17 from assigned to any", []string{`word 5 "assigned"`, "only valid as the destination"}},
		{"permit out 17 from !10.0.0.0/8 to assigned", []string{`word 5 "!10.0.0.0/8"`, "negated addresses"}},
		{"permit out 17 from any to !assigned", []string{`word 7 "!assigned"`, "negated addresses"}},
		{"permit out 17 from to assigned", []string{`word 5 "to"`, "the source is missing"}},
		{"permit out 17 from any to 80", []string{`word 7 "80"`, "want the destination"}},
		// Ports.
		{"permit out ip from any 80 to assigned", []string{`word 6 "80"`, "source ports need protocol tcp, udp or sctp", "not ip"}},
		{"permit out 1 from any to assigned 80", []string{`word 8 "80"`, "destination ports need protocol tcp, udp or sctp", "not 1"}},
		{"permit out esp from any to assigned 80", []string{"destination ports need protocol tcp, udp or sctp", "not 50"}},
		{"permit out 17 from any 70000 to assigned", []string{`word 6 "70000"`, "70000 out of range 0-65535"}},
		{"permit out 17 from any to assigned 2000-1000", []string{`word 8 "2000-1000"`, "backwards", "2000 > 1000"}},
		{"permit out 17 from any to assigned 80,", []string{`word 8 "80,"`, `item 2 ""`, "empty"}},
		{"permit out 17 from any to assigned 80,,90", []string{`item 2 ""`, "empty"}},
		{"permit out 17 from any to assigned 1-", []string{`item 1 "1-"`, "missing port number"}},
		{"permit out 17 from any to assigned 1-2-3", []string{`item 1 "1-2-3"`, `"2-3" is not a port number`}},
		{"permit out 17 from any to assigned 8o", []string{`word 8 "8o"`, `"8o" is not a port number`}},
		{"permit out 17 from any to assigned 80,x", []string{`item 2 "x"`, `"x" is not a port number`}},
		{"permit out 17 from any to assigned 1-99999", []string{`"1-99999"`, "99999 out of range"}},
		// Options and trailing garbage.
		{"permit out 6 from any to assigned 80 established", []string{`word 9 "established"`, "option established is not supported"}},
		{"permit out 6 from any to assigned setup", []string{`word 8 "setup"`, "option setup is not supported"}},
		{"permit out ip from any to assigned frag", []string{"option frag is not supported"}},
		{"permit out ip from any to assigned ipoptions ssrr", []string{"option ipoptions is not supported"}},
		{"permit out 6 from any to assigned tcpoptions mss", []string{"option tcpoptions is not supported"}},
		{"permit out 6 from any to assigned TCPFLAGS syn", []string{`"TCPFLAGS"`, "option tcpflags is not supported"}},
		{"permit out 1 from any to assigned icmptypes 8", []string{"option icmptypes is not supported"}},
		{"permit out 6 from any to assigned tos 0x10/0xfc", []string{`word 8 "tos"`, "not part of a flow description"}},
		{"permit out 50 from any to assigned spi 5", []string{`word 8 "spi"`, "not part of a flow description"}},
		{"permit out 6 from any to assigned 80 90", []string{`word 9 "90"`, "unexpected word after the destination"}},
		{"permit out 6 from any to assigned garbage", []string{`word 8 "garbage"`, "unexpected word after the destination"}},
		{"permit out 6 from any to assigned to any", []string{`word 8 "to"`, "unexpected word"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			f, err := ParseFlowDescription(tt.in)
			if err == nil {
				t.Fatalf("no error; got %#v", f)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if msg != "" && (msg[0] < 'a' || msg[0] > 'z') {
				t.Errorf("error %q does not start lowercase", msg)
			}
			if strings.HasSuffix(msg, ".") {
				t.Errorf("error %q ends with a period", msg)
			}
			if !reflect.DeepEqual(f, Filter{}) {
				t.Errorf("filter not zero on error: %#v", f)
			}
		})
	}
}

func FuzzParseFlowDescription(f *testing.F) {
	for _, s := range []string{
		"permit out 17 from 198.51.100.0/24 1000-2000 to assigned 5060",
		"permit out ip from any to assigned",
		"permit out 58 from ff02::2/128 to assigned",
		"permit out 6 from 10.1.0.0/16 80,443,8000-8080 to 10.45.0.0/16 1024-65535",
		"permit out sctp from 10.0.0.1 0 to 10.45.0.7/32 65535",
		"permit out 6 from any to assigned 80 established",
		"permit out 17 from 10.0.0.1/8 to assigned",
		"deny in 1 from any to any",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := ParseFlowDescription(s)
		if err != nil {
			if !reflect.DeepEqual(flt, Filter{}) {
				t.Fatalf("%q: filter not zero on error: %#v", s, flt)
			}
			return
		}
		if err := flt.Validate(); err != nil {
			t.Fatalf("%q parses to a filter that fails Validate: %v", s, err)
		}
		str := flt.String()
		again, err := ParseFlowDescription(str)
		if err != nil {
			t.Fatalf("%q: String() %q does not parse: %v", s, str, err)
		}
		if !reflect.DeepEqual(again, flt) {
			t.Fatalf("%q: String() %q parses to %#v, not %#v", s, str, again, flt)
		}
		if again.String() != str {
			t.Fatalf("%q: String() not stable: %q then %q", s, str, again.String())
		}
	})
}
