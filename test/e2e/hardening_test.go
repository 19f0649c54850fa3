package e2e

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// TestSpoofedSourceDropped: G-PDUs whose inner source is not the session's UE address never
// reach the data network; they are counted as spoofed_source, and the UE itself still gets
// through.
func TestSpoofedSourceDropped(t *testing.T) {
	e := newEnv(t)
	e.checkSpoofedDropped(sessNoQFI)
}

// checkSpoofedDropped sends uplink packets on genuine's TEID from another source, which must
// all be dropped as spoofed_source, then from genuine's UE address, which must all arrive.
func (e *env) checkSpoofedDropped(genuine session.Session) {
	e.t.Helper()
	const n = 10
	spoofed := genuine
	spoofed.UE = netip.MustParseAddr("10.45.0.99") // sent on genuine's TEID
	if got := e.uplink(spoofed, n, testbed.Payload("spoofed"), time.Second); len(got) != 0 {
		e.t.Errorf("DN received %d packets from spoofed source %s, want none", len(got), spoofed.UE)
	}
	if got := e.stats().Drops["spoofed_source"]; got != n {
		e.t.Errorf("drops spoofed_source %d, want %d", got, n)
	}
	if got := e.uplink(genuine, n, testbed.Payload("genuine"), recvTimeout); len(got) != n {
		e.t.Errorf("DN received %d of %d packets from the UE itself", len(got), n)
	}
}

// TestSpoofedSourceDroppedPFCP: the same for a session an SMF set up Open5GS-style, whose
// uplink PDR names no UE address (its downlink PDR does).
func TestSpoofedSourceDroppedPFCP(t *testing.T) {
	e := newEnv(t)
	c, ctx := e.smfClient("smf.spoofing.test")
	a, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, QFI: 9, GNB: testbed.GNBAddr, GNBTEID: 0x900})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	e.checkSpoofedDropped(testbed.PFCPView(a, testbed.GNBAddr, 0x900, 9))
}

// TestUEToUPFDropped: a UE sends, through its tunnel, a PFCP Association Setup Request to the
// UPF's N6 address, where xupfd listens for PFCP. It must not reach xupfd (which would
// associate with the UE and could delete an SMF's sessions): dropped as ue_to_upf.
func TestUEToUPFDropped(t *testing.T) {
	e := newEnvConfig(t, func(c *config.Config) { c.PFCPListen = "0.0.0.0:8805" }, sessQFI, sessNoQFI)
	const n = 3
	setup, err := message.NewAssociationSetupRequest(1, ie.NewNodeID("", "", "evil-ue.example"),
		ie.NewRecoveryTimeStamp(time.Now())).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := testbed.BuildIPv4UDP(netip.AddrPortFrom(sessNoQFI.UE, testbed.UESrcPort),
		netip.AddrPortFrom(testbed.N6Addr, 8805), setup)
	if err != nil {
		t.Fatal(err)
	}
	gpdu, err := testbed.BuildGPDU(sessNoQFI.UplinkTEID, 0, inner)
	if err != nil {
		t.Fatal(err)
	}
	err = e.topo.Do(e.topo.GNBNS, func() error {
		conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(testbed.GNBAddr, 0)))
		if err != nil {
			return err
		}
		defer conn.Close()
		for range n {
			if _, err := conn.WriteToUDPAddrPort(gpdu, netip.AddrPortFrom(testbed.N3Addr, testbed.GTPUPort)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(recvTimeout)
	for e.stats().Drops["ue_to_upf"] < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.stats().Drops["ue_to_upf"]; got != n {
		t.Errorf("drops ue_to_upf %d, want %d", got, n)
	}
	time.Sleep(200 * time.Millisecond) // what xupfd would have done, it has done by now
	assocs, err := e.api.Associations(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if len(assocs) != 0 {
		t.Errorf("xupfd associated with the UE through its tunnel: %+v", assocs)
	}
}
