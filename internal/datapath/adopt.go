package datapath

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/lbvs"
	"github.com/xupf/xupf/internal/rules"
)

// adoptedSet is what an earlier run published under one key and this run has not installed
// again yet: the slots the live entry uses, which no install may hand out meanwhile (a key
// not installed yet would lead a packet to another session's rules), and its PDRs' counters,
// which the install of the same key carries on, so that usage counts only grow across a
// restart.
type adoptedSet struct {
	ref uint32
	// pdrs are the PDRs a packet can reach: the one in the ref, or those in PDR slots that
	// the classification rule set names.
	pdrs []*adoptedPDR
	// desc and tables are a classified key's rule set and its classification entries (nil
	// for a key with one PDR in its ref), kept as they are until the key is installed again.
	desc   xupfRuleset
	tables *setTables
	// vectors are the classification entries' bit vectors, by key with the rule set id
	// cleared, as compileTables gives them: what pairByBits reads the earlier PDRs' matches
	// from.
	vectors sdfVectors
	// paired is pair's answer for the rule set an install is putting under the key.
	paired []*adoptedPDR
}

// adoptedPDR is one PDR of an earlier run's entry.
type adoptedPDR struct {
	slot     uint32 // its PDR and FAR slot; a key's one PDR in its ref has none
	counters pdrCounters
	meters   []uint32
	// quota is the PDR's quota slot, or the slot of its list of several (quotaList), whose
	// members are listed.
	quota     *uint32
	quotaList bool
	members   []uint32
	// notified says the PDR's FAR is FAR_DROP: if the rules make it FAR_DROP_NOTIFY, the
	// earlier run's program has handed over its packet already (notify_once).
	notified bool
}

// adoptEarlierRun reads what the key tables an earlier run left point at and reserves its
// slots in this run's allocators, before anything is installed, and keeps the
// classification entries of its rule sets (deleting those no key reaches). On a first start
// the tables are empty and it does nothing.
func (d *Datapath) adoptEarlierRun() error {
	d.adopted = map[rules.Key]*adoptedSet{}
	// Meter and quota slots are the owner's, shared by all its keys: each counts its keys.
	d.adoptUses = map[*slots]map[uint32]int{d.refs: {}, d.counters: {}, d.meterSlots: {}, d.quotaSlots: {},
		d.rules: {}, d.rulesets: {}}
	used := d.adoptUses
	byID := map[uint32]*adoptedSet{} // classified keys by rule set id
	refs, err := d.earlierRefs()
	if err != nil {
		return err
	}
	for _, t := range []struct {
		table *keyTable
		key   func(uint32) rules.Key
	}{{d.ulKeys, ulKey}, {d.dlKeys, dlKey}} {
		for k, ref := range t.table.All() {
			v, ok := refs[ref]
			if !ok {
				return fmt.Errorf("the earlier run's rule reference %d is out of range (%d)", ref, d.objs.XupfRefs.MaxEntries())
			}
			a := &adoptedSet{ref: ref}
			used[d.refs][ref]++
			if v.Ruleset == 0 {
				p, err := d.adoptPDR(v.Pdr, v.Far)
				if err != nil {
					return err
				}
				a.pdrs = []*adoptedPDR{p}
			} else if byID[v.Ruleset] != nil {
				// The earlier run gives each rule set its own id: these pins were not made by it.
				return fmt.Errorf("the earlier run's rule set %d is named by two keys; stop the gateway with `xupfd --stop`", v.Ruleset)
			} else if err := d.adoptRuleset(a, v.Ruleset); err != nil {
				return err
			} else {
				used[d.rulesets][v.Ruleset-1]++
				byID[v.Ruleset] = a
			}
			for _, p := range a.pdrs {
				if a.tables != nil {
					used[d.rules][p.slot]++
				}
				for _, s := range p.counters.slots() {
					used[d.counters][s]++
				}
				for _, m := range p.meters {
					used[d.meterSlots][m]++
				}
				for _, q := range p.quotaSlots() {
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
	// A rule set id is one key's alone: it is released when its tables are retired.
	delete(used, d.rulesets)
	if err := d.adoptTables(byID); err != nil {
		return err
	}
	if len(d.adopted) > 0 {
		d.log.Info("took over the earlier run's entries", "keys", len(d.adopted), "classified", len(byID))
	}
	// The program Load made classifies on no field: the adopted rule sets' must be in it
	// before Attach swaps it into the links.
	var fields uint32
	for _, a := range byID {
		fields |= a.desc.Fields
	}
	return d.ensureSDFFields(fields)
}

// earlierRefs reads the xupf_refs entries the key tables an earlier run left point at, by
// index: in batches of refsBatch entries up to the highest one named, a few system calls
// where a lookup per key took one each (0.8 s of CPU for 200,000 keys).
func (d *Datapath) earlierRefs() (map[uint32]xupfRuleRef, error) {
	want := map[uint32]bool{}
	var top uint32
	for _, t := range []*keyTable{d.ulKeys, d.dlKeys} {
		for _, ref := range t.All() {
			want[ref] = true
			top = max(top, ref)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	keys, vals := make([]uint32, refsBatch), make([]xupfRuleRef, refsBatch)
	var cursor ebpf.MapBatchCursor
	out := make(map[uint32]xupfRuleRef, len(want))
	for done := false; !done; {
		n, err := d.objs.XupfRefs.BatchLookup(&cursor, keys, vals, nil)
		done = errors.Is(err, ebpf.ErrKeyNotExist) // the last batch
		if err != nil && !done {
			return nil, fmt.Errorf("read the earlier run's rule references: %w", err)
		}
		for i := range n {
			if want[keys[i]] {
				out[keys[i]] = vals[i]
			}
		}
		done = done || n == 0 || keys[n-1] >= top
	}
	return out, nil
}

// refsBatch is how many xupf_refs entries earlierRefs reads per system call.
const refsBatch = 4096

// adoptPDR reads what a PDR entry of the earlier run uses.
func (d *Datapath) adoptPDR(e xupfPdr, far xupfFar) (*adoptedPDR, error) {
	p := &adoptedPDR{counters: pdrCounters{after: e.Counter},
		meters:   e.Meters[:min(int(e.Nmeters), len(e.Meters))],
		notified: far.Action == uint32(xupfFarActionFAR_DROP)}
	if e.Usage&uint8(xupfPdrUsagePDR_U_BEFORE_QOS) != 0 {
		p.counters.before, p.counters.hasBefore = e.CounterBeforeQos, true
	}
	if e.Usage&uint8(xupfPdrUsagePDR_U_QUOTA) == 0 {
		return p, nil
	}
	q := e.Quota
	p.quota, p.quotaList = &q, e.Usage&uint8(xupfPdrUsagePDR_U_QUOTAS) != 0
	if p.quotaList {
		var l xupfQuotaList
		if err := d.objs.XupfQuotaLists.Lookup(q, &l); err != nil {
			return nil, fmt.Errorf("read the earlier run's quota list %d: %w", q, err)
		}
		p.members = l.Slots[:min(int(l.N), len(l.Slots))]
	}
	return p, nil
}

// quotaSlots are the quota slots p uses: its quota or list, and the list's members.
func (p *adoptedPDR) quotaSlots() []uint32 {
	if p.quota == nil {
		return nil
	}
	return append([]uint32{*p.quota}, p.members...)
}

// adoptRuleset reads the earlier run's rule set id and the PDRs a packet can reach through
// it: the PDR slots its rules name (SDF_LINEAR), or those of its bits that can match
// (SDF_BITS).
func (d *Datapath) adoptRuleset(a *adoptedSet, id uint32) error {
	if id > uint32(len(d.rulesets.free)) {
		return fmt.Errorf("the earlier run's rule set %d is out of range (%d; limits.max_rule_sets)", id, len(d.rulesets.free))
	}
	if err := d.objs.XupfRulesets.Lookup(id, &a.desc); err != nil {
		return fmt.Errorf("read the earlier run's rule set %d: %w", id, err)
	}
	a.tables = &setTables{id: id}
	var reached []uint32
	if a.desc.Method == xupfSdfMethodSDF_LINEAR {
		for _, r := range a.desc.Rules[:min(int(a.desc.Nrules), len(a.desc.Rules))] {
			reached = append(reached, r.Pdr)
		}
	} else {
		for v := a.desc.All; v != 0; v &= v - 1 {
			reached = append(reached, a.desc.Pdr[bits.TrailingZeros64(v)])
		}
	}
	seen := map[uint32]bool{}
	for _, slot := range reached {
		if seen[slot] {
			continue
		}
		seen[slot] = true
		var e xupfPdr
		var far xupfFar
		if err := d.objs.XupfPdrs.Lookup(slot, &e); err != nil {
			return fmt.Errorf("read the earlier run's PDR %d: %w", slot, err)
		}
		if err := d.objs.XupfFars.Lookup(e.Far, &far); err != nil {
			return fmt.Errorf("read the earlier run's FAR %d: %w", e.Far, err)
		}
		p, err := d.adoptPDR(e, far)
		if err != nil {
			return err
		}
		p.slot = slot
		a.pdrs = append(a.pdrs, p)
	}
	return nil
}

// adoptTables keeps the classification entries of the adopted rule sets (byID), recording
// them with their sets, and deletes all others: they name rule set ids this run hands out
// again, where stale entries would match beside the new ones.
func (d *Datapath) adoptTables(byID map[uint32]*adoptedSet) error {
	for _, a := range byID {
		a.vectors = sdfVectors{exact: map[xupfSdfExactKey]uint64{}, lpm: map[xupfSdfLpmKey]uint64{}}
	}
	err := keepEntries(d.objs.XupfSdfExact, func(k xupfSdfExactKey, vec uint64) bool {
		a := byID[k.Ruleset]
		if a != nil {
			a.tables.exact = append(a.tables.exact, k)
			k.Ruleset = 0
			a.vectors.exact[k] = vec
		}
		return a != nil
	})
	if err == nil {
		err = keepEntries(d.objs.XupfSdfLpm, func(k xupfSdfLpmKey, vec uint64) bool {
			a := byID[k.Ruleset]
			if a != nil {
				a.tables.lpm = append(a.tables.lpm, k)
				k.Ruleset = 0
				a.vectors.lpm[k] = vec
			}
			return a != nil
		})
	}
	if err != nil {
		return fmt.Errorf("the earlier run's classification entries: %w", err)
	}
	return nil
}

// keepEntries reads every entry of the hash map m, an earlier run's, and deletes those keep
// does not take.
func keepEntries[K, V any](m *ebpf.Map, keep func(K, V) bool) error {
	var k K
	var v V
	var stale []K
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !keep(k, v) {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read %s: %w", m, err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete from %s: %w", m, err)
		}
	}
	return nil
}

func ulKey(k uint32) rules.Key { return rules.Key{Uplink: true, TEID: be32(k)} }
func dlKey(k uint32) rules.Key { return rules.Key{UE: addrFromBE(k)} }

// pair returns the earlier run's PDRs that rs.PDRs[i] is the same as (nil where none): a
// key's one PDR in its ref stands for rs's one PDR; a classified key's PDRs stand for rs's
// when rs classifies exactly as the earlier rule set did, each PDR in the place of one of
// them, and otherwise (the rules restored differ from those pinned, as after a crash
// between an install and its save) those whose match is unchanged (pairByRules).
func (a *adoptedSet) pair(rs rules.RuleSet) []*adoptedPDR {
	if a.tables == nil {
		if len(rs.PDRs) != 1 {
			return nil
		}
		return a.pdrs
	}
	index := make([]uint32, len(rs.PDRs)) // placeholders: each PDR in the slot of its index
	for i := range index {
		index[i] = uint32(i)
	}
	c, err := compileTables(rs, index)
	if err != nil {
		return nil
	}
	bySlot := map[uint32]*adoptedPDR{}
	for _, p := range a.pdrs {
		bySlot[p.slot] = p
	}
	out := make([]*adoptedPDR, len(rs.PDRs))
	// pair says rs.PDRs[i] is in the earlier run's slot: one slot per PDR, one PDR per slot.
	pair := func(i, slot uint32) bool {
		p := bySlot[slot]
		if p == nil || (out[i] != nil && out[i] != p) {
			return false
		}
		for j, q := range out {
			if q == p && uint32(j) != i {
				return false
			}
		}
		out[i] = p
		return true
	}
	want := c.desc
	if want.Method == xupfSdfMethodSDF_LINEAR {
		for r := range want.Rules[:min(int(want.Nrules), len(want.Rules))] {
			if !pair(want.Rules[r].Pdr, a.desc.Rules[r].Pdr) {
				return a.pairByRules(c, len(rs.PDRs))
			}
			want.Rules[r].Pdr = a.desc.Rules[r].Pdr
		}
	} else {
		for v := want.All; v != 0; v &= v - 1 {
			b := bits.TrailingZeros64(v)
			if !pair(want.Pdr[b], a.desc.Pdr[b]) {
				return a.pairByRules(c, len(rs.PDRs))
			}
		}
		want.Pdr = a.desc.Pdr // the other bits never match an IPv4 packet
	}
	if want != a.desc || !sameEntries(c.exact, a.tables.exact, func(k xupfSdfExactKey) xupfSdfExactKey { k.Ruleset = 0; return k }) ||
		!sameEntries(c.lpm, a.tables.lpm, func(k xupfSdfLpmKey) xupfSdfLpmKey { k.Ruleset = 0; return k }) {
		return a.pairByRules(c, len(rs.PDRs))
	}
	return out
}

// pairByRules pairs the n PDRs of a rule set compiled to c (PDR i in slot i) that is not the
// earlier one with the earlier PDRs whose match is the same: the PDRs the change left alone,
// whose counters and quotas carry on; the rest are nil and start afresh. A match is a PDR's
// compare rules, PDR slot aside, when both sets have them (SDF_LINEAR), or what each of its
// bits accepts field by field when both are classified by tables (SDF_BITS, matchesOfBits);
// a set of each kind pairs nothing. A PDR whose match another PDR on either side has too is
// left unpaired: which one was which cannot be told.
func (a *adoptedSet) pairByRules(c *sdfTables, n int) []*adoptedPDR {
	var earlier, now map[uint32]string
	switch {
	case c.desc.Method != a.desc.Method:
		return nil
	case c.desc.Method == xupfSdfMethodSDF_LINEAR:
		earlier, now = rulesOfPDRs(a.desc), rulesOfPDRs(c.desc)
	default:
		earlier, now = matchesOfBits(a.desc, a.vectors), matchesOfBits(c.desc, sdfVectors{c.exact, c.lpm})
	}
	bySlot := map[uint32]*adoptedPDR{}
	for _, p := range a.pdrs {
		bySlot[p.slot] = p
	}
	unique := func(side map[uint32]string, match string) (slot uint32, ok bool) {
		for s, m := range side {
			if m == match {
				if ok {
					return 0, false
				}
				slot, ok = s, true
			}
		}
		return slot, ok
	}
	out := make([]*adoptedPDR, n)
	for i, m := range now {
		slot, ok := unique(earlier, m)
		if !ok || int(i) >= n {
			continue
		}
		if _, alone := unique(now, m); alone {
			out[i] = bySlot[slot]
		}
	}
	return out
}

// sdfVectors are a rule set's classification entries with their bit vectors, by key with
// the rule set id cleared.
type sdfVectors struct {
	exact map[xupfSdfExactKey]uint64
	lpm   map[xupfSdfLpmKey]uint64
}

// matchesOfBits describes, by PDR slot, what the bits of an SDF_BITS rule set that can
// match IPv4 accept, in bit order: for each field, "any", or the exact values (and whether
// a value not in the table matches) or the value ranges (and whether a packet without the
// value matches) its LBVS entries give the bit. The entries' boundaries depend on every
// rule of the set; what a bit accepts does not, so a PDR the change left alone is described
// the same before and after.
func matchesOfBits(desc xupfRuleset, v sdfVectors) map[uint32]string {
	parts := map[uint32]*prefixPartition{}
	for f := range sdfFields {
		if sdfFields[f].Kind == lbvs.PrefixMatch && desc.Fields&(1<<f) != 0 {
			parts[uint32(f)] = partitionPrefixes(uint32(f), v.lpm)
		}
	}
	var b strings.Builder
	out := map[uint32]string{}
	for all := desc.All; all != 0; all &= all - 1 {
		bit := bits.TrailingZeros64(all)
		b.Reset()
		for f := range sdfFields {
			fmt.Fprintf(&b, "%d:", f)
			switch {
			case desc.Fields&(1<<f) == 0:
				b.WriteString("any")
			case sdfFields[f].Kind == lbvs.ExactMatch:
				b.WriteString(exactAccepts(uint32(f), bit, desc.Wild[f], v.exact))
			default:
				b.WriteString(parts[uint32(f)].accepts(bit))
			}
			b.WriteByte(' ')
		}
		out[desc.Pdr[bit]] += b.String() + "| "
	}
	return out
}

// exactAccepts describes what bit accepts in exact-match field f: any value, or the values
// whose entry differs from wild (the vector of values not in the table) for it.
func exactAccepts(f uint32, bit int, wild uint64, exact map[xupfSdfExactKey]uint64) string {
	inWild := wild&(1<<bit) != 0
	var differ []uint32
	for k, vec := range exact {
		if k.Field == f && (vec&(1<<bit) != 0) != inWild {
			differ = append(differ, k.Value)
		}
	}
	if inWild && len(differ) == 0 {
		return "any"
	}
	slices.Sort(differ)
	return fmt.Sprint(inWild, differ)
}

// prefixPartition is a prefix-match field's entries as the LPM lookup sees them: the 32-bit
// value space cut where a prefix starts or ends, each piece with the vector of its longest
// prefix (0 where none covers it), and the vector of a packet without the value (the
// zero-length entry's).
type prefixPartition struct {
	starts []uint64
	vecs   []uint64
	none   uint64
}

// partitionPrefixes lays field f's entries of lpm out as a prefixPartition: each prefix,
// shortest first, paints the pieces it covers, so the longest one covering a piece wins.
func partitionPrefixes(f uint32, lpm map[xupfSdfLpmKey]uint64) *prefixPartition {
	type prefix struct {
		first, end uint64 // end: one past its last value
		len        uint32
		vec        uint64
	}
	var ps []prefix
	starts := []uint64{0}
	p := &prefixPartition{}
	for k, vec := range lpm {
		l := k.Prefixlen - sdfLPMKeyBits
		if k.Field != f || k.Prefixlen < sdfLPMKeyBits || l > 32 {
			continue
		}
		first := uint64(be32(k.Value)) &^ (1<<(32-l) - 1)
		ps = append(ps, prefix{first: first, end: first + 1<<(32-l), len: l, vec: vec})
		starts = append(starts, first, first+1<<(32-l))
		if l == 0 {
			p.none = vec
		}
	}
	slices.Sort(starts)
	p.starts = slices.DeleteFunc(slices.Compact(starts), func(x uint64) bool { return x > 1<<32-1 })
	p.vecs = make([]uint64, len(p.starts))
	slices.SortFunc(ps, func(a, b prefix) int { return int(a.len) - int(b.len) })
	for _, q := range ps {
		i, _ := slices.BinarySearch(p.starts, q.first)
		for ; i < len(p.starts) && p.starts[i] < q.end; i++ {
			p.vecs[i] = q.vec
		}
	}
	return p
}

// accepts describes what bit accepts: any value (and none), or the ranges of values whose
// longest prefix has the bit, merged, and whether a packet without the value matches.
func (p *prefixPartition) accepts(bit int) string {
	var ranges [][2]uint64 // first, last
	for i, x := range p.starts {
		if p.vecs[i]&(1<<bit) == 0 {
			continue
		}
		last := uint64(1<<32 - 1)
		if i+1 < len(p.starts) {
			last = p.starts[i+1] - 1
		}
		if n := len(ranges); n > 0 && ranges[n-1][1]+1 == x {
			ranges[n-1][1] = last
		} else {
			ranges = append(ranges, [2]uint64{x, last})
		}
	}
	none := p.none&(1<<bit) != 0
	if none && len(ranges) == 1 && ranges[0] == [2]uint64{0, 1<<32 - 1} {
		return "any"
	}
	return fmt.Sprint(none, ranges)
}

// sdfLPMKeyBits are the bits of an xupf_sdf_lpm key before the value (SDF_LPM_KEY_BITS).
const sdfLPMKeyBits = 64

// rulesOfPDRs describes the compare rules of an SDF_LINEAR rule set, by the PDR slot they
// name (cleared in them), in their order.
func rulesOfPDRs(desc xupfRuleset) map[uint32]string {
	out := map[uint32]string{}
	for _, r := range desc.Rules[:min(int(desc.Nrules), len(desc.Rules))] {
		slot := r.Pdr
		r.Pdr = 0
		out[slot] += fmt.Sprintf("%+v|", r)
	}
	return out
}

// adoptedPDRs are the earlier run's PDRs in the places of rs.PDRs as adoptedPrev paired them
// at the start of this install (nil: none). The caller holds d.mu.
func (d *Datapath) adoptedPDRs(rs rules.RuleSet) []*adoptedPDR {
	if a := d.adopted[rs.LookupKey()]; a != nil {
		return a.paired
	}
	return nil
}

// sameEntries says keys, with their rule set id cleared by anon, are those of want.
func sameEntries[K comparable](want map[K]uint64, keys []K, anon func(K) K) bool {
	if len(keys) != len(want) {
		return false
	}
	for _, k := range keys {
		if _, ok := want[anon(k)]; !ok {
			return false
		}
	}
	return true
}

// adoptedPrev returns, for the keys of sets that an earlier run left and this run has not
// installed, sets that stand for the earlier run's entries as the ones an install replaces:
// the ref is released once the new one is published, and the counters of each PDR that
// pair finds in the place of a new one go to it. It keeps the pairs for the rest of the
// install (adoptedPDRs). The caller holds d.mu.
func (d *Datapath) adoptedPrev(sets []rules.RuleSet) []*installedSet {
	var out []*installedSet
	for _, rs := range sets {
		a := d.adopted[rs.LookupKey()]
		if a == nil {
			continue
		}
		set := &installedSet{rs: rules.RuleSet{Uplink: rs.Uplink, TEID: rs.TEID, UE: rs.UE}, ref: a.ref,
			counters: map[uint32]pdrCounters{}, earlier: true}
		a.paired = a.pair(rs)
		for i, p := range a.paired {
			if p != nil {
				set.rs.PDRs = append(set.rs.PDRs, rules.PDR{ID: rs.PDRs[i].ID})
				set.counters[rs.PDRs[i].ID] = p.counters
			}
		}
		out = append(out, set)
	}
	return out
}

// notifiedBefore is rs, but with each DROP FAR with NOCP that the earlier run's PDR in its
// place (adoptedPDRs) has turned into a plain DROP kept so: the SMF had its report before
// the restart, and an install that armed it again would send a second. The caller holds d.mu.
func (d *Datapath) notifiedBefore(rs rules.RuleSet) rules.RuleSet {
	pdrs := rs.PDRs
	for i, p := range d.adoptedPDRs(rs) {
		if p != nil && p.notified && pdrs[i].FAR.Action == rules.DropNotify {
			if &pdrs[0] == &rs.PDRs[0] {
				pdrs = slices.Clone(pdrs) // the caller's stay as they are
			}
			pdrs[i].FAR.Action = rules.Drop
		}
	}
	rs.PDRs = pdrs
	return rs
}

// adoptedQuotaUsed is what the earlier run's entry of rs's key counted against the quota
// that e is written with for rs.PDRs[i].Quotas[j]: when the earlier PDR in its place
// (adoptedPDRs) had as many quotas (one inline, or a list of as many members, written in the
// PDR's quota order) and the one in place j has e's limits, it is the same grant of the same
// URR, whose count carries on, used up or not, so that a restart grants nothing anew.
// Otherwise nothing is used yet. The caller holds d.mu.
func (d *Datapath) adoptedQuotaUsed(rs rules.RuleSet, i, j int, e xupfQuota) [2]uint64 {
	pdrs := d.adoptedPDRs(rs)
	if pdrs == nil || pdrs[i] == nil || pdrs[i].quota == nil {
		return [2]uint64{}
	}
	p, n := pdrs[i], len(rs.PDRs[i].Quotas)
	var slot uint32
	switch {
	case !p.quotaList && n == 1:
		slot = *p.quota
	case p.quotaList && len(p.members) == n:
		slot = p.members[j]
	default:
		return [2]uint64{}
	}
	var old xupfQuota
	if err := d.objs.XupfQuotas.Lookup(slot, &old); err != nil || old.Limit != e.Limit {
		return [2]uint64{}
	}
	return old.Used
}

// adoptedDone forgets the earlier run's entries of the keys of sets, which an install has
// replaced; releaseSet has released the ref and those of their counters it held. The caller
// holds d.mu.
func (d *Datapath) adoptedDone(sets []*installedSet) {
	for _, set := range sets {
		k := set.rs.LookupKey()
		if a := d.adopted[k]; a != nil {
			d.forgetAdopted(k, a, counterSlots([]*installedSet{set}))
		}
	}
}

// pruneAdopted releases the slots of the earlier run's entries that no install took over
// (Prune has deleted their keys). The caller holds d.mu.
func (d *Datapath) pruneAdopted() {
	for k, a := range d.adopted {
		d.dropAdopted(d.refs, a.ref)
		d.forgetAdopted(k, a, nil)
	}
}

// forgetAdopted ends the adoption of key k, releasing its PDR slots, its counters but those
// in released, its meters and quotas, and retiring its classification entries (their rule
// set id is free after the grace, as any retired set's).
func (d *Datapath) forgetAdopted(k rules.Key, a *adoptedSet, released map[uint32]bool) {
	for _, p := range a.pdrs {
		for _, s := range p.counters.slots() {
			if !released[s] {
				d.dropAdopted(d.counters, s)
			}
		}
		d.dropAdopted(d.meterSlots, p.meters...)
		d.dropAdopted(d.quotaSlots, p.quotaSlots()...)
		if a.tables != nil {
			d.dropAdopted(d.rules, p.slot)
		}
	}
	if a.tables != nil {
		d.retireTables(a.tables)
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
