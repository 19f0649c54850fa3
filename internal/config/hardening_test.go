package config

import "testing"

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
