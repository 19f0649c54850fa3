package daemon

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/session"
)

// staticSessions are the configuration's sessions: the daemon turns each into the rule sets
// of its id, which the datapath holds like a PFCP session's under its SEID. The
// configuration has checked them (ids, TEIDs and UE addresses unique, gtpu_address one of
// gtpu_addresses), and they do not change while xupfd runs.
type staticSessions struct {
	dp   ruleStore
	byID map[uint64]session.Session
}

// ruleStore is what static sessions need of the datapath: rule sets in, counters out, and
// which addresses are the UPF's own.
type ruleStore interface {
	Install(owner uint64, sets []rules.RuleSet) error
	Usage(owner uint64) ([]rules.Usage, error)
	IsLocal(netip.Addr) bool
}

// installStatic installs list in dp.
func installStatic(dp ruleStore, list []session.Session) (staticSessions, error) {
	st := staticSessions{dp: dp, byID: make(map[uint64]session.Session, len(list))}
	for _, s := range list {
		// Validated again: a configuration built in code (tests, the bench) skips config.Parse.
		err := s.Validate()
		var sets []rules.RuleSet
		if err == nil {
			sets, err = s.RuleSets()
		}
		if err == nil && dp.IsLocal(s.UE) {
			// Its downlink would be the host's: with kernel_n6 the datapath does not even look
			// for a session of the UPF's own address (xupf_own_addrs).
			err = fmt.Errorf("ue_ipv4 %s is an address of this UPF; give the session another or take it off the host's interfaces", s.UE)
		}
		if err != nil {
			return st, fmt.Errorf("static session: session %d: %w", s.ID, err)
		}
		if err := dp.Install(s.ID, sets); err != nil {
			return st, fmt.Errorf("static session: %w", err)
		}
		st.byID[s.ID] = s
	}
	return st, nil
}

// list returns every static session with its usage, sorted by id.
func (st staticSessions) list() ([]api.SessionInfo, error) {
	out := make([]api.SessionInfo, 0, len(st.byID))
	for _, id := range slices.Sorted(maps.Keys(st.byID)) {
		info, err := st.get(id)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// get returns one static session and what the datapath counted for it.
func (st staticSessions) get(id uint64) (api.SessionInfo, error) {
	s, ok := st.byID[id]
	if !ok {
		return api.SessionInfo{}, fmt.Errorf("session %d: %w", id, api.ErrNotFound)
	}
	usage, err := st.dp.Usage(id)
	if err != nil {
		return api.SessionInfo{}, fmt.Errorf("session %d: reading its counters: %w", id, err)
	}
	return api.SessionInfo{Session: s, Usage: session.UsageOf(usage)}, nil
}

// Sessions implements api.Backend: the static sessions, sorted by id.
func (d *Daemon) Sessions() ([]api.SessionInfo, error) { return d.static.list() }

// Session implements api.Backend: one static session.
func (d *Daemon) Session(id uint64) (api.SessionInfo, error) { return d.static.get(id) }
