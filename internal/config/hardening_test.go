package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// TestAllowAnySource: anti-spoofing is on unless a static session or, for PFCP sessions, the
// top level turns it off.
func TestAllowAnySource(t *testing.T) {
	const sessions = "sessions:\n" +
		"  - {id: 1, ue_ipv4: 10.0.0.1, gnb_ipv4: 198.51.100.1, uplink_teid: 1, downlink_teid: 1}\n" +
		"  - {id: 2, ue_ipv4: 10.0.0.2, gnb_ipv4: 198.51.100.1, uplink_teid: 2, downlink_teid: 2, allow_any_source: true}\n"
	cfg, err := Parse([]byte(minimal + sessions))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PFCPAllowAnySource || cfg.Sessions[0].AllowAnySource || !cfg.Sessions[1].AllowAnySource {
		t.Errorf("pfcp_allow_any_source %v, sessions' allow_any_source %v, %v; want false, false, true",
			cfg.PFCPAllowAnySource, cfg.Sessions[0].AllowAnySource, cfg.Sessions[1].AllowAnySource)
	}
	if cfg, err = Parse([]byte(minimal + "pfcp_allow_any_source: true\n")); err != nil || !cfg.PFCPAllowAnySource {
		t.Errorf("pfcp_allow_any_source: true gave %v, %v", cfg, err)
	}
	if _, err := Parse([]byte(minimal + "pfcp_allow_any_source: maybe\n")); err == nil {
		t.Error("pfcp_allow_any_source: maybe accepted")
	}
}

// TestUEToUPFAllowed: the services UEs may reach on the UPF, and every mistake named.
func TestUEToUPFAllowed(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "ue_to_upf_allowed:\n" +
		"  - {address: 10.45.0.1, protocol: udp, port: 53}\n" +
		"  - {address: 10.45.0.1, protocol: icmp}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dns := netip.MustParseAddr("10.45.0.1")
	want := []UEToUPF{{Address: dns, Protocol: "udp", Port: 53}, {Address: dns, Protocol: "icmp"}}
	if !reflect.DeepEqual(cfg.UEToUPFAllowed, want) {
		t.Errorf("ue_to_upf_allowed %+v, want %+v", cfg.UEToUPFAllowed, want)
	}
	for _, c := range []struct{ entry, want string }{
		{"{protocol: udp, port: 53}", "ue_to_upf_allowed[0].address: missing; give one of the UPF's own IPv4 addresses"},
		{"{address: \"2001:db8::1\", protocol: udp, port: 53}", "ue_to_upf_allowed[0].address: 2001:db8::1 is not IPv4"},
		{"{address: 10.45.0.1, protocol: gre}", `ue_to_upf_allowed[0].protocol: "gre" is not a protocol`},
		{"{address: 10.45.0.1, protocol: tcp}", "ue_to_upf_allowed[0].port: missing"},
		{"{address: 10.45.0.1, protocol: tcp, port: 70000}", "ue_to_upf_allowed[0].port:"},
		{"{address: 10.45.0.1, protocol: icmp, port: 8}", "ue_to_upf_allowed[0].port: icmp has no ports"},
		{"{address: 10.45.0.1, protocol: udp, port: 53, dport: 53}", `unknown key "dport" in a ue_to_upf_allowed entry`},
	} {
		_, err := Parse([]byte(minimal + "ue_to_upf_allowed: [" + c.entry + "]\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.entry, err, c.want)
		}
	}
	_, err = Parse([]byte(minimal + "ue_to_upf_allowed: [{address: 10.45.0.1, protocol: icmp}, {address: 10.45.0.1, protocol: icmp}]\n"))
	if err == nil || !strings.Contains(err.Error(), "ue_to_upf_allowed[1]: the same service as ue_to_upf_allowed[0]") {
		t.Errorf("duplicate: error %v", err)
	}
}
