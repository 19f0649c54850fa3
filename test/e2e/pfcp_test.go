package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// TestPFCPAssociation plays an SMF from the gnb namespace: it associates with xupfd over N4
// on the N3 address (the datapath must hand PFCP to the kernel while GTP-U on the same
// address keeps flowing), sees the association in the API and xupfctl, exchanges
// heartbeats, and releases it.
func TestPFCPAssociation(t *testing.T) {
	e := newEnv(t)
	var c *pfcpclient.Client
	err := e.topo.Do(e.topo.GNBNS, func() error {
		var err error
		c, err = pfcpclient.Dial(testbed.PFCPAddr, pfcpclient.Options{NodeID: "smf.e2e.test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := c.Associate(ctx)
	if err != nil {
		t.Fatalf("associate: %v\n%s", err, e.daemon.LogTail())
	}
	if a.NodeID != testbed.N3Addr.String() {
		t.Errorf("UPF node id %q, want %s (the first GTP-U address)", a.NodeID, testbed.N3Addr)
	}
	list, err := e.api.Associations(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].NodeID != "smf.e2e.test" || list[0].Address.Addr() != testbed.GNBAddr {
		t.Fatalf("associations via the API: %+v", list)
	}
	out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "pfcp", "associations")
	if err != nil || !strings.Contains(out, "smf.e2e.test") || !strings.Contains(out, testbed.GNBAddr.String()) {
		t.Errorf("xupfctl pfcp associations (err %v):\n%s", err, out)
	}
	if ts, err := c.Heartbeat(ctx); err != nil || !ts.Equal(a.Recovery) {
		t.Errorf("heartbeat: recovery %v (%v), association said %v", ts, err, a.Recovery)
	}

	// GTP-U to the same address is still the datapath's.
	if got := e.uplink(sessQFI, 20, testbed.Payload("beside pfcp"), recvTimeout); len(got) != 20 {
		t.Errorf("uplink beside PFCP: %d of 20 arrived", len(got))
	}
	if got := e.downlink(sessNoQFI, 20, testbed.Payload("beside pfcp")); len(got) != 20 {
		t.Errorf("downlink beside PFCP: %d of 20 arrived", len(got))
	}

	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.api.Associations(e.ctx()); len(list) != 0 {
		t.Errorf("associations after release: %+v", list)
	}
	if st, err := e.api.Status(e.ctx()); err != nil || st.PFCPAssociations != 0 {
		t.Errorf("status after release: %+v, %v", st, err)
	}
}
