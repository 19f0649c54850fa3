package pfcp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// impostor is inside pfcp_allowed_peers (192.0.2.0/24) but is not the SMF.
var impostor = netip.MustParseAddrPort("192.0.2.66:8805")

// TestSessionRequestsOnlyFromTheAssociation: an Establishment naming an associated SMF's
// Node ID from another address creates nothing and cannot take the SMF's CP SEIDs; an
// address listed for the Node ID in PeerAddresses may send for it.
func TestSessionRequestsOnlyFromTheAssociation(t *testing.T) {
	p := newPFCPTest(t)
	_, c, _ := cause(t, p.n.Handle(impostor, bytesOf(t, establishment(300, 0x50, basicSession(ue1)...))))
	if c != ie.CauseNoEstablishedPFCPAssociation || len(p.n.Sessions()) != 0 {
		t.Fatalf("establishment from an impostor: cause %d, %d sessions", c, len(p.n.Sessions()))
	}
	p.mustEstablish(0x50, basicSession(ue1)...) // the CP SEID is the SMF's still

	second := netip.MustParseAddrPort("192.0.2.11:8805")
	p = newPFCPTest(t, func(o *Options) {
		o.PeerAddresses = map[string][]netip.Prefix{smfNode: {netip.MustParsePrefix("192.0.2.10/31")}}
	})
	if _, c, _ := cause(t, p.n.Handle(second, bytesOf(t, establishment(301, 0x51, basicSession(ue1)...)))); c != ie.CauseRequestAccepted {
		t.Errorf("establishment from an address listed for the Node ID: cause %d", c)
	}
	if _, c, _ := cause(t, p.n.Handle(impostor, bytesOf(t, establishment(302, 0x52, basicSession(ue1)...)))); c != ie.CauseNoEstablishedPFCPAssociation {
		t.Errorf("establishment from an address not listed for the Node ID: cause %d", c)
	}
}

// TestAssociationNotMoved: a setup naming an associated SMF's Node ID from another address
// is rejected and leaves the association and its sessions alone, also while a lost SMF's
// sessions remain; an address listed in PeerAddresses may take over (an SMF that moved).
func TestAssociationNotMoved(t *testing.T) {
	p := newPFCPTest(t)
	p.mustEstablish(0x60, basicSession(ue1)...)
	setupFrom := func(from netip.AddrPort, seq uint32) uint8 {
		_, c, _ := cause(t, p.n.Handle(from, bytesOf(t, smfSetup(seq))))
		return c
	}
	if c := setupFrom(impostor, 2); c != ie.CauseRequestRejected {
		t.Errorf("setup from an impostor: cause %d", c)
	}
	if a := p.n.Associations(); len(a) != 1 || a[0].Address != smf || len(p.n.Sessions()) != 1 {
		t.Fatalf("after the impostor's setup: associations %+v, %d sessions", a, len(p.n.Sessions()))
	}
	for range 4 { // the SMF is lost; pfcp_lost_peer_sessions: keep
		p.n.peerLost(func() []string { _, lost := p.n.beat(); return lost }())
	}
	if len(p.n.Associations()) != 0 || len(p.n.Sessions()) != 1 {
		t.Fatalf("lost SMF: associations %+v, %d sessions", p.n.Associations(), len(p.n.Sessions()))
	}
	if c := setupFrom(impostor, 3); c != ie.CauseRequestRejected || len(p.n.Sessions()) != 1 {
		t.Errorf("setup from an impostor while the lost SMF's sessions remain: cause %d, %d sessions", c, len(p.n.Sessions()))
	}
	if c := setupFrom(smf, 4); c != ie.CauseRequestAccepted || len(p.n.Sessions()) != 1 {
		t.Errorf("the SMF comes back: cause %d, %d sessions", c, len(p.n.Sessions()))
	}

	p.n.opts.PeerAddresses = map[string][]netip.Prefix{smfNode: {netip.MustParsePrefix(impostor.Addr().String() + "/32")}}
	if c := setupFrom(impostor, 5); c != ie.CauseRequestAccepted {
		t.Errorf("setup from the SMF's new, listed address: cause %d", c)
	}
	if a := p.n.Associations(); len(a) != 1 || a[0].Address != impostor {
		t.Errorf("associations %+v, want the SMF at its new address", a)
	}
}

// TestAllowedPeers: with no pfcp_allowed_peers no address may associate but the SMFs this
// UPF associates with itself; 0.0.0.0/0 admits any.
func TestAllowedPeers(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed []netip.Prefix
		smfs    []netip.AddrPort
		want    uint8
	}{
		{"none", nil, nil, ie.CauseRequestRejected},
		{"an SMF this UPF associates with", nil, []netip.AddrPort{netip.AddrPortFrom(smf.Addr(), 9999)}, ie.CauseRequestAccepted},
		{"any", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, nil, ie.CauseRequestAccepted},
		{"another network", []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, nil, ie.CauseRequestRejected},
	} {
		n := NewNode(Options{NodeID: "10.100.3.1", AllowedPeers: c.allowed, SMFPeers: c.smfs,
			HeartbeatInterval: time.Second, HeartbeatRetries: 3})
		if _, got, _ := cause(t, n.Handle(smf, bytesOf(t, smfSetup(1)))); got != c.want {
			t.Errorf("%s: cause %d, want %d", c.name, got, c.want)
		}
	}
}

// TestLimits: associations, sessions and sessions per association are bounded; the
// sessions' bound answers "No resources available" (TS 29.244 7.5.3).
func TestLimits(t *testing.T) {
	p := newPFCPTest(t, func(o *Options) {
		o.MaxAssociations, o.MaxSessions, o.MaxSessionsPerAssociation = 2, 3, 2
		o.PeerAddresses = map[string][]netip.Prefix{"smf.listed": {netip.MustParsePrefix("192.0.2.40/32")}}
	})
	setup := func(node string, from netip.AddrPort) uint8 {
		_, c, _ := cause(t, p.n.Handle(from, bytesOf(t, setupRequest(1, ie.NewNodeIDHeuristic(node), ie.NewRecoveryTimeStamp(peerTS)))))
		return c
	}
	other := netip.MustParseAddrPort("192.0.2.20:8805")
	if c := setup("192.0.2.20", other); c != ie.CauseRequestAccepted {
		t.Fatalf("second association: cause %d", c)
	}
	if c := setup("192.0.2.30", netip.MustParseAddrPort("192.0.2.30:8805")); c != ie.CauseRequestRejected {
		t.Errorf("third association with max_associations 2: cause %d", c)
	}
	if c := setup(smfNode, smf); c != ie.CauseRequestAccepted {
		t.Errorf("an associated SMF sets up again at the limit: cause %d", c)
	}
	if c := setup("smf.listed", netip.MustParseAddrPort("192.0.2.40:8805")); c != ie.CauseRequestAccepted {
		t.Errorf("an SMF of pfcp_peer_addresses at the limit: cause %d", c)
	}
	p.mustEstablish(1, basicSession(netip.MustParseAddr("10.45.0.1"))...)
	p.mustEstablish(2, basicSession(netip.MustParseAddr("10.45.0.2"))...)
	r := p.establish(3, basicSession(netip.MustParseAddr("10.45.0.3"))...)
	if c, _ := r.Cause.Cause(); c != ie.CauseNoResourcesAvailable {
		t.Errorf("third session of one SMF with max_sessions_per_association 2: cause %d", c)
	}
	est := func(from netip.AddrPort, node string, cp uint64, ue string) uint8 {
		m := message.NewSessionEstablishmentRequest(0, 0, 0, uint32(cp), 0, ie.NewNodeID(node, "", ""),
			ie.NewFSEID(cp, other.Addr().AsSlice(), nil))
		m.CreatePDR, m.CreateFAR = []*ie.IE{dlPDR(2, netip.MustParseAddr(ue), 2)}, []*ie.IE{forwardFAR(2, ie.DstInterfaceAccess, ohc(5, gnb))}
		_, c, _ := cause(t, p.n.Handle(from, bytesOf(t, m)))
		return c
	}
	if c := est(other, "192.0.2.20", 10, "10.45.0.10"); c != ie.CauseRequestAccepted {
		t.Fatalf("the other SMF's first session: cause %d", c)
	}
	if c := est(other, "192.0.2.20", 11, "10.45.0.11"); c != ie.CauseNoResourcesAvailable {
		t.Errorf("a fourth session with max_sessions 3: cause %d", c)
	}
}

// TestPeersForgotten: Node IDs that associate and go leave nothing behind, nor do lost
// ones without sessions.
func TestPeersForgotten(t *testing.T) {
	n := newSessionNode(newFakeDatapath(), func(o *Options) { o.MaxAssociations = 0 })
	for i := range 1000 {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 250)}), uint16(1000+i))
		node := fmt.Sprintf("smf%d.example", i)
		n.Handle(from, bytesOf(t, setupRequest(1, ie.NewNodeIDHeuristic(node), ie.NewRecoveryTimeStamp(peerTS))))
		if i%2 == 0 {
			n.Handle(from, bytesOf(t, message.NewAssociationReleaseRequest(2, ie.NewNodeIDHeuristic(node))))
		}
	}
	if len(n.assocs) != 500 || len(n.recoveries) != 500 {
		t.Fatalf("%d associations and %d recoveries before the losses, want 500 each", len(n.assocs), len(n.recoveries))
	}
	for range 4 {
		_, lost := n.beat()
		n.peerLost(lost)
	}
	if len(n.assocs) != 0 || len(n.recoveries) != 0 || len(n.pending) != 0 {
		t.Errorf("%d associations, %d recoveries, %d pending heartbeats left", len(n.assocs), len(n.recoveries), len(n.pending))
	}
}

// TestNoAmplification: an address without an association gets answers longer than its
// requests at strangerAnswers a second at most; an associated SMF gets every answer.
func TestNoAmplification(t *testing.T) {
	p := newPFCPTest(t)
	// The smallest establishment: its "no association" answer carries the UPF's Node ID.
	req := bytesOf(t, message.NewSessionEstablishmentRequest(0, 0, 0, 1, 0, ie.NewNodeID("x", "", "")))
	answered := 0
	for range 1000 {
		if resp := p.n.Handle(stranger, req); resp != nil {
			if len(resp) <= len(req) {
				t.Fatalf("answer of %d bytes to %d: the test needs a longer answer", len(resp), len(req))
			}
			answered++
		}
	}
	if dropped := p.n.Drops()["amplification_limit"]; answered > strangerAnswers+5 || answered == 0 || dropped != uint64(1000-answered) {
		t.Errorf("%d of 1000 answered, %d counted unanswered; want about %d answered", answered, dropped, strangerAnswers)
	}
	update := bytesOf(t, message.NewAssociationUpdateRequest(2, ie.NewNodeID(smfNode, "", "")))
	for range 200 {
		if resp := p.n.Handle(smf, update); len(resp) <= len(update) {
			t.Fatalf("the associated SMF's association update got %d bytes, want a longer answer", len(resp))
		}
	}
}

// TestUEAddressesRefused: a session may not claim an address of the UPF, or one no UE can
// have; with UEPoolsOnly, not one outside the pools either.
func TestUEAddressesRefused(t *testing.T) {
	n6 := netip.MustParseAddr("10.100.6.1")
	for _, c := range []struct {
		ue        string
		poolsOnly bool
		want      uint8
	}{
		{"10.100.6.1", false, ie.CauseMandatoryIEIncorrect}, // the UPF's N6 address
		{"10.100.1.1", false, ie.CauseMandatoryIEIncorrect}, // its N3 address
		{"127.0.0.1", false, ie.CauseMandatoryIEIncorrect},
		{"0.0.0.0", false, ie.CauseMandatoryIEIncorrect},
		{"255.255.255.255", false, ie.CauseMandatoryIEIncorrect},
		{"224.0.0.1", false, ie.CauseMandatoryIEIncorrect},
		{"169.254.1.1", false, ie.CauseMandatoryIEIncorrect},
		{"240.0.0.1", false, ie.CauseMandatoryIEIncorrect},
		{"10.45.0.7", true, ie.CauseMandatoryIEIncorrect}, // outside the pool 10.46.0.0/30
		{"10.45.0.7", false, ie.CauseRequestAccepted},
		{"10.46.0.1", true, ie.CauseRequestAccepted},
	} {
		p := newPFCPTest(t, func(o *Options) { o.UEPoolsOnly = c.poolsOnly })
		p.dp.local = map[netip.Addr]bool{n6: true, n3: true}
		r := p.establish(0x80, basicSession(netip.MustParseAddr(c.ue))...)
		got, _ := r.Cause.Cause()
		var off uint16
		if r.OffendingIE != nil {
			off, _ = r.OffendingIE.OffendingIE()
		}
		if got != c.want || (got != ie.CauseRequestAccepted && off != ie.UEIPAddress) {
			t.Errorf("UE %s (pools only %v): cause %d, offending IE %d; want cause %d", c.ue, c.poolsOnly, got, off, c.want)
		}
	}
}

// TestSetupResponseCannotTakeANodeID: an answer to this UPF's own Association Setup Request
// that names another associated SMF's Node ID neither moves its association nor ends its
// sessions.
func TestSetupResponseCannotTakeANodeID(t *testing.T) {
	other := netip.MustParseAddrPort("198.51.100.9:8805")
	p := newPFCPTest(t, func(o *Options) { o.SMFPeers = []netip.AddrPort{other} })
	p.mustEstablish(0x61, basicSession(ue1)...)
	req, err := message.Parse(p.n.setupRequest(other))
	if err != nil {
		t.Fatal(err)
	}
	p.n.Handle(other, bytesOf(t, message.NewAssociationSetupResponse(req.Sequence(), ie.NewNodeID(smfNode, "", ""),
		ie.NewCause(ie.CauseRequestAccepted), ie.NewRecoveryTimeStamp(peerTS.Add(time.Hour)))))
	if a := p.n.Associations(); len(a) != 1 || a[0].Address != smf || len(p.n.Sessions()) != 1 {
		t.Errorf("after a setup response naming the SMF's Node ID: associations %+v, %d sessions", a, len(p.n.Sessions()))
	}
}

// TestNoRoomForSessions: a negative MaxSessions (the static sessions fill the datapath)
// refuses every establishment with "No resources available".
func TestNoRoomForSessions(t *testing.T) {
	p := newPFCPTest(t, func(o *Options) { o.MaxSessions = -1 })
	if c, _ := p.establish(1, basicSession(ue1)...).Cause.Cause(); c != ie.CauseNoResourcesAvailable {
		t.Errorf("establishment with no room: cause %d", c)
	}
}

// TestStrangersLogOnce: what an address does wrong again and again is logged above debug
// level once per address and kind, so a flood cannot fill the log.
func TestStrangersLogOnce(t *testing.T) {
	var log strings.Builder
	n := NewNode(Options{NodeID: "10.100.3.1", HeartbeatInterval: time.Second, HeartbeatRetries: 3,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	bad := bytesOf(t, smfSetup(7))
	bad = bad[:len(bad)-3]
	bad[2], bad[3] = byte((len(bad)-4)>>8), byte(len(bad)-4)
	for range 100 {
		n.Handle(stranger, bytesOf(t, smfSetup(1))) // not allowed
		n.Handle(stranger, bad)                     // malformed
	}
	release := bytesOf(t, message.NewAssociationReleaseRequest(3, ie.NewNodeID("0.0.0.0", "", ""))) // pfcpsim's
	for range 100 {
		n.Handle(stranger, release)
	}
	if got := strings.Count(log.String(), "level=WARN"); got != 3 {
		t.Errorf("%d warnings for 300 bad messages of one address, want 3:\n%s", got, log.String())
	}
}
