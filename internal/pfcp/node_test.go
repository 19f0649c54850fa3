package pfcp

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

var (
	smf      = netip.MustParseAddrPort("192.0.2.10:8805")
	smfNode  = "192.0.2.10"
	stranger = netip.MustParseAddrPort("203.0.113.5:8805")
	peerTS   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

func newTestNode() *Node {
	return NewNode(Options{NodeID: "10.100.3.1", AllowedPeers: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		HeartbeatInterval: time.Second, HeartbeatRetries: 3})
}

func bytesOf(t testing.TB, m message.Message) []byte {
	t.Helper()
	b := make([]byte, m.MarshalLen())
	if err := m.MarshalTo(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func setupRequest(seq uint32, ies ...*ie.IE) message.Message {
	return message.NewAssociationSetupRequest(seq, ies...)
}

func smfSetup(seq uint32) message.Message {
	return setupRequest(seq, ie.NewNodeID(smfNode, "", ""), ie.NewRecoveryTimeStamp(peerTS))
}

// cause returns the Cause and the Offending IE type (0 if none) of a response.
func cause(t testing.TB, b []byte) (message.Message, uint8, uint16) {
	t.Helper()
	m, err := message.Parse(b)
	if err != nil {
		t.Fatalf("response does not parse: %v", err)
	}
	var c, off *ie.IE
	switch r := m.(type) {
	case *message.AssociationSetupResponse:
		c = r.Cause
	case *message.AssociationUpdateResponse:
		c = r.Cause
	case *message.AssociationReleaseResponse:
		c = r.Cause
	case *message.SessionEstablishmentResponse:
		c, off = r.Cause, r.OffendingIE
	case *message.SessionModificationResponse:
		c, off = r.Cause, r.OffendingIE
	case *message.SessionDeletionResponse:
		c, off = r.Cause, r.OffendingIE
	default:
		return m, 0, 0
	}
	if c == nil {
		t.Fatalf("%s without a Cause", m.MessageTypeName())
	}
	v, _ := c.Cause()
	var o uint16
	if off != nil {
		o, _ = off.OffendingIE()
	}
	return m, v, o
}

func TestNodeMessages(t *testing.T) {
	cases := []struct {
		name      string
		associate bool // set up an association for smf first
		from      netip.AddrPort
		msg       message.Message
		wantType  uint8
		wantCause uint8
		wantOff   uint16
	}{
		{name: "association setup", from: smf, msg: smfSetup(1),
			wantType: message.MsgTypeAssociationSetupResponse, wantCause: ie.CauseRequestAccepted},
		{name: "association setup without node id", from: smf, msg: setupRequest(2, ie.NewRecoveryTimeStamp(peerTS)),
			wantType: message.MsgTypeAssociationSetupResponse, wantCause: ie.CauseMandatoryIEMissing},
		{name: "association setup without recovery time stamp", from: smf, msg: setupRequest(3, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeAssociationSetupResponse, wantCause: ie.CauseMandatoryIEMissing},
		{name: "association setup from a peer not allowed", from: stranger, msg: smfSetup(4),
			wantType: message.MsgTypeAssociationSetupResponse, wantCause: ie.CauseRequestRejected},
		{name: "association update without association", from: smf,
			msg:      message.NewAssociationUpdateRequest(5, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeAssociationUpdateResponse, wantCause: ie.CauseNoEstablishedPFCPAssociation},
		{name: "association update", associate: true, from: smf,
			msg:      message.NewAssociationUpdateRequest(6, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeAssociationUpdateResponse, wantCause: ie.CauseRequestAccepted},
		{name: "association update without node id", associate: true, from: smf,
			msg:      message.NewAssociationUpdateRequest(7),
			wantType: message.MsgTypeAssociationUpdateResponse, wantCause: ie.CauseMandatoryIEMissing},
		{name: "association release without association", from: smf,
			msg:      message.NewAssociationReleaseRequest(8, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeAssociationReleaseResponse, wantCause: ie.CauseNoEstablishedPFCPAssociation},
		{name: "association release", associate: true, from: smf,
			msg:      message.NewAssociationReleaseRequest(9, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeAssociationReleaseResponse, wantCause: ie.CauseRequestAccepted},
		{name: "session establishment without association", from: smf,
			msg:      message.NewSessionEstablishmentRequest(0, 0, 0, 10, 0, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeSessionEstablishmentResponse, wantCause: ie.CauseNoEstablishedPFCPAssociation},
		{name: "session establishment without node id", associate: true, from: smf,
			msg:      message.NewSessionEstablishmentRequest(0, 0, 0, 11, 0),
			wantType: message.MsgTypeSessionEstablishmentResponse, wantCause: ie.CauseMandatoryIEMissing, wantOff: ie.NodeID},
		{name: "session establishment without CP F-SEID", associate: true, from: smf,
			msg:      message.NewSessionEstablishmentRequest(0, 0, 0, 12, 0, ie.NewNodeID(smfNode, "", "")),
			wantType: message.MsgTypeSessionEstablishmentResponse, wantCause: ie.CauseMandatoryIEMissing, wantOff: ie.FSEID},
		{name: "session modification of an unknown SEID", associate: true, from: smf,
			msg:      message.NewSessionModificationRequest(0, 0, 0x1234, 13, 0),
			wantType: message.MsgTypeSessionModificationResponse, wantCause: ie.CauseSessionContextNotFound},
		{name: "session deletion of an unknown SEID", associate: true, from: smf,
			msg:      message.NewSessionDeletionRequest(0, 0, 0x1234, 14, 0),
			wantType: message.MsgTypeSessionDeletionResponse, wantCause: ie.CauseSessionContextNotFound},
		{name: "heartbeat", from: stranger, msg: message.NewHeartbeatRequest(15, ie.NewRecoveryTimeStamp(peerTS), nil),
			wantType: message.MsgTypeHeartbeatResponse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newTestNode()
			if c.associate {
				if _, got, _ := cause(t, n.Handle(smf, bytesOf(t, smfSetup(99)))); got != ie.CauseRequestAccepted {
					t.Fatalf("setup: cause %d", got)
				}
			}
			resp := n.Handle(c.from, bytesOf(t, c.msg))
			if resp == nil {
				t.Fatal("no response")
			}
			m, got, off := cause(t, resp)
			if m.MessageType() != c.wantType || got != c.wantCause || off != c.wantOff {
				t.Errorf("got %s cause %d offending IE %d; want type %d cause %d offending IE %d",
					m.MessageTypeName(), got, off, c.wantType, c.wantCause, c.wantOff)
			}
			if m.Sequence() != c.msg.Sequence() {
				t.Errorf("sequence %d, want %d", m.Sequence(), c.msg.Sequence())
			}
		})
	}
}

func TestAssociationLifecycle(t *testing.T) {
	n := newTestNode()
	resp := n.Handle(smf, bytesOf(t, smfSetup(1)))
	m, _, _ := cause(t, resp)
	r := m.(*message.AssociationSetupResponse)
	if id, _ := r.NodeID.NodeID(); id != "10.100.3.1" {
		t.Errorf("our node id %q", id)
	}
	ts, _ := r.RecoveryTimeStamp.RecoveryTimeStamp()
	if r.UPFunctionFeatures == nil {
		t.Error("no UP Function Features")
	}
	as := n.Associations()
	if len(as) != 1 || as[0].NodeID != smfNode || as[0].Address != smf || !as[0].Recovery.Equal(peerTS) {
		t.Fatalf("associations %+v", as)
	}
	// Our Recovery Time Stamp stays the same for the life of the node.
	m, _, _ = cause(t, n.Handle(smf, bytesOf(t, message.NewHeartbeatRequest(2, ie.NewRecoveryTimeStamp(peerTS), nil))))
	hts, _ := m.(*message.HeartbeatResponse).RecoveryTimeStamp.RecoveryTimeStamp()
	if !hts.Equal(ts) {
		t.Errorf("heartbeat recovery %v, setup said %v", hts, ts)
	}
	if _, got, _ := cause(t, n.Handle(smf, bytesOf(t, message.NewAssociationReleaseRequest(3, ie.NewNodeID(smfNode, "", ""))))); got != ie.CauseRequestAccepted {
		t.Fatalf("release: cause %d", got)
	}
	if as := n.Associations(); len(as) != 0 {
		t.Errorf("association kept after release: %+v", as)
	}
}

func TestMalformedAndVersion(t *testing.T) {
	n := newTestNode()
	b := bytesOf(t, smfSetup(7))
	b = b[:len(b)-3] // the last IE (Recovery Time Stamp) cut short, the header length fixed up
	b[2], b[3] = byte((len(b)-4)>>8), byte(len(b)-4)
	_, got, _ := cause(t, n.Handle(smf, b))
	if got != ie.CauseMandatoryIEIncorrect {
		t.Errorf("truncated IE: cause %d, want %d", got, ie.CauseMandatoryIEIncorrect)
	}
	v2 := bytesOf(t, message.NewHeartbeatRequest(8, ie.NewRecoveryTimeStamp(peerTS), nil))
	v2[0] = 2<<5 | v2[0]&0x1f
	m, err := message.Parse(n.Handle(smf, v2))
	if err != nil || m.MessageType() != message.MsgTypeVersionNotSupportedResponse || m.Sequence() != 8 {
		t.Errorf("version 2: %v %v", m, err)
	}
	if resp := n.Handle(smf, []byte{0x20}); resp != nil {
		t.Errorf("answered a 1-byte datagram")
	}
	n.Handle(smf, bytesOf(t, message.NewPFDManagementRequest(9)))
	n.Handle(smf, bytesOf(t, message.NewSessionReportResponse(0, 0, 1, 11, 0, ie.NewCause(ie.CauseRequestAccepted))))
	hb := bytesOf(t, message.NewHeartbeatResponse(10, ie.NewRecoveryTimeStamp(peerTS)))
	n.Handle(smf, hb[:len(hb)-2]) // its IE cut short, the header length not: it does not parse
	want := map[string]uint64{"undecodable_header": 1, "amplification_limit": 0, "unhandled_type": 1, "malformed": 1,
		"unrequested_response": 1}
	if got := n.Drops(); !maps.Equal(got, want) {
		t.Errorf("drops %v, want %v", got, want)
	}
}

// TestHeartbeatLoss: a peer that leaves HeartbeatRetries heartbeats unanswered is dropped;
// one that answers keeps its association.
func TestHeartbeatLoss(t *testing.T) {
	n := newTestNode()
	n.Handle(smf, bytesOf(t, smfSetup(1)))
	for range 3 { // each beat answered
		hbs, _ := n.beat()
		if len(hbs) != 1 || hbs[0].peer != smf {
			t.Fatalf("heartbeats %v", hbs)
		}
		req, _ := message.Parse(hbs[0].msg)
		n.Handle(smf, bytesOf(t, message.NewHeartbeatResponse(req.Sequence(), ie.NewRecoveryTimeStamp(peerTS))))
	}
	if as := n.Associations(); len(as) != 1 || as[0].Missed != 0 {
		t.Fatalf("answered heartbeats: %+v", as)
	}
	n.beat() // sent, never answered
	n.beat() // missed 1
	n.beat() // missed 2
	if as := n.Associations(); len(as) != 1 || as[0].Missed != 2 {
		t.Fatalf("after two misses: %+v", as)
	}
	n.beat() // missed 3: lost
	if as := n.Associations(); len(as) != 0 {
		t.Errorf("peer with 3 unanswered heartbeats kept: %+v", as)
	}
}

// serveLoopback runs n on a loopback socket until the test ends and returns a client socket
// connected to it.
func serveLoopback(t *testing.T, n *Node) *net.UDPConn {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, conn) }()
	client, err := net.DialUDP("udp", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return client
}

// TestServeOverUDP runs the node on a loopback socket: an SMF-like client associates, gets a
// heartbeat from the node and answers it, and stays associated.
func TestServeOverUDP(t *testing.T) {
	n := NewNode(Options{NodeID: "127.0.0.1", HeartbeatInterval: 50 * time.Millisecond, HeartbeatRetries: 10,
		AllowedPeers: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	client := serveLoopback(t, n)
	client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write(bytesOf(t, setupRequest(1, ie.NewNodeID("127.0.0.1", "", ""), ie.NewRecoveryTimeStamp(peerTS)))); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	heartbeats := 0
	for heartbeats < 3 {
		size, err := client.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (heartbeats so far %d)", err, heartbeats)
		}
		m, err := message.Parse(buf[:size])
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *message.AssociationSetupResponse:
			if c, _ := m.Cause.Cause(); c != ie.CauseRequestAccepted {
				t.Fatalf("setup cause %d", c)
			}
		case *message.HeartbeatRequest:
			heartbeats++
			client.Write(bytesOf(t, message.NewHeartbeatResponse(m.SequenceNumber, ie.NewRecoveryTimeStamp(peerTS))))
		}
	}
	if as := n.Associations(); len(as) != 1 {
		t.Errorf("after answering heartbeats: %+v", as)
	}
}

// TestHeartbeatRequestsKeepAPeerAlive: a peer that sends Heartbeat Requests but leaves ours
// unanswered is not declared lost.
func TestHeartbeatRequestsKeepAPeerAlive(t *testing.T) {
	n := newTestNode()
	n.Handle(smf, bytesOf(t, smfSetup(1)))
	for i := range 10 {
		n.beat()
		n.Handle(smf, bytesOf(t, message.NewHeartbeatRequest(uint32(10+i), ie.NewRecoveryTimeStamp(peerTS), nil)))
	}
	if as := n.Associations(); len(as) != 1 || as[0].Missed != 0 {
		t.Errorf("associations %+v after 10 of our heartbeats unanswered and 10 of its own", as)
	}
}

// TestBatchWriter: responses sent together arrive, in order, from a socket bound to one IPv4
// address and from a dual-stack one (bound to every address, as pfcp_listen's default is),
// at IPv4 and IPv6 peers.
func TestBatchWriter(t *testing.T) {
	for _, c := range []struct{ local, peer string }{
		{"127.0.0.1:0", "127.0.0.1:0"},
		{":0", "127.0.0.1:0"},
		{":0", "[::1]:0"},
	} {
		t.Run(c.local+"→"+c.peer, func(t *testing.T) {
			laddr := &net.UDPAddr{} // every address: a dual-stack socket
			if c.local != ":0" {
				laddr = net.UDPAddrFromAddrPort(netip.MustParseAddrPort(c.local))
			}
			from, err := net.ListenUDP("udp", laddr)
			if err != nil {
				t.Fatal(err)
			}
			defer from.Close()
			to, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(c.peer)))
			if err != nil {
				t.Skipf("no %s here: %v", c.peer, err)
			}
			defer to.Close()
			peer := to.LocalAddr().(*net.UDPAddr).AddrPort()
			w := newBatchWriter(from, slog.New(slog.DiscardHandler))
			const n = 10
			for i := range n {
				w.add(response{peer: peer, msg: []byte{byte(i)}})
			}
			w.flush()
			to.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 16)
			for i := range n {
				size, err := to.Read(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if size != 1 || buf[0] != byte(i) {
					t.Fatalf("datagram %d: % x, want %02x", i, buf[:size], i)
				}
			}
		})
	}
}

// TestBatchWriterSkipsRefused: a datagram the kernel refuses (an IPv6 peer from an IPv4
// socket) is skipped, and the ones after it still go.
func TestBatchWriterSkipsRefused(t *testing.T) {
	from, to := listenLoopback(t), listenLoopback(t)
	peer := to.LocalAddr().(*net.UDPAddr).AddrPort()
	w := newBatchWriter(from, slog.New(slog.DiscardHandler))
	w.add(response{peer: peer, msg: []byte{1}})
	w.add(response{peer: netip.MustParseAddrPort("[2001:db8::1]:8805"), msg: []byte{2}})
	w.add(response{peer: peer, msg: []byte{3}})
	w.flush()
	to.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	for _, want := range []byte{1, 3} {
		size, err := to.Read(buf)
		if err != nil || size != 1 || buf[0] != want {
			t.Fatalf("got % x (%v), want %02x", buf[:size], err, want)
		}
	}
}

// listenLoopback is a UDP socket on 127.0.0.1, closed when the test ends.
func listenLoopback(t *testing.T) *net.UDPConn {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
