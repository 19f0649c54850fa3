package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/state"
	"github.com/xupf/xupf/internal/testbed"
)

// TestInvalidConfigRejected starts xupfd with broken configurations: it must exit non-zero
// before touching the kernel, with a message that names the field and the fix.
func TestInvalidConfigRejected(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and XDP")
	}
	base := "bpffs: /sys/fs/bpf/xupf-e2e-badconfig\ngtpu_addresses: [10.100.3.1]\n"
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown mode", base + "interfaces: [{name: lo, roles: [n3, n6]}]\nxdp_mode: fast\n",
			[]string{`xdp_mode: "fast" is not a mode; use "native" or "generic"`}},
		{"no n6 role", base + "interfaces: [{name: lo, roles: [n3]}]\n",
			[]string{`interfaces: no interface has role "n6"`, "give the interface facing the data network the role n6"}},
		{"duplicate TEID", base + "interfaces: [{name: lo, roles: [n3, n6]}]\nsessions:\n" +
			"  - {id: 1, ue_ipv4: 10.45.0.2, uplink_teid: 0x100, gnb_ipv4: 10.100.3.2, downlink_teid: 1}\n" +
			"  - {id: 2, ue_ipv4: 10.45.0.3, uplink_teid: 256, gnb_ipv4: 10.100.3.2, downlink_teid: 2}\n",
			[]string{"sessions[1].uplink_teid: 256 is already used by sessions[0]"}},
		{"missing interface", base + "interfaces: [{name: nosuch0, roles: [n3, n6]}]\n",
			[]string{`interface "nosuch0": no such interface`, "interfaces[].name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "xupfd.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(xupfdBin, "--config", path)
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatalf("xupfd accepted the configuration")
			}
			for _, w := range c.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// stateDir is the state_dir of e's daemon.
func (e *env) stateDir(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load(e.daemon.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.StateDir
}

// TestShutdownKeepsForwarding stops xupfd with SIGTERM: it must exit cleanly and leave XDP
// on its interfaces and its pins, so the sessions keep forwarding until the next xupfd takes
// over; `xupfd --stop` is what removes them.
func TestShutdownKeepsForwarding(t *testing.T) {
	e := newEnv(t)
	if err := e.daemon.Stop(); err != nil {
		t.Fatalf("xupfd did not stop cleanly: %v\n%s", err, e.daemon.LogTail())
	}
	if !strings.Contains(e.daemon.LogTail(), "the datapath keeps forwarding") {
		t.Errorf("no shutdown message in the log:\n%s", e.daemon.LogTail())
	}
	e.expectIntact(t, sessNoQFI, "after SIGTERM")
}

// TestStopRemovesEverything runs `xupfd --stop` beside a running xupfd: the daemon exits,
// XDP is detached, and the pins and the state file are gone.
func TestStopRemovesEverything(t *testing.T) {
	e := newEnv(t)
	e.pfcpSession(t)
	stateFile := filepath.Join(e.stateDir(t), state.FileName)
	if _, err := os.Stat(stateFile); err != nil {
		t.Fatalf("state file: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	out, err := e.topo.Command(ctx, e.topo.UPFNS, xupfdBin, "--config", e.daemon.ConfigPath, "--stop").CombinedOutput()
	if err != nil {
		t.Fatalf("xupfd --stop: %v\n%s", err, out)
	}
	if !e.daemon.WaitExited(5 * time.Second) {
		t.Errorf("xupfd still runs after xupfd --stop")
	}
	if a := e.xdpAttached(t); a[testbed.N3If] || a[testbed.N6If] {
		t.Errorf("XDP still attached after xupfd --stop: %v", a)
	}
	for _, path := range []string{e.topo.BPFFS, stateFile} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left by xupfd --stop: %v", path, err)
		}
	}
}
