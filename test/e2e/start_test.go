package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// privateBPFFSWarning starts the warning xupfd logs when its pins cannot outlive it.
const privateBPFFSWarning = "the bpffs of the pins is private"

// xdpAttached tells, for n3 and n6, whether an XDP program is attached.
func (e *env) xdpAttached(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := e.topo.Do(e.topo.UPFNS, func() error {
		for _, name := range []string{testbed.N3If, testbed.N6If} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			out[name] = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expectForwarding sends packets through sessNoQFI both ways and fails t unless every one
// arrives.
func (e *env) expectForwarding(t *testing.T, when string) {
	t.Helper()
	payload := testbed.Payload("forwarding " + when)
	if got := e.downlink(sessNoQFI, packets, payload); len(got) != packets {
		t.Errorf("%s: gNB received %d of %d downlink packets", when, len(got), packets)
	}
	if got := e.uplink(sessNoQFI, packets, payload, recvTimeout); len(got) != packets {
		t.Errorf("%s: DN received %d of %d uplink packets", when, len(got), packets)
	}
}

// TestCrashKeepsForwarding kills xupfd with SIGKILL. Its links and maps are pinned in a
// bpffs that outlives it (the testbed's, outside the /sys that `ip netns exec` replaces), so
// XDP stays attached and the sessions keep forwarding.
func TestCrashKeepsForwarding(t *testing.T) {
	e := newEnv(t)
	if strings.Contains(e.daemon.LogTail(), privateBPFFSWarning) {
		t.Errorf("xupfd warns about a private bpffs on the testbed's shared one:\n%s", e.daemon.LogTail())
	}
	e.expectForwarding(t, "before the crash")
	if err := e.daemon.Kill(); err != nil {
		t.Fatal(err)
	}
	if a := e.xdpAttached(t); !a[testbed.N3If] || !a[testbed.N6If] {
		t.Errorf("XDP detached when xupfd was killed: %v", a)
	}
	e.expectForwarding(t, "after the crash")
}

// TestPrivateBPFFSWarns runs xupfd on a bpffs under /sys/fs/bpf, which inside `ip netns
// exec` is a mount of its own that goes with it: it must say so, and how to fix it.
func TestPrivateBPFFSWarns(t *testing.T) {
	e := newEnvConfig(t, func(c *config.Config) { c.BPFFS = "/sys/fs/bpf/xupf-e2e-private" }, sessNoQFI)
	log := e.daemon.LogTail()
	for _, want := range []string{privateBPFFSWarning, "mount -t bpf bpf /run/xupf/bpffs"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}

// startFails runs xupfd in the upf namespace with cfg, which must fail: it checks that xupfd
// exited with status 1 (a panic exits with 2) and printed no stack trace, and returns what it
// wrote.
func startFails(t *testing.T, topo *testbed.Topology, cfg *config.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xupfd.yaml")
	if err := topo.WriteConfigFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := topo.Command(ctx, topo.UPFNS, xupfdBin, "--config", path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("xupfd: %v, want exit status 1; it wrote:\n%s", err, out)
	}
	if strings.Contains(string(out), "panic") || strings.Contains(string(out), "goroutine ") {
		t.Errorf("xupfd printed a stack trace:\n%s", out)
	}
	return string(out)
}

// inUPF runs fn in the upf namespace, failing t on error.
func inUPF(t *testing.T, topo *testbed.Topology, fn func() error) {
	t.Helper()
	if err := topo.Do(topo.UPFNS, fn); err != nil {
		t.Fatal(err)
	}
}

// TestStartFailures starts xupfd into each failure of the start-up: each must end in the error
// message (no stack trace) and leave nothing behind, neither XDP on n3 (attached first) nor
// pins.
func TestStartFailures(t *testing.T) {
	topo := newTopology(t)
	cases := []struct {
		name    string
		prepare func(t *testing.T, cfg *config.Config)
		want    string
	}{
		{"another XDP program on n6", func(t *testing.T, _ *config.Config) {
			inUPF(t, topo, func() error {
				l, err := testbed.AttachXDPPass(testbed.N6If)
				if err == nil {
					t.Cleanup(func() { l.Close() })
				}
				return err
			})
		}, `attach to "n6": another XDP program is attached`},
		{"no native XDP on lo", func(_ *testing.T, cfg *config.Config) {
			cfg.Interfaces[1].Name = "lo"
		}, `attach to "lo": native XDP is not supported by this interface`},
		{"http_listen busy", func(t *testing.T, _ *config.Config) {
			inUPF(t, topo, func() error {
				ln, err := net.Listen("tcp", httpListen)
				if err == nil {
					t.Cleanup(func() { ln.Close() })
				}
				return err
			})
		}, "http_listen " + httpListen + ": "},
		{"pfcp_listen busy", func(t *testing.T, _ *config.Config) {
			inUPF(t, topo, func() error {
				c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(testbed.PFCPAddr))
				if err == nil {
					t.Cleanup(func() { c.Close() })
				}
				return err
			})
		}, "pfcp_listen " + testbed.PFCPAddr.String() + ": "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := topo.Config([]session.Session{sessQFI, sessNoQFI}, httpListen)
			c.prepare(t, cfg)
			out := startFails(t, topo, cfg)
			if !strings.Contains(out, c.want) {
				t.Errorf("xupfd does not say %q:\n%s", c.want, out)
			}
			e := &env{t: t, topo: topo}
			if a := e.xdpAttached(t); a[testbed.N3If] {
				t.Errorf("XDP left attached to n3 by the failed start")
			}
			if _, err := os.Stat(topo.BPFFS); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pins left by the failed start: stat %s: %v", topo.BPFFS, err)
			}
		})
	}
}
