package pfcp

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// TestUPFInitiatesAssociation: with an SMF configured, the node sends Association Setup
// Requests until one is accepted (the fake SMF ignores the first), keeps the association
// while heartbeats are answered, and when the SMF falls silent drops it and starts asking
// again.
func TestUPFInitiatesAssociation(t *testing.T) {
	smfConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer smfConn.Close()
	upfConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	smfAddr := smfConn.LocalAddr().(*net.UDPAddr).AddrPort()
	n := NewNode(Options{NodeID: "127.0.0.1", HeartbeatInterval: 30 * time.Millisecond, HeartbeatRetries: 2,
		SMFPeers: []netip.AddrPort{smfAddr}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, upfConn) }()
	defer func() {
		cancel()
		<-done
	}()

	smfConn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	setups, heartbeats := 0, 0
	silent := false
	for {
		size, from, err := smfConn.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("fake SMF read: %v (setups %d, heartbeats %d)", err, setups, heartbeats)
		}
		m, err := message.Parse(buf[:size])
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *message.AssociationSetupRequest:
			setups++
			if id, _ := m.NodeID.NodeID(); id != "127.0.0.1" || m.RecoveryTimeStamp == nil {
				t.Fatalf("setup request node id %q recovery %v", id, m.RecoveryTimeStamp)
			}
			if silent {
				// The association was dropped for missed heartbeats and is being asked for
				// again: all observed.
				if as := n.Associations(); len(as) != 0 {
					t.Errorf("association kept while asking for a new one: %+v", as)
				}
				return
			}
			if setups == 1 {
				continue // ignored: the node must try again
			}
			resp := message.NewAssociationSetupResponse(m.SequenceNumber, ie.NewNodeID("", "", "smf.test"),
				ie.NewCause(ie.CauseRequestAccepted), ie.NewRecoveryTimeStamp(peerTS))
			smfConn.WriteToUDPAddrPort(bytesOf(t, resp), from)
		case *message.HeartbeatRequest:
			heartbeats++
			if heartbeats == 1 {
				as := n.Associations()
				if len(as) != 1 || as[0].NodeID != "smf.test" || as[0].Address != smfAddr {
					t.Fatalf("associations after the SMF accepted: %+v", as)
				}
			}
			if heartbeats < 3 {
				smfConn.WriteToUDPAddrPort(bytesOf(t, message.NewHeartbeatResponse(m.SequenceNumber,
					ie.NewRecoveryTimeStamp(peerTS))), from)
				continue
			}
			silent = true // from now on heartbeats go unanswered
		}
	}
}
