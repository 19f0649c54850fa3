package pfcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// reportTest is a node serving on a loopback socket and an SMF socket that associated and
// established one session (basicSession, with BAR 1) with it.
type reportTest struct {
	t      *testing.T
	n      *Node
	dp     *fakeDatapath
	smf    *net.UDPConn
	upf    netip.AddrPort
	seid   uint64 // the UP SEID of the session
	cpSEID uint64
}

func newReportTest(t *testing.T, opts ...func(*Options)) *reportTest {
	smfConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smfConn.Close() })
	upfConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dp := newFakeDatapath()
	n := newSessionNode(dp, append([]func(*Options){func(o *Options) {
		o.ReportTimeout = 50 * time.Millisecond
		o.ReportRetries = 2
	}}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx, upfConn) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	eventually(t, "the node does not serve", func() bool { return n.conn.Load() != nil })
	r := &reportTest{t: t, n: n, dp: dp, smf: smfConn, upf: upfConn.LocalAddr().(*net.UDPAddr).AddrPort(), cpSEID: 0x77}
	from := smfConn.LocalAddr().(*net.UDPAddr).AddrPort()
	if _, c, _ := cause(t, n.Handle(from, bytesOf(t, smfSetup(1)))); c != ie.CauseRequestAccepted {
		t.Fatalf("association: cause %d", c)
	}
	ies := append(basicSession(ue1), ie.NewCreateBAR(ie.NewBARID(1), ie.NewSuggestedBufferingPacketsCount(10)))
	m, c, _ := cause(t, n.Handle(from, bytesOf(t, establishment(2, r.cpSEID, ies...))))
	if c != ie.CauseRequestAccepted {
		t.Fatalf("establishment: cause %d", c)
	}
	f, _ := m.(*message.SessionEstablishmentResponse).UPFSEID.FSEID()
	r.seid = f.SEID
	return r
}

// receive reads the next Session Report Request the SMF socket gets.
func (r *reportTest) receive() (*message.SessionReportRequest, netip.AddrPort) {
	r.t.Helper()
	r.smf.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	size, from, err := r.smf.ReadFromUDPAddrPort(buf)
	if err != nil {
		r.t.Fatalf("SMF: no session report request: %v", err)
	}
	m, err := message.Parse(buf[:size])
	if err != nil {
		r.t.Fatalf("SMF: undecodable message: %v", err)
	}
	req, ok := m.(*message.SessionReportRequest)
	if !ok {
		r.t.Fatalf("SMF got %s, want a Session Report Request", m.MessageTypeName())
	}
	return req, from
}

func (r *reportTest) answer(to netip.AddrPort, seq uint32, ies ...*ie.IE) {
	r.t.Helper()
	if _, err := r.smf.WriteToUDPAddrPort(bytesOf(r.t, message.NewSessionReportResponse(0, 0, r.seid, seq, 0, ies...)), to); err != nil {
		r.t.Fatal(err)
	}
}

// eventually waits for cond, failing with what after a few seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal(what)
		}
	}
}

// TestSessionReport: a report goes to the session's SMF under its CP SEID with the Report
// Type and the IEs given, is sent again while unanswered, and the answer's Update BAR changes
// the session's BAR.
func TestSessionReport(t *testing.T) {
	r := newReportTest(t)
	eir := ie.NewErrorIndicationReport(ie.NewFTEID(0x01, 0x500, gnb.AsSlice(), nil, 0))
	if err := r.n.Report(r.seid, ReportErrorIndication, eir); err != nil {
		t.Fatal(err)
	}
	req, from := r.receive()
	if req.SEID() != r.cpSEID || from != r.upf {
		t.Errorf("report with SEID 0x%x from %s, want 0x%x from %s", req.SEID(), from, r.cpSEID, r.upf)
	}
	if req.ReportType == nil || len(req.ReportType.Payload) != 1 || req.ReportType.Payload[0] != 0x04 {
		t.Errorf("Report Type %v, want ERIR", req.ReportType)
	}
	if req.ErrorIndicationReport == nil {
		t.Fatal("no Error Indication Report")
	}
	if f, err := req.ErrorIndicationReport.FTEID(); err != nil || f.TEID != 0x500 {
		t.Errorf("remote F-TEID %+v %v", f, err)
	}
	again, _ := r.receive() // unanswered: sent again after ReportTimeout
	if again.SequenceNumber != req.SequenceNumber {
		t.Errorf("retransmission with sequence number %d, want %d", again.SequenceNumber, req.SequenceNumber)
	}
	r.answer(from, req.SequenceNumber, ie.NewCause(ie.CauseRequestAccepted),
		ie.NewUpdateBARWithinSessionReportResponse(ie.NewBARID(1), ie.NewDLBufferingDuration(20*time.Second),
			ie.NewDLBufferingSuggestedPacketCount(300), ie.NewDownlinkDataNotificationDelay(100*time.Millisecond)))
	eventually(t, "the answer was not counted", func() bool { return r.n.Reports()["accepted"] == 1 })
	s, _ := r.n.Session(r.seid)
	b := s.BARs[1]
	if b.BufferingDuration == nil || *b.BufferingDuration != 20*time.Second || b.BufferingPackets == nil ||
		*b.BufferingPackets != 300 || b.NotificationDelay != 2 || b.SuggestedPackets != 10 {
		t.Errorf("BAR after the Update BAR: %+v", b)
	}
	want := map[string]uint64{"sent": 1, "retransmitted": 1, "accepted": 1, "rejected": 0, "timed_out": 0, "not_sent": 0}
	if got := r.n.Reports(); !maps.Equal(got, want) {
		t.Errorf("report counts %v, want %v", got, want)
	}
	// The answer again (the SMF's own retransmission) is a response to no report of ours.
	r.answer(from, req.SequenceNumber, ie.NewCause(ie.CauseRequestAccepted))
	eventually(t, "a second answer was not counted as unrequested", func() bool { return r.n.Drops()["unrequested_response"] == 1 })
}

// TestSessionReportContextNotFound: an SMF that answers "Session context not found" does not
// know the session: it is deleted, datapath entries included.
func TestSessionReportContextNotFound(t *testing.T) {
	r := newReportTest(t)
	if err := r.n.Report(r.seid, ReportDownlinkData); err != nil {
		t.Fatal(err)
	}
	req, from := r.receive()
	r.answer(from, req.SequenceNumber, ie.NewCause(ie.CauseSessionContextNotFound))
	eventually(t, "the session was kept", func() bool { return r.n.SessionCount() == 0 })
	if len(r.dp.sets) != 0 || len(r.dp.keys) != 0 {
		t.Errorf("datapath entries left: %v", r.dp.sets)
	}
	if got := r.n.Reports()["rejected"]; got != 1 {
		t.Errorf("rejected reports %d, want 1", got)
	}
	if err := r.n.Report(r.seid, ReportDownlinkData); !errors.Is(err, ErrReportNotSent) {
		t.Errorf("report of the deleted session: %v, want ErrReportNotSent", err)
	}
}

// TestSessionReportBounded: reports to an SMF that does not answer are given up after the
// retransmissions, and no more than MaxReportsPerSMF wait at once; an answer from another
// address than the SMF's is ignored.
func TestSessionReportBounded(t *testing.T) {
	r := newReportTest(t, func(o *Options) { o.MaxReportsPerSMF = 2 })
	for range 2 {
		if err := r.n.Report(r.seid, ReportDownlinkData); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.n.Report(r.seid, ReportDownlinkData); !errors.Is(err, ErrReportNotSent) {
		t.Fatalf("third outstanding report: %v, want ErrReportNotSent", err)
	}
	req, _ := r.receive()
	r.n.Handle(netip.MustParseAddrPort("127.0.0.2:8805"), bytesOf(t, message.NewSessionReportResponse(0, 0, r.seid,
		req.SequenceNumber, 0, ie.NewCause(ie.CauseSessionContextNotFound))))
	eventually(t, "the reports were not given up", func() bool { return r.n.Reports()["timed_out"] == 2 })
	got := r.n.Reports()
	if got["sent"] != 2 || got["retransmitted"] != 4 || got["not_sent"] != 1 || got["rejected"] != 0 {
		t.Errorf("report counts %v, want 2 sent, 4 retransmitted, 1 not sent", got)
	}
	if r.n.SessionCount() != 1 {
		t.Error("an answer from another address deleted the session")
	}
	r.n.mu.Lock()
	left := len(r.n.reports.bySeq) + len(r.n.reports.perPeer)
	r.n.mu.Unlock()
	if left != 0 {
		t.Errorf("%d entries of outstanding reports left", left)
	}
	if err := r.n.Report(r.seid, ReportDownlinkData); err != nil {
		t.Errorf("report after the others were given up: %v", err)
	}
}

// TestErrorIndicationReported: an Error Indication about a tunnel a session's FAR sends into
// becomes an ERIR report to its SMF with the tunnel as Remote F-TEID; about any other
// tunnel, or one the session left, it is not the node's to report.
func TestErrorIndicationReported(t *testing.T) {
	r := newReportTest(t)
	if r.n.ErrorIndication(0x501, gnb) || r.n.ErrorIndication(0x500, gnb2) {
		t.Error("an error indication about no session's tunnel was taken")
	}
	if !r.n.ErrorIndication(0x500, gnb) {
		t.Fatal("the error indication about the session's downlink tunnel was not taken")
	}
	req, from := r.receive()
	if req.ReportType.Payload[0] != byte(ReportErrorIndication) || req.ErrorIndicationReport == nil {
		t.Fatalf("report type %x, Error Indication Report %v", req.ReportType.Payload, req.ErrorIndicationReport)
	}
	f, err := req.ErrorIndicationReport.FTEID()
	if err != nil || f.TEID != 0x500 || !f.IPv4Address.Equal(gnb.AsSlice()) {
		t.Errorf("Remote F-TEID %+v %v, want TEID 0x500 at %s", f, err, gnb)
	}
	r.answer(from, req.SequenceNumber, ie.NewCause(ie.CauseRequestAccepted))

	// A handover moves the session to another tunnel.
	m, c, _ := cause(t, r.n.Handle(from, bytesOf(t, message.NewSessionModificationRequest(0, 0, r.seid, 3, 0,
		ie.NewUpdateFAR(ie.NewFARID(2), ie.NewUpdateForwardingParameters(ohc(0x600, gnb2)))))))
	if c != ie.CauseRequestAccepted {
		t.Fatalf("modification: %v cause %d", m, c)
	}
	if r.n.ErrorIndication(0x500, gnb) || !r.n.ErrorIndication(0x600, gnb2) {
		t.Error("after the handover the old tunnel is still the session's, or the new one is not")
	}
	r.receive()
	if _, c, _ := cause(t, r.n.Handle(from, bytesOf(t, message.NewSessionDeletionRequest(0, 0, r.seid, 4, 0)))); c != ie.CauseRequestAccepted {
		t.Fatalf("deletion: cause %d", c)
	}
	if r.n.ErrorIndication(0x600, gnb2) {
		t.Error("the tunnel of a deleted session is still indexed")
	}
}

// endMarkers records the End Markers a node sends.
type endMarkers struct {
	mu   sync.Mutex
	sent []string
}

func (e *endMarkers) SendEndMarker(local, peer netip.Addr, teid uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sent = append(e.sent, fmt.Sprintf("%s->%s 0x%x", local, peer, teid))
	return nil
}

func (e *endMarkers) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sent)
}

// TestEndMarker: an Update FAR with SNDEM that moves the FAR to another tunnel sends one End
// Marker on the old tunnel, from the session's GTP-U address, EndMarkerDelay later; without
// SNDEM, or without a change of tunnel, none is sent.
func TestEndMarker(t *testing.T) {
	em := &endMarkers{}
	p := newPFCPTest(t, func(o *Options) { o.EndMarkers, o.EndMarkerDelay = em, 30*time.Millisecond })
	seid, _ := p.mustEstablish(0x40, basicSession(ue1)...)
	update := func(teid uint32, peer netip.Addr, flags ...*ie.IE) {
		t.Helper()
		r := p.modify(seid, ie.NewUpdateFAR(ie.NewFARID(2), ie.NewApplyAction(0x02),
			ie.NewUpdateForwardingParameters(append([]*ie.IE{ohc(teid, peer)}, flags...)...)))
		if c, _ := r.Cause.Cause(); c != ie.CauseRequestAccepted {
			t.Fatalf("modification: cause %d", c)
		}
	}
	sndem := ie.NewPFCPSMReqFlags(0x02)
	update(0x501, gnb)        // no SNDEM
	update(0x501, gnb, sndem) // the same tunnel
	start := time.Now()
	update(0x600, gnb2, sndem) // handover
	if got := em.list(); len(got) != 0 {
		t.Fatalf("End Marker sent before the delay: %v", got)
	}
	eventually(t, "no End Marker", func() bool { return len(em.list()) > 0 })
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("End Marker after %s, want at least EndMarkerDelay", d)
	}
	time.Sleep(60 * time.Millisecond)
	if got, want := em.list(), []string{"10.100.1.1->10.100.1.2 0x501"}; !slices.Equal(got, want) {
		t.Errorf("End Markers %v, want %v", got, want)
	}
}

// TestUPFeatures: the UP Function Features advertise EMPU only with an End Marker sender,
// UEIP only with UE pools, DDND and DLBD only with a buffer, FTUP, QUOAC, MNOP and VTIME
// always, and nothing else.
func TestUPFeatures(t *testing.T) {
	for _, c := range []struct {
		opts func(*Options)
		want []byte
	}{
		{func(o *Options) { o.UEPools = nil }, []byte{0x10, 0x08, 0x10, 0x04}},
		{func(o *Options) {}, []byte{0x10, 0x08, 0x14, 0x04}},
		{func(o *Options) { o.EndMarkers = &endMarkers{} }, []byte{0x10, 0x09, 0x14, 0x04}},
		{func(o *Options) { o.Buffers = &fakeBuffers{} }, []byte{0x10 | 0x02 | 0x04, 0x08, 0x14, 0x04}}, // DDND, DLBD
	} {
		n := newSessionNode(newFakeDatapath(), c.opts)
		m, _, _ := cause(t, n.Handle(smf, bytesOf(t, smfSetup(1))))
		got, err := m.(*message.AssociationSetupResponse).UPFunctionFeatures.UPFunctionFeatures()
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("UP Function Features %x %v, want %x", got, err, c.want)
		}
	}
}
