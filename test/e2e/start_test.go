package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// privateBPFFSWarning starts the warning xupfd logs when its pins cannot outlive it.
const privateBPFFSWarning = "the bpffs of the pins is private"

// xdpAttached tells, for n3 and n6, whether an XDP program is attached.
func (e *env) xdpAttached(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for name, x := range e.xdp(t) {
		out[name] = x != nil
	}
	return out
}

// xdp returns, for n3 and n6, what the kernel says of the XDP program attached there, nil
// when there is none.
func (e *env) xdp(t *testing.T) map[string]*netlink.LinkXdp {
	t.Helper()
	out := map[string]*netlink.LinkXdp{}
	err := e.topo.Do(e.topo.UPFNS, func() error {
		for _, name := range []string{testbed.N3If, testbed.N6If} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				out[name] = x
			} else {
				out[name] = nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expectForwarding sends packets through s both ways and fails t unless every one arrives.
func (e *env) expectForwarding(t *testing.T, s session.Session, when string) {
	t.Helper()
	payload := testbed.Payload("forwarding " + when)
	if got := e.downlink(s, packets, payload); len(got) != packets {
		t.Errorf("%s: gNB received %d of %d downlink packets", when, len(got), packets)
	}
	if got := e.uplink(s, packets, payload, recvTimeout); len(got) != packets {
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
	e.expectForwarding(t, sessNoQFI, "before the crash")
	if err := e.daemon.Kill(); err != nil {
		t.Fatal(err)
	}
	if a := e.xdpAttached(t); !a[testbed.N3If] || !a[testbed.N6If] {
		t.Errorf("XDP detached when xupfd was killed: %v", a)
	}
	e.expectForwarding(t, sessNoQFI, "after the crash")
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
		{"static session too big", func(_ *testing.T, cfg *config.Config) {
			// More filters than a rule set matches by compares (16 with the default PDR):
			// LBVS tables, which one SDF entry cannot hold.
			cfg.Limits.MaxSDFEntries = 1
			var sdf []string
			for port := range 16 {
				sdf = append(sdf, fmt.Sprintf("permit out 17 from 10.100.6.0/24 to assigned %d", 7000+port))
			}
			cfg.Sessions[0].Flows = []session.Flow{{Precedence: 10, QFI: 5, SDF: sdf}}
		}, "static session: "},
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

// pfcpSession establishes a session over PFCP, as an SMF in the gnb namespace, and returns it
// as the traffic helpers take it. It is what a second xupfd would prune: it is in no
// configuration.
func (e *env) pfcpSession(t *testing.T) session.Session {
	t.Helper()
	c, ctx := e.smfClient("smf.start.test")
	est, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Free5GC, UE: netip.MustParseAddr("10.45.0.60"),
		UplinkTEID: 0x7100, N3: testbed.N3Addr, NetworkInstance: "internet", GNB: testbed.GNBAddr, GNBTEID: 0x910})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	return testbed.PFCPView(est, testbed.GNBAddr, 0x910, 0)
}

// uplinkDuring sends G-PDUs of s, one a millisecond, from a moment before fn runs until a
// moment after it returns, and returns how many it sent and how many reached the DN host.
func (e *env) uplinkDuring(t *testing.T, s session.Session, fn func()) (sent, received int) {
	t.Helper()
	rx, err := e.topo.ListenDN()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		payload := testbed.Payload("during")
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-tick.C:
			}
			if err := e.topo.SendUplink(s, 1, payload, s.QFI); err != nil {
				done <- err
				return
			}
			sent++
		}
	}()
	stopped := false
	defer func() {
		if !stopped { // fn failed the test
			close(stop)
			<-done
		}
	}()
	time.Sleep(100 * time.Millisecond)
	fn()
	// Long enough for a blackhole left behind to show.
	time.Sleep(300 * time.Millisecond)
	close(stop)
	stopped = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := rx.Collect(sent, recvTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return sent, len(got)
}

// expectIntact fails t unless the running or killed xupfd of e still has its pins and XDP on
// n3 and n6, and s still forwards both ways.
func (e *env) expectIntact(t *testing.T, s session.Session, when string) {
	t.Helper()
	for _, pin := range []string{"link_" + testbed.N3If, "link_" + testbed.N6If, "xupf_ul_keys"} {
		if _, err := os.Stat(filepath.Join(e.topo.BPFFS, pin)); err != nil {
			t.Errorf("%s: pin %s: %v", when, pin, err)
		}
	}
	if a := e.xdpAttached(t); !a[testbed.N3If] || !a[testbed.N6If] {
		t.Errorf("%s: XDP detached: %v", when, a)
	}
	e.expectForwarding(t, s, when)
}

// TestSecondStartLeavesFirstAlone starts a second xupfd on the pins of a running one, with its
// configuration and with other ports: it must fail with an error that names the first, before
// changing anything the first owns. The first's PFCP session keeps forwarding without a loss,
// its API still lists it, and its pins and XDP stay, so killing it later detaches nothing.
func TestSecondStartLeavesFirstAlone(t *testing.T) {
	cases := []struct {
		name string
		edit func(*config.Config)
	}{
		{"same configuration", func(*config.Config) {}},
		{"other ports", func(c *config.Config) {
			c.HTTPListen = "127.0.0.1:8081"
			c.PFCPListen = netip.AddrPortFrom(testbed.N3Addr, 8806).String()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.pfcpSession(t)
			e.expectForwarding(t, s, "before the second start")
			cfg := e.topo.Config([]session.Session{sessQFI, sessNoQFI}, httpListen)
			c.edit(cfg)
			var out string
			sent, received := e.uplinkDuring(t, s, func() { out = startFails(t, e.topo, cfg) })
			want := fmt.Sprintf("bpffs %s is in use by xupfd (pid %d)", e.topo.BPFFS, e.daemon.PID())
			if !strings.Contains(out, want) {
				t.Errorf("the second xupfd does not say %q:\n%s", want, out)
			}
			t.Logf("uplink while the second xupfd started: %d of %d packets arrived", received, sent)
			if received != sent {
				t.Errorf("the first xupfd lost %d of %d uplink packets while the second started", sent-received, sent)
			}
			list, err := e.api.PFCPSessions(e.ctx())
			if err != nil || len(list) != 1 || list[0].SEID != s.ID {
				t.Errorf("the first xupfd's API lists PFCP sessions %+v, %v; want SEID %#x", list, err, s.ID)
			}
			e.expectIntact(t, s, "after the second start")
			if err := e.daemon.Kill(); err != nil {
				t.Fatal(err)
			}
			e.expectIntact(t, s, "after the first was killed")
		})
	}
}

// TestRestartWithBusyPort restarts xupfd after a crash (its pins keep forwarding) while its
// API or PFCP port is taken: the new one must fail before it takes over, prunes or unpins
// anything, so forwarding goes on.
func TestRestartWithBusyPort(t *testing.T) {
	cases := []struct {
		name, want string
		occupy     func() (io.Closer, error)
	}{
		{"http_listen", "http_listen " + httpListen + ": ", func() (io.Closer, error) {
			return net.Listen("tcp", httpListen)
		}},
		{"pfcp_listen", "pfcp_listen " + testbed.PFCPAddr.String() + ": ", func() (io.Closer, error) {
			return net.ListenUDP("udp", net.UDPAddrFromAddrPort(testbed.PFCPAddr))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.pfcpSession(t)
			if err := e.daemon.Kill(); err != nil {
				t.Fatal(err)
			}
			inUPF(t, e.topo, func() error {
				busy, err := c.occupy()
				if err == nil {
					t.Cleanup(func() { busy.Close() })
				}
				return err
			})
			out := startFails(t, e.topo, e.topo.Config([]session.Session{sessQFI, sessNoQFI}, httpListen))
			if !strings.Contains(out, c.want) {
				t.Errorf("xupfd does not say %q:\n%s", c.want, out)
			}
			e.expectIntact(t, s, "after the failed restart")
		})
	}
}
