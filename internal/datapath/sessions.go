package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/session"
)

func be32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

func addrBE(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// addrFromBE is addrBE's inverse.
func addrFromBE(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// Install makes sets the rules of owner (a static session's id or a PFCP session's SEID),
// replacing whatever it had. The new rule sets are written beside the old ones (fresh PDR/FAR
// slots and classification tables) and published by replacing the TEID and UE entries, so a
// packet sees the old rules or the new ones, never a mix; keys the owner no longer uses are
// removed. Usage counts carry on for the PDRs that keep their id and direction, even when
// their TEID or UE address changes. It is
// all or nothing: on error the owner's rules are as before and nothing is leaked.
func (d *Datapath) Install(owner uint64, sets []rules.RuleSet) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.install(owner, sets)
}

func (d *Datapath) install(owner uint64, sets []rules.RuleSet) error {
	prev, exists := d.owners[owner]
	adopted := d.adoptedPrev(sets)
	prev = append(slices.Clip(prev), adopted...)
	if !exists && len(d.owners) >= d.opts.MaxSessions {
		return fmt.Errorf("session %d: the session table is full (%d sessions); raise limits.max_sessions",
			owner, d.opts.MaxSessions)
	}
	seen := map[rules.Key]bool{}
	for _, rs := range sets {
		k := rs.LookupKey()
		if seen[k] {
			return fmt.Errorf("session %d: %s has two rule sets; merge their PDRs", owner, rs.Key())
		}
		seen[k] = true
		if o, ok := d.keys[k]; ok && o != owner {
			return fmt.Errorf("session %d: %s is used by session %d", owner, rs.Key(), o)
		}
	}
	meters, newMeters, err := d.assignMeters(owner, sets)
	if err != nil {
		return fmt.Errorf("session %d: %w", owner, err)
	}
	quotas, newQuotas, err := d.assignQuotas(owner, sets)
	if err != nil {
		d.releaseMeters(newMeters)
		return fmt.Errorf("session %d: %w", owner, err)
	}
	var written []*installedSet
	undo := func() {
		keep := counterSlots(prev)
		for _, set := range written {
			d.releaseSet(set, keep)
		}
		d.releaseMeters(newMeters)
		d.releaseQuotas(newQuotas)
	}
	for _, rs := range sets {
		set, err := d.writeSet(d.notifiedBefore(rs), countersOf(prev, rs.Uplink), meters, quotas, d.drainingPDRs(prev, rs.Uplink))
		if err != nil {
			undo()
			return fmt.Errorf("session %d: %s: %w", owner, rs.Key(), err)
		}
		written = append(written, set)
	}
	for i, set := range written {
		if err := d.publish(set); err != nil {
			for _, done := range written[:i] { // put back what this call replaced
				d.unpublish(done, sameKey(prev, done.rs))
			}
			undo()
			return fmt.Errorf("session %d: publish %s: %w", owner, set.rs.Key(), err)
		}
	}
	keep := counterSlots(written)
	for _, p := range prev {
		if sameKey(written, p.rs) == nil {
			d.deleteSetKey(p)
			delete(d.keys, p.rs.LookupKey())
		}
		d.releaseSet(p, keep)
	}
	for _, set := range written {
		d.keys[set.rs.LookupKey()] = owner
	}
	d.trackCounters(owner, prev, written)
	d.adoptedDone(adopted)
	d.owners[owner] = written
	replaceOwned(d.meters, owner, meters, d.meterSlots)
	replaceOwned(d.quotas, owner, quotas, d.quotaSlots)
	return nil
}

// slotHolder is what an owner holds a slot of: a meter or a quota.
type slotHolder interface{ slotIndex() uint32 }

// replaceOwned records what an owner holds now (held, in all: by owner) and frees the slots
// of what it held before and no longer does.
func replaceOwned[K comparable, V slotHolder](all map[uint64]map[K]V, owner uint64, held map[K]V, free *slots) {
	inUse := map[uint32]bool{}
	for _, h := range held {
		inUse[h.slotIndex()] = true
	}
	for _, h := range all[owner] {
		if !inUse[h.slotIndex()] {
			free.release(h.slotIndex())
		}
	}
	if len(held) == 0 {
		delete(all, owner)
		return
	}
	all[owner] = held
}

// sameKey returns the set of sets with rs's key, or nil.
func sameKey(sets []*installedSet, rs rules.RuleSet) *installedSet {
	k := rs.LookupKey()
	for _, s := range sets {
		if s.rs.LookupKey() == k {
			return s
		}
	}
	return nil
}

// unpublish takes back the entry publish wrote for set: it points again at prev (the set of
// the same key being replaced) when there is one, and is removed otherwise.
func (d *Datapath) unpublish(set, prev *installedSet) {
	if prev == nil {
		d.deleteSetKey(set)
		return
	}
	if err := d.publish(prev); err != nil {
		d.log.Error("restore rule set after a failed modification", "key", prev.rs.Key(), "err", err)
	}
}

// Uninstall removes everything owner has installed and returns what its PDRs had counted.
func (d *Datapath) Uninstall(owner uint64) ([]rules.Usage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.uninstall(owner)
}

func (d *Datapath) uninstall(owner uint64) ([]rules.Usage, error) {
	sets, ok := d.owners[owner]
	if !ok {
		return nil, fmt.Errorf("session %d: %w", owner, ErrNotFound)
	}
	for _, set := range sets {
		d.deleteSetKey(set)
	}
	usage, err := d.usage(sets)
	for _, set := range sets {
		d.releaseSet(set, nil)
		delete(d.keys, set.rs.LookupKey())
	}
	d.trackCounters(owner, sets, nil)
	delete(d.owners, owner)
	replaceOwned(d.meters, owner, nil, d.meterSlots)
	replaceOwned(d.quotas, owner, nil, d.quotaSlots)
	return usage, err
}

// Usage returns what owner's PDRs have counted, one entry per PDR of each rule set.
func (d *Datapath) Usage(owner uint64) ([]rules.Usage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sets, ok := d.owners[owner]
	if !ok {
		return nil, fmt.Errorf("session %d: %w", owner, ErrNotFound)
	}
	return d.usage(sets)
}

// KeyOwner returns the owner of a TEID or UE address, if it is in use.
func (d *Datapath) KeyOwner(k rules.Key) (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.keys[k]
	return o, ok
}

func (d *Datapath) deleteKey(m *ebpf.Map, key uint32) {
	if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		d.log.Warn("delete rule entry", "map", m.String(), "key", key, "err", err)
	}
}

// allocCounter takes a counter slot and zeroes it on every CPU, so a new session starts from
// nothing whatever the slot counted before. A slot known to hold zero already (zeroSlots)
// is not written: at thousands of establishments a second, these are three of a session's
// map calls per counter.
func (d *Datapath) allocCounter() (uint32, error) {
	slot, err := d.counters.alloc()
	if err != nil {
		return 0, fmt.Errorf("usage table full (limits.max_sessions): %w", err)
	}
	if d.zeroCounters.take(slot) {
		return slot, nil
	}
	zero := make([]xupfCounters, possibleCPUs())
	for _, m := range []*ebpf.Map{d.objs.XupfUsage, d.objs.XupfBufferFull} {
		if err := m.Put(slot, zero); err != nil {
			d.counters.release(slot)
			return 0, fmt.Errorf("reset usage counters: %w", err)
		}
	}
	if err := d.resetHeld(slot); err != nil {
		d.counters.release(slot)
		return 0, fmt.Errorf("reset buffered packet counts: %w", err)
	}
	return slot, nil
}

// zeroSlots records the counter slots known to hold zero in xupf_usage, xupf_buffer_in and
// xupf_buffer_out: in maps this run created (the kernel makes arrays zeroed), every slot
// until it is first handed out. As slots hands out every slot never used before it reuses a
// released one, a fresh start's first establishments write no counters at all.
type zeroSlots []uint64

// newZeroSlots records every one of n slots as zero when fresh, none otherwise (the maps
// are an earlier run's, whose free slots may hold what it counted).
func newZeroSlots(n uint32, fresh bool) zeroSlots {
	if !fresh {
		return nil
	}
	z := make(zeroSlots, (n+63)/64)
	for i := range z {
		z[i] = ^uint64(0)
	}
	return z
}

// take reports whether slot holds zero and forgets it: once handed out it counts.
func (z zeroSlots) take(slot uint32) bool {
	w, bit := slot/64, uint64(1)<<(slot%64)
	if int(w) >= len(z) || z[w]&bit == 0 {
		return false
	}
	z[w] &^= bit
	return true
}

// pdrCounters gives PDR p the counters it needs: those of prev, the PDR it replaces (when
// found), or fresh ones. On error it has released what it took.
func (d *Datapath) pdrCounters(p rules.PDR, prev pdrCounters, found bool) (pdrCounters, error) {
	c := prev
	var fresh []uint32
	take := func() (uint32, error) {
		slot, err := d.allocCounter()
		if err != nil {
			for _, s := range fresh {
				d.counters.release(s)
			}
			return 0, err
		}
		fresh = append(fresh, slot)
		return slot, nil
	}
	if !found {
		slot, err := take()
		if err != nil {
			return pdrCounters{}, err
		}
		c = pdrCounters{after: slot}
	}
	switch {
	case !p.BeforeQoS:
		c.before, c.hasBefore = 0, false
	case !c.hasBefore:
		slot, err := take()
		if err != nil {
			return pdrCounters{}, err
		}
		c.before, c.hasBefore = slot, true
	}
	return c, nil
}

// usage reads the counters of every PDR of sets.
func (d *Datapath) usage(sets []*installedSet) ([]rules.Usage, error) {
	var out []rules.Usage
	for _, set := range sets {
		for _, p := range set.rs.PDRs {
			pc := set.counters[p.ID]
			c, err := d.readCounter(pc.after)
			if err != nil {
				return nil, err
			}
			full, err := lookupCounters(d.objs.XupfBufferFull, pc.after)
			if err != nil {
				return nil, fmt.Errorf("read buffer_full counters: %w", err)
			}
			u := rules.Usage{Uplink: set.rs.Uplink, PDR: p.ID, Packets: c.Packets, Bytes: c.Bytes,
				BufferFull: rules.Counts{Packets: full.Packets, Bytes: full.Bytes}}
			if pc.hasBefore {
				b, err := d.readCounter(pc.before)
				if err != nil {
					return nil, err
				}
				u.BeforeQoS = rules.Counts{Packets: b.Packets, Bytes: b.Bytes}
			}
			out = append(out, u)
		}
	}
	return out, nil
}

func (d *Datapath) readCounter(slot uint32) (session.Counters, error) {
	c, err := lookupCounters(d.objs.XupfUsage, slot)
	if err != nil {
		return c, fmt.Errorf("read usage counters: %w", err)
	}
	return c, nil
}

// lookupCounters reads the per-CPU struct counters of key in m and sums the CPUs.
func lookupCounters(m *ebpf.Map, key uint32) (session.Counters, error) {
	var perCPU []xupfCounters
	if err := m.Lookup(key, &perCPU); err != nil {
		return session.Counters{}, err
	}
	var c session.Counters
	for _, v := range perCPU {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
	}
	return c, nil
}

func possibleCPUs() int {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return runtime.NumCPU()
	}
	return n
}

// Prune removes the TEID and UE entries that no installed session owns. After a restart the
// pinned tables still hold the previous run's entries; the daemon re-installs its sessions
// (traffic keeps flowing meanwhile) and then prunes what is left over.
func (d *Datapath) Prune() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	nUL := d.pruneKeys(d.ulKeys, ulKey)
	nDL := d.pruneKeys(d.dlKeys, dlKey)
	if nUL+nDL > 0 {
		d.log.Info("pruned rule entries left by an earlier run", "uplink", nUL, "downlink", nDL)
	}
	d.pruneAdopted()
	// A pinned link of an interface this run did not attach to keeps the earlier program,
	// whose classifier buffer and slots are this run's from now on.
	d.earlierTakenOver("", true)
	return d.pruneTxPorts()
}

// pruneKeys deletes the keys of t that no installed session owns (key names a table key as
// the rules know it) and returns how many.
func (d *Datapath) pruneKeys(t *keyTable, key func(uint32) rules.Key) int {
	var stale []uint32
	for k := range t.All() {
		if _, ok := d.keys[key(k)]; !ok {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		t.Delete(k)
	}
	return len(stale)
}
