package sdf

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		f    Filter
		want string
	}{
		{Filter{Protocol: AnyProtocol}, "permit out ip from any to assigned"},
		{Filter{}, "permit out 0 from any to assigned"},
		{Filter{
			Protocol: 17, Remote: pfx("198.51.100.0/24"),
			RemotePorts: []PortRange{{1000, 2000}}, LocalPorts: []PortRange{{5060, 5060}},
		}, "permit out 17 from 198.51.100.0/24 1000-2000 to assigned 5060"},
		{Filter{
			Protocol: 6, Remote: pfx("10.1.0.0/16"), Local: pfx("10.45.0.0/16"),
			RemotePorts: []PortRange{{80, 80}, {443, 443}, {8000, 8080}},
			LocalPorts:  []PortRange{{1024, 65535}},
		}, "permit out 6 from 10.1.0.0/16 80,443,8000-8080 to 10.45.0.0/16 1024-65535"},
		{Filter{Protocol: 1, Remote: pfx("192.0.2.1/32"), Local: pfx("0.0.0.0/0")},
			"permit out 1 from 192.0.2.1 to 0.0.0.0/0"},
		{Filter{Protocol: AnyProtocol, TOSValue: 0xb8, TOSMask: 0xfc},
			"permit out ip from any to assigned tos 0xb8/0xfc"},
		{Filter{Protocol: 50, SPI: 4096, HasSPI: true}, "permit out 50 from any to assigned spi 4096"},
		{Filter{Protocol: 50, HasSPI: true}, "permit out 50 from any to assigned spi 0"},
		{Filter{Protocol: AnyProtocol, FlowLabel: 0xabcde, HasFlowLabel: true},
			"permit out ip from any to assigned flowlabel 703710"},
		{Filter{Protocol: 51, TOSValue: 0x20, TOSMask: 0xe0, SPI: 7, HasSPI: true, FlowLabel: 1, HasFlowLabel: true},
			"permit out 51 from any to assigned tos 0x20/0xe0 spi 7 flowlabel 1"},
		// Invalid filters still render, for error messages.
		{Filter{Protocol: 300, TOSValue: 3}, "permit out 300 from any to assigned tos 0x03/0x00"},
		{Filter{Protocol: 1, Remote: pfx("2001:db8::/32"), Local: pfx("2001:db8::1/128")},
			"permit out 1 from 2001:db8::/32 to 2001:db8::1"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%#v.String()\n got %q\nwant %q", tt.f, got, tt.want)
		}
	}
}

// TestStringRoundTrip checks that valid filters without ToS, SPI and flow label survive
// String and ParseFlowDescription, for every protocol and a mix of addresses and ports.
func TestStringRoundTrip(t *testing.T) {
	prefixes := []netip.Prefix{{}, pfx("0.0.0.0/0"), pfx("10.0.0.0/8"), pfx("192.0.2.7/32"), pfx("255.255.255.255/32")}
	portLists := [][]PortRange{nil, {{0, 0}}, {{65535, 65535}}, {{1, 2}, {5, 5}, {0, 65535}}}
	for proto := AnyProtocol; proto <= 255; proto++ {
		for i, remote := range prefixes {
			local := prefixes[len(prefixes)-1-i]
			for j, rp := range portLists {
				f := Filter{Protocol: proto, Remote: remote, Local: local}
				if takesPorts(proto) {
					f.RemotePorts, f.LocalPorts = rp, portLists[len(portLists)-1-j]
				}
				if err := f.Validate(); err != nil {
					t.Fatalf("%#v: Validate: %v", f, err)
				}
				got, err := ParseFlowDescription(f.String())
				if err != nil {
					t.Fatalf("%q: %v", f.String(), err)
				}
				if !reflect.DeepEqual(got, f) {
					t.Fatalf("%q parses to %#v, not %#v", f.String(), got, f)
				}
			}
		}
	}
}

func TestValidate(t *testing.T) {
	valid := []Filter{
		{},
		{Protocol: AnyProtocol},
		{Protocol: 255},
		{Protocol: 6, Remote: pfx("10.0.0.0/8"), Local: pfx("10.45.0.1/32"),
			RemotePorts: []PortRange{{0, 65535}}, LocalPorts: []PortRange{{80, 80}}},
		{Protocol: 17, LocalPorts: []PortRange{{5060, 5061}}},
		{Protocol: 132, RemotePorts: []PortRange{{36412, 36412}}},
		{Protocol: AnyProtocol, Remote: pfx("0.0.0.0/0")},
		{Protocol: AnyProtocol, TOSMask: 0x80, TOSValue: 0x80},
		{Protocol: AnyProtocol, TOSMask: 0xc0, TOSValue: 0x40},
		{Protocol: AnyProtocol, TOSMask: 0xfc, TOSValue: 0xb8},
		{Protocol: AnyProtocol, TOSMask: 0xfe, TOSValue: 0x02},
		{Protocol: AnyProtocol, TOSMask: 0xff, TOSValue: 0xff},
		{Protocol: AnyProtocol, TOSMask: 0xff, TOSValue: 0},
		{Protocol: 50, SPI: 0xffffffff, HasSPI: true},
		{Protocol: AnyProtocol, FlowLabel: 0xfffff, HasFlowLabel: true},
	}
	for _, f := range valid {
		if err := f.Validate(); err != nil {
			t.Errorf("%#v: %v", f, err)
		}
	}
	// The leading-ones masks are exactly the 9 in valid above, plus 0xe0, 0xf0, 0xf8.
	for m := 0; m < 256; m++ {
		mask := uint8(m)
		err := Filter{Protocol: AnyProtocol, TOSMask: mask}.Validate()
		leading := false
		for _, ok := range []uint8{0, 0x80, 0xc0, 0xe0, 0xf0, 0xf8, 0xfc, 0xfe, 0xff} {
			leading = leading || mask == ok
		}
		if leading != (err == nil) {
			t.Errorf("tos mask 0x%02x: Validate gives %v", mask, err)
		}
	}

	invalid := []struct {
		f    Filter
		want []string
	}{
		{Filter{Protocol: 256}, []string{"protocol 256 out of range"}},
		{Filter{Protocol: -2}, []string{"protocol -2 out of range"}},
		{Filter{Protocol: 1, Remote: pfx("10.0.0.1/8")}, []string{"remote address", "host bits set", "10.0.0.0/8"}},
		{Filter{Protocol: 1, Local: pfx("10.45.0.1/16")}, []string{"local address", "host bits set", "10.45.0.0/16"}},
		{Filter{Protocol: 1, Remote: pfx("2001:db8::/32")}, []string{"remote address", "IPv6 is not supported yet"}},
		{Filter{Protocol: 1, Local: pfx("::ffff:10.0.0.1/128")}, []string{"local address", "IPv6 is not supported yet"}},
		{Filter{Protocol: 1, Local: netip.PrefixFrom(addr("10.0.0.0"), 33)}, []string{"local address", "invalid prefix"}},
		{Filter{Protocol: AnyProtocol, RemotePorts: []PortRange{{80, 80}}},
			[]string{"remote ports need protocol tcp, udp or sctp, not ip"}},
		{Filter{Protocol: 1, LocalPorts: []PortRange{{80, 80}}},
			[]string{"local ports need protocol tcp, udp or sctp, not 1"}},
		{Filter{Protocol: 6, LocalPorts: []PortRange{{80, 80}, {90, 85}}}, []string{"local port range 90-85 is backwards"}},
		{Filter{Protocol: AnyProtocol, TOSMask: 0x0f, TOSValue: 0x01}, []string{"tos mask 0x0f is not a run of leading ones"}},
		{Filter{Protocol: AnyProtocol, TOSMask: 0xfd}, []string{"tos mask 0xfd"}},
		{Filter{Protocol: AnyProtocol, TOSMask: 0x01}, []string{"tos mask 0x01"}},
		{Filter{Protocol: AnyProtocol, TOSMask: 0xfc, TOSValue: 0xb9}, []string{"tos value 0xb9 has bits outside the mask 0xfc", "0xb8"}},
		{Filter{Protocol: AnyProtocol, TOSValue: 0x10}, []string{"tos value 0x10 has bits outside the mask 0x00"}},
		{Filter{Protocol: AnyProtocol, FlowLabel: 0x100000, HasFlowLabel: true}, []string{"flow label 1048576 does not fit in 20 bits"}},
	}
	for _, tt := range invalid {
		err := tt.f.Validate()
		if err == nil {
			t.Errorf("%#v: no error", tt.f)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%#v: error %q does not contain %q", tt.f, err, w)
			}
		}
		if !strings.Contains(err.Error(), "sdf filter \"permit out ") {
			t.Errorf("%#v: error %q does not show the filter", tt.f, err)
		}
	}
}
