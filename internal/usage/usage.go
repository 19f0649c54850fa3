// Package usage measures a PFCP session's usage reporting rules (URRs, TS 29.244 5.2.2) from
// the datapath's per-PDR counters and decides when each reports: periodic, volume and time
// thresholds and quotas, quota holding and validity time, start and stop of traffic, dropped
// downlink traffic, linked reports; and the reports a query, a removal or the session's end asks for.
// At a URR's monitoring time it splits the measurement: the usage before it is kept apart and
// reported, with the usage after it, at the URR's next report.
// It knows nothing of PFCP encoding or of BPF: the caller samples the counters (Observe) as
// often as reports must be on time, and sends what it returns.
//
// Every report carries what was counted since the URR's previous report, so the reports of
// a URR add up to what the datapath counted for its PDRs.
package usage

import (
	"maps"
	"slices"
	"time"

	"github.com/xupf/xupf/internal/rules"
)

// Trigger is a set of reporting triggers, in the bit layout of the Usage Report Trigger IE
// (TS 29.244 8.2.41; octet 5 in the low byte, then octets 6 and 7).
type Trigger uint32

const (
	Periodic         Trigger = 1 << 0  // PERIO
	VolumeThreshold  Trigger = 1 << 1  // VOLTH
	TimeThreshold    Trigger = 1 << 2  // TIMTH
	QuotaHoldingTime Trigger = 1 << 3  // QUHTI
	StartOfTraffic   Trigger = 1 << 4  // START
	StopOfTraffic    Trigger = 1 << 5  // STOPT
	DroppedThreshold Trigger = 1 << 6  // DROTH: dropped downlink traffic reached its threshold
	Immediate        Trigger = 1 << 7  // IMMER: a query
	VolumeQuota      Trigger = 1 << 8  // VOLQU
	TimeQuota        Trigger = 1 << 9  // TIMQU
	Linked           Trigger = 1 << 10 // LIUSA: a linked URR reported
	Termination      Trigger = 1 << 11 // TERMR: the URR was removed or the session deleted
	MonitoringTime   Trigger = 1 << 12 // MONIT: the usage before a monitoring time (Part Before)
	QuotaValidity    Trigger = 1 << 19 // QUVTI: the quota's validity time ran out (octet 7)
)

// Octets is t as the Usage Report Trigger IE's three octets.
func (t Trigger) Octets() [3]uint8 { return [3]uint8{uint8(t), uint8(t >> 8), uint8(t >> 16)} }

// NoLimit is a volume without a threshold or quota.
const NoLimit = rules.NoLimit

// Volume is a volume threshold or quota in bytes: uplink, downlink and total, NoLimit where
// there is none.
type Volume struct {
	Uplink, Downlink, Total uint64
}

// Unlimited is a Volume without any limit.
var Unlimited = Volume{NoLimit, NoLimit, NoLimit}

// reached reports whether v, counted, reaches any of the limits.
func (v Volume) reached(c Counts) bool {
	return c.Uplink.Bytes >= v.Uplink || c.Downlink.Bytes >= v.Downlink ||
		c.Uplink.Bytes+c.Downlink.Bytes >= v.Total
}

// DefaultInactivity is how long a URR's traffic must pause for a stop of traffic (STOPT)
// when the URR gives no Inactivity Detection Time.
const DefaultInactivity = 10 * time.Second

// Rule is a URR as this package applies it.
type Rule struct {
	ID uint32
	// Triggers are the reporting triggers the SMF asked for (Immediate and Termination are
	// not asked for: they are always honoured; Linked needs LinkedURRs).
	Triggers Trigger
	// BeforeQoS: the URR measures before QoS enforcement (Measurement Information MBQE).
	BeforeQoS bool
	// Period is the measurement period of Periodic reports.
	Period time.Duration
	// VolumeThreshold and VolumeQuota: Unlimited for none.
	VolumeThreshold, VolumeQuota Volume
	// TimeThreshold and TimeQuota are durations of traffic, 0 for none.
	TimeThreshold, TimeQuota time.Duration
	// QuotaHoldingTime: a URR with a quota whose traffic pauses this long reports
	// QuotaHoldingTime; 0 for none.
	QuotaHoldingTime time.Duration
	// QuotaValidityTime: this long after its grant the quota is reported (QuotaValidity),
	// once per grant, whatever is left of it; 0 for none. Forwarding goes on: a new quota,
	// or the end of the quota, is the SMF's to give.
	QuotaValidityTime time.Duration
	// Inactivity is the pause that stops traffic (StopOfTraffic) and the duration
	// measurement; 0 means DefaultInactivity.
	Inactivity time.Duration
	// DroppedThreshold is the downlink traffic of the URR's PDRs the UPF may drop (buffer
	// overflow and expiry, a FAR that drops: ObserveDropped; the datapath's buffer_full
	// drops: the samples' BufferFull) before a DroppedThreshold report: packets and
	// bytes, NoLimit for none. It reports once per threshold the SMF gives.
	DroppedThreshold rules.Counts
	// LinkedURRs: when one of these reports, this URR reports too (Linked).
	LinkedURRs []uint32
	// Grant names the quota the SMF gave last: a new grant (even of the same quota) starts
	// counting the quota again.
	Grant uint64
	// QuotaDone: the quota of Grant was reported used up before this URR was measured here
	// (by an earlier run): it is not reported again.
	QuotaDone bool
	// MonitoringTime, zero for none: at the first sample at or after it the measurement is
	// split; the part before it is reported (Before, trigger MonitoringTime) ahead of the
	// URR's next report (After). A new MonitoringTime splits again.
	MonitoringTime time.Time
}

// Counts are packets and bytes per direction.
type Counts struct {
	Uplink, Downlink rules.Counts
}

func (c *Counts) add(uplink bool, d rules.Counts) {
	dir := &c.Downlink
	if uplink {
		dir = &c.Uplink
	}
	dir.Packets += d.Packets
	dir.Bytes += d.Bytes
}

// Part says which side of a monitoring time a report measures: the Usage Information IE.
type Part uint8

const (
	Whole  Part = iota // no monitoring time split the measurement
	Before             // BEF: the usage before the monitoring time
	After              // AFT: the usage after it
)

// Report is one Usage Report: what URR counted from Start to End.
type Report struct {
	URR     uint32
	Seq     uint32 // UR-SEQN: 0 for the URR's first report, then one more each time
	Trigger Trigger
	Part    Part
	// Start and End bound the measurement; Volume and Duration are what it counted.
	Start, End time.Time
	Volume     Counts
	Duration   time.Duration
	// FirstPacket and LastPacket: when the first and the last packet of the measurement
	// were seen (to within the sampling interval); zero without traffic.
	FirstPacket, LastPacket time.Time
}

// urr is the state of one URR.
type urr struct {
	rule Rule
	seq  uint32
	// The current measurement, since start.
	start       time.Time
	counted     Counts
	first, last time.Time
	lastSeen    time.Time     // the last packet seen in any measurement
	active      time.Duration // duration of traffic counted before the last packet's run
	runStart    time.Time     // start of the run of traffic last seen, zero without
	nextPeriod  time.Time
	// The quota, since the grant.
	grant        uint64
	granted      time.Time
	quotaUsed    Counts
	quotaActive  time.Duration
	quotaDone    bool // VolumeQuota or TimeQuota reported for this grant
	holdingDone  bool // QuotaHoldingTime reported for this pause
	validityDone bool // QuotaValidity reported for this grant
	// Traffic state for StartOfTraffic and StopOfTraffic.
	flowing bool
	// Downlink traffic dropped since the DroppedThreshold was given, and whether it reported.
	dropped     rules.Counts
	droppedDone bool
	// before is the measurement up to the monitoring time, reported with the next report;
	// splitAt is the monitoring time last split at.
	before  *Report
	splitAt time.Time
}

// PDR names one PDR's counter: its direction and id.
type PDR struct {
	Uplink bool
	ID     uint32
}

// Session is the usage state of one session's URRs. It is not safe for concurrent use.
type Session struct {
	urrs map[uint32]*urr
	// pdrs are the URRs each PDR counts toward; last is each PDR's counter at the last
	// sample, so that a sample adds only what came since. Every PFCP session has a Session,
	// kept on the heap the garbage collector marks while SMFs establish sessions: pdrs is a
	// slice (a session has a few PDRs, and a map of them took four times the heap), and last
	// and lastDropped are made with their first entry.
	pdrs []pdrURRs
	last map[PDR]rules.Usage
	// lastDropped is each PDR's count of dropped downlink traffic at the last sample.
	lastDropped map[PDR]rules.Counts
	// watching is what Watching reports, kept rather than computed: the usage poll asks every
	// session each tick, and the answer changes only with the URRs (Set) or when one splits
	// at its monitoring time (Observe).
	watching bool
}

// NewSession returns a session without URRs.
func NewSession() *Session {
	return &Session{urrs: map[uint32]*urr{}}
}

// pdrURRs are the URRs one PDR counts toward.
type pdrURRs struct {
	pdr  PDR
	urrs []uint32
}

// urrsOf are the URRs PDR k counts toward.
func (s *Session) urrsOf(k PDR) []uint32 {
	for _, p := range s.pdrs {
		if p.pdr == k {
			return p.urrs
		}
	}
	return nil
}

// Set makes rs the session's URRs and pdrs the URRs each PDR counts toward, at now. A URR
// that stays keeps its measurement and takes the new thresholds and quotas (Update URR); a
// new Grant restarts its quota. URRs not in rs are forgotten: take their reports first
// (Final). Sample the counters (Observe) before a change of pdrs, so that what the PDRs
// counted so far goes to the URRs they counted toward.
func (s *Session) Set(rs []Rule, pdrs map[PDR][]uint32, now time.Time) {
	keep := map[uint32]*urr{}
	for _, r := range rs {
		u := s.urrs[r.ID]
		if u == nil {
			u = &urr{start: now, granted: now, grant: r.Grant, quotaDone: r.QuotaDone}
		}
		if r.Grant != u.grant {
			u.grant, u.granted, u.quotaUsed, u.quotaActive, u.quotaDone = r.Grant, now, Counts{}, 0, false
			u.validityDone = false
		}
		if r.DroppedThreshold != u.rule.DroppedThreshold {
			u.dropped, u.droppedDone = rules.Counts{}, false
		}
		if r.Period != u.rule.Period || u.nextPeriod.IsZero() {
			u.nextPeriod = u.start.Add(r.Period)
		}
		u.rule = r
		keep[r.ID] = u
	}
	s.urrs = keep
	s.pdrs = s.pdrs[:0]
	for p, urrs := range pdrs {
		s.pdrs = append(s.pdrs, pdrURRs{p, urrs})
	}
	s.watching = s.anyWatched()
	for p := range s.last {
		if _, ok := pdrs[p]; !ok {
			delete(s.last, p)
		}
	}
	for p := range s.lastDropped {
		if _, ok := pdrs[p]; !ok {
			delete(s.lastDropped, p)
		}
	}
}

// Has reports whether the session has URR id.
func (s *Session) Has(id uint32) bool { return s.urrs[id] != nil }

// IDs are the session's URR ids, sorted.
func (s *Session) IDs() []uint32 { return sortedIDs(s.urrs) }

// QuotaUsedUp reports whether URR id has used up the quota of grant: volume or time.
func (s *Session) QuotaUsedUp(id uint32, grant uint64) bool {
	u := s.urrs[id]
	return u != nil && u.grant == grant && u.quotaDone
}

// QuotaUsedBefore counts q, what the datapath counted against a quota before this URR was
// measured here (in an earlier run), toward the quota of q's grant.
func (s *Session) QuotaUsedBefore(q rules.QuotaUse) {
	if u := s.urrs[q.URR]; u != nil && u.grant == q.Grant {
		u.quotaUsed.Uplink.Bytes += q.Uplink
		u.quotaUsed.Downlink.Bytes += q.Downlink
	}
}

// Watching reports whether a URR of the session reports on a trigger, so that its counters
// must be sampled.
func (s *Session) Watching() bool { return s.watching }

// anyWatched computes Watching from the URRs.
func (s *Session) anyWatched() bool {
	for _, u := range s.urrs {
		if u.rule.Triggers != 0 || u.splitPending() {
			return true
		}
	}
	return false
}

// Observe takes a sample of the session's PDR counters at now and returns the reports it
// triggers, in URR id order, linked reports last.
func (s *Session) Observe(sample []rules.Usage, now time.Time) []Report {
	moved := map[uint32]bool{}
	for _, cur := range sample {
		k := PDR{cur.Uplink, cur.PDR}
		prev, seen := s.last[k]
		if s.last == nil {
			s.last = map[PDR]rules.Usage{}
		}
		s.last[k] = cur
		if !seen {
			prev = rules.Usage{}
		}
		for _, id := range s.urrsOf(k) {
			u := s.urrs[id]
			if u == nil {
				continue
			}
			if !cur.Uplink {
				u.addDropped(since(cur.BufferFull, prev.BufferFull))
			}
			d := since(pick(cur, u.rule.BeforeQoS), pick(prev, u.rule.BeforeQoS))
			if d.Packets == 0 && d.Bytes == 0 {
				continue
			}
			u.counted.add(cur.Uplink, d)
			u.quotaUsed.add(cur.Uplink, d)
			moved[id] = true
		}
	}
	var out []Report
	for _, id := range sortedIDs(s.urrs) {
		u := s.urrs[id]
		u.traffic(moved[id], now)
		if t := u.due(now); t != 0 {
			out = append(out, u.report(t, now)...)
		}
		if u.splitPending() && !now.Before(u.rule.MonitoringTime) {
			out = append(out, u.split(now)...)
		}
	}
	s.watching = s.anyWatched()
	return s.withLinked(out, now)
}

// ObserveDropped takes a sample of the downlink traffic dropped for each PDR so far (counts
// that only grow, as the counters do) for the URRs' DroppedThreshold; call it before Observe,
// which reports.
func (s *Session) ObserveDropped(sample map[PDR]rules.Counts) {
	for k, cur := range sample {
		was := s.lastDropped[k]
		if s.lastDropped == nil {
			s.lastDropped = map[PDR]rules.Counts{}
		}
		s.lastDropped[k] = cur
		d := since(cur, was) // since counts afresh when the session's buffer was made again
		for _, id := range s.urrsOf(k) {
			if u := s.urrs[id]; u != nil {
				u.addDropped(d)
			}
		}
	}
}

// since is what a count that only grows, c, gained since it was was; all of c when it is
// smaller, a count started afresh (a PDR removed and created again).
func since(c, was rules.Counts) rules.Counts {
	if c.Packets < was.Packets || c.Bytes < was.Bytes {
		was = rules.Counts{}
	}
	return rules.Counts{Packets: c.Packets - was.Packets, Bytes: c.Bytes - was.Bytes}
}

func (u *urr) addDropped(d rules.Counts) {
	u.dropped.Packets += d.Packets
	u.dropped.Bytes += d.Bytes
}

// pick is the counts a URR measures: before or after QoS.
func pick(u rules.Usage, beforeQoS bool) rules.Counts {
	if beforeQoS {
		return u.BeforeQoS
	}
	return rules.Counts{Packets: u.Packets, Bytes: u.Bytes}
}

// traffic updates the traffic state: moved says packets came since the previous sample.
func (u *urr) traffic(moved bool, now time.Time) {
	if moved {
		if u.first.IsZero() {
			u.first = now
		}
		u.last, u.lastSeen = now, now
		if u.runStart.IsZero() {
			u.runStart = now
		}
		u.holdingDone = false
		return
	}
	if !u.runStart.IsZero() && now.Sub(u.lastSeen) >= u.inactivity() {
		// The run ended at its last packet (in this measurement or the one before, when a
		// report moved the run's start past it).
		if u.lastSeen.After(u.runStart) {
			u.active += u.lastSeen.Sub(u.runStart)
			u.quotaActive += u.lastSeen.Sub(u.runStart)
		}
		u.runStart = time.Time{}
	}
}

func (u *urr) inactivity() time.Duration {
	if u.rule.Inactivity > 0 {
		return u.rule.Inactivity
	}
	return DefaultInactivity
}

// duration is the time of traffic in the measurement, up to now.
func (u *urr) duration(now time.Time) time.Duration {
	if u.runStart.IsZero() {
		return u.active
	}
	return u.active + now.Sub(u.runStart)
}

// quotaDuration is the time of traffic since the quota's grant.
func (u *urr) quotaDuration(now time.Time) time.Duration {
	if u.runStart.IsZero() {
		return u.quotaActive
	}
	return u.quotaActive + now.Sub(u.runStart)
}

// due returns the triggers that fire at now, 0 for none.
func (u *urr) due(now time.Time) Trigger {
	r := u.rule
	var t Trigger
	if r.Triggers&Periodic != 0 && r.Period > 0 && !now.Before(u.nextPeriod) {
		t |= Periodic
	}
	if r.Triggers&VolumeThreshold != 0 && r.VolumeThreshold.reached(u.counted) {
		t |= VolumeThreshold
	}
	if r.Triggers&TimeThreshold != 0 && r.TimeThreshold > 0 && u.duration(now) >= r.TimeThreshold {
		t |= TimeThreshold
	}
	if r.Triggers&DroppedThreshold != 0 && !u.droppedDone &&
		(u.dropped.Packets >= r.DroppedThreshold.Packets || u.dropped.Bytes >= r.DroppedThreshold.Bytes) {
		t |= DroppedThreshold
	}
	if !u.quotaDone {
		if r.Triggers&VolumeQuota != 0 && r.VolumeQuota != Unlimited && r.VolumeQuota.reached(u.quotaUsed) {
			t |= VolumeQuota
		}
		if r.Triggers&TimeQuota != 0 && r.TimeQuota > 0 && u.quotaDuration(now) >= r.TimeQuota {
			t |= TimeQuota
		}
	}
	if r.Triggers&QuotaValidity != 0 && r.QuotaValidityTime > 0 && !u.validityDone &&
		now.Sub(u.granted) >= r.QuotaValidityTime {
		t |= QuotaValidity
	}
	if r.Triggers&QuotaHoldingTime != 0 && r.QuotaHoldingTime > 0 && !u.holdingDone && !u.quotaDone {
		idleSince := u.lastSeen
		if idleSince.Before(u.granted) {
			idleSince = u.granted
		}
		if now.Sub(idleSince) >= r.QuotaHoldingTime {
			t |= QuotaHoldingTime
		}
	}
	flowing := !u.runStart.IsZero()
	if flowing != u.flowing {
		u.flowing = flowing
		if flowing && r.Triggers&StartOfTraffic != 0 {
			t |= StartOfTraffic
		}
		if !flowing && r.Triggers&StopOfTraffic != 0 {
			t |= StopOfTraffic
		}
	}
	return t
}

// splitPending reports whether the URR has a monitoring time it has not split at yet.
func (u *urr) splitPending() bool {
	mt := u.rule.MonitoringTime
	return !mt.IsZero() && !mt.Equal(u.splitAt)
}

// split closes the measurement at the monitoring time, sampled at now: what was counted so
// far is the part before it, kept for the next report; the next measurement starts at the
// monitoring time, so thresholds count afresh from there. A second monitoring time while
// the first one's part is still kept reports both parts at once (trigger MonitoringTime):
// one part is kept at most. It returns the reports due.
func (u *urr) split(now time.Time) []Report {
	mt := u.rule.MonitoringTime
	u.splitAt = mt
	if u.before != nil {
		return u.report(MonitoringTime, now)
	}
	if !u.start.Before(mt) {
		return nil // a report since the monitoring time closed the measurement that spanned it
	}
	b := u.close(MonitoringTime, mt, now)
	b.Part = Before
	u.before = &b
	return nil
}

// close ends the current measurement at end (counted up to the sample at now), without a
// sequence number, and starts the next one at end.
func (u *urr) close(t Trigger, end, now time.Time) Report {
	r := Report{URR: u.rule.ID, Trigger: t, Start: u.start, End: end, Volume: u.counted,
		Duration: u.duration(now), FirstPacket: u.first, LastPacket: u.last}
	if r.LastPacket.After(end) { // a packet counted by the sample that split at end
		r.LastPacket = end
	}
	if r.FirstPacket.After(end) {
		r.FirstPacket = end
	}
	// A threshold counts from the last report: it fires once per threshold's worth.
	u.start, u.counted, u.first, u.last, u.active = end, Counts{}, time.Time{}, time.Time{}, 0
	if !u.runStart.IsZero() {
		// The run goes on into the next measurement; the quota keeps its part so far.
		u.quotaActive += now.Sub(u.runStart)
		u.runStart = now
	}
	return r
}

// report closes the current measurement with trigger t at now and starts the next. It
// returns the report, after the part before a monitoring time when one is kept.
func (u *urr) report(t Trigger, now time.Time) []Report {
	var out []Report
	if u.before != nil {
		b := *u.before
		b.Seq, u.before = u.seq, nil
		u.seq++
		out = append(out, b)
	}
	r := u.close(t, now, now)
	r.Seq = u.seq
	u.seq++
	if len(out) > 0 {
		r.Part = After
	}
	out = append(out, r)
	if t&(VolumeQuota|TimeQuota) != 0 {
		u.quotaDone = true
	}
	if t&QuotaHoldingTime != 0 {
		u.holdingDone = true
	}
	if t&DroppedThreshold != 0 {
		u.droppedDone = true
	}
	if t&QuotaValidity != 0 {
		u.validityDone = true
	}
	if u.rule.Period > 0 {
		for !u.nextPeriod.After(now) {
			u.nextPeriod = u.nextPeriod.Add(u.rule.Period)
		}
	}
	return out
}

// withLinked adds a Linked report of every URR that links to one that reports in out and
// does not report itself.
func (s *Session) withLinked(out []Report, now time.Time) []Report {
	reported := map[uint32]bool{}
	for _, r := range out {
		reported[r.URR] = true
	}
	n := len(out)
	for _, id := range sortedIDs(s.urrs) {
		u := s.urrs[id]
		if reported[id] || u.rule.Triggers&Linked == 0 {
			continue
		}
		for _, l := range u.rule.LinkedURRs {
			if reported[l] {
				out = append(out, u.report(Linked, now)...)
				reported[id] = true
				break
			}
		}
	}
	if len(out) > n {
		// A linked report may itself be linked to.
		return s.withLinked(out, now)
	}
	return out
}

// Query returns a report of each of ids, with trigger t (Immediate for a query,
// Termination for a removed URR or a deleted session), and the linked reports they
// trigger. Sample the counters first. Unknown ids are skipped.
func (s *Session) Query(ids []uint32, t Trigger, now time.Time) []Report {
	var out []Report
	done := map[uint32]bool{}
	for _, id := range ids {
		if u := s.urrs[id]; u != nil && !done[id] {
			done[id] = true
			out = append(out, u.report(t, now)...)
		}
	}
	return s.withLinked(out, now)
}

func sortedIDs(m map[uint32]*urr) []uint32 { return slices.Sorted(maps.Keys(m)) }
