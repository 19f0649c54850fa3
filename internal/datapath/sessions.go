package datapath

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/session"
)

// installed is a session and the datapath state it occupies: its uplink and downlink rule
// sets.
type installed struct {
	s    session.Session
	sets []*installedSet
}

func be32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

func addrBE(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

// checkConflicts reports why s cannot be installed beside the other sessions; s.ID itself is
// ignored so that a modification may keep its own TEID and UE address.
func (d *Datapath) checkConflicts(s session.Session) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("session %d: %w", s.ID, err)
	}
	if !slices.Contains(d.opts.GTPUAddrs, s.GTPUAddr) {
		return fmt.Errorf("session %d: gtpu_address %s is not a local GTP-U address; use one of %v",
			s.ID, s.GTPUAddr, d.opts.GTPUAddrs)
	}
	if id, ok := d.byTEID[s.UplinkTEID]; ok && id != s.ID {
		return fmt.Errorf("session %d: uplink TEID 0x%x is used by session %d", s.ID, s.UplinkTEID, id)
	}
	if id, ok := d.byUE[s.UE]; ok && id != s.ID {
		return fmt.Errorf("session %d: UE address %s is used by session %d", s.ID, s.UE, id)
	}
	return nil
}

// AddSession installs a new session.
func (d *Datapath) AddSession(s session.Session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.sessions[s.ID]; ok {
		return fmt.Errorf("session %d already exists", s.ID)
	}
	if err := d.checkConflicts(s); err != nil {
		return err
	}
	if len(d.sessions) >= d.opts.MaxSessions {
		return fmt.Errorf("session %d: the session table is full (%d sessions); raise limits.max_sessions",
			s.ID, d.opts.MaxSessions)
	}
	in, err := d.install(s, nil)
	if err != nil {
		return err
	}
	d.sessions[s.ID] = in
	d.byTEID[s.UplinkTEID] = s.ID
	d.byUE[s.UE] = s.ID
	return nil
}

// ModifySession replaces a session's rules. The new rule sets are written beside the old
// ones (fresh PDR/FAR slots and classification tables) and published by replacing the TEID
// and UE entries, so a packet sees the old rules or the new ones, never a mix. Usage counts
// carry on for the PDRs that stay. A failed modification changes nothing.
func (d *Datapath) ModifySession(s session.Session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.sessions[s.ID]
	if !ok {
		return fmt.Errorf("session %d: %w", s.ID, ErrNotFound)
	}
	if err := d.checkConflicts(s); err != nil {
		return err
	}
	in, err := d.install(s, old)
	if err != nil {
		return err
	}
	if old.s.UplinkTEID != s.UplinkTEID {
		d.deleteKey(d.objs.XupfUlRules, be32(old.s.UplinkTEID))
		delete(d.byTEID, old.s.UplinkTEID)
	}
	if old.s.UE != s.UE {
		d.deleteKey(d.objs.XupfDlRules, addrBE(old.s.UE))
		delete(d.byUE, old.s.UE)
	}
	for i, set := range old.sets {
		d.releaseSet(set, in.sets[i].counterSlots())
	}
	d.sessions[s.ID] = in
	d.byTEID[s.UplinkTEID] = s.ID
	d.byUE[s.UE] = s.ID
	return nil
}

// install writes s's rule sets and publishes them; prev is the session being replaced, nil
// for a new one. On error what the packets see is as before and nothing is leaked.
func (d *Datapath) install(s session.Session, prev *installed) (*installed, error) {
	sets, err := s.RuleSets()
	if err != nil {
		return nil, fmt.Errorf("session %d: %w", s.ID, err)
	}
	in := &installed{s: s}
	undo := func() {
		for i, set := range in.sets {
			keep := map[uint32]bool{}
			if prev != nil {
				keep = prev.sets[i].counterSlots()
			}
			d.releaseSet(set, keep)
		}
	}
	for i, rs := range sets {
		var prevSet *installedSet
		if prev != nil {
			prevSet = prev.sets[i]
		}
		set, err := d.writeSet(rs, prevSet)
		if err != nil {
			undo()
			return nil, fmt.Errorf("session %d: %s: %w", s.ID, rs.Key(), err)
		}
		in.sets = append(in.sets, set)
	}
	for i, set := range in.sets {
		if err := d.publish(set); err != nil {
			for _, done := range in.sets[:i] { // put back what this call replaced
				d.unpublish(done, prev)
			}
			undo()
			return nil, fmt.Errorf("session %d: publish %s: %w", s.ID, set.rs.Key(), err)
		}
	}
	return in, nil
}

// unpublish takes back the entry publish wrote for set: it points again at prev's rule set of
// the same key when there is one, and is removed otherwise.
func (d *Datapath) unpublish(set *installedSet, prev *installed) {
	if prev != nil {
		for _, p := range prev.sets {
			if p.sameKey(set) {
				if err := d.publish(p); err != nil {
					d.log.Error("restore rule set after a failed modification", "key", p.rs.Key(), "err", err)
				}
				return
			}
		}
	}
	d.deleteSetKey(set)
}

// DeleteSession removes a session and returns what it had counted.
func (d *Datapath) DeleteSession(id uint64) (session.Usage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.sessions[id]
	if !ok {
		return session.Usage{}, fmt.Errorf("session %d: %w", id, ErrNotFound)
	}
	for _, set := range in.sets {
		d.deleteSetKey(set)
	}
	usage, err := d.usage(in)
	for _, set := range in.sets {
		d.releaseSet(set, nil)
	}
	delete(d.sessions, id)
	delete(d.byTEID, in.s.UplinkTEID)
	delete(d.byUE, in.s.UE)
	return usage, err
}

// Session returns one session and its usage.
func (d *Datapath) Session(id uint64) (session.Session, session.Usage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.sessions[id]
	if !ok {
		return session.Session{}, session.Usage{}, fmt.Errorf("session %d: %w", id, ErrNotFound)
	}
	u, err := d.usage(in)
	return in.s, u, err
}

// Sessions returns every session, sorted by id.
func (d *Datapath) Sessions() []session.Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]session.Session, 0, len(d.sessions))
	for _, in := range d.sessions {
		out = append(out, in.s)
	}
	slices.SortFunc(out, func(a, b session.Session) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (d *Datapath) deleteKey(m *ebpf.Map, key uint32) {
	if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		d.log.Warn("delete rule entry", "map", m.String(), "key", key, "err", err)
	}
}

// allocCounter takes a counter slot and zeroes it on every CPU, so a new session starts from
// nothing whatever the slot counted before.
func (d *Datapath) allocCounter() (uint32, error) {
	slot, err := d.counters.alloc()
	if err != nil {
		return 0, fmt.Errorf("usage table full (limits.max_sessions): %w", err)
	}
	zero := make([]xupfCounters, possibleCPUs())
	if err := d.objs.XupfUsage.Put(slot, zero); err != nil {
		d.counters.release(slot)
		return 0, fmt.Errorf("reset usage counters: %w", err)
	}
	return slot, nil
}

// usage sums the counters of every PDR, per direction.
func (d *Datapath) usage(in *installed) (session.Usage, error) {
	var u session.Usage
	for _, set := range in.sets {
		dir := &u.Downlink
		if set.rs.Uplink {
			dir = &u.Uplink
		}
		for _, slot := range set.counters {
			c, err := d.readCounter(slot)
			if err != nil {
				return session.Usage{}, err
			}
			dir.Packets += c.Packets
			dir.Bytes += c.Bytes
		}
	}
	return u, nil
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
	var errs []error
	var ul xupfUlKey
	var ref xupfRuleRef
	var staleUL []xupfUlKey
	it := d.objs.XupfUlRules.Iterate()
	for it.Next(&ul, &ref) {
		if _, ok := d.byTEID[be32(ul.Teid)]; !ok {
			staleUL = append(staleUL, ul)
		}
	}
	errs = append(errs, it.Err())
	for _, k := range staleUL {
		d.deleteKey(d.objs.XupfUlRules, k.Teid)
	}

	var dl xupfDlKey
	var staleDL []xupfDlKey
	it = d.objs.XupfDlRules.Iterate()
	for it.Next(&dl, &ref) {
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], dl.UeAddr)
		if _, ok := d.byUE[netip.AddrFrom4(b)]; !ok {
			staleDL = append(staleDL, dl)
		}
	}
	errs = append(errs, it.Err())
	for _, k := range staleDL {
		d.deleteKey(d.objs.XupfDlRules, k.UeAddr)
	}
	if n := len(staleUL) + len(staleDL); n > 0 {
		d.log.Info("pruned rule entries left by an earlier run", "uplink", len(staleUL), "downlink", len(staleDL))
	}
	return errors.Join(append(errs, d.pruneTxPorts())...)
}
