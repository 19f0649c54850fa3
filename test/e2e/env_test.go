package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

const (
	packets     = 100
	recvTimeout = 5 * time.Second
	httpListen  = "127.0.0.1:8080" // inside the test's own upf namespace
)

// The sessions every test's daemon starts with: one with a QoS flow, one without.
var (
	sessQFI = session.Session{ID: 1, UE: netip.MustParseAddr("10.45.0.2"), UplinkTEID: 0x100,
		DownlinkTEID: 0x200, QFI: 9, GNB: testbed.GNBAddr}
	sessNoQFI = session.Session{ID: 2, UE: netip.MustParseAddr("10.45.0.3"), UplinkTEID: 0x101,
		DownlinkTEID: 0x201, GNB: testbed.GNBAddr}
)

// env is one test's topology with xupfd running in it.
type env struct {
	t      testing.TB
	topo   *testbed.Topology
	daemon *testbed.Daemon
	api    *api.Client
}

// newEnv builds a fresh topology and starts xupfd with both sessions. Everything is torn down
// by t.Cleanup, failure or not; on failure the daemon's stats and log are logged first.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, sessQFI, sessNoQFI)
}

// newEnvWith is newEnv with the given sessions instead of the usual two.
func newEnvWith(t *testing.T, sessions ...session.Session) *env {
	t.Helper()
	return newEnvConfig(t, nil, sessions...)
}

// newEnvConfig is newEnvWith with the configuration changed by edit (when not nil) first.
func newEnvConfig(t testing.TB, edit func(*config.Config), sessions ...session.Session) *env {
	t.Helper()
	e, err := startEnv(t, nil, edit, sessions...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// startEnv is newEnvConfig with the daemon started through wrapper (see
// testbed.StartDaemonWrapped). A daemon that does not start is its error; any other failure
// fails t.
func startEnv(t testing.TB, wrapper []string, edit func(*config.Config), sessions ...session.Session) (*env, error) {
	t.Helper()
	return startEnvOn(t, newTopology(t), wrapper, edit, sessions...)
}

// startEnvOn is startEnv on the topology topo.
func startEnvOn(t testing.TB, topo *testbed.Topology, wrapper []string, edit func(*config.Config), sessions ...session.Session) (*env, error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "xupfd.yaml")
	c := topo.Config(sessions, httpListen)
	if edit != nil {
		edit(c)
	}
	if err := topo.WriteConfigFile(cfg, c); err != nil {
		t.Fatal(err)
	}
	d, err := topo.StartDaemonWrapped(wrapper, xupfdBin, cfg, nil)
	if err != nil {
		return nil, err
	}
	// Registered after topo.Close, so it runs before it: the namespace must be empty to go.
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stop xupfd: %v\n%s", err, d.LogTail())
		}
	})
	e := &env{t: t, topo: topo, daemon: d, api: d.API()}
	t.Cleanup(func() {
		if t.Failed() {
			out, err := d.Xupfctl(context.Background(), xupfctlBin, "stats")
			t.Logf("xupfctl stats after the failure (err %v):\n%s", err, out)
			t.Logf("xupfd log (tail):\n%s", d.LogTail())
		}
	})
	return e, nil
}

// newTopology builds a fresh topology, torn down by t.Cleanup.
func newTopology(t testing.TB) *testbed.Topology {
	t.Helper()
	return newTopologyWith(t, testbed.Options{})
}

// newTopologyWith is newTopology with options.
func newTopologyWith(t testing.TB, opts testbed.Options) *testbed.Topology {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and XDP")
	}
	topo, err := testbed.NewWith("xupf-e2e", opts)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return topo
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// stats returns the daemon's counters through the API client.
func (e *env) stats() api.Stats {
	e.t.Helper()
	st, err := e.api.Stats(e.ctx())
	if err != nil {
		e.t.Fatalf("API stats: %v", err)
	}
	return st
}

// xupfctlJSON runs xupfctl -o json args... in the upf namespace and decodes its output into v.
func (e *env) xupfctlJSON(v any, args ...string) {
	e.t.Helper()
	out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, append([]string{"-o", "json"}, args...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("xupfctl -o json %v: decode %q: %v", args, out, err)
	}
}

// uplink sends n G-PDUs of s (with the session's QFI) and returns what the DN host received.
func (e *env) uplink(s session.Session, n int, payload func(int) []byte, timeout time.Duration) []testbed.Datagram {
	e.t.Helper()
	return e.uplinkFrom(s, testbed.UESrcPort, s.QFI, n, payload, timeout)
}

// uplinkFrom is uplink from the UE's port uePort with QFI qfi in the PDU Session Container.
func (e *env) uplinkFrom(s session.Session, uePort uint16, qfi uint8, n int, payload func(int) []byte, timeout time.Duration) []testbed.Datagram {
	e.t.Helper()
	rx, err := e.topo.ListenDN()
	if err != nil {
		e.t.Fatal(err)
	}
	defer rx.Close()
	if err := e.topo.SendUplinkFrom(s, uePort, n, payload, qfi); err != nil {
		e.t.Fatal(err)
	}
	got, err := rx.Collect(n, timeout)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// downlink sends n packets to s.UE from the DN host and returns the G-PDUs the gNB received.
func (e *env) downlink(s session.Session, n int, payload func(int) []byte) []testbed.GTPUPacket {
	e.t.Helper()
	return e.downlinkTo(s, testbed.UEPort, n, payload)
}

// downlinkTo is downlink to the UE's port uePort.
func (e *env) downlinkTo(s session.Session, uePort uint16, n int, payload func(int) []byte) []testbed.GTPUPacket {
	e.t.Helper()
	rx, err := e.topo.ListenGNB()
	if err != nil {
		e.t.Fatal(err)
	}
	defer rx.Close()
	if err := e.topo.SendDownlinkTo(s, uePort, n, payload); err != nil {
		e.t.Fatal(err)
	}
	got, err := testbed.ReceiveDownlink(rx, n, recvTimeout)
	if err != nil {
		e.t.Errorf("receive downlink: %v", err)
	}
	return got
}

// reportProblems fails t with every problem a testbed check found.
func reportProblems(t *testing.T, what string, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
}

// innerBytes is what the datapath counts for n packets from payload: the inner IPv4 packet
// (20-byte header, 8-byte UDP header, payload).
func innerBytes(n int, payload func(int) []byte) uint64 {
	var b uint64
	for i := range n {
		b += uint64(20 + 8 + len(payload(i)))
	}
	return b
}
