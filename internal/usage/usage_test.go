package usage

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/rules"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// counters are the datapath's counters of a session with one uplink and one downlink PDR.
type counters struct{ ul, dl rules.Usage }

func newCounters() *counters {
	return &counters{ul: rules.Usage{Uplink: true, PDR: 1}, dl: rules.Usage{PDR: 2}}
}

func (c *counters) send(uplink bool, packets, size uint64) {
	u := &c.dl
	if uplink {
		u = &c.ul
	}
	u.Packets += packets
	u.Bytes += packets * size
	u.BeforeQoS.Packets += packets
	u.BeforeQoS.Bytes += packets * size
}

func (c *counters) sample() []rules.Usage { return []rules.Usage{c.ul, c.dl} }

var bothPDRs = map[PDR][]uint32{{Uplink: true, ID: 1}: {1}, {ID: 2}: {1}}

func session(r Rule) *Session {
	s := NewSession()
	s.Set([]Rule{r}, bothPDRs, t0)
	return s
}

func triggers(rs []Report) []Trigger {
	var out []Trigger
	for _, r := range rs {
		out = append(out, r.Trigger)
	}
	return out
}

// TestVolumeThresholdFiresOnce: a threshold reports once when it is reached, and again only
// after another threshold's worth, since each report starts a new measurement.
func TestVolumeThresholdFiresOnce(t *testing.T) {
	s := session(Rule{ID: 1, Triggers: VolumeThreshold, VolumeThreshold: Volume{NoLimit, NoLimit, 1000},
		VolumeQuota: Unlimited})
	c := newCounters()
	var reports []Report
	for i := range 30 {
		c.send(i%2 == 0, 1, 100)
		reports = append(reports, s.Observe(c.sample(), t0.Add(time.Duration(i+1)*100*time.Millisecond))...)
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports for 3000 bytes and a threshold of 1000: %+v", len(reports), reports)
	}
	for i, r := range reports {
		if r.Trigger != VolumeThreshold || r.Seq != uint32(i) || r.Volume.Uplink.Bytes+r.Volume.Downlink.Bytes != 1000 {
			t.Errorf("report %d: %+v", i, r)
		}
	}
}

// TestTimeThresholdFiresOnce: a time threshold counts the time of traffic (not a pause
// longer than the inactivity time) and reports once per threshold's worth, each report
// starting a new measurement.
func TestTimeThresholdFiresOnce(t *testing.T) {
	s := session(Rule{ID: 1, Triggers: TimeThreshold, TimeThreshold: 3 * time.Second, Inactivity: time.Second,
		VolumeThreshold: Unlimited, VolumeQuota: Unlimited})
	c := newCounters()
	var reports []Report
	for i := range 100 { // 10 s of samples; traffic in the first 2 s and the last 5 s
		now := t0.Add(time.Duration(i+1) * 100 * time.Millisecond)
		if i < 20 || i >= 50 {
			c.send(false, 1, 100)
		}
		reports = append(reports, s.Observe(c.sample(), now)...)
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports for 7 s of traffic and a threshold of 3 s: %+v", len(reports), reports)
	}
	for i, r := range reports {
		if r.Trigger != TimeThreshold || r.Duration < 3*time.Second || r.Duration > 3*time.Second+100*time.Millisecond {
			t.Errorf("report %d: trigger %v, duration %v; want TimeThreshold after 3 s of traffic", i, r.Trigger, r.Duration)
		}
	}
	if at := reports[0].End; at.Before(t0.Add(5500 * time.Millisecond)) {
		t.Errorf("first report at %v: the 3 s pause (1 s inactivity) counted as traffic", at.Sub(t0))
	}
}

// TestDroppedThresholdFiresOnce: dropped downlink traffic reports once when it reaches the
// threshold (packets here), whatever more is dropped; a new threshold counts afresh.
func TestDroppedThresholdFiresOnce(t *testing.T) {
	r := Rule{ID: 1, Triggers: DroppedThreshold, VolumeThreshold: Unlimited, VolumeQuota: Unlimited,
		DroppedThreshold: rules.Counts{Packets: 10, Bytes: NoLimit}}
	s := session(r)
	c := newCounters()
	dl := PDR{ID: 2}
	var got []Trigger
	for i := range 20 {
		s.ObserveDropped(map[PDR]rules.Counts{dl: {Packets: uint64(i + 1), Bytes: uint64(100 * (i + 1))}})
		got = append(got, triggers(s.Observe(c.sample(), t0.Add(time.Duration(i+1)*100*time.Millisecond)))...)
	}
	if len(got) != 1 || got[0] != DroppedThreshold {
		t.Fatalf("triggers %v, want one DroppedThreshold", got)
	}
	r.DroppedThreshold = rules.Counts{Packets: NoLimit, Bytes: 500}
	s.Set([]Rule{r}, bothPDRs, t0.Add(3*time.Second))
	s.ObserveDropped(map[PDR]rules.Counts{dl: {Packets: 24, Bytes: 2400}})
	if rs := s.Observe(c.sample(), t0.Add(4*time.Second)); len(rs) != 0 {
		t.Fatalf("reports %v after 400 bytes of a new threshold of 500", triggers(rs))
	}
	s.ObserveDropped(map[PDR]rules.Counts{dl: {Packets: 25, Bytes: 2500}})
	if rs := s.Observe(c.sample(), t0.Add(5*time.Second)); len(rs) != 1 || rs[0].Trigger != DroppedThreshold {
		t.Fatalf("reports %v at the new threshold, want one DroppedThreshold", triggers(rs))
	}
}

// TestDroppedThresholdCountsBufferFull: the datapath's buffer_full drops (a sample's
// BufferFull) count toward the Dropped DL Traffic Threshold beside what xupfd discarded;
// an uplink PDR's do not, and a session made again from counters that ran before (a
// restart) counts only what comes after.
func TestDroppedThresholdCountsBufferFull(t *testing.T) {
	r := Rule{ID: 1, Triggers: DroppedThreshold, VolumeThreshold: Unlimited, VolumeQuota: Unlimited,
		DroppedThreshold: rules.Counts{Packets: 10, Bytes: NoLimit}}
	c := newCounters()
	c.dl.BufferFull = rules.Counts{Packets: 100, Bytes: 10000} // before the restart
	s := NewSession()
	s.Observe(c.sample(), t0) // the baseline, as the node takes it
	s.Set([]Rule{r}, bothPDRs, t0)
	c.ul.BufferFull = rules.Counts{Packets: 50, Bytes: 5000}
	c.dl.BufferFull.Packets += 4
	s.ObserveDropped(map[PDR]rules.Counts{{ID: 2}: {Packets: 5, Bytes: 500}})
	if rs := s.Observe(c.sample(), t0.Add(time.Second)); len(rs) != 0 {
		t.Fatalf("reports %v after 9 dropped of 10", triggers(rs))
	}
	c.dl.BufferFull.Packets++
	if rs := s.Observe(c.sample(), t0.Add(2*time.Second)); len(rs) != 1 || rs[0].Trigger != DroppedThreshold {
		t.Fatalf("reports %v at the threshold, want one DroppedThreshold", triggers(rs))
	}
}

// TestQuotaValidityTime: a quota's validity time reports once, that long after the grant,
// and again only for a new grant.
func TestQuotaValidityTime(t *testing.T) {
	r := Rule{ID: 1, Triggers: QuotaValidity, VolumeThreshold: Unlimited, VolumeQuota: Volume{NoLimit, NoLimit, 1 << 20},
		QuotaValidityTime: 2 * time.Second, Grant: 1}
	s := session(r)
	c := newCounters()
	var at []time.Duration
	for i := 1; i <= 50; i++ {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		c.send(false, 1, 100)
		for _, rep := range s.Observe(c.sample(), now) {
			if rep.Trigger != QuotaValidity {
				t.Fatalf("trigger %v, want QuotaValidity", rep.Trigger)
			}
			at = append(at, now.Sub(t0))
		}
		if i == 30 {
			r.Grant++
			s.Set([]Rule{r}, bothPDRs, now) // a new quota: valid for 2 s from here
		}
	}
	if len(at) != 2 || at[0] != 2*time.Second || at[1] != 5*time.Second {
		t.Errorf("validity reports at %v, want 2s and 5s", at)
	}
}

// TestPeriodKept: periodic reports come at start + k × period, whatever the sampling.
func TestPeriodKept(t *testing.T) {
	s := session(Rule{ID: 1, Triggers: Periodic, Period: 2 * time.Second, VolumeThreshold: Unlimited,
		VolumeQuota: Unlimited})
	c := newCounters()
	var ends []time.Duration
	for ms := 0; ms <= 10_200; ms += 300 {
		c.send(false, 1, 100)
		for _, r := range s.Observe(c.sample(), t0.Add(time.Duration(ms)*time.Millisecond)) {
			ends = append(ends, r.End.Sub(t0))
		}
	}
	if len(ends) != 5 {
		t.Fatalf("reports at %v, want 5", ends)
	}
	for i, e := range ends {
		due := time.Duration(i+1) * 2 * time.Second
		if e < due || e >= due+300*time.Millisecond {
			t.Errorf("report %d at %v, due at %v: later than one sampling interval", i, e, due)
		}
	}
}

// TestQuotas: a volume quota reports once per grant; a new grant counts again; a time quota
// counts the time of traffic; the quota holding time reports a pause.
func TestQuotas(t *testing.T) {
	r := Rule{ID: 1, Triggers: VolumeQuota | QuotaHoldingTime, VolumeQuota: Volume{500, NoLimit, NoLimit},
		VolumeThreshold: Unlimited, QuotaHoldingTime: 5 * time.Second, Grant: 1}
	s := session(r)
	c := newCounters()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	c.send(true, 4, 100)
	if got := s.Observe(c.sample(), at(time.Second)); len(got) != 0 {
		t.Fatalf("below the quota: %+v", got)
	}
	c.send(false, 10, 100) // downlink does not count toward an uplink quota
	c.send(true, 1, 100)
	if got := triggers(s.Observe(c.sample(), at(2*time.Second))); len(got) != 1 || got[0] != VolumeQuota {
		t.Fatalf("at the quota: %v, want VOLQU", got)
	}
	if !s.QuotaUsedUp(1, 1) {
		t.Error("QuotaUsedUp false after VOLQU")
	}
	c.send(true, 1, 100)
	if got := s.Observe(c.sample(), at(3*time.Second)); len(got) != 0 {
		t.Fatalf("quota reported again: %+v", got)
	}
	r.Grant = 2
	s.Set([]Rule{r}, bothPDRs, at(3*time.Second))
	if got := triggers(s.Observe(c.sample(), at(9*time.Second))); len(got) != 1 || got[0] != QuotaHoldingTime {
		t.Fatalf("6 s without traffic after a grant: %v, want QUHTI", got)
	}
	if got := s.Observe(c.sample(), at(20*time.Second)); len(got) != 0 {
		t.Fatalf("QUHTI again in the same pause: %+v", got)
	}

	tq := session(Rule{ID: 1, Triggers: TimeQuota | StartOfTraffic | StopOfTraffic, TimeQuota: 3 * time.Second,
		VolumeThreshold: Unlimited, VolumeQuota: Unlimited, Inactivity: 2 * time.Second})
	c = newCounters()
	var got []Trigger
	for sec := 1; sec <= 12; sec++ {
		if sec <= 2 || (sec >= 6 && sec <= 8) {
			c.send(false, 1, 100)
		}
		got = append(got, triggers(tq.Observe(c.sample(), at(time.Duration(sec)*time.Second)))...)
	}
	want := []Trigger{StartOfTraffic, StopOfTraffic, StartOfTraffic, TimeQuota, StopOfTraffic}
	if len(got) != len(want) {
		t.Fatalf("triggers %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("triggers %v, want %v", got, want)
		}
	}
}

// TestLinkedAndQuery: a query reports the URRs asked and those linked to them; a report of a
// URR another links to brings the other's.
func TestLinkedAndQuery(t *testing.T) {
	s := NewSession()
	s.Set([]Rule{
		{ID: 1, Triggers: VolumeThreshold, VolumeThreshold: Volume{NoLimit, NoLimit, 100}, VolumeQuota: Unlimited},
		{ID: 2, Triggers: Linked, LinkedURRs: []uint32{1}, VolumeThreshold: Unlimited, VolumeQuota: Unlimited},
		{ID: 3, VolumeThreshold: Unlimited, VolumeQuota: Unlimited},
	}, map[PDR][]uint32{{Uplink: true, ID: 1}: {1, 2, 3}}, t0)
	c := newCounters()
	c.send(true, 1, 150)
	rs := s.Observe(c.sample(), t0.Add(time.Second))
	if len(rs) != 2 || rs[0].URR != 1 || rs[0].Trigger != VolumeThreshold || rs[1].URR != 2 || rs[1].Trigger != Linked {
		t.Fatalf("reports %+v, want URR 1 VOLTH and URR 2 LIUSA", rs)
	}
	rs = s.Query([]uint32{3, 9}, Immediate, t0.Add(2*time.Second))
	if len(rs) != 1 || rs[0].URR != 3 || rs[0].Volume.Uplink.Bytes != 150 || rs[0].Trigger != Immediate {
		t.Fatalf("query: %+v", rs)
	}
}

// TestReportsAddUp: whatever the triggers and the sampling, the reports of each URR add up to
// the counters of its PDRs, before or after QoS as it measures.
func TestReportsAddUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewSession()
	s.Set([]Rule{
		{ID: 1, Triggers: Periodic | VolumeThreshold, Period: time.Second, VolumeThreshold: Volume{NoLimit, 7000, 9000},
			VolumeQuota: Unlimited},
		{ID: 2, Triggers: VolumeQuota | Linked, LinkedURRs: []uint32{1}, VolumeQuota: Volume{NoLimit, NoLimit, 50_000},
			VolumeThreshold: Unlimited, BeforeQoS: true},
		{ID: 3, Triggers: Periodic, Period: 7 * time.Second, MonitoringTime: t0.Add(37 * time.Second),
			VolumeThreshold: Unlimited, VolumeQuota: Unlimited},
	}, map[PDR][]uint32{{Uplink: true, ID: 1}: {1, 2, 3}, {ID: 2}: {1, 2, 3}}, t0)
	c := newCounters()
	sum := map[uint32]Counts{}
	add := func(rs []Report) {
		for _, r := range rs {
			v := sum[r.URR]
			v.Uplink.Packets += r.Volume.Uplink.Packets
			v.Uplink.Bytes += r.Volume.Uplink.Bytes
			v.Downlink.Packets += r.Volume.Downlink.Packets
			v.Downlink.Bytes += r.Volume.Downlink.Bytes
			sum[r.URR] = v
		}
	}
	now := t0
	for range 500 {
		c.send(rng.IntN(2) == 0, uint64(rng.IntN(5)), uint64(40+rng.IntN(1400)))
		c.dl.BeforeQoS.Packets += 1 // dropped by a QER: counted before QoS only
		c.dl.BeforeQoS.Bytes += 100
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		add(s.Observe(c.sample(), now))
	}
	add(s.Query([]uint32{1, 2, 3}, Termination, now))
	all := Counts{Uplink: rules.Counts{Packets: c.ul.Packets, Bytes: c.ul.Bytes}, Downlink: rules.Counts{Packets: c.dl.Packets, Bytes: c.dl.Bytes}}
	want := map[uint32]Counts{
		1: all,
		3: all,
		2: {Uplink: c.ul.BeforeQoS, Downlink: c.dl.BeforeQoS},
	}
	for id, w := range want {
		if sum[id] != w {
			t.Errorf("URR %d: reports add up to %+v, counters %+v", id, sum[id], w)
		}
	}
}

// TestMonitoringTimeSplit: the sample at or after the monitoring time splits the
// measurement; no report goes out for the split alone; the URR's next report carries the
// part before (MonitoringTime, Before, ending at the monitoring time) and the part after
// (its own trigger, After), in UR-SEQN order. What the sample that split counted is before.
// A volume threshold counts afresh from the monitoring time.
func TestMonitoringTimeSplit(t *testing.T) {
	mt := t0.Add(3 * time.Second)
	s := session(Rule{ID: 1, Triggers: Periodic | VolumeThreshold, Period: 10 * time.Second, MonitoringTime: mt,
		VolumeThreshold: Volume{NoLimit, NoLimit, 1000}, VolumeQuota: Unlimited})
	if !s.Watching() {
		t.Fatal("a URR with a monitoring time is not sampled")
	}
	c := newCounters()
	c.send(true, 5, 100)
	if rs := s.Observe(c.sample(), t0.Add(time.Second)); len(rs) != 0 {
		t.Fatalf("reports before the monitoring time: %+v", rs)
	}
	c.send(false, 2, 100) // counted by the sample that splits: before
	if rs := s.Observe(c.sample(), mt.Add(200*time.Millisecond)); len(rs) != 0 {
		t.Fatalf("the split reported by itself: %+v", rs)
	}
	c.send(false, 7, 100) // 700 bytes: under the threshold counted from the monitoring time
	if rs := s.Observe(c.sample(), t0.Add(5*time.Second)); len(rs) != 0 {
		t.Fatalf("reports after the split: %+v", rs)
	}
	rs := s.Observe(c.sample(), t0.Add(10*time.Second))
	if len(rs) != 2 {
		t.Fatalf("periodic report after a monitoring time: %d reports, want 2: %+v", len(rs), rs)
	}
	bef, aft := rs[0], rs[1]
	if bef.Part != Before || bef.Trigger != MonitoringTime || bef.Seq != 0 || !bef.Start.Equal(t0) || !bef.End.Equal(mt) ||
		bef.Volume.Uplink.Packets != 5 || bef.Volume.Downlink.Packets != 2 || bef.LastPacket.After(mt) {
		t.Errorf("before: %+v", bef)
	}
	if aft.Part != After || aft.Trigger != Periodic || aft.Seq != 1 || !aft.Start.Equal(mt) ||
		!aft.End.Equal(t0.Add(10*time.Second)) || aft.Volume.Uplink.Packets != 0 || aft.Volume.Downlink.Packets != 7 {
		t.Errorf("after: %+v", aft)
	}
	c.send(false, 1, 100)
	if rs := s.Observe(c.sample(), t0.Add(20*time.Second)); len(rs) != 1 || rs[0].Part != Whole || rs[0].Seq != 2 {
		t.Errorf("the report after the split's: %+v, want one whole report, UR-SEQN 2", rs)
	}
}

// TestMonitoringTimeAgain: a second monitoring time while the first one's part is kept
// reports both parts at once; a report between the monitoring time and the sample that
// would split leaves nothing before it; a query reports the kept part too.
func TestMonitoringTimeAgain(t *testing.T) {
	r := Rule{ID: 1, MonitoringTime: t0.Add(time.Second), VolumeThreshold: Unlimited, VolumeQuota: Unlimited}
	s := session(r)
	c := newCounters()
	c.send(true, 1, 100)
	s.Observe(c.sample(), t0.Add(time.Second))
	c.send(true, 2, 100)
	r.MonitoringTime = t0.Add(2 * time.Second)
	s.Set([]Rule{r}, bothPDRs, t0.Add(1500*time.Millisecond))
	rs := s.Observe(c.sample(), t0.Add(2*time.Second))
	if len(rs) != 2 || rs[0].Part != Before || rs[0].Volume.Uplink.Packets != 1 ||
		rs[1].Part != After || rs[1].Trigger != MonitoringTime || rs[1].Volume.Uplink.Packets != 2 {
		t.Fatalf("second monitoring time with the first part kept: %+v", rs)
	}
	r.MonitoringTime = t0.Add(3 * time.Second)
	s.Set([]Rule{r}, bothPDRs, t0.Add(2500*time.Millisecond))
	c.send(true, 4, 100)
	s.Observe(c.sample(), t0.Add(3*time.Second))
	c.send(true, 8, 100)
	rs = s.Query([]uint32{1}, Immediate, t0.Add(4*time.Second))
	if len(rs) != 2 || rs[0].Volume.Uplink.Packets != 4 || rs[1].Part != After || rs[1].Volume.Uplink.Packets != 0 {
		t.Fatalf("query with a kept part (the 8 packets are not sampled yet): %+v", rs)
	}
	r.MonitoringTime = t0.Add(5 * time.Second)
	s.Set([]Rule{r}, bothPDRs, t0.Add(4*time.Second))
	s.Observe(c.sample(), t0.Add(4500*time.Millisecond))
	if rs := s.Query([]uint32{1}, Immediate, t0.Add(5*time.Second)); len(rs) != 1 || rs[0].Part != Whole {
		t.Fatalf("query before the monitoring time: %+v", rs)
	}
	if rs := s.Observe(c.sample(), t0.Add(5*time.Second)); len(rs) != 0 || s.Watching() {
		t.Fatalf("split after a report at the monitoring time: %+v, watching %v", rs, s.Watching())
	}
	if rs := s.Query([]uint32{1}, Immediate, t0.Add(6*time.Second)); len(rs) != 1 || rs[0].Part != Whole {
		t.Fatalf("nothing before the monitoring time was left to keep: %+v", rs)
	}
}
