package config

import (
	"gopkg.in/yaml.v3"
)

// limits checks the limits section; max_rule_sets and max_sessions_per_association follow
// max_sessions unless given, and direct_cache_slots is 0 (the datapath sizes it) unless given.
func (v *validator) limits(raw *rawLimits) {
	n, present, err := intNode(&raw.MaxSessions, 1, MaxMaxSessions)
	switch {
	case err != nil:
		v.addf("limits.max_sessions: %w; use 1 to %d", err, MaxMaxSessions)
		v.cfg.Limits.MaxSessions = 0 // unknown: skip the session-count check
	case present:
		v.cfg.Limits.MaxSessions = int(n)
	}
	if v.cfg.Limits.MaxSessions > 0 {
		v.cfg.Limits.MaxRuleSets = min(v.cfg.Limits.MaxSessions, MaxMaxRuleSets)
		v.cfg.Limits.MaxSessionsPerAssociation = v.cfg.Limits.MaxSessions
	}
	for _, l := range []struct {
		name string
		node *yaml.Node
		max  uint64
		dst  *int
	}{
		{"max_rule_sets", &raw.MaxRuleSets, MaxMaxRuleSets, &v.cfg.Limits.MaxRuleSets},
		{"max_sdf_entries", &raw.MaxSDFEntries, MaxMaxSDFEntries, &v.cfg.Limits.MaxSDFEntries},
		{"max_associations", &raw.MaxAssocs, MaxMaxAssociations, &v.cfg.Limits.MaxAssociations},
		{"max_sessions_per_association", &raw.MaxPerAssoc, MaxMaxSessions, &v.cfg.Limits.MaxSessionsPerAssociation},
	} {
		n, present, err := intNode(l.node, 1, l.max)
		switch {
		case err != nil:
			v.addf("limits.%s: %w; use 1 to %d", l.name, err, l.max)
		case present:
			*l.dst = int(n)
		}
	}
	switch n, present, err := intNode(&raw.DirectSlots, 0, 2*MaxMaxSessions); {
	case err != nil:
		v.addf("limits.direct_cache_slots: %w; use 0 (a slot per key) to %d", err, 2*MaxMaxSessions)
	case present:
		v.cfg.Limits.DirectCacheSlots = int(n)
	}
}
