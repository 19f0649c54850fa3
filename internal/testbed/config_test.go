package testbed

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/session"
)

// TestWriteConfigFlows checks that the sessions WriteConfig writes reach the daemon's parser
// whole, QoS flows included. It needs no root: no topology is built.
func TestWriteConfigFlows(t *testing.T) {
	topo := &Topology{Suffix: "test", UPFNS: "xupf-upf-test", BPFFS: "/sys/fs/bpf/xupf-test"}
	sessions := []session.Session{
		{ID: 1, UE: netip.MustParseAddr("10.45.0.2"), UplinkTEID: 0x100, DownlinkTEID: 0x200, QFI: 9, GNB: GNBAddr},
		{ID: 3, UE: netip.MustParseAddr("10.45.0.9"), UplinkTEID: 0x102, DownlinkTEID: 0x300, QFI: 9, GNB: GNBAddr,
			Flows: []session.Flow{
				{Precedence: 10, QFI: 5, SDF: []string{"permit out 17 from any to assigned 7000"}, DownlinkTEID: 0x301},
				{Precedence: 20, QFI: 6, SDF: []string{"permit out 6 from 10.100.6.0/24 80 to assigned", "permit out ip from any to assigned"}},
			}},
	}
	path := filepath.Join(t.TempDir(), "xupfd.yaml")
	if err := topo.WriteConfig(path, sessions, "127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// The token file is the run's own, next to the configuration.
	if want := filepath.Join(filepath.Dir(path), "api-token"); cfg.TokenFile != want {
		t.Errorf("api_token_file = %q, want %q", cfg.TokenFile, want)
	}
	if len(cfg.Sessions) != len(sessions) {
		t.Fatalf("config has %d sessions, want %d", len(cfg.Sessions), len(sessions))
	}
	for i, want := range sessions {
		want.GTPUAddr = N3Addr // filled in by the parser: the first GTP-U address
		if got := cfg.Sessions[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("sessions[%d] read back as\n%+v\nwant\n%+v", i, got, want)
		}
	}
}
