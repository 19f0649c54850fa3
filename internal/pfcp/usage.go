package pfcp

import (
	"context"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/usage"
)

// DefaultUsagePollInterval is how often the counters of sessions whose URRs report on
// triggers are sampled: a threshold, a quota or a period is reported at most this late (plus
// the send), well within the second a report may be late.
const DefaultUsagePollInterval = 200 * time.Millisecond

// Measurement Method bits (TS 29.244 8.2.40) and Measurement Information's MBQE (8.2.68).
const (
	methodDuration = 0x01
	methodVolume   = 0x02
	infoMBQE       = 0x01
)

// reportingTriggers maps the Reporting Triggers IE's octets (TS 29.244 8.2.19) to the
// triggers this UPF implements, in the Usage Report Trigger layout. Octet 5's first seven
// bits are the same in both; LIUSA, octet 6's quotas and QUVTI move.
func reportingTriggers(b []byte) usage.Trigger {
	var t usage.Trigger
	if len(b) > 0 {
		t |= usage.Trigger(b[0] & 0x7f) // PERIO VOLTH TIMTH QUHTI START STOPT DROTH
		if b[0]&0x80 != 0 {
			t |= usage.Linked // LIUSA
		}
	}
	if len(b) > 1 {
		if b[1]&0x01 != 0 {
			t |= usage.VolumeQuota
		}
		if b[1]&0x02 != 0 {
			t |= usage.TimeQuota
		}
		if b[1]&0x80 != 0 {
			t |= usage.QuotaValidity // QUVTI
		}
	}
	return t
}

// usageRule is u as the usage package measures it.
func usageRule(u *URR) usage.Rule {
	limit := func(v uint64, given bool) uint64 {
		if !given {
			return usage.NoLimit
		}
		return v
	}
	seconds := func(s uint32) time.Duration { return time.Duration(s) * time.Second }
	return usage.Rule{
		ID:        u.ID,
		Triggers:  reportingTriggers(u.Triggers),
		BeforeQoS: u.MeasurementInformation&infoMBQE != 0,
		Period:    seconds(u.MeasurementPeriod),
		VolumeThreshold: usage.Volume{Uplink: limit(u.VolumeThresholdUL, u.VolumeThresholdUL != 0),
			Downlink: limit(u.VolumeThresholdDL, u.VolumeThresholdDL != 0),
			Total:    limit(u.VolumeThreshold, u.VolumeThreshold != 0)},
		VolumeQuota:       u.volumeQuota(),
		TimeThreshold:     seconds(u.TimeThreshold),
		TimeQuota:         seconds(u.TimeQuota),
		QuotaHoldingTime:  seconds(u.QuotaHoldingTime),
		QuotaValidityTime: seconds(u.QuotaValidityTime),
		Inactivity:        seconds(u.InactivityTime),
		DroppedThreshold: rules.Counts{Packets: limit(u.DroppedPackets, u.DroppedThresholdFlags&droppedPackets != 0),
			Bytes: limit(u.DroppedBytes, u.DroppedThresholdFlags&droppedBytes != 0)},
		LinkedURRs: u.LinkedURRs,
		Grant:      u.Grant,
		QuotaDone:  u.quotaUsedUp(),
		// The URR forgets its monitoring time once passed (passMonitoringTimes).
		MonitoringTime: u.MonitoringTime,
	}
}

// countsDropped reports whether a URR of PDR p measures the downlink traffic dropped for it
// (DROTH): a FAR that drops then hands every packet to the buffer, which discards and counts
// it, instead of dropping it in the datapath uncounted.
func (s *Session) countsDropped(p *PDR) bool {
	if p.FTEID != nil {
		return false
	}
	for _, id := range p.URRs {
		if u := s.URRs[id]; u != nil && reportingTriggers(u.Triggers)&usage.DroppedThreshold != 0 {
			return true
		}
	}
	return false
}

// quotaUsedUp reports whether the quota of the URR's current grant was reported used up.
func (u *URR) quotaUsedUp() bool { return u.Grant != 0 && u.QuotaUsedUp == u.Grant }

// volumeQuota is the URR's volume quota, usage.Unlimited without one.
func (u *URR) volumeQuota() usage.Volume {
	v := usage.Unlimited
	if u.VolumeQuotaFlags&volumeTotal != 0 {
		v.Total = u.VolumeQuota
	}
	if u.VolumeQuotaFlags&volumeUplink != 0 {
		v.Uplink = u.VolumeQuotaUL
	}
	if u.VolumeQuotaFlags&volumeDownlink != 0 {
		v.Downlink = u.VolumeQuotaDL
	}
	return v
}

// usageRules are the URRs of s, and the URRs each PDR counts toward.
func usageRules(s *Session) ([]usage.Rule, map[usage.PDR][]uint32) {
	var rs []usage.Rule
	for _, id := range sortedKeys(s.URRs) {
		rs = append(rs, usageRule(s.URRs[id]))
	}
	pdrs := map[usage.PDR][]uint32{}
	for id, p := range s.PDRs {
		pdrs[usage.PDR{Uplink: p.FTEID != nil, ID: uint32(id)}] = p.URRs
	}
	return rs, pdrs
}

// pdrUsage is what the datapath measures for PDR p beyond its counter: before QoS when one
// of its URRs asks, and the volume quotas of its URRs that have one, which the datapath
// enforces. A URR whose quota the usage state (us, nil for a new or restored session) or
// the URR itself (QuotaUsedUp, after a restart) says is used up stops the PDR with a quota of nothing, or switches it to the URR's FAR for quota action
// (far, else nil).
func (s *Session) pdrUsage(p *PDR, us *usage.Session) (beforeQoS bool, quotas []rules.Quota, far *FAR) {
	for _, id := range p.URRs {
		u := s.URRs[id]
		beforeQoS = beforeQoS || u.MeasurementInformation&infoMBQE != 0
		if u.Grant == 0 || (u.VolumeQuotaFlags == 0 && u.TimeQuota == 0) {
			continue
		}
		v := u.volumeQuota()
		usedUp := u.quotaUsedUp() || us != nil && us.QuotaUsedUp(id, u.Grant)
		if v == usage.Unlimited && !usedUp {
			continue // a time quota: the datapath has nothing to count until it is used up
		}
		quota := rules.Quota{URR: id, Grant: u.Grant, Uplink: v.Uplink, Downlink: v.Downlink, Total: v.Total}
		if usedUp {
			if u.QuotaFAR != nil {
				far = s.FARs[*u.QuotaFAR]
				continue
			}
			quota.Uplink, quota.Downlink, quota.Total = 0, 0, 0
		}
		quotas = append(quotas, quota)
	}
	return beforeQoS, quotas, far
}

// quotaURRs counts the URRs of p with a quota: the datapath enforces rules.MaxQuotasPerPDR.
func (s *Session) quotaURRs(p *PDR) int {
	n := 0
	for _, id := range p.URRs {
		if u := s.URRs[id]; u != nil && (u.VolumeQuotaFlags != 0 || u.TimeQuota != 0) {
			n++
		}
	}
	return n
}

// usageReports are Usage Report IEs (wrap picks the message's kind) for rs; urrs are the
// URRs they are of (a removed URR's among them), for what each measures.
func usageReports(rs []usage.Report, urrs map[uint32]*URR, wrap func(...*ie.IE) *ie.IE) []*ie.IE {
	out := make([]*ie.IE, 0, len(rs))
	for _, r := range rs {
		t := r.Trigger.Octets()
		ies := []*ie.IE{ie.NewURRID(r.URR), ie.NewURSEQN(r.Seq), ie.NewUsageReportTrigger(t[0], t[1], t[2]),
			ie.NewStartTime(r.Start), ie.NewEndTime(r.End)}
		method := uint8(methodVolume)
		if u := urrs[r.URR]; u != nil {
			method = u.Method
		}
		if method&methodVolume != 0 || method&methodDuration == 0 {
			ul, dl := r.Volume.Uplink, r.Volume.Downlink
			ies = append(ies, ie.NewVolumeMeasurement(0x3f, ul.Bytes+dl.Bytes, ul.Bytes, dl.Bytes,
				ul.Packets+dl.Packets, ul.Packets, dl.Packets)) // TOVOL ULVOL DLVOL TONOP ULNOP DLNOP
		}
		if method&methodDuration != 0 {
			ies = append(ies, ie.NewDurationMeasurement(r.Duration))
		}
		if !r.FirstPacket.IsZero() {
			ies = append(ies, ie.NewTimeOfFirstPacket(r.FirstPacket), ie.NewTimeOfLastPacket(r.LastPacket))
		}
		switch r.Part {
		case usage.Before:
			ies = append(ies, ie.NewUsageInformation(1, 0, 0, 0)) // BEF
		case usage.After:
			ies = append(ies, ie.NewUsageInformation(0, 1, 0, 0)) // AFT
		}
		out = append(out, wrap(ies...))
	}
	return out
}

// sample takes a sample of session s's counters for its usage state at now and returns the
// reports due; quotas says a URR's monitoring time gave it a new quota, which the datapath
// must be given (Install). n.smu is held.
func (n *Node) sample(s *Session, us *usage.Session, now time.Time) (due []usage.Report, quotas bool) {
	counts, err := n.opts.Datapath.Usage(s.SEID)
	if err != nil {
		n.log.Warn("pfcp: read a session's counters for its usage reports", "seid", s.SEID, "err", err)
		return nil, false
	}
	if n.opts.Buffers != nil {
		dropped := map[usage.PDR]rules.Counts{}
		for k, c := range n.opts.Buffers.Dropped(s.SEID) {
			dropped[usage.PDR{Uplink: k.Uplink, ID: k.PDR}] = c
		}
		us.ObserveDropped(dropped)
	}
	due = us.Observe(counts, now)
	passed, quotas := s.passMonitoringTimes(now)
	if passed {
		n.ss.setUsage(s, us, now)
		// Saved, so that a restart does not apply the subsequent values again.
		n.saveSession(s)
	}
	return due, quotas
}

// passMonitoringTimes gives each URR of s whose Monitoring Time has come (by now; the usage
// state split its measurement at the sample just taken) its subsequent thresholds and
// quotas, and replaces the monitoring time by its next one (Additional), or forgets it. A subsequent quota is a new grant, counted from
// now. It reports whether a monitoring time passed, and whether a quota changed.
func (s *Session) passMonitoringTimes(now time.Time) (passed, quotas bool) {
	for _, u := range s.URRs {
		if u.MonitoringTime.IsZero() || now.Before(u.MonitoringTime) {
			continue
		}
		passed = true
		sub := u.Subsequent
		if f := sub.VolumeThresholdFlags; f != 0 {
			u.VolumeThreshold, u.VolumeThresholdUL, u.VolumeThresholdDL = flagged(f, volumeTotal, sub.VolumeThreshold),
				flagged(f, volumeUplink, sub.VolumeThresholdUL), flagged(f, volumeDownlink, sub.VolumeThresholdDL)
		}
		if sub.TimeThreshold != 0 {
			u.TimeThreshold = sub.TimeThreshold
		}
		if sub.VolumeQuotaFlags != 0 || sub.TimeQuota != 0 {
			if sub.VolumeQuotaFlags != 0 {
				u.VolumeQuotaFlags, u.VolumeQuota, u.VolumeQuotaUL, u.VolumeQuotaDL = sub.VolumeQuotaFlags,
					sub.VolumeQuota, sub.VolumeQuotaUL, sub.VolumeQuotaDL
			}
			if sub.TimeQuota != 0 {
				u.TimeQuota = sub.TimeQuota
			}
			u.Grant++
			quotas = true
		}
		u.MonitoringTime, u.Subsequent = time.Time{}, Subsequent{}
		// The next monitoring time, if any, takes its place. Resliced, not changed in place:
		// a Modification's copy of the URR may share the slice.
		if rest := u.Additional; len(rest) > 0 {
			u.MonitoringTime, u.Subsequent, u.Additional = rest[0].Time, rest[0].Subsequent, nil
			if len(rest) > 1 {
				u.Additional = rest[1:]
			}
		}
	}
	return passed, quotas
}

// flagged is v when flags has bit, else 0 (no such volume).
func flagged(flags, bit uint8, v uint64) uint64 {
	if flags&bit == 0 {
		return 0
	}
	return v
}

// pollUsage samples the counters of the sessions whose URRs report on triggers every
// UsagePollInterval and sends the reports due, until ctx is done. A monitoring time due
// before the next tick gets a sample of its own at that time, so that a URR's usage is split
// there rather than up to an interval later.
func (n *Node) pollUsage(ctx context.Context) {
	tick := time.NewTicker(n.opts.UsagePollInterval)
	defer tick.Stop()
	split := time.NewTimer(time.Hour)
	split.Stop()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-tick.C:
		case now = <-split.C:
		}
		due, next := n.dueReports(now)
		n.sendUsageReports(due)
		if wait := time.Until(next); !next.IsZero() && wait < n.opts.UsagePollInterval {
			split.Reset(wait)
		}
	}
}

// dueReports are the Usage Report IEs due at now, by session, and the next monitoring time
// of a URR (zero for none). A quota used up re-installs the session's rules (stop, or the
// FAR for quota action).
func (n *Node) dueReports(now time.Time) (map[uint64][]*ie.IE, time.Time) {
	n.smu.Lock()
	defer n.smu.Unlock()
	out := map[uint64][]*ie.IE{}
	var next time.Time
	for seid, us := range n.ss.watched {
		s := n.ss.byID[seid]
		if s == nil || !us.Watching() { // no longer: a sample split its URR at its monitoring time
			delete(n.ss.watched, seid)
			continue
		}
		rs, quotas := n.sample(s, us, now)
		for _, u := range s.URRs {
			if mt := u.MonitoringTime; !mt.IsZero() && (next.IsZero() || mt.Before(next)) {
				next = mt
			}
		}
		if len(rs) > 0 {
			out[seid] = usageReports(rs, s.URRs, ie.NewUsageReportWithinSessionReportRequest)
		}
		if quotaReported(rs) {
			n.keepQuotasUsedUp(s, rs)
		}
		if quotaReported(rs) || quotas {
			if err := n.opts.Datapath.Install(seid, n.ruleSets(s)); err != nil {
				n.log.Warn("pfcp: apply a used-up quota", "seid", seid, "err", err)
			}
		}
	}
	return out, next
}

// keepQuotasUsedUp records in s and its state record the grants whose quota rs report used
// up, which a restart must not grant anew. n.smu is held.
func (n *Node) keepQuotasUsedUp(s *Session, rs []usage.Report) {
	for _, r := range rs {
		if u := s.URRs[r.URR]; u != nil && r.Trigger&(usage.VolumeQuota|usage.TimeQuota) != 0 {
			u.QuotaUsedUp = u.Grant
		}
	}
	n.saveSession(s)
}

// quotaReported reports whether rs report a quota used up.
func quotaReported(rs []usage.Report) bool {
	for _, r := range rs {
		if r.Trigger&(usage.VolumeQuota|usage.TimeQuota) != 0 {
			return true
		}
	}
	return false
}

// sendUsageReports sends each session's SMF a Session Report Request with its reports.
func (n *Node) sendUsageReports(bySession map[uint64][]*ie.IE) {
	for _, seid := range sortedKeys(bySession) {
		if err := n.Report(seid, ReportUsage, bySession[seid]...); err != nil {
			n.log.Warn("pfcp: usage report not sent", "seid", seid, "err", err)
		}
	}
}
