package scenario

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xupf/xupf/internal/config"
)

// expand returns the points of the cartesian product of axes (the first axis varies
// slowest), each checked by checkPoint.
func expand(name string, axes []*axis) ([]Point, []error) {
	total := 1
	var swept []*axis
	for _, a := range axes {
		if len(a.labels) > 1 {
			swept = append(swept, a)
			total *= len(a.labels)
			if total > MaxPoints {
				keys := make([]string, len(swept))
				for i, s := range swept {
					keys[i] = fmt.Sprintf("%s (%d values)", s.key, len(s.labels))
				}
				return nil, []error{fmt.Errorf("the sweep over %s has more than %d points; sweep fewer parameters or fewer values, or split the scenario", strings.Join(keys, ", "), MaxPoints)}
			}
		}
	}
	base := Point{}
	for _, a := range axes {
		a.set(&base, 0)
	}
	points := make([]Point, 0, total)
	idx := make([]int, len(swept))
	problems := newProblems()
	for n := range total {
		p := base
		for i, a := range swept {
			a.set(&p, idx[i])
		}
		p.Index = n
		p.Name = name
		if len(swept) > 0 {
			parts := make([]string, len(swept))
			p.Sweep = make([]Setting, len(swept))
			for i, a := range swept {
				p.Sweep[i] = Setting{Key: a.key, Value: a.labels[idx[i]]}
				parts[i] = leaf(a.key) + "=" + a.labels[idx[i]]
			}
			p.Name += "/" + strings.Join(parts, ",")
		}
		complete(&p)
		for _, err := range checkPoint(&p) {
			problems.add(p.Name, len(swept) > 0, err)
		}
		points = append(points, p)
		// Odometer: the last axis varies fastest.
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(swept[i].labels) {
				break
			}
			idx[i] = 0
		}
	}
	if errs := problems.errors(); len(errs) > 0 {
		return nil, errs
	}
	return points, nil
}

func leaf(key string) string {
	return key[strings.LastIndexByte(key, '.')+1:]
}

// complete fills the values whose default depends on others, and resolves the counts given
// per users.
func complete(p *Point) {
	pl := &p.Pipeline
	for _, n := range []*int{&pl.BaseStations, &pl.Servers, &pl.Routes} {
		if *n < 0 {
			*n = max(1, (pl.Users+(-*n)-1)/-*n)
		}
	}
	if p.Traffic.ActiveUsers == 0 || p.Traffic.ActiveUsers > pl.Users {
		p.Traffic.ActiveUsers = pl.Users
	}
	if all := p.Traffic.ActiveUsers * pl.FlowsPerUser; p.Traffic.Flows == 0 || p.Traffic.Flows > all {
		p.Traffic.Flows = all
	}
}

// checkPoint checks the rules that tie parameters together. Every message names the
// parameters and the fix.
func checkPoint(p *Point) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	pl, tr, te, rf, ev := &p.Pipeline, &p.Traffic, &p.Tester, &p.Tester.RFC2544, &p.Events

	if pl.BaseStations > MaxBaseStations || pl.Servers > MaxServers {
		add("pipeline.base_stations (%d) or servers (%d) is above its limit (%d, %d) for %d users; give one per more users", pl.BaseStations, pl.Servers, MaxBaseStations, MaxServers, pl.Users)
	}
	if pl.Routes > pl.Servers {
		add("pipeline.routes (%d) exceeds pipeline.servers (%d): every route needs a server behind it; lower routes or raise servers", pl.Routes, pl.Servers)
	}
	if pl.QERsPerUser == 0 && (pl.MBRUplink > 0 || pl.MBRDownlink > 0) {
		add("pipeline.mbr_uplink/mbr_downlink are set but pipeline.qers_per_user is 0: an MBR lives in a QER; set qers_per_user to 1 or more, or remove the MBRs")
	}
	if pl.PolicerContract > 0 && pl.ClassifierClasses == 0 {
		add("pipeline.policer_contract needs classifier classes: the policer applies to classified packets; set classifier_classes to 1 or more, or remove the contract")
	}
	if !HasSessions(pl.Datapath) && (pl.PolicerContract > 0 || pl.SMF != SMFOpen5GS || pl.UEAddress != UEBySMF ||
		pl.UplinkSpread != config.SpreadOff || pl.UplinkSpreadCPUs != SpreadCPUsAll) {
		add("pipeline.policer_contract, smf, ue_address and uplink_spread(_cpus) configure xupf, not the %s baseline; remove them or use datapath xupf", pl.Datapath)
	}
	if pl.QERsPerUser > 2*pl.PDRsPerUser {
		add("pipeline.qers_per_user (%d) exceeds the user's %d PDRs (pdrs_per_user %d, both directions): a QER no PDR uses is never metered; lower qers_per_user or raise pdrs_per_user", pl.QERsPerUser, 2*pl.PDRsPerUser, pl.PDRsPerUser)
	}
	dirs := []string{tr.Direction}
	if tr.Direction == Bidirectional {
		dirs = []string{Uplink, Downlink}
	}
	for _, d := range dirs {
		if tr.PacketSize == IMIX {
			break // each IMIX frame is raised to the direction's smallest
		}
		if lo := MinPacketSize(d, tr.PDUSessionContainer); tr.PacketSize < lo {
			add("traffic.packet_size (%d) is below the %d bytes that %s frames' headers and payload header take (with FCS); use %d or more", tr.PacketSize, lo, d, lo)
		}
		if hi := MaxPacketSize(d); tr.PacketSize > hi {
			add("traffic.packet_size (%d) is above the largest %s frame a 1500-byte MTU carries (%d with FCS, after the UPF's encapsulation on downlink); use %d or less", tr.PacketSize, d, hi, hi)
		}
	}
	switch te.Mode {
	case ModeFixedRate:
		if te.Rate == 0 {
			add("tester.rate is missing: mode fixed_rate offers that rate; set it, e.g. rate: 1Mpps")
		}
	default:
		if te.Rate != 0 {
			add("tester.rate (%s) is only used with mode fixed_rate (mode is %s); remove it or set mode: fixed_rate", rateLabel(te.Rate), te.Mode)
		}
	}
	if rf.MaxRate != 0 && rf.MaxRate <= rf.MinRate {
		add("tester.rfc2544.max_rate (%s) is not above min_rate (%s); raise max_rate, lower min_rate, or use max_rate 0 for the generator's maximum", rateLabel(rf.MaxRate), rateLabel(rf.MinRate))
	}
	if rf.MaxRate != 0 && rf.Resolution >= rf.MaxRate-rf.MinRate {
		add("tester.rfc2544.resolution (%s) is not below max_rate − min_rate; lower it, or use 0 for 1 %% of max_rate", rateLabel(rf.Resolution))
	}
	if Masquerades(pl.Datapath) && pl.Servers < pl.Users*pl.FlowsPerUser {
		add("pipeline.datapath %s needs a server per flow (servers %d, users × flows_per_user %d): masquerade keeps a UE port only when no other flow leaves with it toward the same server, and the sink checks the port; set servers to %d", pl.Datapath, pl.Servers, pl.Users*pl.FlowsPerUser, pl.Users*pl.FlowsPerUser)
	}
	if !HasSessions(pl.Datapath) && (ev.SessionAdd > 0 || ev.SessionDelete > 0 || ev.Handover > 0) {
		add("events need sessions, which only pipeline.datapath xupf has (it is %s); remove the events or use datapath xupf", pl.Datapath)
	}
	if ev.Handover > 0 && pl.BaseStations < 2 {
		add("events.handover needs a second gNB to hand over to; set pipeline.base_stations to 2 or more")
	}
	if ev.SessionDelete > 0 && ev.SessionDelete*te.Duration.D().Seconds() > float64(pl.Users)+ev.SessionAdd*te.Duration.D().Seconds() {
		add("events.session_delete (%g/s over %v) deletes more sessions than there are (%d users plus those added); lower session_delete or raise users", ev.SessionDelete, te.Duration, pl.Users)
	}
	return errs
}

// problems groups cross-parameter errors: a rule broken by many points of a sweep is reported
// once, with the first point and how many others.
type problems struct {
	order []string
	first map[string]string
	count map[string]int
	named map[string]bool
}

func newProblems() *problems {
	return &problems{first: map[string]string{}, count: map[string]int{}, named: map[string]bool{}}
}

func (p *problems) add(point string, sweep bool, err error) {
	msg := err.Error()
	if p.count[msg] == 0 {
		p.order = append(p.order, msg)
		p.first[msg] = point
		p.named[msg] = sweep
	}
	p.count[msg]++
}

// maxProblems bounds the errors reported for a sweep.
const maxProblems = 20

func (p *problems) errors() []error {
	errs := make([]error, 0, len(p.order))
	for i, msg := range p.order {
		if i == maxProblems {
			errs = append(errs, fmt.Errorf("%d more problems like these; fix the ones above first", len(p.order)-i))
			break
		}
		if !p.named[msg] {
			errs = append(errs, errors.New(msg))
			continue
		}
		where := "point " + p.first[msg]
		if n := p.count[msg] - 1; n > 0 {
			where += fmt.Sprintf(" (and %d more)", n)
		}
		errs = append(errs, fmt.Errorf("%s: %s", where, msg))
	}
	return errs
}
