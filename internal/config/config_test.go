package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/kerneln6"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/yamlerr"
)

// minimal is the smallest valid configuration; cases append keys to it.
const minimal = `interfaces:
  - name: eth0
    roles: [n3, n6]
gtpu_addresses: [192.0.2.1]
`

func TestLoadExample(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatalf("Load(example.yaml): %v", err)
	}
	want := &Config{
		Interfaces: []Interface{
			{Name: "eth1", Roles: []Role{RoleN3}},
			{Name: "eth2", Roles: []Role{RoleN6}},
		},
		GTPUAddresses:     []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")},
		XDPMode:           "native",
		UplinkSpread:      "off",
		UplinkSpreadQueue: 2048,
		XDPFallback:       true,
		BPFFS:             "/sys/fs/bpf/xupf",
		StateDir:          "/var/lib/xupf/state",
		HTTPListen:        "127.0.0.1:8080",
		PFCPListen:        "192.0.2.1:8805",
		PFCPNodeID:        "192.0.2.1",
		// pfcp_allowed_peers: [] is no list: only pfcp_smf_peers.
		PFCPHeartbeatInterval:      10 * time.Second,
		PFCPHeartbeatRetries:       3,
		PFCPLostPeerSessions:       "keep",
		GTPUErrorIndicationRate:    10,
		BufferMaxPacketsPerSession: 10000, BufferMaxBytesPerSession: 10 << 20, BufferMaxBytes: 256 << 20, BufferMaxDuration: 30 * time.Second,
		QoSAlgorithm:     "token_bucket",
		QoSClock:         "ktime",
		QoSMBRBurst:      50 * time.Millisecond,
		UEPools:          []netip.Prefix{netip.MustParsePrefix("10.45.0.0/16")},
		NetworkInstances: map[string]string{"internet": "eth2"},
		LogLevel:         "info",
		Limits: Limits{MaxSessions: 100000, MaxRuleSets: 100000, MaxSDFEntries: 262144, MaxAssociations: 64,
			MaxSessionsPerAssociation: 100000},
		APIAccess: APIAccess{TokenFile: "/var/lib/xupf/api-token"},
		Router:    Router{Mode: "mirror", MaxRoutes: 1048576, MaxRouteChunks: 4096, MaxNexthops: 65536},
		FlowCache: FlowCache{IdleTimeout: 30 * time.Second, ReturnDevice: "xupfret"},
		Sessions: []session.Session{
			{
				ID:           1,
				UE:           netip.MustParseAddr("10.45.0.1"),
				UplinkTEID:   0x100,
				GNB:          netip.MustParseAddr("198.51.100.10"),
				DownlinkTEID: 1,
				QFI:          9,
				GTPUAddr:     netip.MustParseAddr("192.0.2.1"),
				Flows: []session.Flow{{Precedence: 10, QFI: 5,
					SDF: []string{"permit out 17 from any to assigned 5060"}}},
			},
			{
				ID:           2,
				UE:           netip.MustParseAddr("10.45.0.2"),
				UplinkTEID:   257,
				GNB:          netip.MustParseAddr("198.51.100.11"),
				DownlinkTEID: 2,
				GTPUAddr:     netip.MustParseAddr("192.0.2.2"),
			},
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load(example.yaml) =\n%+v\nwant\n%+v", cfg, want)
	}
	if got := cfg.InterfacesWithRole(RoleN3); len(got) != 1 || got[0].Name != "eth1" {
		t.Errorf("InterfacesWithRole(n3) = %+v, want [eth1]", got)
	}
	if got := cfg.InterfacesWithRole(RoleN6); len(got) != 1 || got[0].Name != "eth2" {
		t.Errorf("InterfacesWithRole(n6) = %+v, want [eth2]", got)
	}
}

// The example shows every default; if a default changes, the example must change with it.
func TestExampleShowsDefaults(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	def := Default()
	got := Config{XDPMode: cfg.XDPMode, XDPFallback: cfg.XDPFallback, BPFFS: cfg.BPFFS, StateDir: cfg.StateDir,
		UplinkSpread: cfg.UplinkSpread, UplinkSpreadQueue: cfg.UplinkSpreadQueue,
		HTTPListen:       cfg.HTTPListen,
		PFCPAllowedPeers: cfg.PFCPAllowedPeers, PFCPHeartbeatInterval: cfg.PFCPHeartbeatInterval,
		PFCPHeartbeatRetries: cfg.PFCPHeartbeatRetries, PFCPLostPeerSessions: cfg.PFCPLostPeerSessions,
		GTPUErrorIndicationRate:    cfg.GTPUErrorIndicationRate,
		BufferMaxPacketsPerSession: cfg.BufferMaxPacketsPerSession, BufferMaxBytesPerSession: cfg.BufferMaxBytesPerSession,
		BufferMaxBytes: cfg.BufferMaxBytes, BufferMaxDuration: cfg.BufferMaxDuration,
		QoSAlgorithm: cfg.QoSAlgorithm, QoSClock: cfg.QoSClock, QoSMBRBurst: cfg.QoSMBRBurst,
		LogLevel: cfg.LogLevel, Limits: cfg.Limits, APIAccess: cfg.APIAccess, Router: cfg.Router, FlowCache: cfg.FlowCache}
	if !reflect.DeepEqual(&got, def) {
		t.Errorf("example settings %+v differ from Default() %+v", got, *def)
	}
	// pfcp_node_id's and pfcp_listen's defaults are not in Default(): they come from the
	// first of gtpu_addresses.
	if want := cfg.GTPUAddresses[0].String() + ":8805"; cfg.PFCPListen != want {
		t.Errorf("example pfcp_listen = %q, want its default, the first of gtpu_addresses, port 8805 (%s)", cfg.PFCPListen, want)
	}
	if want := cfg.GTPUAddresses[0].String(); cfg.PFCPNodeID != want {
		t.Errorf("example pfcp_node_id = %q, want its default, the first of gtpu_addresses (%s)", cfg.PFCPNodeID, want)
	}
}

func TestMinimalGetsDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatalf("Parse(minimal): %v", err)
	}
	want := Default()
	want.Interfaces = []Interface{{Name: "eth0", Roles: []Role{"n3", "n6"}}}
	want.GTPUAddresses = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	want.PFCPNodeID = "192.0.2.1" // the first of gtpu_addresses
	want.PFCPListen = "192.0.2.1:8805"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Parse(minimal) =\n%+v\nwant\n%+v", cfg, want)
	}
	if cfg.XDPMode != "native" || !cfg.XDPFallback || cfg.BPFFS != "/sys/fs/bpf/xupf" ||
		cfg.HTTPListen != "127.0.0.1:8080" || cfg.PFCPListen != "192.0.2.1:8805" ||
		cfg.LogLevel != "info" || cfg.Limits.MaxSessions != 100000 || cfg.Sessions != nil ||
		cfg.PFCPNodeID != "192.0.2.1" || cfg.PFCPAllowedPeers != nil ||
		cfg.PFCPHeartbeatInterval != 10*time.Second || cfg.PFCPHeartbeatRetries != 3 {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	if n3, n6 := cfg.InterfacesWithRole(RoleN3), cfg.InterfacesWithRole(RoleN6); len(n3) != 1 || len(n6) != 1 {
		t.Errorf("one interface with both roles: n3 %v, n6 %v", n3, n6)
	}
}

func TestNullValuesKeepDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "xdp_mode:\nxdp_fallback: ~\nlimits:\nlog_level: null\n" +
		"pfcp_node_id:\npfcp_allowed_peers: ~\npfcp_heartbeat_interval:\npfcp_heartbeat_retries: null\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if cfg.XDPMode != DefaultXDPMode || cfg.XDPFallback != DefaultXDPFallback ||
		cfg.LogLevel != DefaultLogLevel || cfg.Limits.MaxSessions != DefaultMaxSessions ||
		cfg.PFCPNodeID != "192.0.2.1" || cfg.PFCPAllowedPeers != nil ||
		cfg.PFCPHeartbeatInterval != DefaultPFCPHeartbeatInterval || cfg.PFCPHeartbeatRetries != DefaultPFCPHeartbeatRetries {
		t.Errorf("null values did not keep defaults: %+v", cfg)
	}
}

func TestOverrides(t *testing.T) {
	cfg, err := Parse([]byte(minimal + `xdp_mode: generic
xdp_fallback: false
bpffs: /sys/fs/bpf/other
http_listen: ":9090"
pfcp_listen: "[::1]:8805"
pfcp_node_id: upf-1.5gc.example
pfcp_allowed_peers: [192.0.2.0/24, 198.51.100.7]
pfcp_peer_addresses: {smf1.5gc.example: [192.0.2.10, 198.51.100.0/28]}
pfcp_heartbeat_interval: 1m30s
pfcp_heartbeat_retries: 0x5
log_level: debug
uplink_spread: flow
uplink_spread_cpus: [3, 0x1]
uplink_spread_queue: 512
limits:
  max_sessions: 4194304
  max_associations: 8
  max_sessions_per_association: 1000
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if cfg.XDPMode != "generic" || cfg.XDPFallback || cfg.BPFFS != "/sys/fs/bpf/other" ||
		cfg.HTTPListen != ":9090" || cfg.PFCPListen != "[::1]:8805" || cfg.LogLevel != "debug" ||
		cfg.Limits.MaxSessions != MaxMaxSessions || cfg.PFCPNodeID != "upf-1.5gc.example" ||
		cfg.PFCPHeartbeatInterval != 90*time.Second || cfg.PFCPHeartbeatRetries != 5 {
		t.Errorf("overrides not applied: %+v", cfg)
	}
	if cfg.UplinkSpread != SpreadFlow || !reflect.DeepEqual(cfg.UplinkSpreadCPUs, []int{3, 1}) || cfg.UplinkSpreadQueue != 512 {
		t.Errorf("uplink spreading not applied: %q %v %d", cfg.UplinkSpread, cfg.UplinkSpreadCPUs, cfg.UplinkSpreadQueue)
	}
	if cfg.Limits.MaxAssociations != 8 || cfg.Limits.MaxSessionsPerAssociation != 1000 {
		t.Errorf("limits not applied: %+v", cfg.Limits)
	}
	wantAddrs := map[string][]netip.Prefix{"smf1.5gc.example": {netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("198.51.100.0/28")}}
	if !reflect.DeepEqual(cfg.PFCPPeerAddresses, wantAddrs) {
		t.Errorf("pfcp_peer_addresses = %v, want %v", cfg.PFCPPeerAddresses, wantAddrs)
	}
	wantPeers := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.7/32")}
	if !reflect.DeepEqual(cfg.PFCPAllowedPeers, wantPeers) {
		t.Errorf("pfcp_allowed_peers = %v, want %v (an address is a /32)", cfg.PFCPAllowedPeers, wantPeers)
	}
}

func TestPFCPNodeIDAccepted(t *testing.T) {
	for _, id := range []string{"10.100.3.1", "upf", "upf1.5gc.example", "UPF-1.Example.NET", "5gc.example",
		"a1." + strings.Repeat("b", 63) + ".example", "1.2.3.example"} {
		cfg, err := Parse([]byte(minimal + "pfcp_node_id: " + id + "\n"))
		if err != nil {
			t.Errorf("pfcp_node_id %q: %v", id, err)
			continue
		}
		if cfg.PFCPNodeID != id {
			t.Errorf("pfcp_node_id %q: got %q", id, cfg.PFCPNodeID)
		}
	}
}

func TestPFCPHeartbeatBounds(t *testing.T) {
	for _, tt := range []struct {
		yaml     string
		interval time.Duration
		retries  int
	}{
		{"pfcp_heartbeat_interval: 100ms\npfcp_heartbeat_retries: 1\n", 100 * time.Millisecond, 1},
		{"pfcp_heartbeat_interval: 10m\npfcp_heartbeat_retries: 100\n", 10 * time.Minute, 100},
		{"pfcp_heartbeat_interval: \"2s\"\n", 2 * time.Second, 3},
	} {
		cfg, err := Parse([]byte(minimal + tt.yaml))
		if err != nil {
			t.Errorf("%q: %v", tt.yaml, err)
			continue
		}
		if cfg.PFCPHeartbeatInterval != tt.interval || cfg.PFCPHeartbeatRetries != tt.retries {
			t.Errorf("%q: interval %s, retries %d; want %s, %d", tt.yaml, cfg.PFCPHeartbeatInterval,
				cfg.PFCPHeartbeatRetries, tt.interval, tt.retries)
		}
	}
}

func TestTEIDsDecodeDecimalAndHex(t *testing.T) {
	tests := []struct {
		uplink, downlink string
		wantUp, wantDown uint32
	}{
		{"256", "1", 256, 1},
		{"0x100", "0x1", 256, 1},
		{"0xFFFFFFFF", "0xabcdef", 0xffffffff, 0xabcdef},
		{"4294967295", "0o17", 4294967295, 15},
	}
	for _, tt := range tests {
		data := minimal + "sessions:\n  - {id: 1, ue_ipv4: 10.0.0.1, gnb_ipv4: 198.51.100.1, uplink_teid: " +
			tt.uplink + ", downlink_teid: " + tt.downlink + "}\n"
		cfg, err := Parse([]byte(data))
		if err != nil {
			t.Errorf("uplink %s, downlink %s: %v", tt.uplink, tt.downlink, err)
			continue
		}
		s := cfg.Sessions[0]
		if s.UplinkTEID != tt.wantUp || s.DownlinkTEID != tt.wantDown {
			t.Errorf("uplink %s, downlink %s: got %#x, %#x; want %#x, %#x",
				tt.uplink, tt.downlink, s.UplinkTEID, s.DownlinkTEID, tt.wantUp, tt.wantDown)
		}
		if s.GTPUAddr != netip.MustParseAddr("192.0.2.1") {
			t.Errorf("gtpu_address default = %v, want 192.0.2.1", s.GTPUAddr)
		}
	}
}

// sess returns a sessions list holding the given flow-style entries.
func sess(entries ...string) string {
	var b strings.Builder
	b.WriteString("sessions:\n")
	for _, e := range entries {
		b.WriteString("  - {" + e + "}\n")
	}
	return b.String()
}

// s1 and s2 are valid, distinct sessions; cases override one field by appending it (flow
// mappings reject duplicate keys, so overrides replace the base's keys).
func sessionWith(id, ue, up string, extra ...string) string {
	fields := []string{"id: " + id, "ue_ipv4: " + ue, "uplink_teid: " + up, "gnb_ipv4: 198.51.100.1", "downlink_teid: 7"}
	return strings.Join(append(fields, extra...), ", ")
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    []string // substrings the error must contain
		notWant string   // substring the error must not contain
	}{
		// Document-level problems.
		{name: "empty", yaml: "", want: []string{"config: the file is empty", `"interfaces"`, `"gtpu_addresses"`}},
		{name: "whitespace only", yaml: "\n  \n", want: []string{"the file is empty"}},
		{name: "comments only", yaml: "# nothing\n", want: []string{"the file is empty"}},
		{name: "null document", yaml: "---\n", want: []string{"the file is empty"}},
		{name: "syntax", yaml: "interfaces: [\n", want: []string{"config: invalid YAML: line", "indentation"}},
		{name: "bad indentation", yaml: "interfaces:\n  - name: eth0\n   roles: [n3]\n", want: []string{"invalid YAML: line 1: did not find expected '-' indicator; check the indentation and quoting from that line down"}},
		{name: "duplicate key", yaml: minimal + "log_level: info\nlog_level: debug\n", want: []string{`line 6: mapping key "log_level" already defined at line 5`}},
		{name: "unknown anchor", yaml: minimal + "limits: {max_sessions: *x}\n", want: []string{"config: invalid YAML: unknown anchor 'x' referenced"}, notWant: "indentation"},
		{name: "two documents", yaml: minimal + "---\nlog_level: debug\n", want: []string{"line 5: a second YAML document starts here", "one document"}},
		{name: "top level is a list", yaml: "- eth0\n", want: []string{"line 1: a list is not valid here; expected a mapping"}},

		// Unknown keys name the key, the line and the section.
		{name: "unknown top-level key", yaml: minimal + "xdp_mod: generic\n", want: []string{`config: line 5: unknown key "xdp_mod" at the top level; remove it or correct its spelling`, "valid keys: interfaces, gtpu_addresses, xdp_mode,"}},
		{name: "unknown interface key", yaml: "interfaces:\n  - name: eth0\n    role: [n3]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`line 3: unknown key "role" in an interfaces entry`, "valid keys: name, roles"}},
		{name: "unknown limits key", yaml: minimal + "limits:\n  sessions: 5\n", want: []string{`line 6: unknown key "sessions" under limits`, "valid keys: max_sessions"}},
		{name: "unknown session key", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", "teid: 5")), want: []string{`line 6: unknown key "teid" in a sessions entry`, "valid keys: id, ue_ipv4, uplink_teid, gnb_ipv4, downlink_teid, qfi, gtpu_address"}},

		// Wrong YAML types.
		{name: "gtpu_addresses not a list", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: 192.0.2.1\n", want: []string{"line 2: 192.0.2.1 is not valid here; expected a list"}},
		{name: "roles not a list", yaml: "interfaces: [{name: eth0, roles: n3}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{"line 1: n3 is not valid here; expected a list"}},
		{name: "xdp_fallback not a bool", yaml: minimal + "xdp_fallback: maybe\n", want: []string{"line 5: maybe is not valid here; expected true or false"}},
		{name: "interfaces not a list", yaml: "interfaces: eth0\ngtpu_addresses: [192.0.2.1]\n", want: []string{"line 1: eth0 is not valid here; expected a list"}},

		// interfaces
		{name: "no interfaces", yaml: "gtpu_addresses: [192.0.2.1]\n", want: []string{"config: interfaces: missing; list at least one interface"}},
		{name: "empty interfaces", yaml: "interfaces: []\ngtpu_addresses: [192.0.2.1]\n", want: []string{"interfaces: missing"}},
		{name: "name missing", yaml: "interfaces: [{roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{"interfaces[0].name: missing; give the Linux interface name"}},
		{name: "name too long", yaml: "interfaces: [{name: abcdefghijklmnop, roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].name: "abcdefghijklmnop" is 16 bytes long; Linux interface names have at most 15`}},
		{name: "name with slash", yaml: "interfaces: [{name: eth/0, roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].name: "eth/0" contains '/' or ':'`, `"ip link"`}},
		{name: "name with space", yaml: "interfaces: [{name: \"eth 0\", roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].name: "eth 0" contains whitespace`}},
		{name: "name with tab", yaml: "interfaces: [{name: \"eth\\t0\", roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].name: "eth\t0" contains whitespace`}},
		{name: "duplicate name", yaml: "interfaces: [{name: eth0, roles: [n3]}, {name: eth0, roles: [n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[1].name: "eth0" is already listed as interfaces[0]; list each interface once and give it all its roles`}},
		{name: "roles missing", yaml: "interfaces: [{name: eth0}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].roles: missing; give "n3", "n6" or both`}},
		{name: "bad role", yaml: "interfaces: [{name: eth0, roles: [n3]}, {name: eth1, roles: [n9]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[1].roles[0]: "n9" is not a role; use "n3" (facing the gNBs) or "n6" (facing the data network)`}},
		{name: "uppercase role", yaml: "interfaces: [{name: eth0, roles: [N3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].roles[0]: "N3" is not a role`}},
		{name: "duplicate role", yaml: "interfaces: [{name: eth0, roles: [n3, n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces[0].roles[1]: "n3" is listed twice; list each role once`}},
		{name: "no n3", yaml: "interfaces: [{name: eth0, roles: [n6]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces: no interface has role "n3"; give the interface facing the gNBs the role n3`}},
		{name: "no n6", yaml: "interfaces: [{name: eth0, roles: [n3]}]\ngtpu_addresses: [192.0.2.1]\n", want: []string{`interfaces: no interface has role "n6"; give the interface facing the data network the role n6`}},

		// gtpu_addresses
		{name: "no gtpu_addresses", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\n", want: []string{"config: gtpu_addresses: missing; list at least one local IPv4 address"}},
		{name: "empty gtpu_addresses", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: []\n", want: []string{"gtpu_addresses: missing"}},
		{name: "gtpu empty string", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [\"\"]\n", want: []string{"gtpu_addresses[0]: missing; give a local IPv4 address"}},
		{name: "gtpu invalid", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1, 192.0.2.x]\n", want: []string{`gtpu_addresses[1]: "192.0.2.x" is not an IP address; give a local IPv4 address`}},
		{name: "gtpu IPv6", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [\"2001:db8::1\"]\n", want: []string{`gtpu_addresses[0]: "2001:db8::1" is not an IPv4 address; only IPv4 N3 addresses are supported`}},
		{name: "gtpu IPv4-mapped", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [\"::ffff:192.0.2.1\"]\n", want: []string{`gtpu_addresses[0]: "::ffff:192.0.2.1" is an IPv4-mapped IPv6 address; write it as 192.0.2.1`}},
		{name: "gtpu unspecified", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [0.0.0.0]\n", want: []string{`gtpu_addresses[0]: "0.0.0.0" is not a unicast address`}},
		{name: "gtpu multicast", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [239.1.1.1]\n", want: []string{`gtpu_addresses[0]: "239.1.1.1" is not a unicast address`}},
		{name: "gtpu too many", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1, 192.0.2.2, 192.0.2.3, 192.0.2.4, 192.0.2.5, 192.0.2.6, 192.0.2.7, 192.0.2.8, 192.0.2.9, 192.0.2.10, 192.0.2.11, 192.0.2.12, 192.0.2.13, 192.0.2.14, 192.0.2.15, 192.0.2.16, 192.0.2.17]\n", want: []string{"gtpu_addresses: 17 addresses listed; the datapath holds at most 16"}},
		{name: "gtpu duplicate", yaml: "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1, 192.0.2.1]\n", want: []string{`gtpu_addresses[1]: "192.0.2.1" is already listed as gtpu_addresses[0]; list each address once`}},

		// Settings.
		{name: "xdp_mode", yaml: minimal + "xdp_mode: fast\n", want: []string{`config: xdp_mode: "fast" is not a mode; use "native" or "generic"`}},
		{name: "xdp_mode empty", yaml: minimal + "xdp_mode: \"\"\n", want: []string{`xdp_mode: "" is not a mode`}},
		{name: "bpffs relative", yaml: minimal + "bpffs: sys/fs/bpf\n", want: []string{`bpffs: "sys/fs/bpf" is not an absolute path; give an absolute directory on the BPF filesystem, e.g. /sys/fs/bpf/xupf`}},
		{name: "state_dir relative", yaml: minimal + "state_dir: state\n", want: []string{`state_dir: "state" is not an absolute path; give the directory of the state file, e.g. /var/lib/xupf/state`}},
		{name: "bpffs empty", yaml: minimal + "bpffs: \"\"\n", want: []string{"bpffs: empty; give an absolute directory"}},
		{name: "http_listen no port", yaml: minimal + "http_listen: 127.0.0.1\n", want: []string{`http_listen: "127.0.0.1" is not host:port (missing port in address); use host:port, e.g. "127.0.0.1:8080"`}},
		{name: "http_listen port 0", yaml: minimal + "http_listen: \":0\"\n", want: []string{`http_listen: port "0" in ":0" is not a port number from 1 to 65535`}},
		{name: "http_listen port too big", yaml: minimal + "http_listen: \"127.0.0.1:65536\"\n", want: []string{`http_listen: port "65536" in "127.0.0.1:65536" is not a port number from 1 to 65535`}},
		{name: "http_listen named port", yaml: minimal + "http_listen: \"localhost:http\"\n", want: []string{`http_listen: port "http" in "localhost:http" is not a port number`}},
		{name: "http_listen empty", yaml: minimal + "http_listen: \"\"\n", want: []string{"http_listen: empty; use host:port"}},
		{name: "pfcp_listen", yaml: minimal + "pfcp_listen: \"0.0.0.0:99999\"\n", want: []string{`pfcp_listen: port "99999" in "0.0.0.0:99999" is not a port number from 1 to 65535; use host:port of the address the SMFs reach, e.g. "192.0.2.1:8805"`}},
		{name: "pfcp_listen IPv6 without brackets", yaml: minimal + "pfcp_listen: \"::1:8805\"\n", want: []string{`pfcp_listen: "::1:8805" is not host:port (too many colons in address)`}},

		// PFCP node settings.
		{name: "pfcp_node_id IPv6", yaml: minimal + "pfcp_node_id: \"2001:db8::1\"\n", want: []string{`config: pfcp_node_id: "2001:db8::1" is an IPv6 address, which is not supported as a Node ID; give an IPv4 address of this UPF, e.g. 192.0.2.1, or its DNS name`, "leave pfcp_node_id out to use the first of gtpu_addresses"}},
		{name: "pfcp_node_id IPv4-mapped", yaml: minimal + "pfcp_node_id: \"::ffff:192.0.2.1\"\n", want: []string{`pfcp_node_id: "::ffff:192.0.2.1" is an IPv4-mapped IPv6 address; write it as 192.0.2.1`}},
		{name: "pfcp_node_id unspecified", yaml: minimal + "pfcp_node_id: 0.0.0.0\n", want: []string{`pfcp_node_id: "0.0.0.0" is not a unicast address; give an IPv4 address`}},
		{name: "pfcp_node_id multicast", yaml: minimal + "pfcp_node_id: 224.0.0.1\n", want: []string{`pfcp_node_id: "224.0.0.1" is not a unicast address`}},
		{name: "buffer bounds out of range", yaml: minimal + "buffer_max_packets_per_session: 0\nbuffer_max_bytes: 1\nbuffer_max_duration: 2h\n", want: []string{
			"buffer_max_packets_per_session:", "use 1 to 1000000 packets", "buffer_max_bytes:", "use 4096 to 68719476736 bytes",
			`buffer_max_duration: 2h is out of range; use a duration from 1s to 1h`}},
		{name: "pfcp_node_id bad IPv4", yaml: minimal + "pfcp_node_id: 192.0.2.256\n", want: []string{`pfcp_node_id: "192.0.2.256" is not a valid IPv4 address; give an IPv4 address`}},
		{name: "pfcp_node_id short IPv4", yaml: minimal + "pfcp_node_id: 10.0.1\n", want: []string{`pfcp_node_id: "10.0.1" is not a valid IPv4 address`}},
		{name: "pfcp_node_id underscore", yaml: minimal + "pfcp_node_id: upf_1.example\n", want: []string{`pfcp_node_id: "upf_1.example" is neither an IPv4 address nor a DNS name (DNS names hold only letters, digits, hyphens and dots); give`}},
		{name: "pfcp_node_id space", yaml: minimal + "pfcp_node_id: \"upf 1\"\n", want: []string{`pfcp_node_id: "upf 1" is neither an IPv4 address nor a DNS name`}},
		{name: "pfcp_node_id URL", yaml: minimal + "pfcp_node_id: \"http://upf\"\n", want: []string{`pfcp_node_id: "http://upf" is neither an IPv4 address nor a DNS name`}},
		{name: "pfcp_node_id trailing dot", yaml: minimal + "pfcp_node_id: upf.example.\n", want: []string{`pfcp_node_id: "upf.example." has an empty label (a dot at the start or the end, or two in a row)`}},
		{name: "pfcp_node_id double dot", yaml: minimal + "pfcp_node_id: upf..example\n", want: []string{`pfcp_node_id: "upf..example" has an empty label`}},
		{name: "pfcp_node_id hyphen", yaml: minimal + "pfcp_node_id: -upf.example\n", want: []string{`pfcp_node_id: "-upf.example" has a label that starts or ends with a hyphen`}},
		{name: "pfcp_node_id long label", yaml: minimal + "pfcp_node_id: " + strings.Repeat("a", 64) + ".example\n", want: []string{"pfcp_node_id: ", "has a label of 64 characters; a DNS label has at most 63"}},
		{name: "pfcp_node_id long name", yaml: minimal + "pfcp_node_id: " + strings.Repeat("abcdefghi.", 26) + "example\n", want: []string{"pfcp_node_id: ", "is 267 characters long; a DNS name has at most 253"}},
		{name: "pfcp_node_id list", yaml: minimal + "pfcp_node_id: [upf]\n", want: []string{"line 5: a list is not valid here; expected a single value"}},
		{name: "pfcp_allowed_peers not a list", yaml: minimal + "pfcp_allowed_peers: any\n", want: []string{"line 5: any is not valid here; expected a list"}},
		{name: "pfcp_allowed_peers bad address", yaml: minimal + "pfcp_allowed_peers: [192.0.2.0/24, smf1]\n", want: []string{`config: pfcp_allowed_peers[1]: "smf1" is not an IP address or prefix; give an IPv4 address or prefix of the SMFs, e.g. 192.0.2.10 or 192.0.2.0/24`}},
		{name: "pfcp_allowed_peers bad prefix", yaml: minimal + "pfcp_allowed_peers: [192.0.2.0/33]\n", want: []string{`pfcp_allowed_peers[0]: "192.0.2.0/33" is not an IP prefix; give an IPv4 address or prefix`}},
		{name: "pfcp_allowed_peers empty entry", yaml: minimal + "pfcp_allowed_peers: [\"\"]\n", want: []string{"pfcp_allowed_peers[0]: missing; give an IPv4 address or prefix of the SMFs"}},
		{name: "pfcp_allowed_peers host bits", yaml: minimal + "pfcp_allowed_peers: [192.0.2.10/24]\n", want: []string{`pfcp_allowed_peers[0]: "192.0.2.10/24" has host bits set; write the network, 192.0.2.0/24`}},
		{name: "pfcp_allowed_peers IPv6", yaml: minimal + "pfcp_allowed_peers: [\"2001:db8::/32\"]\n", want: []string{`pfcp_allowed_peers[0]: "2001:db8::/32" is not IPv4; only IPv4 SMF addresses are supported`}},
		{name: "pfcp_allowed_peers IPv4-mapped", yaml: minimal + "pfcp_allowed_peers: [\"::ffff:192.0.2.10\"]\n", want: []string{`pfcp_allowed_peers[0]: "::ffff:192.0.2.10" is an IPv4-mapped IPv6 address; write it as IPv4, e.g. 192.0.2.10`}},
		{name: "pfcp_allowed_peers duplicate", yaml: minimal + "pfcp_allowed_peers: [192.0.2.10, 192.0.2.0/24, 192.0.2.10/32]\n", want: []string{`pfcp_allowed_peers[2]: "192.0.2.10/32" is already listed as pfcp_allowed_peers[0]; list each network once`}},
		{name: "pfcp_heartbeat_interval no unit", yaml: minimal + "pfcp_heartbeat_interval: 10\n", want: []string{`config: pfcp_heartbeat_interval: "10" is not a duration (a number with a unit: ms, s, m); use a duration from 100ms to 10m, e.g. "10s"`}},
		{name: "pfcp_heartbeat_interval text", yaml: minimal + "pfcp_heartbeat_interval: often\n", want: []string{`pfcp_heartbeat_interval: "often" is not a duration`}},
		{name: "pfcp_heartbeat_interval empty", yaml: minimal + "pfcp_heartbeat_interval: \"\"\n", want: []string{`pfcp_heartbeat_interval: "" is not a duration`}},
		{name: "pfcp_heartbeat_interval too short", yaml: minimal + "pfcp_heartbeat_interval: 99ms\n", want: []string{`pfcp_heartbeat_interval: 99ms is out of range; use a duration from 100ms to 10m`}},
		{name: "pfcp_heartbeat_interval too long", yaml: minimal + "pfcp_heartbeat_interval: 1h\n", want: []string{`pfcp_heartbeat_interval: 1h is out of range`}},
		{name: "pfcp_heartbeat_interval zero", yaml: minimal + "pfcp_heartbeat_interval: 0s\n", want: []string{`pfcp_heartbeat_interval: 0s is out of range`}},
		{name: "pfcp_heartbeat_interval negative", yaml: minimal + "pfcp_heartbeat_interval: -10s\n", want: []string{`pfcp_heartbeat_interval: -10s is out of range`}},
		{name: "pfcp_heartbeat_retries 0", yaml: minimal + "pfcp_heartbeat_retries: 0\n", want: []string{"config: pfcp_heartbeat_retries: 0 is out of range; use 1 to 100 (unanswered heartbeats in a row that declare an SMF lost)"}},
		{name: "pfcp_heartbeat_retries too many", yaml: minimal + "pfcp_heartbeat_retries: 101\n", want: []string{"pfcp_heartbeat_retries: 101 is out of range; use 1 to 100"}},
		{name: "pfcp_heartbeat_retries text", yaml: minimal + "pfcp_heartbeat_retries: three\n", want: []string{`pfcp_heartbeat_retries: "three" is not an integer; use 1 to 100`}},
		{name: "uplink_spread unknown", yaml: minimal + "uplink_spread: rss\n", want: []string{`config: uplink_spread: "rss" is not a mode; use off (the default: the NIC's RSS spreads already), teid (each session's uplink on one CPU) or flow (each inner flow on one CPU)`}},
		{name: "uplink_spread_cpus without spreading", yaml: minimal + "uplink_spread_cpus: [0, 1]\n", want: []string{"config: uplink_spread_cpus: listed, but uplink_spread is off; set uplink_spread to teid or flow, or remove uplink_spread_cpus"}},
		{name: "uplink_spread_cpus negative", yaml: minimal + "uplink_spread: flow\nuplink_spread_cpus: [0, -1]\n", want: []string{"config: uplink_spread_cpus[1]: -1 is out of range; give a CPU number from 0 to 8191, as in /sys/devices/system/cpu/online"}},
		{name: "uplink_spread_cpus text", yaml: minimal + "uplink_spread: flow\nuplink_spread_cpus: [all]\n", want: []string{`config: uplink_spread_cpus[0]: "all" is not an integer; give a CPU number`}},
		{name: "uplink_spread_cpus duplicate", yaml: minimal + "uplink_spread: teid\nuplink_spread_cpus: [1, 2, 1]\n", want: []string{"config: uplink_spread_cpus[2]: CPU 1 is already listed; list each CPU once"}},
		{name: "uplink_spread_queue zero", yaml: minimal + "uplink_spread: teid\nuplink_spread_queue: 0\n", want: []string{"config: uplink_spread_queue: 0 is out of range; use 1 to 16384 packets (default 2048)"}},
		{name: "uplink_spread_queue too long", yaml: minimal + "uplink_spread: teid\nuplink_spread_queue: 16385\n", want: []string{"uplink_spread_queue: 16385 is out of range"}},
		{name: "qos_algorithm unknown", yaml: minimal + "qos_algorithm: leaky_bucket\n", want: []string{`config: qos_algorithm: "leaky_bucket" is not an algorithm; use token_bucket (the default), sliding_window or fixed_window`}},
		{name: "qos_clock unknown", yaml: minimal + "qos_clock: tsc\n", want: []string{`config: qos_clock: "tsc" is not a clock; use ktime (the default), coarse or user`}},
		{name: "qos_mbr_burst no unit", yaml: minimal + "qos_mbr_burst: 20\n", want: []string{`qos_mbr_burst: "20" is not a duration`}},
		{name: "flow_cache.max_flows negative", yaml: minimal + "flow_cache: {max_flows: -1}\n", want: []string{`flow_cache.max_flows: `, `use 0 (off) to 16777216`}},
		{name: "flow_cache.idle_timeout too short", yaml: minimal + "flow_cache: {idle_timeout: 10ms}\n", want: []string{`flow_cache.idle_timeout: 10ms is out of range; use a duration from 1s to 24h`}},
		{name: "flow_cache.kernel_n6 without a table", yaml: minimal + "flow_cache: {kernel_n6: true}\n", want: []string{`flow_cache.kernel_n6 needs the flow cache: set flow_cache.max_flows`}},
		{name: "flow_cache.kernel_n6_instances without a table", yaml: minimal + "flow_cache: {kernel_n6_instances: {internet: true}}\n",
			want: []string{`flow_cache.kernel_n6_instances.internet needs the flow cache: set flow_cache.max_flows`}},
		{name: "flow_cache.kernel_n6_instances unknown instance", yaml: minimal + "network_instances: {internet: eth0}\nflow_cache: {max_flows: 16, kernel_n6_instances: {ims: true}}\n",
			want: []string{`flow_cache.kernel_n6_instances.ims: not a network instance; use one of network_instances [internet]`}},
		{name: "flow_cache.kernel_n6 without ue_pools", yaml: minimal + "flow_cache: {max_flows: 64, kernel_n6: true}\n", want: []string{`flow_cache.kernel_n6 (or kernel_n6_instances) needs ue_pools: the kernel routes them into flow_cache.return_device`}},
		{name: "flow_cache.kernel_n6_instances without ue_pools", yaml: minimal + "flow_cache: {max_flows: 64, kernel_n6_instances: {internet: true}}\n", want: []string{`flow_cache.kernel_n6 (or kernel_n6_instances) needs ue_pools`}},
		{name: "flow_cache.return_device too long", yaml: minimal + "flow_cache: {return_device: xupfreturn12}\n", want: []string{`flow_cache.return_device: "xupfreturn12"; give an interface name of 1 to 11 characters`}},
		{name: "flow_cache unknown key", yaml: minimal + "flow_cache: {max_flow: 10}\n", want: []string{`max_flow`, `under flow_cache`}},
		{name: "qos_mbr_burst too short", yaml: minimal + "qos_mbr_burst: 100us\n", want: []string{`qos_mbr_burst: 100us is out of range; use a duration from 1ms to 10s`}},
		{name: "pfcp_lost_peer_sessions unknown", yaml: minimal + "pfcp_lost_peer_sessions: drop\n", want: []string{`config: pfcp_lost_peer_sessions: "drop" is not a policy; use "keep" (lost SMFs' sessions keep forwarding) or "delete"`}},
		{name: "ue_pools not a network", yaml: minimal + "ue_pools: [10.45.0.1]\n", want: []string{`config: ue_pools[0]: "10.45.0.1" is not an IPv4 network; give an IPv4 network such as "10.45.0.0/16"`}},
		{name: "ue_pools IPv6", yaml: minimal + "ue_pools: [\"2001:db8::/64\"]\n", want: []string{`ue_pools[0]: "2001:db8::/64" is not an IPv4 network`}},
		{name: "ue_pools host bits", yaml: minimal + "ue_pools: [10.45.0.1/16]\n", want: []string{`ue_pools[0]: "10.45.0.1/16" has host bits set; write the network, 10.45.0.0/16`}},
		{name: "ue_pools overlap", yaml: minimal + "ue_pools: [10.45.0.0/16, 10.45.3.0/24]\n", want: []string{`ue_pools[1]: 10.45.3.0/24 overlaps ue_pools[0] 10.45.0.0/16; give pools that do not overlap`}},
		{name: "network_instances unknown interface", yaml: minimal + "network_instances: {internet: eth9}\n", want: []string{`config: network_instances.internet: "eth9" is not one of the interfaces; use one of [eth0]`}},
		{name: "static session id in the PFCP range", yaml: minimal + "sessions:\n  - {id: 0x100000000, ue_ipv4: 10.45.0.1, uplink_teid: 1, gnb_ipv4: 192.0.2.9, downlink_teid: 1}\n",
			want: []string{"sessions[0].id: 0x100000000 is out of range", "give each session a unique id from 1 to 4294967295 (higher ids are PFCP sessions')"}},
		{name: "pfcp_heartbeat_retries duration", yaml: minimal + "pfcp_heartbeat_retries: 3s\n", want: []string{`pfcp_heartbeat_retries: "3s" is not an integer`}},
		{
			name:    "bad gtpu_addresses without pfcp_node_id reports only gtpu_addresses",
			yaml:    "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [bad]\n",
			want:    []string{`gtpu_addresses[0]: "bad" is not an IP address`},
			notWant: "pfcp_node_id",
		},

		{name: "log_level", yaml: minimal + "log_level: verbose\n", want: []string{`log_level: "verbose" is not a level; use debug, info, warn or error`}},
		{name: "max_sessions 0", yaml: minimal + "limits: {max_sessions: 0}\n", want: []string{"config: limits.max_sessions: 0 is out of range; use 1 to 4194304"}},
		{name: "max_sessions too big", yaml: minimal + "limits: {max_sessions: 4194305}\n", want: []string{"limits.max_sessions: 4194305 is out of range; use 1 to 4194304"}},
		{name: "max_sessions negative", yaml: minimal + "limits: {max_sessions: -1}\n", want: []string{"limits.max_sessions: -1 is out of range"}},
		{name: "max_sessions text", yaml: minimal + "limits: {max_sessions: lots}\n", want: []string{`limits.max_sessions: "lots" is not an integer; use 1 to 4194304`}},
		{name: "max_sessions float", yaml: minimal + "limits: {max_sessions: 1.5}\n", want: []string{`limits.max_sessions: "1.5" is not an integer`}},
		{name: "max_sessions list", yaml: minimal + "limits: {max_sessions: [1]}\n", want: []string{`limits.max_sessions: a list is not an integer`}},
		{name: "too many sessions", yaml: minimal + "limits: {max_sessions: 1}\n" + sess(sessionWith("1", "10.0.0.1", "1"), sessionWith("2", "10.0.0.2", "2")), want: []string{"sessions: 2 sessions exceed limits.max_sessions (1); raise limits.max_sessions or remove sessions"}},

		// sessions
		{name: "session id missing", yaml: minimal + sess("ue_ipv4: 10.0.0.1, uplink_teid: 1, gnb_ipv4: 198.51.100.1, downlink_teid: 1"), want: []string{"config: sessions[0].id: missing; give each session a unique id"}},
		{name: "session id 0", yaml: minimal + sess(sessionWith("0", "10.0.0.1", "1")), want: []string{"sessions[0].id: 0 is out of range; give each session a unique id from 1"}},
		{name: "session id negative", yaml: minimal + sess(sessionWith("-3", "10.0.0.1", "1")), want: []string{"sessions[0].id: -3 is out of range"}},
		{name: "session id duplicate", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1"), sessionWith("1", "10.0.0.2", "2")), want: []string{"sessions[1].id: 1 is already used by sessions[0]; give each session its own id"}},
		{name: "session UE duplicate", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1"), sessionWith("2", "10.0.0.1", "2")), want: []string{"sessions[1].ue_ipv4: 10.0.0.1 is already used by sessions[0]; give each session its own UE address"}},
		{name: "session uplink TEID duplicate", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "0x100"), sessionWith("2", "10.0.0.2", "3"), sessionWith("3", "10.0.0.3", "256")), want: []string{"config: sessions[2].uplink_teid: 256 is already used by sessions[0]; give each session its own uplink TEID"}},
		{name: "session uplink TEID 0", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "0")), want: []string{"sessions[0].uplink_teid: 0 is reserved for GTP-U signalling; use a TEID from 1 to 4294967295"}},
		{name: "session uplink TEID too big", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "4294967296")), want: []string{"sessions[0].uplink_teid: 4294967296 is out of range; use 1 to 4294967295 (decimal, or hex such as 0x100)"}},
		{name: "session uplink TEID hex too big", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "0x100000000")), want: []string{"sessions[0].uplink_teid: 0x100000000 is out of range"}},
		{name: "session uplink TEID negative", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "-1")), want: []string{"sessions[0].uplink_teid: -1 is out of range"}},
		{name: "session uplink TEID quoted", yaml: minimal + sess(sessionWith("1", "10.0.0.1", `"256"`)), want: []string{`sessions[0].uplink_teid: "256" is not an integer; use 1 to 4294967295`}},
		{name: "session uplink TEID missing", yaml: minimal + sess("id: 1, ue_ipv4: 10.0.0.1, gnb_ipv4: 198.51.100.1, downlink_teid: 1"), want: []string{"sessions[0].uplink_teid: missing; give the TEID the gNB puts on this session's uplink packets"}},
		{name: "session downlink TEID 0", yaml: minimal + sess("id: 1, ue_ipv4: 10.0.0.1, uplink_teid: 1, gnb_ipv4: 198.51.100.1, downlink_teid: 0"), want: []string{"sessions[0].downlink_teid: 0 is reserved for GTP-U signalling"}},
		{name: "session downlink TEID missing", yaml: minimal + sess("id: 1, ue_ipv4: 10.0.0.1, uplink_teid: 1, gnb_ipv4: 198.51.100.1"), want: []string{"sessions[0].downlink_teid: missing; give the TEID the gNB assigned"}},
		{name: "session downlink TEID text", yaml: minimal + sess("id: 1, ue_ipv4: 10.0.0.1, uplink_teid: 1, gnb_ipv4: 198.51.100.1, downlink_teid: abc"), want: []string{`sessions[0].downlink_teid: "abc" is not an integer`}},
		{name: "session UE missing", yaml: minimal + sess("id: 1, uplink_teid: 1, gnb_ipv4: 198.51.100.1, downlink_teid: 1"), want: []string{"sessions[0].ue_ipv4: missing; give the UE's IPv4 address"}},
		{name: "session UE invalid", yaml: minimal + sess(sessionWith("1", "10.0.0.256", "1")), want: []string{`sessions[0].ue_ipv4: "10.0.0.256" is not an IP address; give the UE's IPv4 address`}},
		{name: "session UE IPv6", yaml: minimal + sess(sessionWith("1", `"2001:db8::1"`, "1")), want: []string{`sessions[0].ue_ipv4: "2001:db8::1" is not an IPv4 address; give the UE's IPv4 address`}},
		{name: "session gNB missing", yaml: minimal + sess("id: 1, ue_ipv4: 10.0.0.1, uplink_teid: 1, downlink_teid: 1"), want: []string{"sessions[0].gnb_ipv4: missing; give the gNB's N3 IPv4 address"}},
		{name: "session gNB invalid", yaml: minimal + sess("id: 1, ue_ipv4: 10.0.0.1, uplink_teid: 1, gnb_ipv4: gnb1, downlink_teid: 1"), want: []string{`sessions[0].gnb_ipv4: "gnb1" is not an IP address`}},
		{name: "smf peer not an address", yaml: minimal + "pfcp_smf_peers: [smf.example]\n", want: []string{`pfcp_smf_peers[0]: "smf.example" is not an SMF address`}},
		{name: "smf peer twice", yaml: minimal + "pfcp_smf_peers: [192.0.2.10, \"192.0.2.10:8805\"]\n", want: []string{"pfcp_smf_peers[1]: 192.0.2.10:8805 is listed twice"}},
		{name: "max_rule_sets zero", yaml: minimal + "limits: {max_rule_sets: 0}\n", want: []string{"limits.max_rule_sets:", "use 1 to 1048576"}},
		{name: "ue_pools_only without pools", yaml: minimal + "ue_pools_only: true\n",
			want: []string{"ue_pools_only: true without ue_pools would refuse every UE address"}},
		{name: "max_associations zero", yaml: minimal + "limits: {max_associations: 0}\n", want: []string{"limits.max_associations:", "use 1 to 65536"}},
		{name: "max_sessions_per_association zero", yaml: minimal + "limits: {max_sessions_per_association: 0}\n",
			want: []string{"limits.max_sessions_per_association:", "use 1 to 4194304"}},
		{name: "pfcp_peer_addresses bad node id", yaml: minimal + "pfcp_peer_addresses: {\"smf 1\": [192.0.2.10]}\n",
			want: []string{`pfcp_peer_addresses: "smf 1" is not a Node ID`}},
		{name: "pfcp_peer_addresses empty", yaml: minimal + "pfcp_peer_addresses: {smf1: []}\n",
			want: []string{"pfcp_peer_addresses.smf1: empty; list the addresses"}},
		{name: "pfcp_peer_addresses bad address", yaml: minimal + "pfcp_peer_addresses: {smf1: [192.0.2.10/24]}\n",
			want: []string{`pfcp_peer_addresses.smf1[0]: "192.0.2.10/24" has host bits set`}},
		{name: "direct_cache_slots too big", yaml: minimal + "limits: {direct_cache_slots: 8388609}\n", want: []string{"limits.direct_cache_slots:", "use 0 (a slot per key) to 8388608"}},
		{name: "max_sdf_entries too big", yaml: minimal + "limits: {max_sdf_entries: 99999999}\n", want: []string{"limits.max_sdf_entries:", "use 1 to 16777216"}},
		{name: "flow without qfi", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", `flows: [{precedence: 10, sdf: ["permit out ip from any to assigned"]}]`)),
			want: []string{"sessions[0].flows[0].qfi: missing; give the flow's QFI, 1 to 63"}},
		{name: "flow with a bad SDF", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", `flows: [{precedence: 10, qfi: 5, sdf: ["permit out 1 from any 80 to assigned"]}]`)),
			want: []string{"sessions[0].flows[0].sdf[0]: flow description", "ports need protocol tcp, udp or sctp"}},
		{name: "flow without SDF", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", `flows: [{precedence: 10, qfi: 5}]`)),
			want: []string{"sessions[0].flows[0].sdf: empty; give at least one flow description"}},
		{name: "flow with an unknown key", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", `flows: [{precedence: 10, qfi: 5, sdf: ["permit out ip from any to assigned"], prio: 1}]`)),
			want: []string{`unknown key "prio" in a flows entry`}},
		{name: "session QFI too big", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", "qfi: 64")), want: []string{"sessions[0].qfi: 64 is out of range; use 1 to 63, or 0 for no PDU Session Container"}},
		{name: "session QFI way too big", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", "qfi: 300")), want: []string{"sessions[0].qfi: 300 is out of range; use 1 to 63"}},
		{name: "session gtpu_address not local", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", "gtpu_address: 192.0.2.9")), want: []string{"sessions[0].gtpu_address: 192.0.2.9 is not in gtpu_addresses; use one of 192.0.2.1, or add it to gtpu_addresses"}},
		{name: "session gtpu_address IPv6", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", `gtpu_address: "2001:db8::1"`)), want: []string{`sessions[0].gtpu_address: "2001:db8::1" is not an IPv4 address; give one of the local GTP-U addresses`}},
		{name: "session gtpu_address invalid", yaml: minimal + sess(sessionWith("1", "10.0.0.1", "1", "gtpu_address: local")), want: []string{`sessions[0].gtpu_address: "local" is not an IP address; give one of gtpu_addresses`}},
		{name: "session not a mapping", yaml: minimal + "sessions: [5]\n", want: []string{"line 5: 5 is not valid here; expected a mapping"}},

		// No cascade: a bad gtpu_addresses is reported once, not again for each session.
		{
			name:    "bad gtpu_addresses not repeated per session",
			yaml:    "interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [bad]\n" + sess(sessionWith("1", "10.0.0.1", "1")),
			want:    []string{`gtpu_addresses[0]: "bad" is not an IP address`},
			notWant: "sessions[0]",
		},

		// Every problem is reported, one per line.
		{
			name: "several problems",
			yaml: minimal + "xdp_mode: fast\nlog_level: loud\n" + sess(sessionWith("1", "10.0.0.1", "0")),
			want: []string{`config: xdp_mode: "fast"`, "\nconfig: log_level:", "\nconfig: sessions[0].uplink_teid: 0 is reserved"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v); want an error containing %q", cfg, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with an error")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", msg, w)
				}
			}
			if tt.notWant != "" && strings.Contains(msg, tt.notWant) {
				t.Errorf("error\n%s\ncontains %q", msg, tt.notWant)
			}
			for _, line := range strings.Split(msg, "\n") {
				if !strings.HasPrefix(line, "config: ") {
					t.Errorf("error line %q does not start with \"config: \"", line)
				}
				if strings.Contains(line, "config.raw") || strings.Contains(line, "yaml: ") || strings.Contains(line, "uint") {
					t.Errorf("error line %q leaks Go or yaml internals", line)
				}
			}
		})
	}
}

func TestSMFPeers(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "pfcp_smf_peers: [192.0.2.10, \"198.51.100.1:9000\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.10:8805"), netip.MustParseAddrPort("198.51.100.1:9000")}
	if !reflect.DeepEqual(cfg.PFCPSMFPeers, want) {
		t.Errorf("pfcp_smf_peers = %v, want %v", cfg.PFCPSMFPeers, want)
	}
}

func TestSessionFlows(t *testing.T) {
	cfg, err := Parse([]byte(minimal + sess(sessionWith("1", "10.0.0.1", "1",
		`flows: [{precedence: 10, qfi: 5, sdf: ["permit out 17 from any to assigned 5060", "permit out 6 from 198.51.100.0/24 to assigned"], downlink_teid: 0x99}]`))))
	if err != nil {
		t.Fatal(err)
	}
	want := []session.Flow{{Precedence: 10, QFI: 5, DownlinkTEID: 0x99,
		SDF: []string{"permit out 17 from any to assigned 5060", "permit out 6 from 198.51.100.0/24 to assigned"}}}
	if got := cfg.Sessions[0].Flows; !reflect.DeepEqual(got, want) {
		t.Errorf("flows = %+v, want %+v", got, want)
	}
}

func TestSessionValidateErrorIsWrapped(t *testing.T) {
	_, err := Parse([]byte(minimal + sess(sessionWith("1", "10.0.0.1", "0"))))
	if err == nil {
		t.Fatal("Parse succeeded; want an error")
	}
	want := session.Session{UE: netip.MustParseAddr("10.0.0.1")}.Validate()
	var found bool
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == want.Error() {
			found = true
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, je := range j.Unwrap() {
				for e2 := je; e2 != nil; e2 = errors.Unwrap(e2) {
					if e2.Error() == want.Error() {
						found = true
					}
				}
			}
			break
		}
	}
	if !found {
		t.Errorf("error %q does not wrap session.Validate's %q", err, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	if !strings.HasPrefix(err.Error(), "config: cannot read ") {
		t.Errorf("error %q does not say the file cannot be read", err)
	}
	if strings.Count(err.Error(), path) != 1 {
		t.Errorf("error %q names the path more than once", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%q, fs.ErrNotExist) = false", err)
	}
}

func TestLoadInvalidFileNamesPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xupf.yaml")
	if err := os.WriteFile(path, []byte(minimal+"xdp_mode: fast\nlog_level: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load succeeded; want an error")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "config: "+path+": ") {
			t.Errorf("error line %q does not start with the path", line)
		}
	}
	if !strings.Contains(err.Error(), `config: `+path+`: xdp_mode: "fast" is not a mode`) {
		t.Errorf("error %q does not report xdp_mode", err)
	}

	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "config: "+empty+": the file is empty") {
		t.Errorf("Load(empty file) = %v; want it to say the file is empty", err)
	}
}

// Config's YAML keys match what Parse reads: a marshalled Config parses back to itself.
func TestMarshalRoundTrip(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The example leaves pfcp_allowed_peers empty; a list must survive the trip too.
	cfg.PFCPAllowedPeers = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.7/32")}
	cfg.PFCPHeartbeatInterval = 1500 * time.Millisecond
	// Private routes, one with a gateway (a netip.Addr, which yaml.v3 takes for empty).
	cfg.Router.Mode = RouterPrivate
	cfg.Router.Routes = []Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("203.0.113.1"), Interface: "eth2"},
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Interface: "eth1", MTU: 1400},
		{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Type: "blackhole"}}
	cfg.Router.Neighbours = []Neighbour{{Address: netip.MustParseAddr("203.0.113.1"), Interface: "eth2", MAC: "02:00:00:00:02:02"}}
	checkRoundTrip(t, cfg)
}

func TestDefault(t *testing.T) {
	d := Default()
	if d.XDPMode != "native" || !d.XDPFallback || d.BPFFS != "/sys/fs/bpf/xupf" ||
		d.HTTPListen != "127.0.0.1:8080" || d.PFCPListen != "" || d.LogLevel != "info" ||
		d.Limits.MaxSessions != 100000 || d.Interfaces != nil || d.GTPUAddresses != nil || d.Sessions != nil ||
		d.PFCPNodeID != "" || d.PFCPAllowedPeers != nil || d.PFCPHeartbeatInterval != 10*time.Second ||
		d.PFCPHeartbeatRetries != 3 {
		t.Errorf("Default() = %+v", d)
	}
	d.XDPMode = "generic"
	if Default().XDPMode != "native" {
		t.Error("Default() returns shared state")
	}
}

// rawSession must accept exactly session.Session's YAML keys; if the session model gains a
// field, rawSession and validator.session need it too.
func TestRawTypesMatchModel(t *testing.T) {
	pairs := []struct{ raw, model reflect.Type }{
		{reflect.TypeOf(rawSession{}), reflect.TypeOf(session.Session{})},
		{reflect.TypeOf(rawFlow{}), reflect.TypeOf(session.Flow{})},
		{reflect.TypeOf(rawConfig{}), reflect.TypeOf(Config{})},
		{reflect.TypeOf(rawLimits{}), reflect.TypeOf(Limits{})},
	}
	for _, p := range pairs {
		if got, want := yamlerr.Keys(p.raw), yamlerr.Keys(p.model); !reflect.DeepEqual(got, want) {
			t.Errorf("%v keys %v differ from %v keys %v", p.raw, got, p.model, want)
		}
	}
}

// max_rule_sets follows max_sessions unless given (capped at its own maximum).
func TestMaxRuleSetsDefault(t *testing.T) {
	for _, c := range []struct {
		limits string
		want   int
	}{
		{"", DefaultMaxSessions},
		{"limits: {max_sessions: 500}\n", 500},
		{"limits: {max_sessions: 4194304}\n", MaxMaxRuleSets},
		{"limits: {max_sessions: 500, max_rule_sets: 7}\n", 7},
	} {
		cfg, err := Parse([]byte(minimal + c.limits))
		if err != nil {
			t.Fatalf("%q: %v", c.limits, err)
		}
		if cfg.Limits.MaxRuleSets != c.want {
			t.Errorf("%q: max_rule_sets %d, want %d", c.limits, cfg.Limits.MaxRuleSets, c.want)
		}
	}
}

// direct_cache_slots is 0 (sized by the datapath from the key tables) unless given.
func TestDirectCacheSlots(t *testing.T) {
	for limits, want := range map[string]int{"": 0, "limits: {direct_cache_slots: 1000}\n": 1000} {
		cfg, err := Parse([]byte(minimal + limits))
		if err != nil {
			t.Fatalf("%q: %v", limits, err)
		}
		if cfg.Limits.DirectCacheSlots != want {
			t.Errorf("%q: direct_cache_slots %d, want %d", limits, cfg.Limits.DirectCacheSlots, want)
		}
	}
}

func TestAPIAccess(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "api_token_file: /etc/xupf/token\napi_allowed_hosts: [UPF1.example.net, localhost]\n" +
		"api_metrics_auth: true\napi_tls_cert: /etc/xupf/api.crt\napi_tls_key: /etc/xupf/api.key\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := APIAccess{TokenFile: "/etc/xupf/token", AllowedHosts: []string{"upf1.example.net", "localhost"},
		MetricsAuth: true, TLSCert: "/etc/xupf/api.crt", TLSKey: "/etc/xupf/api.key"}
	if !reflect.DeepEqual(cfg.APIAccess, want) {
		t.Errorf("APIAccess = %+v, want %+v", cfg.APIAccess, want)
	}

	for _, c := range []struct{ yaml, want string }{
		{"api_token_file: \"\"\n", "api_token_file: empty; give an absolute file path, e.g. /var/lib/xupf/api-token"},
		{"api_token_file: token\n", `api_token_file: "token" is not an absolute file path`},
		{"api_token_file: /var/lib/xupf/\n", `api_token_file: "/var/lib/xupf/" is not an absolute file path`},
		{"api_allowed_hosts: [\"evil.example:8080\"]\n", `api_allowed_hosts[0]: "evil.example:8080" is neither an IPv4 address nor a DNS name`},
		{"api_allowed_hosts: [\"a..b\"]\n", `api_allowed_hosts[0]: "a..b" has an empty label`},
		{"api_tls_cert: /etc/xupf/api.crt\n", "api_tls_cert, api_tls_key: only one is set; give both"},
		{"api_tls_key: /etc/xupf/api.key\n", "api_tls_cert, api_tls_key: only one is set"},
		{"api_tls_cert: api.crt\napi_tls_key: /k\n", `api_tls_cert, api_tls_key: "api.crt" and "/k" must both be absolute paths`},
		{"api_token: x\n", "api_token_file, api_allowed_hosts, api_metrics_auth, api_tls_cert, api_tls_key"},
	} {
		_, err := Parse([]byte(minimal + c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

// TestKernelN6Instances: flow_cache.kernel_n6_instances names network instances with the
// kernel's N6 treatment on or off, beside the default kernel_n6.
func TestKernelN6Instances(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "network_instances: {internet: eth0, ims: eth0, iot: eth0}\nue_pools: [10.45.0.0/16]\n" +
		"flow_cache: {max_flows: 16, kernel_n6: true, kernel_n6_instances: {ims: false, iot: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := FlowCache{MaxFlows: 16, IdleTimeout: DefaultFlowIdleTimeout, KernelN6: kerneln6.Choice{Default: true,
		Instances: map[string]bool{"ims": false, "iot": true}}, ReturnDevice: DefaultReturnDevice}
	if !reflect.DeepEqual(cfg.FlowCache, want) {
		t.Errorf("flow_cache %+v, want %+v", cfg.FlowCache, want)
	}
}
