package pfcp

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/usage"
)

func decodeReports(t *testing.T, l []*ie.IE) []pfcpclient.UsageReport {
	t.Helper()
	rs, err := pfcpclient.ParseUsageReports(l)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// usageSession establishes basicSession with URR 1 replaced by urr and returns its SEID.
func usageSession(p *pfcpTest, urr *ie.IE, extra ...*ie.IE) uint64 {
	ies := basicSession(ue1)
	ies[5] = urr
	seid, _ := p.mustEstablish(0x40, append(ies, extra...)...)
	return seid
}

// due takes the reports the poller would send at now, decoded, for seid.
func (p *pfcpTest) due(seid uint64, now time.Time) []pfcpclient.UsageReport {
	p.t.Helper()
	due, _ := p.n.dueReports(now)
	return decodeReports(p.t, due[seid])
}

// TestUsageThresholdAndPeriod: a volume threshold reports once per threshold's worth,
// periodic reports keep their period, and each report carries what came since the last.
func TestUsageThresholdAndPeriod(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 1),
		ie.NewReportingTriggers(0x01|0x02, 0), ie.NewVolumeThreshold(0x01, 1000, 0, 0),
		ie.NewMeasurementPeriod(10*time.Second)))
	start := time.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}, {PDR: 2, Packets: 1, Bytes: 300}}
	if rs := p.due(seid, at(time.Second)); len(rs) != 0 {
		t.Fatalf("below the threshold: %+v", rs)
	}
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 2, Bytes: 500}
	rs := p.due(seid, at(2*time.Second))
	if len(rs) != 1 || rs[0].Trigger[0] != 0x02 || rs[0].Seq != 0 || rs[0].Volume.TotalVolume != 1100 ||
		rs[0].Volume.UplinkVolume != 600 || rs[0].Volume.DownlinkNumberOfPackets != 2 || rs[0].FirstPacket.IsZero() {
		t.Fatalf("at the threshold: %+v", rs)
	}
	if rs := p.due(seid, at(3*time.Second)); len(rs) != 0 {
		t.Fatalf("threshold reported twice: %+v", rs)
	}
	p.dp.usage[seid][0] = rules.Usage{Uplink: true, PDR: 1, Packets: 4, Bytes: 700}
	rs = p.due(seid, at(10*time.Second+100*time.Millisecond))
	if len(rs) != 1 || rs[0].Trigger[0] != 0x01 || rs[0].Seq != 1 || rs[0].Volume.TotalVolume != 100 {
		t.Fatalf("the period: %+v", rs)
	}
	// The period counts from the establishment, whatever reports came between; End Time
	// has a resolution of one second.
	if d := rs[0].End.Sub(start); d < 9*time.Second || d > 11*time.Second {
		t.Errorf("periodic report ends %v after the establishment, want within a second of 10 s", d)
	}
}

// TestUsageUpdateThreshold: an Update URR's new Volume Threshold and Measurement Period
// replace the old ones for the measurement under way (what came since the last report
// counts toward the new threshold), and reporting triggers it adds take effect.
func TestUsageUpdateThreshold(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0x02, 0), ie.NewVolumeThreshold(0x01, 1000, 0, 0)))
	start := time.Now()
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 2, Bytes: 400}, {PDR: 2}}
	if rs := p.due(seid, start.Add(time.Second)); len(rs) != 0 {
		t.Fatalf("below the threshold of 1000: %+v", rs)
	}
	p.modify(seid, ie.NewUpdateURR(ie.NewURRID(1), ie.NewReportingTriggers(0x01|0x02, 0),
		ie.NewVolumeThreshold(0x01, 500, 0, 0), ie.NewMeasurementPeriod(5*time.Second)))
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 1, Bytes: 100}
	rs := p.due(seid, start.Add(2*time.Second))
	if len(rs) != 1 || rs[0].Trigger[0] != 0x02 || rs[0].Volume.TotalVolume != 500 {
		t.Fatalf("at the new threshold of 500: %+v, want one VOLTH of 500 bytes", rs)
	}
	rs = p.due(seid, start.Add(5*time.Second+100*time.Millisecond))
	if len(rs) != 1 || rs[0].Trigger[0] != 0x01 {
		t.Errorf("at the new period: %+v, want one PERIO", rs)
	}
}

// TestUsageQuery: Query URR and the QAURR flag report in the Modification Response
// (IMMER), Remove URR reports the URR's last usage (TERMR), and every report of a URR adds
// up to what its PDRs counted.
func TestUsageQuery(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0, 0)))
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}, {PDR: 2, Packets: 1, Bytes: 300}}
	var total uint64
	r := decodeReports(t, p.modify(seid, ie.NewQueryURR(ie.NewURRID(1))).UsageReport)
	if len(r) != 1 || r[0].Trigger[0] != 0x80 || r[0].Volume.TotalVolume != 900 {
		t.Fatalf("query: %+v", r)
	}
	total += r[0].Volume.TotalVolume
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 2, Bytes: 400}
	r = decodeReports(t, p.modify(seid, ie.NewPFCPSMReqFlags(pfcpSMReqQAURR)).UsageReport)
	if len(r) != 1 || r[0].Trigger[0] != 0x80 || r[0].Seq != 1 || r[0].Volume.TotalVolume != 100 {
		t.Fatalf("query all: %+v", r)
	}
	total += r[0].Volume.TotalVolume
	p.dp.usage[seid][0] = rules.Usage{Uplink: true, PDR: 1, Packets: 4, Bytes: 650}
	// URR 2 takes URR 1's place on the PDRs.
	r = decodeReports(t, p.modify(seid, ie.NewRemoveURR(ie.NewURRID(1)),
		ie.NewCreateURR(ie.NewURRID(2), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0)),
		ie.NewUpdatePDR(ie.NewPDRID(1), ie.NewURRID(2)), ie.NewUpdatePDR(ie.NewPDRID(2), ie.NewURRID(2))).UsageReport)
	if len(r) != 1 || r[0].Trigger[1] != 0x08 || r[0].Seq != 2 || r[0].Volume.TotalVolume != 50 {
		t.Fatalf("removal: %+v", r)
	}
	total += r[0].Volume.TotalVolume
	if total != 650+400 {
		t.Errorf("the reports add up to %d bytes, the counters to %d", total, 650+400)
	}
	if ids := p.n.ss.usage[seid].IDs(); len(ids) != 1 || ids[0] != 2 {
		t.Errorf("URRs measured: %v, want only 2", ids)
	}
}

// TestUsageQuota: a volume quota goes to the datapath with the URR's PDRs; used up, it is
// reported once (VOLQU) and the PDRs then apply the FAR for quota action; a new quota in an
// Update URR gives the PDRs their FAR and a fresh count back.
func TestUsageQuota(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0, 0x01), ie.NewVolumeQuota(0x01, 1000, 0, 0), ie.NewFARID(3)),
		ie.NewCreateFAR(ie.NewFARID(3), ie.NewApplyAction(ApplyDrop)))
	quota := func() (*rules.Quota, rules.Action) {
		pdr := p.dp.sets[seid][1].PDRs[0]
		if len(pdr.Quotas) != 1 {
			return nil, pdr.FAR.Action
		}
		return &pdr.Quotas[0], pdr.FAR.Action
	}
	if q, a := quota(); q == nil || q.Total != 1000 || q.Uplink != rules.NoLimit || q.Grant != 1 || a != rules.Forward {
		t.Fatalf("datapath quota %+v, FAR %v; want a total of 1000 bytes, forwarding", q, a)
	}
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}, {PDR: 2, Packets: 2, Bytes: 450}}
	rs := p.due(seid, time.Now())
	if len(rs) != 1 || rs[0].Trigger[1] != 0x01 || rs[0].Volume.TotalVolume != 1050 {
		t.Fatalf("quota used up: %+v", rs)
	}
	if q, a := quota(); q != nil || a != rules.Drop {
		t.Errorf("after VOLQU: quota %+v, FAR %v; want the FAR for quota action (drop)", q, a)
	}
	if rs := p.due(seid, time.Now()); len(rs) != 0 {
		t.Fatalf("quota reported twice: %+v", rs)
	}
	p.modify(seid, ie.NewUpdateURR(ie.NewURRID(1), ie.NewVolumeQuota(0x01, 1000, 0, 0)))
	if q, a := quota(); q == nil || q.Grant != 2 || q.Total != 1000 || a != rules.Forward {
		t.Errorf("after a new quota: %+v, FAR %v; want grant 2, forwarding", q, a)
	}
	if rs := p.due(seid, time.Now()); len(rs) != 0 {
		t.Fatalf("a fresh quota reported at once: %+v", rs)
	}
}

// TestDeletionReportsAddUp: the Deletion Response's reports carry what the earlier reports
// did not, so that together they add up to the counters.
func TestDeletionReportsAddUp(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0x02, 0), ie.NewVolumeThreshold(0x01, 500, 0, 0)))
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}, {PDR: 2}}
	sum := uint64(0)
	for _, r := range p.due(seid, time.Now()) {
		sum += r.Volume.TotalVolume
	}
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 4, Bytes: 700}, {PDR: 2, Packets: 1, Bytes: 80}}
	d := p.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid, seq, 0) })
	for _, r := range decodeReports(t, d.(*message.SessionDeletionResponse).UsageReport) {
		sum += r.Volume.TotalVolume
	}
	if sum != 780 {
		t.Errorf("reports add up to %d bytes, counters to 780", sum)
	}
}

// TestReportingTriggersMap: the Reporting Triggers octets map to the Usage Report Trigger
// layout the usage package uses.
func TestReportingTriggersMap(t *testing.T) {
	got := reportingTriggers([]byte{0xff, 0x83, 0xff})
	want := usage.Periodic | usage.VolumeThreshold | usage.TimeThreshold | usage.QuotaHoldingTime |
		usage.StartOfTraffic | usage.StopOfTraffic | usage.DroppedThreshold | usage.Linked | usage.VolumeQuota |
		usage.TimeQuota | usage.QuotaValidity
	if got != want {
		t.Errorf("triggers %#x, want %#x", got, want)
	}
}

// TestUsageTimeQuota: a time quota counts the time of traffic; used up, it is reported
// (TIMQU) and the URR's PDRs get a quota of nothing in the datapath.
func TestUsageTimeQuota(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 0, 1),
		ie.NewReportingTriggers(0, 0x02), ie.NewTimeQuota(2*time.Second)))
	if q := p.dp.sets[seid][0].PDRs[0].Quotas; len(q) != 0 {
		t.Fatalf("a time quota not used up needs nothing in the datapath: %+v", q)
	}
	start := time.Now()
	for sec := 1; sec <= 4; sec++ {
		p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: uint64(sec), Bytes: uint64(100 * sec)}, {PDR: 2}}
		rs := p.due(seid, start.Add(time.Duration(sec)*time.Second))
		switch {
		case sec < 3 && len(rs) != 0:
			t.Fatalf("%d s: %+v before the quota is used up", sec, rs)
		case sec == 3 && (len(rs) != 1 || rs[0].Trigger[1] != 0x02 || rs[0].Duration != 2*time.Second || rs[0].Volume != nil):
			t.Fatalf("2 s of traffic: %+v, want one TIMQU report of 2 s, without volume (DURAT only)", rs)
		}
	}
	for _, rs := range p.dp.sets[seid] {
		if q := rs.PDRs[0].Quotas; len(q) != 1 || q[0].Total != 0 || q[0].Uplink != 0 || q[0].Downlink != 0 {
			t.Errorf("%s after TIMQU: quotas %+v, want one of nothing", rs.Key(), q)
		}
	}
}

// TestDroppedDLTrafficThreshold: a downlink PDR whose URR has DROTH hands the packets of a
// FAR that drops to the buffer (rules.Buffer in the datapath, Discard in the buffer), and the
// URR reports once (DROTH) when what the buffer discarded for the PDR reaches the Dropped DL
// Traffic Threshold.
func TestDroppedDLTrafficThreshold(t *testing.T) {
	fb := &fakeBuffers{set: map[uint64]map[buffer.Key]buffer.Policy{}}
	p := newPFCPTest(t, func(o *Options) { o.Buffers = fb })
	ies := basicSession(ue1)
	ies[3] = ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(ApplyDrop))
	ies[5] = ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0x40, 0), ie.NewDroppedDLTrafficThreshold(true, true, 10, 1_000_000))
	seid, _ := p.mustEstablish(0x40, ies...)
	dl := buffer.Key{Owner: seid, PDR: 2}
	for _, rs := range p.dp.sets[seid] {
		if want := map[bool]rules.Action{true: rules.Forward, false: rules.Buffer}[rs.Uplink]; rs.PDRs[0].FAR.Action != want {
			t.Errorf("%s: FAR action %d, want %d", rs.Key(), rs.PDRs[0].FAR.Action, want)
		}
	}
	if pol := fb.policy(seid, dl); pol.Mode != buffer.Discard {
		t.Errorf("downlink policy %+v, want Discard", pol)
	}
	start := time.Now()
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1}, {PDR: 2}}
	for i, n := range []uint64{5, 9, 10, 30} {
		fb.mu.Lock()
		fb.discarded = map[buffer.Key]rules.Counts{dl: {Packets: n, Bytes: 100 * n}}
		fb.mu.Unlock()
		rs := p.due(seid, start.Add(time.Duration(i+1)*time.Second))
		switch {
		case n < 10 && len(rs) != 0:
			t.Fatalf("%d dropped: reports %+v below the threshold", n, rs)
		case n == 10 && (len(rs) != 1 || rs[0].Trigger[0] != 0x40):
			t.Fatalf("%d dropped: reports %+v, want one DROTH", n, rs)
		case n > 10 && len(rs) != 0:
			t.Fatalf("%d dropped: reports %+v, the threshold reported again", n, rs)
		}
	}
}

// TestUsageSeveralQuotas: a PDR with two URRs with volume quotas (as free5GC's URRs before and
// after QoS) gives the datapath both; the one used up first is reported and becomes a quota
// of nothing, the other keeps its budget.
func TestUsageSeveralQuotas(t *testing.T) {
	p := newPFCPTest(t)
	ies := basicSession(ue1)
	ies[0] = chosenULPDR(1, 1, 9, 1, ie.NewQERID(1), ie.NewURRID(1), ie.NewURRID(2))
	ies[1] = dlPDR(2, ue1, 2, ie.NewQERID(1), ie.NewURRID(1), ie.NewURRID(2))
	ies[5] = ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x01),
		ie.NewVolumeQuota(0x01, 1000, 0, 0))
	ies = append(ies, ie.NewCreateURR(ie.NewURRID(2), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0, 0x01), ie.NewVolumeQuota(0x01, 5000, 0, 0), ie.NewMeasurementInformation(0x01)))
	seid, _ := p.mustEstablish(0x41, ies...)
	totals := func() []uint64 {
		var out []uint64
		for _, q := range p.dp.sets[seid][1].PDRs[0].Quotas {
			out = append(out, q.Total)
		}
		return out
	}
	if got := totals(); len(got) != 2 || got[0] != 1000 || got[1] != 5000 {
		t.Fatalf("datapath quotas %v, want 1000 and 5000", got)
	}
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600, BeforeQoS: rules.Counts{Packets: 3, Bytes: 600}},
		{PDR: 2, Packets: 2, Bytes: 450, BeforeQoS: rules.Counts{Packets: 2, Bytes: 450}}}
	if rs := p.due(seid, time.Now()); len(rs) != 1 || rs[0].URR != 1 || rs[0].Trigger[1] != 0x01 {
		t.Fatalf("reports %+v, want URR 1's VOLQU", rs)
	}
	if got := totals(); len(got) != 2 || got[0] != 0 || got[1] != 5000 {
		t.Errorf("datapath quotas %v after URR 1's VOLQU, want 0 and 5000", got)
	}
}

// TestUsageQuotaValidityTime: a quota's Quota Validity Time reports (QUVTI, octet 7 bit 4)
// once, that long after the grant, and leaves the datapath's quota as it was.
func TestUsageQuotaValidityTime(t *testing.T) {
	p := newPFCPTest(t)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0, 0x01|0x80), ie.NewVolumeQuota(0x01, 1000, 0, 0), ie.NewQuotaValidityTime(3*time.Second)))
	start := time.Now()
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 1, Bytes: 100}, {PDR: 2}}
	for sec := 1; sec <= 5; sec++ {
		rs := p.due(seid, start.Add(time.Duration(sec)*time.Second))
		switch {
		case sec == 3 && (len(rs) != 1 || rs[0].Trigger[2] != 0x08 || rs[0].Trigger[1] != 0):
			t.Fatalf("%d s: reports %+v, want one QUVTI", sec, rs)
		case sec != 3 && len(rs) != 0:
			t.Fatalf("%d s: reports %+v, want none", sec, rs)
		}
	}
	if q := p.dp.sets[seid][1].PDRs[0].Quotas; len(q) != 1 || q[0].Total != 1000 {
		t.Errorf("datapath quotas %+v after QUVTI, want the quota of 1000 still", q)
	}
}

// quietSplit has session seid's PDRs count 600 bytes uplink before monitoring time mt and
// 300 downlink by it, and checks that neither sample reports: a monitoring time sends
// nothing by itself.
func (p *pfcpTest) quietSplit(seid uint64, mt time.Time) {
	p.t.Helper()
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 6, Bytes: 600}, {PDR: 2}}
	if rs := p.due(seid, mt.Add(-time.Second)); len(rs) != 0 {
		p.t.Fatalf("before the monitoring time: %+v", rs)
	}
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 3, Bytes: 300}
	if rs := p.due(seid, mt); len(rs) != 0 {
		p.t.Fatalf("at the monitoring time: %+v, want no report", rs)
	}
}

// TestUsageMonitoringTime: at the monitoring time the URR takes its subsequent threshold
// and quota (a new grant for the datapath) and sends nothing; its next report carries the
// usage before (Usage Information BEF, trigger MONIT, ending at the monitoring time) and
// after (AFT, starting there), which add up to the counters.
func TestUsageMonitoringTime(t *testing.T) {
	p := newPFCPTest(t)
	mt := time.Now().Truncate(time.Second).Add(2 * time.Second)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0x02, 0x01), ie.NewVolumeThreshold(0x01, 1000, 0, 0), ie.NewMonitoringTime(mt),
		ie.NewSubsequentVolumeThreshold(0x01, 5000, 0, 0), ie.NewSubsequentVolumeQuota(0x01, 3000, 0, 0)))
	p.quietSplit(seid, mt)
	if u := p.n.ss.byID[seid].URRs[1]; !u.MonitoringTime.IsZero() || u.VolumeThreshold != 5000 || u.VolumeQuota != 3000 {
		t.Errorf("URR after its monitoring time: %+v", u)
	}
	if q := p.dp.sets[seid][0].PDRs[0].Quotas; len(q) != 1 || q[0].Total != 3000 {
		t.Errorf("datapath quotas %+v after the monitoring time, want the subsequent quota of 3000", q)
	}
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 15, Bytes: 1500} // 1200 after: under the new threshold
	if rs := p.due(seid, mt.Add(time.Second)); len(rs) != 0 {
		t.Fatalf("the threshold did not become the subsequent one: %+v", rs)
	}
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 59, Bytes: 5900}
	rs := p.due(seid, mt.Add(2*time.Second))
	if len(rs) != 2 {
		t.Fatalf("%d reports, want BEF and AFT: %+v", len(rs), rs)
	}
	bef, aft := rs[0], rs[1]
	if bef.Info != pfcpclient.UsageBefore || bef.Trigger[1] != 0x10 || bef.Seq != 0 || !bef.End.Equal(mt) ||
		bef.Volume.TotalVolume != 900 || bef.Volume.UplinkVolume != 600 {
		t.Errorf("before: %+v %+v", bef, bef.Volume)
	}
	if aft.Info != pfcpclient.UsageAfter || aft.Trigger[0] != 0x02 || aft.Trigger[1] != 0x01 || aft.Seq != 1 ||
		!aft.Start.Equal(mt) || aft.Volume.TotalVolume != 5600 || aft.Volume.UplinkVolume != 0 {
		t.Errorf("after: %+v %+v", aft, aft.Volume)
	}
}

// TestAdditionalMonitoringTime: an Additional Monitoring Time is a further split, taken in
// time order whichever IE gave it (here the Additional one comes first): at the first the URR
// takes that one's subsequent values and the next monitoring time; at the second, with the
// part before the first still unreported, both parts go out (BEF and AFT, trigger MONIT) and
// the URR takes the second one's values; the usage after it is reported on its own.
func TestAdditionalMonitoringTime(t *testing.T) {
	p := newPFCPTest(t)
	mt1 := time.Now().Truncate(time.Second).Add(2 * time.Second)
	mt2 := mt1.Add(2 * time.Second)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0x02, 0x01), ie.NewVolumeThreshold(0x01, 1000, 0, 0),
		ie.NewMonitoringTime(mt2), ie.NewSubsequentVolumeThreshold(0x01, 2000, 0, 0),
		ie.NewAdditionalMonitoringTime(ie.NewMonitoringTime(mt1), ie.NewSubsequentVolumeThreshold(0x01, 5000, 0, 0),
			ie.NewSubsequentVolumeQuota(0x01, 30000, 0, 0))))
	urr := func() *URR { return p.n.ss.byID[seid].URRs[1] }
	if u := urr(); !u.MonitoringTime.Equal(mt1) || len(u.Additional) != 1 || !u.Additional[0].Time.Equal(mt2) {
		t.Fatalf("monitoring times %v then %+v, want %v then %v", u.MonitoringTime, u.Additional, mt1, mt2)
	}
	p.quietSplit(seid, mt1)
	if u := urr(); !u.MonitoringTime.Equal(mt2) || u.Additional != nil || u.VolumeThreshold != 5000 ||
		u.VolumeQuota != 30000 || u.Subsequent.VolumeThreshold != 2000 {
		t.Errorf("URR after its first monitoring time: %+v", u)
	}
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 20, Bytes: 2000} // 1700 after mt1
	rs := p.due(seid, mt2)
	if len(rs) != 2 {
		t.Fatalf("%d reports at the second monitoring time, want BEF and AFT: %+v", len(rs), rs)
	}
	bef, aft := rs[0], rs[1]
	if bef.Info != pfcpclient.UsageBefore || bef.Trigger[1] != 0x10 || !bef.End.Equal(mt1) || bef.Volume.TotalVolume != 900 {
		t.Errorf("before the first: %+v %+v", bef, bef.Volume)
	}
	if aft.Info != pfcpclient.UsageAfter || aft.Trigger[1] != 0x10 || !aft.Start.Equal(mt1) || aft.Volume.TotalVolume != 1700 {
		t.Errorf("after the first: %+v %+v", aft, aft.Volume)
	}
	if u := urr(); !u.MonitoringTime.IsZero() || u.VolumeThreshold != 2000 || u.VolumeQuota != 30000 {
		t.Errorf("URR after its second monitoring time: %+v", u)
	}
	p.dp.usage[seid][1] = rules.Usage{PDR: 2, Packets: 41, Bytes: 4100} // 2100 after mt2
	rs = p.due(seid, mt2.Add(time.Second))
	if len(rs) != 1 || rs[0].Info != 0 || rs[0].Trigger[0] != 0x02 || rs[0].Volume.TotalVolume != 2100 {
		t.Errorf("reports after the second monitoring time %+v, want one VOLTH of 2100 without Usage Information", rs)
	}
}

// TestMonitoringTimeHostile: monitoring time IEs too short or without a flag are refused
// with Mandatory IE incorrect and the IE, subsequent values without a Monitoring Time with
// Conditional IE missing, an Additional Monitoring Time without its Monitoring Time with
// Mandatory IE missing, two monitoring times at one second with Mandatory IE incorrect, and
// more than maxMonitoringTimes with Rule creation/modification failure.
func TestMonitoringTimeHostile(t *testing.T) {
	urr := func(extra ...*ie.IE) *ie.IE {
		return ie.NewCreateURR(append([]*ie.IE{ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
			ie.NewReportingTriggers(0x02, 0)}, extra...)...)
	}
	mt := ie.NewMonitoringTime(time.Now().Add(time.Hour))
	later := func(h int) *ie.IE { return ie.NewMonitoringTime(time.Now().Add(time.Duration(h+1) * time.Hour)) }
	nine := []*ie.IE{mt}
	for i := range 8 {
		nine = append(nine, ie.NewAdditionalMonitoringTime(later(i+1)))
	}
	for _, c := range []struct {
		name      string
		urr       *ie.IE
		cause     uint8
		offending uint16
	}{
		{"short monitoring time", urr(ie.New(ie.MonitoringTime, []byte{1, 2, 3})), ie.CauseMandatoryIEIncorrect, ie.MonitoringTime},
		{"short subsequent volume threshold", urr(mt, ie.New(ie.SubsequentVolumeThreshold, []byte{0x01, 0, 0, 0})),
			ie.CauseMandatoryIEIncorrect, ie.SubsequentVolumeThreshold},
		{"subsequent volume quota without a flag", urr(mt, ie.New(ie.SubsequentVolumeQuota, []byte{0x08, 0})),
			ie.CauseMandatoryIEIncorrect, ie.SubsequentVolumeQuota},
		{"short subsequent time threshold", urr(mt, ie.New(ie.SubsequentTimeThreshold, []byte{0, 1})),
			ie.CauseMandatoryIEIncorrect, ie.SubsequentTimeThreshold},
		{"short subsequent time quota", urr(mt, ie.New(ie.SubsequentTimeQuota, []byte{0})),
			ie.CauseMandatoryIEIncorrect, ie.SubsequentTimeQuota},
		{"subsequent threshold without a monitoring time", urr(ie.NewSubsequentTimeThreshold(time.Minute)),
			ie.CauseConditionalIEMissing, ie.MonitoringTime},
		{"additional monitoring time without a monitoring time", urr(ie.NewAdditionalMonitoringTime(
			ie.NewSubsequentTimeThreshold(time.Minute))), ie.CauseMandatoryIEMissing, ie.MonitoringTime},
		{"empty additional monitoring time", urr(ie.New(ie.AdditionalMonitoringTime, nil)),
			ie.CauseMandatoryIEMissing, ie.MonitoringTime},
		{"additional monitoring time with a short monitoring time", urr(ie.NewAdditionalMonitoringTime(
			ie.New(ie.MonitoringTime, []byte{1, 2}))), ie.CauseMandatoryIEIncorrect, ie.MonitoringTime},
		{"additional monitoring time with a short subsequent volume quota", urr(ie.NewAdditionalMonitoringTime(
			later(1), ie.New(ie.SubsequentVolumeQuota, []byte{0x01, 0, 0}))),
			ie.CauseMandatoryIEIncorrect, ie.SubsequentVolumeQuota},
		{"additional monitoring time with a short subsequent time quota", urr(ie.NewAdditionalMonitoringTime(
			later(1), ie.New(ie.SubsequentTimeQuota, []byte{0, 0}))), ie.CauseMandatoryIEIncorrect, ie.SubsequentTimeQuota},
		{"two monitoring times at the same second", urr(mt, ie.NewAdditionalMonitoringTime(mt)),
			ie.CauseMandatoryIEIncorrect, ie.AdditionalMonitoringTime},
		{"nine monitoring times", urr(nine...), ie.CauseRuleCreationModificationFailure, ie.AdditionalMonitoringTime},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPFCPTest(t)
			ies := basicSession(ue1)
			ies[5] = c.urr
			r := p.establish(0x41, ies...)
			_, got, off := cause(t, bytesOf(t, r))
			if got != c.cause || off != c.offending {
				t.Errorf("cause %d, offending IE %d; want %d, %d", got, off, c.cause, c.offending)
			}
		})
	}
}

// TestEventMeasurementRefused: this UPF has no events to count (it detects no
// applications), so a URR that asks for event measurement alone, or gives an event threshold
// or quota (also as a subsequent value), is refused with Rule creation/modification failure,
// the URR and the IE; EVENT beside VOLUM is accepted and measures the volume.
func TestEventMeasurementRefused(t *testing.T) {
	urr := func(method *ie.IE, extra ...*ie.IE) *ie.IE {
		return ie.NewCreateURR(append([]*ie.IE{ie.NewURRID(1), method, ie.NewReportingTriggers(0x02, 0)}, extra...)...)
	}
	volume, event, both := ie.NewMeasurementMethod(0, 1, 0), ie.NewMeasurementMethod(1, 0, 0), ie.NewMeasurementMethod(1, 1, 0)
	mt := ie.NewMonitoringTime(time.Now().Add(time.Hour))
	for _, c := range []struct {
		name      string
		urr       *ie.IE
		offending uint16
	}{
		{"EVENT alone", urr(event), ie.MeasurementMethod},
		{"event threshold", urr(both, ie.NewEventThreshold(10)), ie.EventThreshold},
		{"event quota", urr(volume, ie.NewEventQuota(10)), ie.EventQuota},
		{"subsequent event threshold", urr(volume, mt, ie.NewSubsequentEventThreshold(10)), ie.SubsequentEventThreshold},
		{"subsequent event quota in an additional monitoring time", urr(volume, ie.NewAdditionalMonitoringTime(mt,
			ie.NewSubsequentEventQuota(10))), ie.SubsequentEventQuota},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPFCPTest(t)
			ies := basicSession(ue1)
			ies[5] = c.urr
			r := bytesOf(t, p.establish(0x41, ies...))
			_, got, off := cause(t, r)
			if got != ie.CauseRuleCreationModificationFailure || off != c.offending {
				t.Errorf("cause %d, offending IE %d; want %d, %d", got, off, ie.CauseRuleCreationModificationFailure, c.offending)
			}
			m, err := message.Parse(r)
			if err != nil {
				t.Fatal(err)
			}
			if f := m.(*message.SessionEstablishmentResponse).FailedRuleID; f == nil {
				t.Error("no Failed Rule ID")
			} else if typ, _ := f.RuleIDType(); typ != ie.RuleIDTypeURR {
				t.Errorf("failed rule type %d, want URR", typ)
			}
		})
	}
	p := newPFCPTest(t)
	ies := basicSession(ue1)
	ies[5] = urr(both)
	if _, got, _ := cause(t, bytesOf(t, p.establish(0x41, ies...))); got != ie.CauseRequestAccepted {
		t.Errorf("EVENT with VOLUM: cause %d, want accepted", got)
	}
}

// TestMonitoringTimeSampledOnTime: the poller samples at a monitoring time that comes
// before its next tick, so the usage is split within milliseconds of it, not up to a tick
// (here 1 s) later: the ticks fall half a second before and after it.
func TestMonitoringTimeSampledOnTime(t *testing.T) {
	p := newPFCPTest(t, func(o *Options) { o.UsagePollInterval = time.Second })
	mt := time.Now().Truncate(time.Second).Add(3 * time.Second)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0, 0), ie.NewMonitoringTime(mt)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.Sleep(time.Until(mt.Add(-1500 * time.Millisecond)))
	go p.n.pollUsage(ctx)
	passed := func() bool {
		p.n.smu.Lock()
		defer p.n.smu.Unlock()
		return p.n.ss.byID[seid].URRs[1].MonitoringTime.IsZero()
	}
	for !passed() {
		if time.Since(mt) > 2*time.Second {
			t.Fatal("the monitoring time did not pass")
		}
		time.Sleep(time.Millisecond)
	}
	late := time.Since(mt)
	t.Logf("split %v after the monitoring time (poll interval 1 s)", late)
	if late > 100*time.Millisecond {
		t.Errorf("split %v after the monitoring time, want within 100 ms", late)
	}
}

// TestMonitoringTimeSaved: what a passing monitoring time changes in a URR (the subsequent
// threshold and quota, a new grant, no monitoring time left) reaches the state file, so a
// restart does not apply the subsequent values a second time.
func TestMonitoringTimeSaved(t *testing.T) {
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	p := newPFCPTest(t, func(o *Options) { o.Store = st })
	p.n.Restore()
	mt := time.Now().Truncate(time.Second).Add(2 * time.Second)
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0x02, 0x01), ie.NewVolumeThreshold(0x01, 1000, 0, 0), ie.NewMonitoringTime(mt),
		ie.NewSubsequentVolumeThreshold(0x01, 5000, 0, 0), ie.NewSubsequentVolumeQuota(0x01, 3000, 0, 0),
		ie.NewAdditionalMonitoringTime(ie.NewMonitoringTime(mt.Add(time.Hour)), ie.NewSubsequentTimeThreshold(time.Minute))))
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1}, {PDR: 2}}
	p.due(seid, mt)
	if err := st.Wait(st.Queued()); err != nil {
		t.Fatal(err)
	}
	v, err := st.Get(bucketSessions, seidKey(seid))
	if err != nil {
		t.Fatal(err)
	}
	s, err := decodeStored(v)
	if err != nil {
		t.Fatal(err)
	}
	want := p.n.ss.byID[seid].URRs[1]
	if got := s.URRs[1]; !got.MonitoringTime.Equal(mt.Add(time.Hour)) || got.Subsequent.TimeThreshold != 60 ||
		got.Additional != nil || got.VolumeThreshold != 5000 || got.VolumeQuota != 3000 || got.Grant != want.Grant {
		t.Errorf("saved URR after its monitoring time: %+v, want %+v", got, want)
	}
}

// TestUpdateURRAdditionalMonitoringTimes: an Update URR's Additional Monitoring Times
// replace the URR's earlier ones; one without any leaves them; its Monitoring Time replaces
// the current one, and all are kept in time order.
func TestUpdateURRAdditionalMonitoringTimes(t *testing.T) {
	p := newPFCPTest(t)
	mt := time.Now().Truncate(time.Second).Add(time.Hour)
	at := func(h int) time.Time { return mt.Add(time.Duration(h) * time.Hour) }
	amt := func(h int) *ie.IE { return ie.NewAdditionalMonitoringTime(ie.NewMonitoringTime(at(h))) }
	seid := usageSession(p, ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0),
		ie.NewReportingTriggers(0, 0), ie.NewMonitoringTime(at(0)), amt(2), amt(3)))
	times := func() []time.Time {
		u := p.n.ss.byID[seid].URRs[1]
		out := []time.Time{u.MonitoringTime}
		for _, m := range u.Additional {
			out = append(out, m.Time)
		}
		return out
	}
	for _, c := range []struct {
		name string
		ies  []*ie.IE
		want []time.Time
	}{
		{"created", nil, []time.Time{at(0), at(2), at(3)}},
		{"replaced", []*ie.IE{amt(4)}, []time.Time{at(0), at(4)}},
		{"left", []*ie.IE{ie.NewReportingTriggers(0x02, 0)}, []time.Time{at(0), at(4)}},
		{"new monitoring time, later than an additional one", []*ie.IE{ie.NewMonitoringTime(at(5))},
			[]time.Time{at(4), at(5)}},
	} {
		if c.ies != nil {
			p.modify(seid, ie.NewUpdateURR(append([]*ie.IE{ie.NewURRID(1)}, c.ies...)...))
		}
		if got := times(); !slices.EqualFunc(got, c.want, time.Time.Equal) {
			t.Errorf("%s: monitoring times %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPollSamplesWatchedSessionsOnly: the usage poll, which holds smu, looks only at the
// sessions whose URRs report on a trigger: one without triggers is not among them until a
// modification gives it one, and a deleted session leaves them.
func TestPollSamplesWatchedSessionsOnly(t *testing.T) {
	p := newPFCPTest(t)
	quiet := ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0))
	seid := usageSession(p, quiet)
	watched := func() []uint64 {
		p.n.smu.Lock()
		defer p.n.smu.Unlock()
		return slices.Sorted(maps.Keys(p.n.ss.watched))
	}
	if w := watched(); len(w) != 0 {
		t.Fatalf("watched %x: a session without triggers", w)
	}
	p.modify(seid, ie.NewUpdateURR(ie.NewURRID(1), ie.NewReportingTriggers(0x02, 0), ie.NewVolumeThreshold(0x01, 1000, 0, 0)))
	if w := watched(); !slices.Equal(w, []uint64{seid}) {
		t.Fatalf("watched %x after a volume threshold was set, want %x", w, seid)
	}
	p.dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 5, Bytes: 1200}}
	if rs := p.due(seid, time.Now()); len(rs) != 1 || rs[0].Trigger[0] != 0x02 {
		t.Fatalf("reports %+v, want the volume threshold's", rs)
	}
	p.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid, seq, 0) })
	if w := watched(); len(w) != 0 {
		t.Fatalf("watched %x after the deletion", w)
	}
}
