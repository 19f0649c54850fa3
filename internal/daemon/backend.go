package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/pfcp"
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
		Sessions:         len(d.dp.Sessions()),
		MaxSessions:      d.cfg.Limits.MaxSessions,
		BPFFSPath:        d.cfg.BPFFS,
	}
}

// Associations implements api.Backend.
func (d *Daemon) Associations() []pfcp.Association {
	return d.pfcpNode.Associations()
}

// Sessions implements api.Backend.
func (d *Daemon) Sessions() ([]api.SessionInfo, error) {
	var out []api.SessionInfo
	for _, s := range d.dp.Sessions() {
		info, err := d.Session(s.ID)
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

// Session implements api.Backend.
func (d *Daemon) Session(id uint64) (api.SessionInfo, error) {
	s, u, err := d.dp.Session(id)
	if errors.Is(err, datapath.ErrNotFound) {
		return api.SessionInfo{}, fmt.Errorf("session %d: %w", id, api.ErrNotFound)
	}
	if err != nil {
		return api.SessionInfo{}, err
	}
	return api.SessionInfo{Session: s, Usage: u}, nil
}

// Stats implements api.Backend.
func (d *Daemon) Stats() (api.Stats, error) {
	st, err := d.dp.Stats()
	if err != nil {
		return api.Stats{}, err
	}
	return api.Stats{Counters: st.Counters, Drops: st.Drops}, nil
}
