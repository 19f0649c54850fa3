package e2e

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// idleSession establishes a session whose downlink buffers and notifies (BUFF+NOCP with a
// BAR, as Open5GS starts every session) for an SMF that answers reports with cause and ies,
// and returns it with the reports the SMF receives.
func (e *env) idleSession(nodeID string, spec pfcpclient.SessionSpec, ies ...*ie.IE) (*pfcpclient.Client,
	*pfcpclient.Session, chan receivedReport) {
	e.t.Helper()
	opts, reports := reportsTo(nodeID, 0)
	onReport := opts.OnReport
	opts.OnReport = func(m *message.SessionReportRequest) pfcpclient.ReportAnswer {
		a := onReport(m)
		a.IEs = ies
		return a
	}
	c, ctx := e.smfClientWith(opts)
	s, err := c.Establish(ctx, spec)
	if err != nil {
		e.t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	return c, s, reports
}

// received is what a gNB receiver collected.
type received struct {
	ps  []testbed.GTPUPacket
	err error
}

// receiveAtGNB starts collecting n downlink packets at the gNB, for 15 s at most, and returns
// where they will come.
func (e *env) receiveAtGNB(n int) <-chan received {
	e.t.Helper()
	rx, err := e.topo.ListenGNB()
	if err != nil {
		e.t.Fatal(err)
	}
	ch := make(chan received, 1)
	go func() {
		defer rx.Close()
		ps, err := testbed.ReceiveDownlink(rx, n, 15*time.Second)
		ch <- received{ps, err}
	}()
	return ch
}

// shifted is payload p numbered from first.
func shifted(p func(int) []byte, first int) func(int) []byte {
	return func(i int) []byte { return p(first + i) }
}

// waitStat polls the stats until ok holds for them, for 10 s at most.
func (e *env) waitStat(what string, ok func(st api.Stats) bool) api.Stats {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := e.stats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: counters %v, drops %v, buffer %v", what, st.Counters, st.Drops, st.Buffer)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleUEBuffering: toward an idle UE (BUFF+NOCP), downlink packets are buffered and the
// first one brings exactly one Downlink Data Report (the PDR, the QFI); when the SMF makes the
// FAR forward, mid-stream, the buffered packets reach the gNB first, in order, then the new
// ones: none lost, none reordered.
func TestIdleUEBuffering(t *testing.T) {
	e := newEnv(t)
	const teid, qfi = 0x940, 9
	c, s, reports := e.idleSession("smf.buffer.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, QFI: qfi})
	view := testbed.PFCPView(s, testbed.GNBAddr, teid, qfi)
	const held, more, after = 2000, 500, 5000
	total := held + more + after
	gotCh := e.receiveAtGNB(total)

	payload := testbed.Payload("idle")
	from := func(first int) func(int) []byte { return shifted(payload, first) }
	sent := time.Now()
	if err := e.topo.SendDownlink(view, held, payload); err != nil {
		t.Fatal(err)
	}
	r := nextReport(t, reports)
	t.Logf("DDN latency (first packet sent -> report at the SMF): %s", r.at.Sub(sent))
	checkDownlinkDataReport(t, r, s.CPSEID, pfcpclient.DownlinkPDRID, qfi)
	if err := e.topo.SendDownlink(view, more, from(held)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reports:
		t.Fatalf("a second report before the FAR changed: %v", r.req)
	case <-time.After(300 * time.Millisecond):
	}
	e.waitStat("every packet buffered", func(st api.Stats) bool { return st.Buffer["buffered"] == held+more })

	// The gNB answers while packets keep coming: those that arrive during the switch must
	// queue behind the buffered ones, not overtake them.
	sending := make(chan error, 1)
	go func() { sending <- e.topo.SendDownlink(view, after, from(held+more)) }()
	switched := time.Now()
	if err := c.SetDownlink(e.ctx(), s, testbed.GNBAddr, teid); err != nil {
		t.Fatal(err)
	}
	st := e.waitStat("the buffer flushed", func(st api.Stats) bool { return st.Buffer["flushed"] >= held+more })
	flush := time.Since(switched)
	if err := <-sending; err != nil {
		t.Fatal(err)
	}
	t.Logf("flush: %d packets in %s after the Update FAR (%.0f packets/s); %d more buffered behind them",
		st.Buffer["flushed"], flush, float64(st.Buffer["flushed"])/flush.Seconds(), st.Buffer["flushed"]-held-more)
	g := <-gotCh
	if g.err != nil {
		t.Errorf("receive: %v", g.err)
	}
	next := 0
	for _, p := range g.ps {
		if p.TEID != teid || p.QFI != qfi || !bytes.Equal(p.Payload, payload(next)) {
			t.Fatalf("packet %d at the gNB: TEID 0x%x QFI %d %q, want TEID 0x%x QFI %d %q (%d received in all)",
				next, p.TEID, p.QFI, p.Payload, teid, qfi, payload(next), len(g.ps))
		}
		next++
	}
	if next != total {
		t.Errorf("%d of %d packets reached the gNB, in order", next, total)
	}
	final := e.stats()
	if final.Drops["buffer_full"] != 0 || final.Buffer["discarded_overflow"] != 0 || final.PFCPReports["sent"] != 1 {
		t.Errorf("drops %v, buffer %v, reports %v: want nothing discarded and one report", final.Drops, final.Buffer,
			final.PFCPReports)
	}
	t.Logf("datapath: buffered %d, replayed %d; xupfd: %v", final.Counters["buffered"], final.Counters["replayed"], final.Buffer)
}

// checkDownlinkDataReport checks a Session Report Request is a DLDR for the PDR, with the QFI.
func checkDownlinkDataReport(t *testing.T, r receivedReport, cpSEID uint64, pdr uint16, qfi uint8) {
	t.Helper()
	m := r.req
	if m.SEID() != cpSEID || m.ReportType == nil || len(m.ReportType.Payload) == 0 || m.ReportType.Payload[0] != 0x01 ||
		m.DownlinkDataReport == nil {
		t.Fatalf("report SEID 0x%x type %v DLDR %v, want a DLDR for CP SEID 0x%x", m.SEID(), m.ReportType,
			m.DownlinkDataReport, cpSEID)
	}
	id, err := m.DownlinkDataReport.PDRID()
	if err != nil || id != pdr {
		t.Errorf("Downlink Data Report PDR ID %d %v, want %d", id, err, pdr)
	}
	dsi, err := m.DownlinkDataReport.DownlinkDataServiceInformation()
	if err != nil || !bytes.Equal(dsi, []byte{0x02, qfi}) {
		t.Errorf("Downlink Data Service Information %x %v, want QFI %d (02 %02x)", dsi, err, qfi, qfi)
	}
}

// TestBufferingBoundsAndExpiry: a flood toward an idle UE stops at the session's bound
// (counted as buffer_full in the datapath and discarded_overflow in xupfd) and costs no
// other session its buffering; the SMF's DL Buffering Duration (Update BAR in its answer)
// expires what is held, counted, and holds back other reports while it runs; a DROP FAR discards; the notification waits for the BAR's
// delay.
func TestBufferingBoundsAndExpiry(t *testing.T) {
	e := newEnvConfig(t, func(c *config.Config) { c.BufferMaxPacketsPerSession = 300 })
	// DL Buffering Duration 2 s (unit 2 s, value 1), in the answer to the report.
	bar := ie.NewUpdateBARWithinSessionReportResponse(ie.NewBARID(pfcpclient.BARID), ie.NewDLBufferingDuration(2*time.Second))
	const delay = 200 * time.Millisecond
	_, flooded, reports := e.idleSession("smf.flood.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS,
		NotificationDelay: delay}, bar)
	c2, quiet, reports2 := e.idleSession("smf.quiet.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS})
	fview := testbed.PFCPView(flooded, testbed.GNBAddr, 0x950, 0)
	qview := testbed.PFCPView(quiet, testbed.GNBAddr, 0x951, 0)

	sent := time.Now()
	if err := e.topo.SendDownlink(fview, 3000, testbed.Payload("flood")); err != nil {
		t.Fatal(err)
	}
	r := nextReport(t, reports)
	if d := r.at.Sub(sent); d < delay {
		t.Errorf("report %s after the first packet, before the BAR's delay of %s", d, delay)
	}
	if err := e.topo.SendDownlink(qview, 10, testbed.Payload("quiet")); err != nil {
		t.Fatal(err)
	}
	nextReport(t, reports2)
	st := e.waitStat("the flood held at the bound", func(st api.Stats) bool {
		return st.Buffer["buffered"] == 300+10 && st.Drops["buffer_full"]+st.Buffer["discarded_overflow"] == 3000-300
	})
	t.Logf("flood of 3000: buffered %d, buffer_full %d, discarded_overflow %d", st.Buffer["buffered"],
		st.Drops["buffer_full"], st.Buffer["discarded_overflow"])
	e.waitStat("the flood's packets expired", func(st api.Stats) bool { return st.Buffer["discarded_expired"] == 300 })
	// The SMF asked for no other report while its DL Buffering Duration ran: the flood brought
	// one; the first packet after it brings one more.
	select {
	case r := <-reports:
		t.Fatalf("a second report while the DL Buffering Duration ran: %v", r.req)
	default:
	}
	time.Sleep(time.Until(r.at.Add(2*time.Second + 300*time.Millisecond)))
	if err := e.topo.SendDownlink(fview, 5, testbed.Payload("later")); err != nil {
		t.Fatal(err)
	}
	nextReport(t, reports)
	select {
	case r := <-reports:
		t.Fatalf("a third report: %v", r.req)
	case <-time.After(delay + 300*time.Millisecond):
	}

	if err := c2.DropDownlink(e.ctx(), quiet); err != nil {
		t.Fatal(err)
	}
	e.waitStat("the DROP FAR's packets discarded", func(st api.Stats) bool { return st.Buffer["discarded_dropped"] == 10 })
}

// TestDropNotify: a downlink FAR that drops with NOCP brings exactly one Downlink Data Report
// for a stream of packets, and discards them all (the first in xupfd, the others in the
// datapath); the SMF's next Update FAR brings one more.
func TestDropNotify(t *testing.T) {
	e := newEnv(t)
	const qfi = 5
	c, s, reports := e.idleSession("smf.dropnotify.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, QFI: qfi})
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x960, qfi)
	before := e.stats()
	for round := range 2 {
		if err := c.DropDownlinkNotify(e.ctx(), s); err != nil {
			t.Fatal(err)
		}
		if err := e.topo.SendDownlink(view, 200, testbed.Payload("dropped")); err != nil {
			t.Fatal(err)
		}
		checkDownlinkDataReport(t, nextReport(t, reports), s.CPSEID, pfcpclient.DownlinkPDRID, qfi)
		select {
		case r := <-reports:
			t.Fatalf("round %d: a second report before the FAR changed: %v", round, r.req)
		case <-time.After(300 * time.Millisecond):
		}
	}
	st := e.waitStat("every packet discarded", func(st api.Stats) bool {
		return st.Buffer["discarded_dropped"]-before.Buffer["discarded_dropped"] == 2 &&
			st.Drops["far_drop"]-before.Drops["far_drop"] == 2*199
	})
	if n := st.Buffer["buffered"] - before.Buffer["buffered"]; n != 0 || st.PFCPReports["sent"] != 2 {
		t.Errorf("%d packets kept, reports %v: want none kept and two reports", n, st.PFCPReports)
	}
}

// TestDroppedDLTrafficThreshold: the downlink packets dropped for a session (beyond the BAR's
// count, then by a FAR that drops) are counted for its URR's Dropped DL Traffic Threshold,
// which reports once (DROTH) when they reach it.
func TestDroppedDLTrafficThreshold(t *testing.T) {
	e := newEnv(t)
	c, s, reports := e.idleSession("smf.droth.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS,
		SuggestedBufferingPackets: 20, DroppedPackets: 50})
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x970, 0)
	payload := testbed.Payload("droth")
	sent := 0
	send := func(n int) {
		t.Helper()
		if err := e.topo.SendDownlink(view, n, shifted(payload, sent)); err != nil {
			t.Fatal(err)
		}
		sent += n
	}
	droth := func(wait time.Duration) int { return drothReports(t, reports, s.CPSEID, wait) }
	before := e.stats()
	discarded := func(st api.Stats) uint64 {
		return st.Buffer["discarded_overflow"] + st.Buffer["discarded_dropped"] -
			before.Buffer["discarded_overflow"] - before.Buffer["discarded_dropped"]
	}
	send(30) // 20 buffered (the BAR's count), 10 over it
	e.waitStat("10 over the BAR's count", func(st api.Stats) bool { return discarded(st) == 10 })
	if err := c.DropDownlink(e.ctx(), s); err != nil { // the 20 held are dropped: 30
		t.Fatal(err)
	}
	send(19) // dropped by the FAR: 49
	e.waitStat("49 dropped", func(st api.Stats) bool { return discarded(st) == 49 })
	if n := droth(500 * time.Millisecond); n != 0 {
		t.Fatalf("%d DROTH reports below the threshold", n)
	}
	send(1)
	if n := droth(time.Second); n != 1 {
		t.Fatalf("%d DROTH reports at the threshold, want 1", n)
	}
	send(20)
	e.waitStat("70 dropped", func(st api.Stats) bool { return discarded(st) == 70 })
	if n := droth(500 * time.Millisecond); n != 0 {
		t.Errorf("%d more DROTH reports past the threshold, want none", n)
	}
}

// drothReports is how many usage reports of session seid come within wait, all of which must
// be DROTH ones.
func drothReports(t *testing.T, reports chan receivedReport, seid uint64, wait time.Duration) int {
	t.Helper()
	rs, _ := usageReports(t, reports, seid, wait)
	n := 0
	for _, r := range rs {
		if len(r.Trigger) > 0 && r.Trigger[0]&trigDROTH != 0 {
			n++
		}
	}
	if n != len(rs) {
		t.Errorf("usage reports %+v: want only DROTH ones", rs)
	}
	return n
}

// TestDroppedDLTrafficThresholdBufferFull: the packets the datapath drops as buffer_full (the
// session holds its most) count toward the URR's Dropped DL Traffic Threshold too, though
// they never reach xupfd: it reports once when they reach it.
func TestDroppedDLTrafficThresholdBufferFull(t *testing.T) {
	e := newEnvConfig(t, func(c *config.Config) { c.BufferMaxPacketsPerSession = 10 })
	_, s, reports := e.idleSession("smf.droth-full.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS,
		DroppedPackets: 25})
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x971, 0)
	payload := testbed.Payload("droth-full")
	before := e.stats()
	sent := 0
	send := func(n int, dropped uint64) {
		t.Helper()
		if err := e.topo.SendDownlink(view, n, shifted(payload, sent)); err != nil {
			t.Fatal(err)
		}
		sent += n
		st := e.waitStat("buffer_full drops", func(st api.Stats) bool {
			return st.Drops["buffer_full"]-before.Drops["buffer_full"] == dropped
		})
		if n := st.Buffer["discarded_overflow"] - before.Buffer["discarded_overflow"]; n != 0 {
			t.Fatalf("%d discarded in xupfd: want every packet over the bound dropped in the datapath", n)
		}
	}
	send(34, 24) // 10 held, 24 dropped
	if n := drothReports(t, reports, s.CPSEID, 500*time.Millisecond); n != 0 {
		t.Fatalf("%d DROTH reports below the threshold", n)
	}
	send(1, 25)
	if n := drothReports(t, reports, s.CPSEID, time.Second); n != 1 {
		t.Fatalf("%d DROTH reports at the threshold, want 1", n)
	}
	send(10, 35)
	if n := drothReports(t, reports, s.CPSEID, 500*time.Millisecond); n != 0 {
		t.Errorf("%d more DROTH reports past the threshold, want none", n)
	}
}

// TestDrainSeveralPDRs: a session whose two downlink PDRs (the default one and a flow's, by
// SDF filter) buffer behind two FARs; one Modification makes both FARs forward, each into
// its own tunnel, while packets keep coming. Each PDR's packets reach the gNB through its
// own FAR's new tunnel and QFI, the buffered ones first and all in order.
func TestDrainSeveralPDRs(t *testing.T) {
	e := newEnv(t)
	const qfiA, qfiB, portB = 9, 5, 7000
	const teidA, teidB = 0x980, 0x981
	const farB = 9
	c, s, _ := e.idleSession("smf.drain.test", pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, QFI: qfiA,
		Flows: []pfcpclient.Flow{{Filter: "permit out 17 from any to assigned 7000", Precedence: 100, QFI: qfiB}}})
	_, flowDL := pfcpclient.FlowPDRIDs(0)
	if _, err := c.Modify(e.ctx(), s, ie.NewCreateFAR(ie.NewFARID(farB), ie.NewApplyAction(0x04)), // BUFF
		ie.NewUpdatePDR(ie.NewPDRID(flowDL), ie.NewFARID(farB))); err != nil {
		t.Fatal(err)
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, teidA, qfiA)
	a, b := testbed.Payload("pdr-a"), testbed.Payload("pdr-b")
	const heldA, heldB, after = 300, 200, 2000
	gotCh := e.receiveAtGNB(heldA + heldB + 2*after)

	// Held, interleaved between the PDRs: A 0-149, B 0-199, A 150-299.
	for _, step := range []func() error{
		func() error { return e.topo.SendDownlink(view, heldA/2, a) },
		func() error { return e.topo.SendDownlinkTo(view, portB, heldB, b) },
		func() error { return e.topo.SendDownlink(view, heldA/2, shifted(a, heldA/2)) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	e.waitStat("every packet buffered", func(st api.Stats) bool { return st.Buffer["buffered"] == heldA+heldB })

	sending := make(chan error, 1)
	go func() {
		sending <- errors.Join(e.topo.SendDownlink(view, after, shifted(a, heldA)),
			e.topo.SendDownlinkTo(view, portB, after, shifted(b, heldB)))
	}()
	forward := func(far uint32, teid uint32) *ie.IE {
		return ie.NewUpdateFAR(ie.NewFARID(far), ie.NewApplyAction(0x02), ie.NewUpdateForwardingParameters(
			ie.NewDestinationInterface(ie.DstInterfaceAccess),
			ie.NewOuterHeaderCreation(0x0100, teid, testbed.GNBAddr.String(), "", 0, 0, 0)))
	}
	if _, err := c.Modify(e.ctx(), s, forward(pfcpclient.DownlinkFARID, teidA), forward(farB, teidB)); err != nil {
		t.Fatal(err)
	}
	if err := <-sending; err != nil {
		t.Fatal(err)
	}
	g := <-gotCh
	if g.err != nil {
		t.Errorf("receive: %v", g.err)
	}
	next := map[uint32]int{}
	want := map[uint32]struct {
		qfi     uint8
		payload func(int) []byte
	}{teidA: {qfiA, a}, teidB: {qfiB, b}}
	for _, p := range g.ps {
		w, ok := want[p.TEID]
		if !ok || p.QFI != w.qfi || !bytes.Equal(p.Payload, w.payload(next[p.TEID])) {
			t.Fatalf("packet at the gNB: TEID 0x%x QFI %d %q; want TEID 0x%x QFI %d %q or TEID 0x%x QFI %d %q",
				p.TEID, p.QFI, p.Payload, teidA, qfiA, a(next[teidA]), teidB, qfiB, b(next[teidB]))
		}
		next[p.TEID]++
	}
	if next[teidA] != heldA+after || next[teidB] != heldB+after {
		t.Errorf("in order at the gNB: %d through FAR 2's tunnel, %d through FAR %d's; want %d and %d",
			next[teidA], next[teidB], farB, heldA+after, heldB+after)
	}
	st := e.stats()
	if st.Drops["buffer_full"] != 0 || st.Buffer["discarded_overflow"] != 0 {
		t.Errorf("drops %v, buffer %v: want nothing discarded", st.Drops, st.Buffer)
	}
	t.Logf("datapath: buffered %d, replayed %d; xupfd: %v", st.Counters["buffered"], st.Counters["replayed"], st.Buffer)
}
