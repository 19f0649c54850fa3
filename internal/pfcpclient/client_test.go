package pfcpclient

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/pfcp"
)

// startUPF runs a pfcp.Node on a loopback socket.
func startUPF(t *testing.T, opts pfcp.Options) (*pfcp.Node, netip.AddrPort) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	n := pfcp.NewNode(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return n, conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

func TestAssociateHeartbeatRelease(t *testing.T) {
	upf, addr := startUPF(t, pfcp.Options{NodeID: "127.0.0.1", HeartbeatInterval: 30 * time.Millisecond, HeartbeatRetries: 10,
		AllowedPeers: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	c, err := Dial(addr, Options{NodeID: "smf.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a, err := c.Associate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeID != "127.0.0.1" || a.Recovery.IsZero() || a.Features == nil {
		t.Errorf("association %+v", a)
	}
	ts, err := c.Heartbeat(ctx)
	if err != nil || !ts.Equal(a.Recovery) {
		t.Errorf("heartbeat: %v %v, want recovery %v", ts, err, a.Recovery)
	}
	// The client answers the UPF's heartbeats: after several intervals the association stands.
	time.Sleep(200 * time.Millisecond)
	if as := upf.Associations(); len(as) != 1 || as[0].NodeID != "smf.example" {
		t.Fatalf("associations while answering heartbeats: %+v", as)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if as := upf.Associations(); len(as) != 0 {
		t.Errorf("associations after release: %+v", as)
	}
	var ce *CauseError
	if err := c.Release(ctx); !errors.As(err, &ce) || ce.Cause != ie.CauseNoEstablishedPFCPAssociation {
		t.Errorf("second release: %v", err)
	}
}

func TestRefusedAndUnanswered(t *testing.T) {
	_, addr := startUPF(t, pfcp.Options{NodeID: "127.0.0.1", AllowedPeers: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		HeartbeatInterval: time.Second, HeartbeatRetries: 3})
	c, err := Dial(addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ce *CauseError
	if _, err := c.Associate(context.Background()); !errors.As(err, &ce) || ce.Cause != ie.CauseRequestRejected {
		t.Errorf("association from a peer not allowed: %v", err)
	}

	// Nobody listens here: the request is retried, then given up with a clear error.
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c2, err := Dial(silent.LocalAddr().(*net.UDPAddr).AddrPort(), Options{Timeout: 20 * time.Millisecond, Tries: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.Associate(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no answer after 3 tries") {
		t.Errorf("unanswered: %v", err)
	}
	buf := make([]byte, 1024)
	silent.SetReadDeadline(time.Now().Add(time.Second))
	got := 0
	for {
		if _, err := silent.Read(buf); err != nil {
			break
		}
		got++
	}
	if got != 3 {
		t.Errorf("the silent UPF received %d copies, want 3", got)
	}
}
