package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
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

// reportingSession establishes a session toward the gNB's tunnel teid for an SMF that answers
// Session Report Requests with cause, and returns it with the reports the SMF receives.
func (e *env) reportingSession(nodeID string, cause uint8, teid uint32) (*pfcpclient.Session, chan receivedReport) {
	e.t.Helper()
	opts, reports := reportsTo(nodeID, cause)
	c, ctx := e.smfClientWith(opts)
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr, GNBTEID: teid})
	if err != nil {
		e.t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	return s, reports
}

// errorIndication sends the UPF an Error Indication from the gNB about its tunnel teid.
func (e *env) errorIndication(teid uint32) {
	e.t.Helper()
	if err := e.topo.SendFromGNB(gtpu.ErrorIndication{TEID: teid, Peer: testbed.GNBAddr}.Marshal()); err != nil {
		e.t.Fatal(err)
	}
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
	s, reports := e.reportingSession("smf.errind.test", 0, 0x910)
	e.errorIndication(0x911)
	sent := time.Now()
	e.errorIndication(0x910)
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

// TestHandoverEndMarker: a handover whose Update FAR carries SNDEM, while downlink traffic
// flows, ends the old tunnel with one End Marker (old TEID, from the UPF's GTP-U address),
// and no data follows it there; the data goes on through the new tunnel.
func TestHandoverEndMarker(t *testing.T) {
	e := newEnv(t)
	c, ctx := e.smfClient("smf.endmarker.test")
	const oldTEID, newTEID = 0x920, 0x921
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr, GNBTEID: oldTEID})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, oldTEID, 0)
	oldRx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer oldRx.Close()
	newRx, err := e.topo.ListenGTPU(testbed.GNB2Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer newRx.Close()
	type got struct {
		ds  []testbed.Datagram
		err error
	}
	oldGot, newGot := make(chan got, 1), make(chan got, 1)
	go func() { ds, err := oldRx.Collect(1<<20, 2*time.Second); oldGot <- got{ds, err} }()
	go func() { ds, err := newRx.Collect(1<<20, 2*time.Second); newGot <- got{ds, err} }()

	stop := make(chan struct{})
	sending := make(chan error, 1)
	go func() {
		payload := testbed.Payload("handover")
		for {
			select {
			case <-stop:
				sending <- nil
				return
			default:
			}
			if err := e.topo.SendDownlink(view, 10, payload); err != nil {
				sending <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := c.Handover(ctx, s, testbed.GNB2Addr, newTEID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	if err := <-sending; err != nil {
		t.Fatal(err)
	}

	old, fresh := <-oldGot, <-newGot
	if old.err != nil || fresh.err != nil {
		t.Fatal(old.err, fresh.err)
	}
	data, markers, afterMarker := 0, 0, 0
	for _, d := range old.ds {
		p, err := testbed.DecodeGTPU(d)
		switch {
		case err != nil:
			t.Errorf("undecodable on the old tunnel: %v", err)
		case p.MsgType == gtpu.TypeEndMarker:
			markers++
			if p.TEID != oldTEID || p.OuterSrc.Addr() != testbed.N3Addr || p.OuterSrc.Port() != gtpu.Port {
				t.Errorf("End Marker TEID 0x%x from %s, want 0x%x from %s:%d", p.TEID, p.OuterSrc, oldTEID, testbed.N3Addr, gtpu.Port)
			}
		case markers > 0:
			afterMarker++
		default:
			data++
		}
	}
	t.Logf("old tunnel: %d packets, then %d End Marker(s), then %d packets; new tunnel: %d packets",
		data, markers, afterMarker, len(fresh.ds))
	if data == 0 || markers != 1 || afterMarker != 0 || len(fresh.ds) == 0 {
		t.Errorf("want data, one End Marker and nothing after it on the old tunnel, and data on the new one")
	}
	if st := e.stats(); st.GTPU["end_marker_sent"] != 1 {
		t.Errorf("end_marker_sent %d, want 1", st.GTPU["end_marker_sent"])
	}
}

// TestReportContextNotFound: an SMF that answers a Session Report Request with "Session
// context not found" does not know the session: xupfd deletes it, datapath entries included,
// and its downlink goes nowhere any more.
func TestReportContextNotFound(t *testing.T) {
	e := newEnv(t)
	s, reports := e.reportingSession("smf.forgetful.test", ie.CauseSessionContextNotFound, 0x930)
	e.errorIndication(0x930)
	nextReport(t, reports)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var list struct{ PFCP []json.RawMessage }
		e.xupfctlJSON(&list, "session", "list")
		if len(list.PFCP) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still there after cause 65: %+v", list.PFCP)
		}
		time.Sleep(20 * time.Millisecond)
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x930, 0)
	if got := e.downlink(view, 5, testbed.Payload("gone")); len(got) != 0 {
		t.Errorf("%d downlink packets reached the gNB after the session was deleted", len(got))
	}
	if st := e.stats(); st.PFCPReports["rejected"] != 1 {
		t.Errorf("reports %v; want one rejected", st.PFCPReports)
	}
}
