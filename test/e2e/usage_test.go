package e2e

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// usageReports are the usage reports of the Session Report Requests the SMF got for the
// session with CP SEID cpSEID until wait has passed, with the time each request arrived.
func usageReports(t *testing.T, ch chan receivedReport, cpSEID uint64, wait time.Duration) ([]pfcpclient.UsageReport, []time.Time) {
	t.Helper()
	var out []pfcpclient.UsageReport
	var at []time.Time
	end := time.After(wait)
	for {
		select {
		case r := <-ch:
			if r.req.SEID() != cpSEID || r.req.ReportType == nil || r.req.ReportType.Payload[0]&0x02 == 0 {
				continue
			}
			rs, err := pfcpclient.ParseUsageReports(r.req.UsageReport)
			if err != nil {
				t.Fatal(err)
			}
			for range rs {
				at = append(at, r.at)
			}
			out = append(out, rs...)
		case <-end:
			return out, at
		}
	}
}

// Usage Report Trigger bits (TS 29.244 8.2.41).
const (
	trigPERIO = 0x01 // octet 5
	trigVOLTH = 0x02 // octet 5
	trigDROTH = 0x40 // octet 5
	trigQUVTI = 0x08 // octet 7
	trigVOLQU = 0x01 // octet 6
	trigMONIT = 0x10 // octet 6
)

// TestUsageReporting: with real traffic, a URR's periodic reports keep their period to
// within a second, a volume threshold reports once per threshold's worth, a volume quota
// stops the downlink within one packet per CPU and is reported, a Query URR reports what is
// left, and all the reports of the URR, the Deletion Response's included, add up to the
// datapath's counters.
func TestUsageReporting(t *testing.T) {
	e := newEnv(t)
	opts, reports := reportsTo("smf.usage.test", 0)
	c, ctx := e.smfClientWith(opts)
	payload := testbed.Payload("usage")
	size := uint64(20 + 8 + len(payload(0))) // the inner IPv4 packet usage counts

	// Periodic: one report a second, each on time.
	const period = time.Second
	perio, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr,
		GNBTEID: 0x940, MeasurementPeriod: period})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	established := time.Now()
	rs, at := usageReports(t, reports, perio.CPSEID, 5*period+500*time.Millisecond)
	if len(rs) != 5 {
		t.Fatalf("%d periodic reports in 5.5 periods, want 5: %+v", len(rs), rs)
	}
	var worst time.Duration
	for i, r := range rs {
		late := at[i].Sub(established) - time.Duration(i+1)*period
		worst = max(worst, late)
		if r.Trigger[0] != trigPERIO || r.Seq != uint32(i) || late < -50*time.Millisecond || late > time.Second {
			t.Errorf("report %d: trigger %x seq %d, %v after its time", i, r.Trigger, r.Seq, late)
		}
	}
	t.Logf("periodic reports (period %v): the latest arrived %v after its time", period, worst)
	if err := c.Delete(ctx, perio); err != nil {
		t.Fatal(err)
	}

	// Threshold and quota, downlink.
	threshold, quota := 50*size, 200*size+1
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr,
		GNBTEID: 0x941, VolumeThreshold: threshold, VolumeQuota: quota})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x941, 0)
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	got := make(chan []testbed.Datagram, 1)
	go func() { ds, _ := rx.Collect(1000, 4*time.Second); got <- ds }()
	var all []pfcpclient.UsageReport
	for i, want := range []struct {
		packets int
		trigger [2]byte
	}{
		{60, [2]byte{trigVOLTH, 0}},
		{60, [2]byte{trigVOLTH, 0}},
		{200, [2]byte{trigVOLTH, trigVOLQU}}, // the quota cuts the third batch short
	} {
		if err := e.topo.SendDownlink(view, want.packets, payload); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		rs, at := usageReports(t, reports, s.CPSEID, 600*time.Millisecond)
		// Each trigger once: in one report, or two when the batch straddled a sample.
		var seen [2]byte
		for j, r := range rs {
			for k := range seen {
				if seen[k]&r.Trigger[k] != 0 {
					t.Errorf("batch %d: trigger %x reported twice", i, r.Trigger)
				}
				seen[k] |= r.Trigger[k]
			}
			t.Logf("batch %d: report %x %v after the last packet was sent", i, r.Trigger, at[j].Sub(sent))
		}
		if seen != want.trigger {
			t.Fatalf("batch %d of %d packets: reports %+v, want triggers %x", i, want.packets, rs, want.trigger)
		}
		all = append(all, rs...)
	}
	forwarded := <-got
	// 200 packets leave 1 byte of the quota: the 201st starts below it and passes; one
	// packet per CPU at most may pass beyond.
	t.Logf("quota %d bytes (%d packets of %d bytes): %d packets forwarded, %d bytes over",
		quota, quota/size, size, len(forwarded), int64(uint64(len(forwarded))*size)-int64(quota))
	if len(forwarded) < 201 || len(forwarded) > 200+runtime.NumCPU() {
		t.Errorf("%d packets forwarded with a quota of 200 and a byte, want 201 to %d", len(forwarded), 200+runtime.NumCPU())
	}
	if d := e.stats().Drops["urr_quota"]; d != uint64(320-len(forwarded)) {
		t.Errorf("urr_quota drops %d, want %d", d, 320-len(forwarded))
	}
	queryAndDelete(t, e, c, ctx, s, all, uint64(len(forwarded))*size)
}

// queryAndDelete queries every URR of session s (Query URR with QAURR), deletes s, and
// checks that the reports the SMF got before (earlier), the query's and the Deletion
// Response's add up to what the datapath counted for s and to the bytes the gNB got
// (delivered). It returns the query's reports.
func queryAndDelete(t *testing.T, e *env, c *pfcpclient.Client, ctx context.Context, s *pfcpclient.Session,
	earlier []pfcpclient.UsageReport, delivered uint64) []pfcpclient.UsageReport {
	t.Helper()
	info, err := e.api.PFCPSession(e.ctx(), s.UPSEID)
	if err != nil {
		t.Fatal(err)
	}
	var counted uint64
	for _, u := range info.Usage {
		counted += u.Bytes
	}
	q, err := c.QueryURR(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	final, err := c.DeleteWithUsage(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var reported uint64
	for _, r := range slices.Concat(earlier, q, final) {
		reported += r.Volume.TotalVolume
	}
	if reported != counted || counted != delivered {
		t.Errorf("reports add up to %d bytes, the datapath counted %d, the gNB got %d", reported, counted, delivered)
	}
	return q
}

// TestSeveralQuotas: a flow's PDRs count toward two URRs with volume quotas (the flow's and
// the session's). The flow's, used up first, stops the flow's packets while the default
// flow goes on; the session's, which the flow's packets spent too, then stops the default
// flow; each within one packet per CPU, each reported once.
func TestSeveralQuotas(t *testing.T) {
	e := newEnv(t)
	opts, reports := reportsTo("smf.quotas.test", 0)
	c, ctx := e.smfClientWith(opts)
	payload := testbed.Payload("quotas")
	size := uint64(20 + 8 + len(payload(0)))
	const flowPort = 7000
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr,
		GNBTEID: 0x942, VolumeQuota: 300*size + 1, Flows: []pfcpclient.Flow{{
			Filter: "permit out 17 from any to assigned 7000", Precedence: 100, QFI: 5, VolumeQuota: 100*size + 1}}})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x942, 0)
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	cpus := runtime.NumCPU()
	for _, b := range []struct {
		name      string
		port      uint16
		packets   int
		forwarded int // at least; at most cpus more
		volqu     uint32
	}{
		// 100 packets and a byte of the flow's quota: 101 pass.
		{"the flow, up to its quota", flowPort, 150, 101, pfcpclient.FlowURRID(0)},
		// The session's quota has 199 packets and a byte left: 200 pass.
		{"the default flow, up to the session's quota", testbed.UEPort, 250, 200, pfcpclient.SessionURRID},
		{"the flow, past both", flowPort, 20, 0, 0},
	} {
		if err := e.topo.SendDownlinkTo(view, b.port, b.packets, payload); err != nil {
			t.Fatal(err)
		}
		ds, _ := rx.Collect(b.packets, time.Second)
		if len(ds) < b.forwarded || len(ds) > b.forwarded+cpus {
			t.Errorf("%s: %d of %d packets forwarded, want %d to %d", b.name, len(ds), b.packets, b.forwarded,
				b.forwarded+cpus)
		}
		rs, _ := usageReports(t, reports, s.CPSEID, 600*time.Millisecond)
		var volqu []uint32
		for _, r := range rs {
			if r.Trigger[1]&trigVOLQU != 0 {
				volqu = append(volqu, r.URR)
			}
		}
		if (b.volqu == 0 && len(volqu) != 0) || (b.volqu != 0 && (len(volqu) != 1 || volqu[0] != b.volqu)) {
			t.Errorf("%s: VOLQU reports of URRs %v, want URR %d's alone", b.name, volqu, b.volqu)
		}
		t.Logf("%s: %d of %d packets forwarded, VOLQU of URRs %v", b.name, len(ds), b.packets, volqu)
	}
}

// TestQuotaValidityTime: a quota with a Quota Validity Time is reported (QUVTI) once, that
// long after it was granted, to within the sampling interval; the session forwards on.
func TestQuotaValidityTime(t *testing.T) {
	e := newEnv(t)
	opts, reports := reportsTo("smf.validity.test", 0)
	c, ctx := e.smfClientWith(opts)
	const validity = time.Second
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr,
		GNBTEID: 0x943, VolumeQuota: 1 << 30, QuotaValidityTime: validity})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	granted := time.Now()
	rs, at := usageReports(t, reports, s.CPSEID, 2*validity+500*time.Millisecond)
	if len(rs) != 1 || len(rs[0].Trigger) < 3 || rs[0].Trigger[2] != trigQUVTI {
		t.Fatalf("reports %+v, want one QUVTI", rs)
	}
	if d := at[0].Sub(granted); d < validity || d > validity+time.Second {
		t.Errorf("QUVTI %v after the grant, want within a second after %v", d, validity)
	}
	t.Logf("QUVTI report %v after the grant of a %v validity", at[0].Sub(granted), validity)
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x943, 0)
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := e.topo.SendDownlink(view, 10, testbed.Payload("valid")); err != nil {
		t.Fatal(err)
	}
	if ds, _ := rx.Collect(10, time.Second); len(ds) != 10 {
		t.Errorf("%d of 10 packets forwarded after QUVTI, want all: the SMF ends the quota, not the UPF", len(ds))
	}
}

// TestMonitoringTime: traffic before and after a URR's monitoring time (1 to 2 s after the
// session's establishment). Nothing is reported at the monitoring time; the subsequent
// volume quota stops the traffic after it (within one packet per CPU); the subsequent
// volume threshold, reached after it, brings the two parts in one Session Report Request:
// the usage before (Usage Information BEF, trigger MONIT, ending at the monitoring time)
// and after (AFT, VOLTH, starting there). The split happens at a sample taken at the
// monitoring time (within milliseconds; a tick of the 200 ms sampling could be up to 200 ms
// late), so each batch is sent 100 ms from it and must land whole on its side. All reports
// add up to the datapath's counters.
func TestMonitoringTime(t *testing.T) {
	e := newEnv(t)
	opts, reports := reportsTo("smf.monitoring.test", 0)
	c, ctx := e.smfClientWith(opts)
	payload := testbed.Payload("monitoring")
	size := uint64(20 + 8 + len(payload(0)))
	mt := time.Now().Truncate(time.Second).Add(2 * time.Second)
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr,
		GNBTEID: 0x944, VolumeThreshold: 1 << 30,
		Monitoring: []pfcpclient.Monitoring{{Time: mt, VolumeThreshold: 30 * size, VolumeQuota: 60*size + 1}}})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x944, 0)
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	got := make(chan []testbed.Datagram, 1)
	go func() { ds, _ := rx.Collect(120, time.Until(mt)+3*time.Second); got <- ds }()
	if err := e.topo.SendDownlink(view, 50, payload); err != nil {
		t.Fatal(err)
	}
	if time.Until(mt) < 100*time.Millisecond {
		t.Fatalf("the traffic before the monitoring time ended %v before it, want 100 ms at least", time.Until(mt))
	}
	if rs, _ := usageReports(t, reports, s.CPSEID, time.Until(mt)+100*time.Millisecond); len(rs) != 0 {
		t.Fatalf("reports before the subsequent threshold was reached: %+v", rs)
	}
	if err := e.topo.SendDownlink(view, 40, payload); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	rs, at := usageReports(t, reports, s.CPSEID, 600*time.Millisecond)
	if len(rs) != 2 {
		t.Fatalf("%d reports after the subsequent threshold, want BEF and AFT: %+v", len(rs), rs)
	}
	bef, aft := rs[0], rs[1]
	t.Logf("BEF %d bytes %v-%v, AFT %d bytes %v-%v, sent %v after the threshold was reached",
		bef.Volume.TotalVolume, bef.Start, bef.End, aft.Volume.TotalVolume, aft.Start, aft.End, at[1].Sub(sent))
	if bef.Info != pfcpclient.UsageBefore || bef.Trigger[1]&trigMONIT == 0 || !bef.End.Equal(mt) ||
		bef.Volume.TotalVolume != 50*size {
		t.Errorf("before: %+v, %d bytes; want BEF, MONIT, ending at %v, %d bytes", bef, bef.Volume.TotalVolume, mt, 50*size)
	}
	if aft.Info != pfcpclient.UsageAfter || aft.Trigger[0] != trigVOLTH || !aft.Start.Equal(mt) ||
		aft.Volume.TotalVolume != 40*size || aft.Seq != bef.Seq+1 {
		t.Errorf("after: %+v, %d bytes; want AFT, VOLTH, from %v, %d bytes", aft, aft.Volume.TotalVolume, mt, 40*size)
	}
	// 40 and 30 packets after the monitoring time: the subsequent quota of 60 and a byte
	// lets 61 through.
	if err := e.topo.SendDownlink(view, 30, payload); err != nil {
		t.Fatal(err)
	}
	quota, _ := usageReports(t, reports, s.CPSEID, 600*time.Millisecond)
	if len(quota) != 1 || quota[0].Trigger[1]&trigVOLQU == 0 || quota[0].Info != 0 {
		t.Errorf("reports of the subsequent quota: %+v, want one VOLQU without Usage Information", quota)
	}
	rs = append(rs, quota...)
	forwarded := <-got
	cpus := runtime.NumCPU()
	t.Logf("subsequent quota of 61 packets (and a byte): %d forwarded after the monitoring time", len(forwarded)-50)
	if len(forwarded) < 50+61 || len(forwarded) > 50+61+cpus {
		t.Errorf("%d packets forwarded, want 50 before the monitoring time and 61 to %d after", len(forwarded), 61+cpus)
	}
	if q := queryAndDelete(t, e, c, ctx, s, rs, uint64(len(forwarded))*size); len(q) != 1 || q[0].Info != 0 {
		t.Errorf("query after the split's reports: %+v, want one report without Usage Information", q)
	}
}

// TestAdditionalMonitoringTime: a URR with a Monitoring Time and an Additional Monitoring
// Time a second later splits its usage at both. At the first nothing is reported; at the
// second, the part before the first still unreported, both parts go out at once (BEF and
// AFT, trigger MONIT, split at the monitoring times); the second one's subsequent volume
// quota then stops the traffic after it (within one packet per CPU), and the first one's
// subsequent threshold goes on counting from the second. All reports add up to the
// datapath's counters. Each batch is sent 100 ms or more from a monitoring time.
func TestAdditionalMonitoringTime(t *testing.T) {
	e := newEnv(t)
	opts, reports := reportsTo("smf.additional-monitoring.test", 0)
	c, ctx := e.smfClientWith(opts)
	payload := testbed.Payload("additional")
	size := uint64(20 + 8 + len(payload(0)))
	mt1 := time.Now().Truncate(time.Second).Add(2 * time.Second)
	mt2 := mt1.Add(time.Second)
	s, err := c.Establish(ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, GNB: testbed.GNBAddr,
		GNBTEID: 0x945, VolumeThreshold: 1 << 30, Monitoring: []pfcpclient.Monitoring{
			{Time: mt1, VolumeThreshold: 20 * size}, {Time: mt2, VolumeQuota: 30*size + 1}}})
	if err != nil {
		t.Fatalf("establish: %v\n%s", err, e.daemon.LogTail())
	}
	view := testbed.PFCPView(s, testbed.GNBAddr, 0x945, 0)
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	got := make(chan []testbed.Datagram, 1)
	go func() { ds, _ := rx.Collect(100, time.Until(mt2)+3*time.Second); got <- ds }()
	sendBefore := func(n int, mt time.Time) {
		t.Helper()
		if err := e.topo.SendDownlink(view, n, payload); err != nil {
			t.Fatal(err)
		}
		if time.Until(mt) < 100*time.Millisecond {
			t.Fatalf("a batch ended %v before a monitoring time, want 100 ms at least", time.Until(mt))
		}
	}
	sendBefore(10, mt1)
	if rs, _ := usageReports(t, reports, s.CPSEID, time.Until(mt1)+100*time.Millisecond); len(rs) != 0 {
		t.Fatalf("reports at the first monitoring time: %+v", rs)
	}
	sendBefore(10, mt2)
	rs, at := usageReports(t, reports, s.CPSEID, time.Until(mt2)+500*time.Millisecond)
	if len(rs) != 2 {
		t.Fatalf("%d reports at the second monitoring time, want BEF and AFT: %+v", len(rs), rs)
	}
	bef, aft := rs[0], rs[1]
	t.Logf("BEF %d bytes %v-%v, AFT %d bytes %v-%v, sent %v after the second monitoring time",
		bef.Volume.TotalVolume, bef.Start, bef.End, aft.Volume.TotalVolume, aft.Start, aft.End, at[1].Sub(mt2))
	if bef.Info != pfcpclient.UsageBefore || bef.Trigger[1]&trigMONIT == 0 || !bef.End.Equal(mt1) ||
		bef.Volume.TotalVolume != 10*size {
		t.Errorf("before the first: %+v, %d bytes; want BEF, MONIT, ending at %v, %d bytes", bef, bef.Volume.TotalVolume, mt1, 10*size)
	}
	if aft.Info != pfcpclient.UsageAfter || aft.Trigger[1]&trigMONIT == 0 || !aft.Start.Equal(mt1) ||
		aft.Volume.TotalVolume != 10*size || aft.Seq != bef.Seq+1 {
		t.Errorf("after the first: %+v, %d bytes; want AFT, MONIT, from %v, %d bytes", aft, aft.Volume.TotalVolume, mt1, 10*size)
	}
	// After the second: the threshold of 20 packets reports, the quota of 30 and a byte lets
	// 31 through.
	if err := e.topo.SendDownlink(view, 40, payload); err != nil {
		t.Fatal(err)
	}
	after, _ := usageReports(t, reports, s.CPSEID, 600*time.Millisecond)
	var volqu bool
	for _, r := range after {
		volqu = volqu || r.Trigger[1]&trigVOLQU != 0
		if r.Info != 0 {
			t.Errorf("report after the second monitoring time with Usage Information: %+v", r)
		}
	}
	if !volqu || len(after) > 2 {
		t.Errorf("reports after the second monitoring time: %+v, want VOLTH and VOLQU", after)
	}
	forwarded := <-got
	cpus := runtime.NumCPU()
	t.Logf("subsequent quota of 31 packets (and a byte): %d forwarded after the second monitoring time", len(forwarded)-20)
	if len(forwarded) < 20+31 || len(forwarded) > 20+31+cpus {
		t.Errorf("%d packets forwarded, want 20 before the second monitoring time and 31 to %d after", len(forwarded), 31+cpus)
	}
	queryAndDelete(t, e, c, ctx, s, slices.Concat(rs, after), uint64(len(forwarded))*size)
}
