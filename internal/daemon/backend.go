package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/rules"
)

var _ api.Backend = (*Daemon)(nil)

// Status implements api.Backend.
func (d *Daemon) Status() api.Status {
	addrs := make([]string, len(d.cfg.GTPUAddresses))
	for i, a := range d.cfg.GTPUAddresses {
		addrs[i] = a.String()
	}
	return api.Status{
		Version:          d.version,
		StartedAt:        d.started,
		UptimeSeconds:    time.Since(d.started).Seconds(),
		Interfaces:       d.attached,
		GTPUAddresses:    addrs,
		PFCPAddress:      d.cfg.PFCPListen,
		PFCPAssociations: len(d.pfcpNode.Associations()),
		Sessions:         len(d.static.byID) + d.pfcpNode.SessionCount(),
		MaxSessions:      d.cfg.Limits.MaxSessions,
		BPFFSPath:        d.cfg.BPFFS,
		QoSAlgorithm:     string(d.cfg.QoSAlgorithm),
		QoSClock:         string(d.cfg.QoSClock),
	}
}

// Associations implements api.Backend.
func (d *Daemon) Associations() []pfcp.Association {
	return d.pfcpNode.Associations()
}

// PFCPSessions implements api.Backend.
func (d *Daemon) PFCPSessions() ([]api.PFCPSessionInfo, error) {
	var out []api.PFCPSessionInfo
	for _, s := range d.pfcpNode.Sessions() {
		info, err := d.pfcpSessionInfo(s)
		if errors.Is(err, api.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// PFCPSession implements api.Backend.
func (d *Daemon) PFCPSession(seid uint64) (api.PFCPSessionInfo, error) {
	s, ok := d.pfcpNode.Session(seid)
	if !ok {
		return api.PFCPSessionInfo{}, fmt.Errorf("PFCP session %d: %w", seid, api.ErrNotFound)
	}
	return d.pfcpSessionInfo(s)
}

// pfcpSessionInfo adds to s what the datapath counted for its PDRs.
func (d *Daemon) pfcpSessionInfo(s pfcp.Session) (api.PFCPSessionInfo, error) {
	usage, err := d.pfcpNode.Usage(s.SEID)
	if errors.Is(err, datapath.ErrNotFound) {
		// Every session the node has is installed (with no rule set, at least): this one
		// was deleted since s was read.
		return api.PFCPSessionInfo{}, fmt.Errorf("PFCP session %d: %w", s.SEID, api.ErrNotFound)
	}
	if err != nil {
		return api.PFCPSessionInfo{}, fmt.Errorf("PFCP session %d: reading its counters: %w", s.SEID, err)
	}
	return api.PFCPSessionInfo{Session: s, Usage: pdrUsage(s, usage)}, nil
}

// pdrUsage is the datapath's usage of s as one entry per PDR, sorted by PDR id: a PDR the
// datapath has no counter for has zeros. An uplink PDR (one with an F-TEID) is counted in
// the uplink rule set of its TEID, a downlink one in the rule set of its UE address.
func pdrUsage(s pfcp.Session, usage []rules.Usage) []api.PDRUsage {
	out := make([]api.PDRUsage, 0, len(s.PDRs))
	for id, p := range s.PDRs {
		u := api.PDRUsage{PDR: id}
		for _, c := range usage {
			if c.PDR == uint32(id) && c.Uplink == (p.FTEID != nil) {
				u.Packets += c.Packets
				u.Bytes += c.Bytes
			}
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b api.PDRUsage) int { return cmp.Compare(a.PDR, b.PDR) })
	return out
}

// Stats implements api.Backend.
func (d *Daemon) Stats() (api.Stats, error) {
	st, err := d.dp.Stats()
	if err != nil {
		return api.Stats{}, err
	}
	out := api.Stats{Counters: st.Counters, Drops: st.Drops, PFCPDrops: d.pfcpNode.Drops(),
		PFCPReports: d.pfcpNode.Reports(), GTPU: d.gtpu.Counters()}
	if d.buf != nil {
		out.Buffer = d.buf.Counts()
	}
	if out.FlowCache, err = d.flowCacheStats(); err != nil {
		return api.Stats{}, err
	}
	return out, nil
}
