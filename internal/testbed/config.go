package testbed

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/session"
)

// MaxSessions is limits.max_sessions in the configurations WriteConfig writes.
const MaxSessions = 1024

// Config returns the daemon configuration for this topology: n3 and n6 in native XDP mode,
// the N3 address as GTP-U address, a per-run bpffs directory and the given sessions.
func (t *Topology) Config(sessions []session.Session, httpListen string) *config.Config {
	cfg := config.Default()
	cfg.Interfaces = []config.Interface{
		{Name: N3If, Roles: []config.Role{config.RoleN3}},
		{Name: N6If, Roles: []config.Role{config.RoleN6}},
	}
	cfg.GTPUAddresses = []netip.Addr{N3Addr}
	cfg.XDPMode = config.XDPModeNative
	// A silent fall back to generic mode would test a different datapath than the one asked
	// for; veth supports native XDP, so failing is the better answer.
	cfg.XDPFallback = false
	cfg.BPFFS = t.BPFFS
	cfg.HTTPListen = httpListen
	// On the N3 address, as GTP-U: the datapath must hand PFCP to the kernel. The gnb
	// namespace reaches it, so tests play the SMF from there.
	cfg.PFCPListen = PFCPAddr.String()
	// The tests' SMFs play from the gnb host's addresses.
	cfg.PFCPAllowedPeers = []netip.Prefix{netip.PrefixFrom(GNBAddr, subnetBits).Masked()}
	cfg.UEPools = []netip.Prefix{UEPool}
	cfg.Limits.MaxSessions = MaxSessions
	cfg.Sessions = sessions
	return cfg
}

// WriteConfig writes the configuration of Config as xupfd's YAML file at path. The file is
// checked with the daemon's own parser first, so a bad session is reported here rather than
// as a daemon that does not start.
func (t *Topology) WriteConfig(path string, sessions []session.Session, httpListen string) error {
	return t.WriteConfigFile(path, t.Config(sessions, httpListen))
}

// WriteConfigFile writes cfg (Config's, changed by the caller) as WriteConfig does. A token
// file left at its default goes next to the configuration file, so that runs neither share
// one nor write to /var/lib; so does a state_dir left at its default.
func (t *Topology) WriteConfigFile(path string, cfg *config.Config) error {
	if cfg.TokenFile == config.DefaultAPITokenFile {
		cfg.TokenFile = filepath.Join(filepath.Dir(path), "api-token")
	}
	if cfg.StateDir == config.DefaultStateDir {
		cfg.StateDir = filepath.Join(filepath.Dir(path), "state")
	}
	if cfg.StateDir == config.DefaultStateDir {
		cfg.StateDir = filepath.Join(filepath.Dir(path), "state")
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("testbed: encode config: %w", err)
	}
	if _, err := config.Parse(data); err != nil {
		return fmt.Errorf("testbed: generated config is invalid: %w", err)
	}
	header := fmt.Sprintf("# xupfd configuration for testbed run %s (upf namespace %s).\n", t.Suffix, t.UPFNS)
	if err := os.WriteFile(path, append([]byte(header), data...), 0o644); err != nil {
		return fmt.Errorf("testbed: write config: %w", err)
	}
	return nil
}
