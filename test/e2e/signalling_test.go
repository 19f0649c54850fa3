package e2e

import (
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/gtpu"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// reportsTo returns client options that put each Session Report Request the SMF receives on
// the channel, with the time it arrived, and answer it with cause (0: accepted).
func reportsTo(nodeID string, cause uint8) (pfcpclient.Options, chan receivedReport) {
	ch := make(chan receivedReport, 64)
	return pfcpclient.Options{NodeID: nodeID, OnReport: func(m *message.SessionReportRequest) pfcpclient.ReportAnswer {
		select {
		case ch <- receivedReport{m, time.Now()}:
		default:
		}
		return pfcpclient.ReportAnswer{Cause: cause}
	}}, ch
}

type receivedReport struct {
	req *message.SessionReportRequest
	at  time.Time
}

func nextReport(t *testing.T, ch chan receivedReport) receivedReport {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the SMF got no Session Report Request")
		return receivedReport{}
	}
}

// TestErrorIndicationReported: an Error Indication the gNB sends about the session's
// downlink tunnel reaches the SMF as a Session Report Request with an Error Indication
// Report naming the tunnel; one about another tunnel is counted and dropped.
func TestErrorIndicationReported(t *testing.T) {
	e := newEnv(t)
	opts, reports := reportsTo("smf.errind.test", 0)
	c, ctx := e.smfClientWith(opts)
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr, GNBTEID: 0x910})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	if err := e.topo.SendFromGNB(gtpu.ErrorIndication{TEID: 0x911, Peer: testbed.GNBAddr}.Marshal()); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if err := e.topo.SendFromGNB(gtpu.ErrorIndication{TEID: 0x910, Peer: testbed.GNBAddr}.Marshal()); err != nil {
		t.Fatal(err)
	}
	r := nextReport(t, reports)
	t.Logf("error indication sent -> session report received: %s", r.at.Sub(sent))
	if r.req.SEID() != s.CPSEID || r.req.ReportType == nil || r.req.ReportType.Payload[0] != 0x04 || r.req.ErrorIndicationReport == nil {
		t.Fatalf("report SEID 0x%x type %v EIR %v, want ERIR for CP SEID 0x%x", r.req.SEID(), r.req.ReportType,
			r.req.ErrorIndicationReport, s.CPSEID)
	}
	if f, err := r.req.ErrorIndicationReport.FTEID(); err != nil || f.TEID != 0x910 || !f.IPv4Address.Equal(testbed.GNBAddr.AsSlice()) {
		t.Errorf("Remote F-TEID %+v %v, want 0x910 at %s", f, err, testbed.GNBAddr)
	}
	select {
	case r := <-reports:
		t.Errorf("a second report: %v", r.req)
	case <-time.After(200 * time.Millisecond):
	}
	st := e.stats()
	if st.GTPU["error_indication_reported"] != 1 || st.GTPU["error_indication_unknown"] != 1 || st.PFCPReports["accepted"] != 1 {
		t.Errorf("gtpu signalling %v, reports %v: want one reported, one unknown, one accepted", st.GTPU, st.PFCPReports)
	}
}
