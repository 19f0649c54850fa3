package datapath

import (
	"fmt"

	"github.com/xupf/xupf/internal/rules"
)

// adoptedSet is what an earlier run published under one key and this run has not installed
// again yet: the slots the live entry uses, which no install may hand out meanwhile (a key
// not installed yet would lead a packet to another session's rules), and the counters of a
// key with one PDR, which the install of the same key carries on, so that usage counts only
// grow across a restart.
type adoptedSet struct {
	ref uint32
	// counters are the one PDR's counter slots; nil for a classified key, whose PDRs are
	// found through classification tables that Load clears.
	counters *pdrCounters
	meters   []uint32
	// quota is the one PDR's quota slot, or the slot of its list of several (quotaList).
	quota     *uint32
	quotaList bool
	// notified says the one PDR's FAR is FAR_DROP: if the rules make it FAR_DROP_NOTIFY, the
	// earlier run's program has handed over its packet already (notify_once).
	notified bool
}

// adoptEarlierRun reads what the key tables an earlier run left point at and reserves its
// slots in this run's allocators, before anything is installed. On a first start the tables
// are empty and it does nothing.
func (d *Datapath) adoptEarlierRun() error {
	d.adopted = map[rules.Key]*adoptedSet{}
	// Meter and quota slots are the owner's, shared by all its keys: each counts its keys.
	d.adoptUses = map[*slots]map[uint32]int{d.refs: {}, d.counters: {}, d.meterSlots: {}, d.quotaSlots: {}}
	used := d.adoptUses
	for _, t := range []struct {
		table *keyTable
		key   func(uint32) rules.Key
	}{{d.ulKeys, ulKey}, {d.dlKeys, dlKey}} {
		for k, ref := range t.table.All() {
			var v xupfRuleRef
			if err := d.objs.XupfRefs.Lookup(ref, &v); err != nil {
				return fmt.Errorf("read the earlier run's rule reference %d: %w", ref, err)
			}
			a := &adoptedSet{ref: ref}
			used[d.refs][ref]++
			if v.Ruleset == 0 {
				c := pdrCounters{after: v.Pdr.Counter}
				if v.Pdr.Usage&uint8(xupfPdrUsagePDR_U_BEFORE_QOS) != 0 {
					c.before, c.hasBefore = v.Pdr.CounterBeforeQos, true
				}
				a.counters = &c
				a.notified = v.Far.Action == uint32(xupfFarActionFAR_DROP)
				for _, s := range c.slots() {
					used[d.counters][s]++
				}
				a.meters = v.Pdr.Meters[:min(int(v.Pdr.Nmeters), len(v.Pdr.Meters))]
				for _, m := range a.meters {
					used[d.meterSlots][m]++
				}
				if v.Pdr.Usage&uint8(xupfPdrUsagePDR_U_QUOTA) != 0 {
					q := v.Pdr.Quota
					a.quota, a.quotaList = &q, v.Pdr.Usage&uint8(xupfPdrUsagePDR_U_QUOTAS) != 0
					used[d.quotaSlots][q]++
				}
			}
			d.adopted[t.key(k)] = a
		}
	}
	for s, u := range used {
		if err := s.reserve(u); err != nil {
			return fmt.Errorf("the earlier run's entries do not fit this run's tables: %w", err)
		}
	}
	if len(d.adopted) > 0 {
		d.log.Info("took over the earlier run's entries", "keys", len(d.adopted))
	}
	return nil
}

func ulKey(k uint32) rules.Key { return rules.Key{Uplink: true, TEID: be32(k)} }
func dlKey(k uint32) rules.Key { return rules.Key{UE: addrFromBE(k)} }

// adoptedPrev returns, for the keys of sets that an earlier run left and this run has not
// installed, sets that stand for the earlier run's entries as the ones an install replaces:
// the ref is released once the new one is published, and the counters of a key with one PDR
// go to the new set's one PDR. The caller holds d.mu.
func (d *Datapath) adoptedPrev(sets []rules.RuleSet) []*installedSet {
	var out []*installedSet
	for _, rs := range sets {
		a := d.adopted[rs.LookupKey()]
		if a == nil {
			continue
		}
		set := &installedSet{rs: rules.RuleSet{Uplink: rs.Uplink, TEID: rs.TEID, UE: rs.UE}, ref: a.ref,
			counters: map[uint32]pdrCounters{}}
		if a.counters != nil && len(rs.PDRs) == 1 {
			set.rs.PDRs = []rules.PDR{{ID: rs.PDRs[0].ID}}
			set.counters[rs.PDRs[0].ID] = *a.counters
		}
		out = append(out, set)
	}
	return out
}

// notifiedBefore is rs, but with a DROP FAR with NOCP that the earlier run's entry of its
// key has turned into a plain DROP kept so: the SMF had its report before the restart, and
// an install that armed it again would send a second. Only a key with one PDR is told (its
// FAR is in the ref); a classified key's FARs are armed again. The caller holds d.mu.
func (d *Datapath) notifiedBefore(rs rules.RuleSet) rules.RuleSet {
	a := d.adopted[rs.LookupKey()]
	if a == nil || !a.notified || len(rs.PDRs) != 1 || rs.PDRs[0].FAR.Action != rules.DropNotify {
		return rs
	}
	p := rs.PDRs[0]
	p.FAR.Action = rules.Drop
	rs.PDRs = []rules.PDR{p}
	return rs
}

// adoptedQuotaUsed is what the earlier run's entry of rs's key counted against the quota
// that e is written with: when both that entry and rs have one PDR with one quota, and its
// limits are e's, it is the same grant of the same URR, whose count carries on so that a
// restart grants nothing anew. Otherwise nothing is used yet. The caller holds d.mu.
func (d *Datapath) adoptedQuotaUsed(rs rules.RuleSet, e xupfQuota) [2]uint64 {
	a := d.adopted[rs.LookupKey()]
	if a == nil || a.quota == nil || a.quotaList || len(rs.PDRs) != 1 || len(rs.PDRs[0].Quotas) != 1 {
		return [2]uint64{}
	}
	var old xupfQuota
	if err := d.objs.XupfQuotas.Lookup(*a.quota, &old); err != nil || old.Limit != e.Limit {
		return [2]uint64{}
	}
	return old.Used
}

// adoptedDone forgets the earlier run's entries of the keys of sets, which an install has
// replaced, releasing their meters and quota, and their counters unless the new set's one
// PDR carries them on; releaseSet has released the ref. The caller holds d.mu.
func (d *Datapath) adoptedDone(sets []*installedSet) {
	for _, set := range sets {
		k := set.rs.LookupKey()
		if a := d.adopted[k]; a != nil {
			d.forgetAdopted(k, a, len(set.counters) == 0)
		}
	}
}

// pruneAdopted releases the slots of the earlier run's entries that no install took over
// (Prune has deleted their keys). The caller holds d.mu.
func (d *Datapath) pruneAdopted() {
	for k, a := range d.adopted {
		d.dropAdopted(d.refs, a.ref)
		d.forgetAdopted(k, a, true)
	}
}

// forgetAdopted ends the adoption of key k, releasing its meters, quota and, with counters,
// its counters.
func (d *Datapath) forgetAdopted(k rules.Key, a *adoptedSet, counters bool) {
	if counters && a.counters != nil {
		d.dropAdopted(d.counters, a.counters.slots()...)
	}
	d.dropAdopted(d.meterSlots, a.meters...)
	if a.quota != nil {
		d.dropAdopted(d.quotaSlots, *a.quota)
	}
	delete(d.adopted, k)
}

// dropAdopted ends one adopted key's use of each of vs, slots of s, and releases those no
// other adopted key uses: a slot released twice would be handed out twice.
func (d *Datapath) dropAdopted(s *slots, vs ...uint32) {
	for _, v := range vs {
		uses := d.adoptUses[s]
		if uses[v]--; uses[v] <= 0 {
			delete(uses, v)
			s.release(v)
		}
	}
}
