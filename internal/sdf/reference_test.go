package sdf

import "testing"

// udpPacket is a downlink-ish UDP packet from 198.51.100.7:1500 to the UE 10.45.0.7:5060.
func udpPacket() Packet {
	return Packet{
		Protocol: 17, Remote: addr("198.51.100.7"), Local: addr("10.45.0.7"),
		HasPorts: true, RemotePort: 1500, LocalPort: 5060, TOS: 0xb8,
	}
}

func TestFilterMatches(t *testing.T) {
	with := func(change func(*Packet)) Packet {
		p := udpPacket()
		change(&p)
		return p
	}
	esp := Packet{Protocol: 50, Remote: addr("192.0.2.1"), Local: addr("10.45.0.7"), HasSPI: true, SPI: 0x1234}
	tests := []struct {
		name string
		f    Filter
		p    Packet
		want bool
	}{
		// Protocol.
		{"zero filter is protocol 0", Filter{}, udpPacket(), false},
		{"protocol 0 matches protocol 0", Filter{}, with(func(p *Packet) { p.Protocol = 0 }), true},
		{"any protocol", Filter{Protocol: AnyProtocol}, udpPacket(), true},
		{"any protocol, esp", Filter{Protocol: AnyProtocol}, esp, true},
		{"protocol equal", Filter{Protocol: 17}, udpPacket(), true},
		{"protocol differs", Filter{Protocol: 6}, udpPacket(), false},
		{"protocol 255", Filter{Protocol: 255}, with(func(p *Packet) { p.Protocol = 255 }), true},
		// Remote prefix.
		{"remote prefix contains", Filter{Protocol: AnyProtocol, Remote: pfx("198.51.100.0/24")}, udpPacket(), true},
		{"remote prefix excludes", Filter{Protocol: AnyProtocol, Remote: pfx("198.51.101.0/24")}, udpPacket(), false},
		{"remote /32 equal", Filter{Protocol: AnyProtocol, Remote: pfx("198.51.100.7/32")}, udpPacket(), true},
		{"remote /32 differs", Filter{Protocol: AnyProtocol, Remote: pfx("198.51.100.8/32")}, udpPacket(), false},
		{"remote /0", Filter{Protocol: AnyProtocol, Remote: pfx("0.0.0.0/0")}, udpPacket(), true},
		{"remote is not local", Filter{Protocol: AnyProtocol, Remote: pfx("10.45.0.0/16")}, udpPacket(), false},
		// Local prefix.
		{"local prefix contains", Filter{Protocol: AnyProtocol, Local: pfx("10.45.0.0/16")}, udpPacket(), true},
		{"local prefix excludes", Filter{Protocol: AnyProtocol, Local: pfx("10.46.0.0/16")}, udpPacket(), false},
		{"local /31 edge", Filter{Protocol: AnyProtocol, Local: pfx("10.45.0.6/31")}, udpPacket(), true},
		{"local is not remote", Filter{Protocol: AnyProtocol, Local: pfx("198.51.100.0/24")}, udpPacket(), false},
		// Remote ports.
		{"remote port in range", Filter{Protocol: 17, RemotePorts: []PortRange{{1000, 2000}}}, udpPacket(), true},
		{"remote port at range start", Filter{Protocol: 17, RemotePorts: []PortRange{{1500, 2000}}}, udpPacket(), true},
		{"remote port at range end", Filter{Protocol: 17, RemotePorts: []PortRange{{1000, 1500}}}, udpPacket(), true},
		{"remote port below range", Filter{Protocol: 17, RemotePorts: []PortRange{{1501, 2000}}}, udpPacket(), false},
		{"remote port above range", Filter{Protocol: 17, RemotePorts: []PortRange{{1000, 1499}}}, udpPacket(), false},
		{"remote port in second range", Filter{Protocol: 17, RemotePorts: []PortRange{{80, 80}, {1500, 1500}}}, udpPacket(), true},
		{"remote port in no range", Filter{Protocol: 17, RemotePorts: []PortRange{{80, 80}, {443, 443}}}, udpPacket(), false},
		{"remote ports, packet without ports", Filter{Protocol: AnyProtocol, RemotePorts: []PortRange{{0, 65535}}},
			with(func(p *Packet) { p.HasPorts = false }), false},
		{"no ports, packet without ports", Filter{Protocol: AnyProtocol},
			with(func(p *Packet) { p.HasPorts = false }), true},
		{"remote port 0", Filter{Protocol: 17, RemotePorts: []PortRange{{0, 0}}},
			with(func(p *Packet) { p.RemotePort = 0 }), true},
		{"remote port 65535", Filter{Protocol: 17, RemotePorts: []PortRange{{65535, 65535}}},
			with(func(p *Packet) { p.RemotePort = 65535 }), true},
		{"remote range is not local", Filter{Protocol: 17, RemotePorts: []PortRange{{5060, 5060}}}, udpPacket(), false},
		// Local ports.
		{"local port equal", Filter{Protocol: 17, LocalPorts: []PortRange{{5060, 5060}}}, udpPacket(), true},
		{"local port differs", Filter{Protocol: 17, LocalPorts: []PortRange{{5061, 5070}}}, udpPacket(), false},
		{"local ports, packet without ports", Filter{Protocol: 17, LocalPorts: []PortRange{{5060, 5060}}},
			with(func(p *Packet) { p.HasPorts = false }), false},
		{"local range is not remote", Filter{Protocol: 17, LocalPorts: []PortRange{{1500, 1500}}}, udpPacket(), false},
		{"both ports", Filter{Protocol: 17, RemotePorts: []PortRange{{1500, 1500}}, LocalPorts: []PortRange{{5060, 5060}}},
			udpPacket(), true},
		{"both ports, local differs", Filter{Protocol: 17, RemotePorts: []PortRange{{1500, 1500}}, LocalPorts: []PortRange{{5061, 5061}}},
			udpPacket(), false},
		// TOS (packet TOS 0xb8: DSCP 46, ECN 0).
		{"tos mask 0 ignores tos", Filter{Protocol: AnyProtocol}, udpPacket(), true},
		{"tos dscp equal", Filter{Protocol: AnyProtocol, TOSValue: 0xb8, TOSMask: 0xfc}, udpPacket(), true},
		{"tos dscp equal, ecn set", Filter{Protocol: AnyProtocol, TOSValue: 0xb8, TOSMask: 0xfc},
			with(func(p *Packet) { p.TOS = 0xbb }), true},
		{"tos dscp differs", Filter{Protocol: AnyProtocol, TOSValue: 0x28, TOSMask: 0xfc}, udpPacket(), false},
		{"tos full mask, ecn differs", Filter{Protocol: AnyProtocol, TOSValue: 0xb8, TOSMask: 0xff},
			with(func(p *Packet) { p.TOS = 0xb9 }), false},
		{"tos top bit", Filter{Protocol: AnyProtocol, TOSValue: 0x80, TOSMask: 0x80}, udpPacket(), true},
		{"tos top bit clear", Filter{Protocol: AnyProtocol, TOSValue: 0x00, TOSMask: 0x80}, udpPacket(), false},
		{"tos value zero with mask", Filter{Protocol: AnyProtocol, TOSValue: 0, TOSMask: 0xfc},
			with(func(p *Packet) { p.TOS = 0x03 }), true},
		// SPI.
		{"spi equal", Filter{Protocol: 50, SPI: 0x1234, HasSPI: true}, esp, true},
		{"spi differs", Filter{Protocol: 50, SPI: 0x1235, HasSPI: true}, esp, false},
		{"spi 0 is a value", Filter{Protocol: AnyProtocol, SPI: 0, HasSPI: true}, esp, false},
		{"spi 0 equal", Filter{Protocol: AnyProtocol, SPI: 0, HasSPI: true}, Packet{HasSPI: true}, true},
		{"spi, packet without spi", Filter{Protocol: AnyProtocol, SPI: 0, HasSPI: true}, udpPacket(), false},
		{"no spi, packet with spi", Filter{Protocol: AnyProtocol}, esp, true},
		{"spi field ignored without HasSPI", Filter{Protocol: AnyProtocol, SPI: 99}, esp, true},
		// Flow label.
		{"flow label never matches", Filter{Protocol: AnyProtocol, HasFlowLabel: true}, udpPacket(), false},
		{"flow label never matches esp", Filter{Protocol: AnyProtocol, FlowLabel: 7, HasFlowLabel: true}, esp, false},
		{"flow label field ignored without HasFlowLabel", Filter{Protocol: AnyProtocol, FlowLabel: 7}, udpPacket(), true},
		// Everything at once.
		{"all fields match", Filter{
			Protocol: 17, Remote: pfx("198.51.100.0/24"), Local: pfx("10.45.0.7/32"),
			RemotePorts: []PortRange{{1000, 2000}}, LocalPorts: []PortRange{{5060, 5060}},
			TOSValue: 0xb8, TOSMask: 0xfc,
		}, udpPacket(), true},
		{"all fields but tos match", Filter{
			Protocol: 17, Remote: pfx("198.51.100.0/24"), Local: pfx("10.45.0.7/32"),
			RemotePorts: []PortRange{{1000, 2000}}, LocalPorts: []PortRange{{5060, 5060}},
			TOSValue: 0xb4, TOSMask: 0xfc,
		}, udpPacket(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Matches(tt.p); got != tt.want {
				t.Errorf("%s .Matches(%+v) = %v, want %v", tt.f, tt.p, got, tt.want)
			}
		})
	}
}

// TestParsedMatches checks parsed descriptions end to end, "from"/"to" landing on
// Remote/Local.
func TestParsedMatches(t *testing.T) {
	tests := []struct {
		desc string
		p    Packet
		want bool
	}{
		{"permit out 17 from 198.51.100.0/24 1000-2000 to assigned 5060", udpPacket(), true},
		{"permit out 17 from 198.51.100.0/24 1000-2000 to assigned 5061", udpPacket(), false},
		{"permit out 17 from 10.45.0.7 to 198.51.100.7", udpPacket(), false},
		{"permit out ip from any to assigned", udpPacket(), true},
		{"permit out ip from any to assigned", Packet{}, true},
		{"permit out 6 from any to assigned", udpPacket(), false},
		{"permit out udp from 198.51.100.7 1500 to 10.45.0.7 5060", udpPacket(), true},
	}
	for _, tt := range tests {
		f, err := ParseFlowDescription(tt.desc)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Matches(tt.p); got != tt.want {
			t.Errorf("%q matches %+v: %v, want %v", tt.desc, tt.p, got, tt.want)
		}
	}
}

func TestMatch(t *testing.T) {
	sip := Filter{Protocol: 17, LocalPorts: []PortRange{{5060, 5060}}}
	tcp := Filter{Protocol: 6}
	udp := Filter{Protocol: 17}
	never := Filter{Protocol: AnyProtocol, HasFlowLabel: true}
	p := udpPacket()
	tests := []struct {
		name   string
		rules  []Rule
		want   int
		wantOK bool
	}{
		{"no rules", nil, -1, false},
		{"empty rules", []Rule{}, -1, false},
		{"single match", []Rule{{10, []Filter{udp}}}, 0, true},
		{"single miss", []Rule{{10, []Filter{tcp}}}, -1, false},
		{"no filters matches all", []Rule{{10, nil}}, 0, true},
		{"empty filter list matches all", []Rule{{10, []Filter{}}}, 0, true},
		{"all miss", []Rule{{1, []Filter{tcp}}, {2, []Filter{never}}}, -1, false},
		{"any filter matches: first", []Rule{{1, []Filter{udp, tcp}}}, 0, true},
		{"any filter matches: last", []Rule{{1, []Filter{tcp, never, sip}}}, 0, true},
		{"no filter matches", []Rule{{1, []Filter{tcp, never}}}, -1, false},
		{"lower precedence wins, later index", []Rule{{20, []Filter{udp}}, {10, []Filter{sip}}}, 1, true},
		{"lower precedence wins, earlier index", []Rule{{10, []Filter{sip}}, {20, []Filter{udp}}}, 0, true},
		{"lower precedence misses", []Rule{{20, []Filter{udp}}, {10, []Filter{tcp}}}, 0, true},
		{"tie: lower index wins", []Rule{{10, []Filter{udp}}, {10, []Filter{sip}}}, 0, true},
		{"tie: lower index misses", []Rule{{10, []Filter{tcp}}, {10, []Filter{sip}}, {10, []Filter{udp}}}, 1, true},
		{"tie after a higher precedence", []Rule{{30, nil}, {5, []Filter{udp}}, {5, nil}, {7, nil}}, 1, true},
		{"catch-all loses to lower precedence", []Rule{{255, nil}, {100, []Filter{sip}}}, 1, true},
		{"catch-all wins with lower precedence", []Rule{{100, []Filter{sip}}, {1, nil}}, 1, true},
		{"precedence 0", []Rule{{1, nil}, {0, []Filter{udp}}}, 1, true},
		{"precedence max", []Rule{{^uint32(0), nil}, {^uint32(0), nil}}, 0, true},
		{"many, lowest in the middle", []Rule{{9, nil}, {4, []Filter{tcp}}, {3, []Filter{sip}}, {3, nil}, {8, nil}}, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Match(tt.rules, p)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Match = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
