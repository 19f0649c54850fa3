package pfcpgrouped

import (
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

func TestGroupedTypes(t *testing.T) {
	for _, typ := range []uint16{ie.CreatePDR, ie.PDI, ie.CreateFAR, ie.ForwardingParameters, ie.CreateURR,
		ie.CreateQER, ie.CreatedPDR, ie.UpdatePDR, ie.UpdateFAR, ie.CreateBAR, ie.QueryURR,
		ie.UsageReportWithinSessionDeletionResponse, ie.AdditionalMonitoringTime} {
		if !(&ie.IE{Type: typ}).IsGrouped() {
			t.Errorf("IE type %d: not grouped, want grouped", typ)
		}
	}
	for _, typ := range []uint16{0, ie.Cause, ie.FTEID, ie.PDRID, ie.NodeID, ie.FSEID, ie.URRID, ie.BARID,
		ie.RecoveryTimeStamp, 0x8000, 0xffff} {
		if (&ie.IE{Type: typ}).IsGrouped() {
			t.Errorf("IE type %d: grouped, want not grouped", typ)
		}
	}
}

// TestParseGrouped checks that a message parsed with the table has its grouped IEs' children.
func TestParseGrouped(t *testing.T) {
	req := message.NewSessionEstablishmentRequest(0, 0, 1, 2, 0, ie.NewNodeIDHeuristic("smf.test"),
		ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceAccess))))
	b := make([]byte, req.MarshalLen())
	if err := req.MarshalTo(b); err != nil {
		t.Fatal(err)
	}
	m, err := message.ParseSessionEstablishmentRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CreatePDR) != 1 {
		t.Fatalf("%d Create PDRs, want 1", len(m.CreatePDR))
	}
	id, err := m.CreatePDR[0].PDRID()
	if err != nil || id != 1 {
		t.Fatalf("Create PDR's PDR ID: %d, %v; want 1", id, err)
	}
	if _, err := m.CreatePDR[0].SourceInterface(); err != nil {
		t.Fatalf("Create PDR's PDI: %v", err)
	}
}

func BenchmarkIsGrouped(b *testing.B) {
	e := &ie.IE{Type: ie.CreatePDR}
	for b.Loop() {
		e.IsGrouped()
	}
}
