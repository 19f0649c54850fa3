package e2e

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// causeOf is the cause of a refused PFCP request, 0 for another error or none.
func causeOf(err error) uint8 {
	var ce *pfcpclient.CauseError
	if errors.As(err, &ce) {
		return ce.Cause
	}
	return 0
}

// TestPFCPOnlyTheOwningSMF: against the real daemon, a second host naming the associated
// SMF's Node ID from another address can neither set up an association nor establish a
// session; a session cannot claim the UPF's own addresses as its UE's.
func TestPFCPOnlyTheOwningSMF(t *testing.T) {
	e := newEnv(t)
	const nodeID = "smf.owner.test"
	c, ctx := e.smfClient(nodeID)
	if _, err := c.Establish(ctx, pfcpclient.SessionSpec{UE: netip.MustParseAddr("10.45.7.1"), GNB: testbed.GNBAddr, GNBTEID: 0x700}); err != nil {
		t.Fatalf("the SMF's session: %v\n%s", err, e.daemon.LogTail())
	}

	var impostor *pfcpclient.Client
	err := e.topo.Do(e.topo.GNBNS, func() error {
		var err error
		impostor, err = pfcpclient.Dial(testbed.PFCPAddr, pfcpclient.Options{NodeID: nodeID,
			Local: netip.AddrPortFrom(testbed.GNB2Addr, 0), Timeout: 300 * time.Millisecond, Tries: 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := impostor.Establish(ictx, pfcpclient.SessionSpec{UE: netip.MustParseAddr("10.45.7.2"), GNB: testbed.GNBAddr, GNBTEID: 0x701}); causeOf(err) != ie.CauseNoEstablishedPFCPAssociation {
		t.Errorf("establishment in the SMF's name from %s: %v, want cause %d", testbed.GNB2Addr, err, ie.CauseNoEstablishedPFCPAssociation)
	}
	if _, err := impostor.Associate(ictx); causeOf(err) != ie.CauseRequestRejected {
		t.Errorf("association setup in the SMF's name from %s: %v, want cause %d", testbed.GNB2Addr, err, ie.CauseRequestRejected)
	}
	list, err := e.api.Associations(e.ctx())
	if err != nil || len(list) != 1 || list[0].Address.Addr() != testbed.GNBAddr {
		t.Errorf("associations after the impostor: %+v, %v; want the SMF's alone, at %s", list, err, testbed.GNBAddr)
	}
	if l, err := e.api.PFCPSessions(e.ctx()); err != nil || len(l) != 1 || l[0].Peer != nodeID {
		t.Errorf("PFCP sessions after the impostor: %+v, %v; want the SMF's one session", l, err)
	}

	for _, own := range []netip.Addr{testbed.N6Addr, testbed.N3Addr} {
		_, err := c.Establish(ctx, pfcpclient.SessionSpec{UE: own, GNB: testbed.GNBAddr, GNBTEID: 0x702})
		if causeOf(err) != ie.CauseMandatoryIEIncorrect {
			t.Errorf("a session claiming the UPF's address %s: %v, want cause %d", own, err, ie.CauseMandatoryIEIncorrect)
		}
	}
}
