package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
)

// These tests run Daemon.Run without a datapath (which needs root): they use only what Run
// serves, PFCP and the API's association listing.

const runConfig = `interfaces: [{name: eth0, roles: [n3, n6]}]
gtpu_addresses: [192.0.2.1]
`

// testConfig parses runConfig plus extra and points both listeners at loopback port 0.
func testConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(runConfig + extra))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.PFCPListen = "127.0.0.1:0"
	cfg.PFCPAllowedPeers = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} // the tests' SMFs
	cfg.TokenFile = filepath.Join(t.TempDir(), "api-token")
	return cfg
}

type running struct {
	client   *api.Client
	pfcpAddr *net.UDPAddr
	httpAddr net.Addr
	cancel   context.CancelFunc
	done     chan error // Run's result
}

// startRun runs a datapath-less daemon for cfg until the test ends.
func startRun(t *testing.T, cfg *config.Config) *running {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	d := &Daemon{cfg: cfg, log: log, pfcpNode: newPFCPNode(cfg, nil, nil, nil, nil, log)}
	if err := d.listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{cancel: cancel, done: make(chan error, 1), httpAddr: d.httpLn.Addr(), pfcpAddr: d.pfcpConn.LocalAddr().(*net.UDPAddr)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	r.client = api.NewClient("http://"+r.httpAddr.String(), nil).WithTokenFile(cfg.TokenFile)
	return r
}

// stop cancels Run's context and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was canceled")
		return nil
	}
}

// smf is a PFCP peer on loopback.
type smf struct {
	t    *testing.T
	conn *net.UDPConn
	upf  *net.UDPAddr
}

func newSMF(t *testing.T, upf *net.UDPAddr) *smf {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &smf{t: t, conn: conn, upf: upf}
}

func (s *smf) send(m message.Message) {
	s.t.Helper()
	b := make([]byte, m.MarshalLen())
	if err := m.MarshalTo(b); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.conn.WriteToUDP(b, s.upf); err != nil {
		s.t.Fatal(err)
	}
}

// receive returns the next message from the UPF, failing the test after timeout.
func (s *smf) receive(timeout time.Duration) message.Message {
	s.t.Helper()
	buf := make([]byte, 65535)
	if err := s.conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		s.t.Fatal(err)
	}
	n, err := s.conn.Read(buf)
	if err != nil {
		s.t.Fatalf("no PFCP message from the UPF: %v", err)
	}
	m, err := message.Parse(buf[:n])
	if err != nil {
		s.t.Fatalf("the UPF's message does not parse: %v", err)
	}
	return m
}

// associate sends an Association Setup Request as Node ID smf.example and returns the
// response.
func (s *smf) associate() *message.AssociationSetupResponse {
	s.t.Helper()
	s.send(message.NewAssociationSetupRequest(1, ie.NewNodeID("", "", "smf.example"),
		ie.NewRecoveryTimeStamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))))
	m := s.receive(5 * time.Second)
	resp, ok := m.(*message.AssociationSetupResponse)
	if !ok {
		s.t.Fatalf("got %s, want an Association Setup Response", m.MessageTypeName())
	}
	return resp
}

func causeOf(t *testing.T, c *ie.IE) uint8 {
	t.Helper()
	if c == nil {
		t.Fatal("response without a Cause")
	}
	v, err := c.Cause()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRunServesPFCPAndAssociations(t *testing.T) {
	r := startRun(t, testConfig(t, "pfcp_node_id: upf.test\npfcp_allowed_peers: [127.0.0.0/8]\n"))

	list, err := r.client.Associations(t.Context())
	if err != nil || len(list) != 0 {
		t.Fatalf("Associations before any SMF = %v, %v; want none", list, err)
	}

	s := newSMF(t, r.pfcpAddr)
	resp := s.associate()
	if c := causeOf(t, resp.Cause); c != ie.CauseRequestAccepted {
		t.Fatalf("Association Setup cause = %d, want %d (accepted)", c, ie.CauseRequestAccepted)
	}
	// pfcp_node_id reaches the node.
	if id, err := resp.NodeID.NodeID(); err != nil || id != "upf.test" {
		t.Errorf("the UPF's Node ID = %q, %v; want upf.test (pfcp_node_id)", id, err)
	}

	list, err = r.client.Associations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := s.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	if len(list) != 1 || list[0].NodeID != "smf.example" || list[0].Address != netip.AddrPortFrom(want.Addr().Unmap(), want.Port()) {
		t.Errorf("Associations = %+v, want smf.example from %s", list, want)
	}

	if err := r.stop(t); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	// Both listeners are closed: their addresses can be bound again.
	conn, err := net.ListenUDP("udp", r.pfcpAddr)
	if err != nil {
		t.Errorf("the PFCP socket is still open after Run returned: %v", err)
	} else {
		conn.Close()
	}
	ln, err := net.Listen("tcp", r.httpAddr.String())
	if err != nil {
		t.Errorf("the HTTP listener is still open after Run returned: %v", err)
	} else {
		ln.Close()
	}
}

func TestRunAllowedPeers(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.PFCPAllowedPeers = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	r := startRun(t, cfg)
	resp := newSMF(t, r.pfcpAddr).associate()
	if c := causeOf(t, resp.Cause); c != ie.CauseRequestRejected {
		t.Errorf("Association Setup from 127.0.0.1 with pfcp_allowed_peers [192.0.2.0/24]: cause %d, want %d (rejected)",
			c, ie.CauseRequestRejected)
	}
	// The default Node ID is the first of gtpu_addresses.
	if id, err := resp.NodeID.NodeID(); err != nil || id != "192.0.2.1" {
		t.Errorf("the UPF's Node ID = %q, %v; want 192.0.2.1", id, err)
	}
	if list, err := r.client.Associations(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("Associations = %v, %v; want none", list, err)
	}
}

// The heartbeat settings reach the node: an SMF that does not answer is sent heartbeats
// every pfcp_heartbeat_interval and dropped after pfcp_heartbeat_retries of them.
func TestRunHeartbeats(t *testing.T) {
	r := startRun(t, testConfig(t, "pfcp_heartbeat_interval: 100ms\npfcp_heartbeat_retries: 2\n"))
	s := newSMF(t, r.pfcpAddr)
	if c := causeOf(t, s.associate().Cause); c != ie.CauseRequestAccepted {
		t.Fatalf("Association Setup cause = %d, want accepted", c)
	}
	if m := s.receive(2 * time.Second); m.MessageType() != message.MsgTypeHeartbeatRequest {
		t.Errorf("got %s, want a Heartbeat Request", m.MessageTypeName())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := r.client.Associations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the association of an SMF that answers no heartbeat is still there: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestListenPFCPBusy(t *testing.T) {
	busy, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// A free TCP port for the API, to check that it is released when PFCP cannot bind.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()

	cfg := testConfig(t, "")
	cfg.HTTPListen = httpAddr
	cfg.PFCPListen = busy.LocalAddr().String()
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), pfcpNode: newPFCPNode(cfg, nil, nil, nil, nil, nil)}
	err = d.listen()
	if err == nil {
		t.Fatal("listen succeeded with pfcp_listen in use")
	}
	if want := "pfcp_listen " + cfg.PFCPListen + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if !strings.Contains(err.Error(), "set pfcp_listen to another address") {
		t.Errorf("error %q does not say how to fix it", err)
	}
	ln, err = net.Listen("tcp", httpAddr)
	if err != nil {
		t.Errorf("the HTTP listener was not closed after the PFCP bind failed: %v", err)
	} else {
		ln.Close()
	}
}

// TestPFCPSocketHoldsBurst sends 2,000 requests' worth of datagrams at once, as an SMF with
// that many UEs attaching would, before xupfd reads any: every one must be there to read.
// With the default receive buffer about 200 fit and the rest cost their SMF a retransmission.
func TestPFCPSocketHoldsBurst(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: CAP_NET_ADMIN forces the buffer past net.core.rmem_max")
	}
	conn, err := listenPFCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	smf, err := net.DialUDP("udp", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer smf.Close()
	const burst = 2000
	req := make([]byte, 200)
	for i := range burst {
		req[0] = byte(i)
		if _, err := smf.Write(req); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1500)
	got := 0
	for {
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := conn.Read(buf); err != nil {
			break
		}
		got++
	}
	if got != burst {
		t.Fatalf("%d of %d datagrams sent at once were there to read", got, burst)
	}
}
