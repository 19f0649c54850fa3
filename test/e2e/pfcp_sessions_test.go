package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// smfClient associates an SMF with the daemon from the gnb namespace.
func (e *env) smfClient(nodeID string) (*pfcpclient.Client, context.Context) {
	return e.smfClientWith(pfcpclient.Options{NodeID: nodeID})
}

// smfClientWith is smfClient with the client's options.
func (e *env) smfClientWith(opts pfcpclient.Options) (*pfcpclient.Client, context.Context) {
	e.t.Helper()
	var c *pfcpclient.Client
	err := e.topo.Do(e.topo.GNBNS, func() error {
		var err error
		c, err = pfcpclient.Dial(testbed.PFCPAddr, opts)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	if _, err := c.Associate(ctx); err != nil {
		e.t.Fatalf("associate: %v\n%s", err, e.daemon.LogTail())
	}
	return c, ctx
}

// TestPFCPSessions: an SMF in the gnb namespace sets sessions up over PFCP the way Open5GS and
// free5GC do, and real packets go through them in both directions while they are modified
// (buffering, the gNB answering, handover, dropping, N9 forwarding) and deleted.
func TestPFCPSessions(t *testing.T) {
	e := newEnv(t)
	c, ctx := e.smfClient("smf.sessions.test")
	const n = 50

	// Open5GS style: the UPF chooses the TEID (CHOOSE ID shared with the flow's uplink PDR)
	// and the UE address; a QoS flow for UDP to the UE's port 7000.
	a, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, QFI: 9, NetworkInstance: "internet",
		GNB: testbed.GNBAddr, GNBTEID: 0x900,
		Flows: []pfcpclient.Flow{{Filter: "permit out 17 from any to assigned 7000", Precedence: 100, QFI: 5}}})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	if !testbed.UEPool.Contains(a.UE) || a.UplinkTEID == 0 || a.N3 != testbed.N3Addr {
		t.Fatalf("session %+v: want a UE from %s and a TEID on %s", a, testbed.UEPool, testbed.N3Addr)
	}
	for _, cp := range a.CreatedPDRs {
		if cp.TEID != 0 && cp.TEID != a.UplinkTEID {
			t.Errorf("created PDR %d on TEID 0x%x, want every uplink PDR on the shared 0x%x", cp.ID, cp.TEID, a.UplinkTEID)
		}
	}
	sa := testbed.PFCPView(a, testbed.GNBAddr, 0x900, 9)
	payload := testbed.Payload("pfcp a")
	reportProblems(t, "session a uplink", testbed.CheckUplink(sa, n, payload, e.uplink(sa, n, payload, recvTimeout)))
	reportProblems(t, "session a downlink", testbed.CheckDownlink(sa, n, payload, e.downlink(sa, n, payload)))
	// The flow: uplink with QFI 5 to the flow's port, downlink to it tunnelled with QFI 5.
	got := e.uplinkFrom(sa, 7000, 5, n, payload, recvTimeout)
	reportProblems(t, "flow uplink", testbed.CheckUplinkFrom(sa, 7000, n, payload, got))
	reportProblems(t, "flow downlink", testbed.CheckDownlinkTo(sa, testbed.DownlinkExpect{UEPort: 7000, TEID: 0x900, QFI: 5},
		n, payload, e.downlinkTo(sa, 7000, n, payload)))

	// free5GC style: the SMF chooses TEID and UE, and the downlink buffers until the gNB is
	// known: the datapath hands its packets to xupfd meanwhile.
	b, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Free5GC, UE: netip.MustParseAddr("10.45.0.50"),
		UplinkTEID: 0x7000, N3: testbed.N3Addr, NetworkInstance: "internet"})
	if err != nil {
		t.Fatalf("establish b: %v", err)
	}
	sb := testbed.PFCPView(b, testbed.GNBAddr, 0x901, 0)
	before := e.stats().Counters["buffered"]
	if got := e.downlink(sb, 10, payload); len(got) != 0 {
		t.Errorf("%d downlink packets reached the gNB while the FAR buffers", len(got))
	}
	if d := e.stats().Counters["buffered"] - before; d != 10 {
		t.Errorf("buffered grew by %d, want 10", d)
	}
	reportProblems(t, "session b uplink", testbed.CheckUplink(sb, n, payload, e.uplink(sb, n, payload, recvTimeout)))
	// The gNB answers: BUFF -> FORW with outer header creation. The 10 buffered packets leave
	// first, in order, then the new ones: the gNB listens before the switch, so it sees both.
	gnb, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetDownlink(ctx, b, testbed.GNBAddr, 0x901); err != nil {
		t.Fatal(err)
	}
	if err := e.topo.SendDownlinkTo(sb, testbed.UEPort, n, payload); err != nil {
		t.Fatal(err)
	}
	flush, err := testbed.ReceiveDownlink(gnb, 10+n, recvTimeout)
	gnb.Close()
	if err != nil {
		t.Errorf("receive downlink: %v", err)
	}
	flushed := flush[:min(10, len(flush))]
	reportProblems(t, "session b buffered downlink", testbed.CheckDownlink(sb, 10, payload, flushed))
	reportProblems(t, "session b downlink", testbed.CheckDownlink(sb, n, payload, flush[len(flushed):]))

	// Handover to a second gNB: downlink follows the new address and TEID.
	rx, err := e.topo.ListenGTPU(testbed.GNB2Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := c.SetDownlink(ctx, b, testbed.GNB2Addr, 0x902); err != nil {
		t.Fatal(err)
	}
	if err := e.topo.SendDownlink(sb, n, payload); err != nil {
		t.Fatal(err)
	}
	moved, err := testbed.ReceiveDownlink(rx, n, recvTimeout)
	if err != nil {
		t.Error(err)
	}
	reportProblems(t, "after handover", testbed.CheckDownlink(testbed.PFCPView(b, testbed.GNB2Addr, 0x902, 0), n, payload, moved))

	// DROP: nothing leaves, counted far_drop.
	if err := c.DropDownlink(ctx, b); err != nil {
		t.Fatal(err)
	}
	before = e.stats().Drops["far_drop"]
	if err := e.topo.SendDownlink(sb, 10, payload); err != nil {
		t.Fatal(err)
	}
	if late, _ := rx.Collect(1, 300*time.Millisecond); len(late) != 0 {
		t.Errorf("downlink reached the new gNB after DROP")
	}
	if d := e.stats().Drops["far_drop"] - before; d != 10 {
		t.Errorf("far_drop grew by %d, want 10", d)
	}

	// N9: session a's uplink FAR now tunnels to another UPF instead of routing to the DN.
	peer, err := e.topo.ListenGTPU(testbed.PeerUPFAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	_, err = c.Modify(ctx, a, ie.NewUpdateFAR(ie.NewFARID(pfcpclient.UplinkFARID),
		ie.NewUpdateForwardingParameters(ie.NewDestinationInterface(ie.DstInterfaceCore),
			ie.NewOuterHeaderCreation(0x0100, 0x4444, testbed.PeerUPFAddr.String(), "", 0, 0, 0))))
	if err != nil {
		t.Fatalf("N9 modification: %v", err)
	}
	if err := e.topo.SendUplink(sa, n, payload, 9); err != nil {
		t.Fatal(err)
	}
	n9, err := peer.Collect(n, recvTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if len(n9) != n {
		t.Errorf("%d of %d uplink packets reached the N9 peer", len(n9), n)
	}
	for i, d := range n9 {
		g, err := testbed.DecodeGTPU(d)
		switch {
		case err != nil:
			t.Errorf("N9 packet %d: %v", i, err)
		case g.TEID != 0x4444 || g.OuterSrc.Addr() != testbed.N3Addr || g.HasPSC ||
			g.InnerSrc != netip.AddrPortFrom(a.UE, testbed.UESrcPort) || g.InnerDst.Addr() != testbed.DNAddr ||
			g.InnerTTL != testbed.InnerTTL-1 || !g.IPChecksumOK:
			t.Errorf("N9 packet %d: %+v", i, g)
		}
	}

	// Deletion: the tunnels stop, and the sessions are gone from the datapath.
	for _, s := range []*pfcpclient.Session{a, b} {
		if err := c.Delete(ctx, s); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	before = e.stats().Drops["unknown_teid"]
	if err := e.topo.SendUplink(sa, 10, payload, 9); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if d := e.stats().Drops["unknown_teid"] - before; d != 10 {
		t.Errorf("after deletion unknown_teid grew by %d, want 10", d)
	}
	if err := c.Delete(ctx, a); err == nil {
		t.Error("a second deletion was accepted")
	}
	// The static sessions never noticed.
	reportProblems(t, "static session", testbed.CheckUplink(sessQFI, n, payload, e.uplink(sessQFI, n, payload, recvTimeout)))
}
