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

// installed is a session and the datapath slots it occupies.
type installed struct {
	s                    session.Session
	ulRule, dlRule       uint32 // PDR slot, and FAR slot of the same index
	ulCounter, dlCounter uint32 // usage counter slots; stable for the life of the session
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
	in := &installed{s: s}
	var err error
	if in.ulCounter, err = d.allocCounter(); err != nil {
		return err
	}
	if in.dlCounter, err = d.allocCounter(); err != nil {
		d.counters.release(in.ulCounter)
		return err
	}
	if err := d.writeRules(in, nil); err != nil {
		d.counters.release(in.ulCounter)
		d.counters.release(in.dlCounter)
		return err
	}
	d.sessions[s.ID] = in
	d.byTEID[s.UplinkTEID] = s.ID
	d.byUE[s.UE] = s.ID
	return nil
}

// ModifySession replaces a session's rules. The new rules are written to fresh slots and
// published by replacing the TEID and UE entries, so a packet sees the old rules or the new
// ones, never a mix; usage counts carry on.
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
	in := &installed{s: s, ulCounter: old.ulCounter, dlCounter: old.dlCounter}
	if err := d.writeRules(in, old); err != nil {
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
	d.rules.release(old.ulRule)
	d.rules.release(old.dlRule)
	d.sessions[s.ID] = in
	d.byTEID[s.UplinkTEID] = s.ID
	d.byUE[s.UE] = s.ID
	return nil
}

// DeleteSession removes a session and returns what it had counted.
func (d *Datapath) DeleteSession(id uint64) (session.Usage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.sessions[id]
	if !ok {
		return session.Usage{}, fmt.Errorf("session %d: %w", id, ErrNotFound)
	}
	d.deleteKey(d.objs.XupfUlRules, be32(in.s.UplinkTEID))
	d.deleteKey(d.objs.XupfDlRules, addrBE(in.s.UE))
	usage, err := d.usage(in)
	d.rules.release(in.ulRule)
	d.rules.release(in.dlRule)
	d.counters.release(in.ulCounter)
	d.counters.release(in.dlCounter)
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

// writeRules writes in's PDR and FAR slots (allocating them) and then points the TEID and UE
// entries at them. prev is the session being replaced, nil for a new one. On error what the
// packets see is as before.
func (d *Datapath) writeRules(in, prev *installed) error {
	var err error
	if in.ulRule, err = d.rules.alloc(); err != nil {
		return fmt.Errorf("session %d: rule table full (limits.max_sessions): %w", in.s.ID, err)
	}
	if in.dlRule, err = d.rules.alloc(); err != nil {
		d.rules.release(in.ulRule)
		return fmt.Errorf("session %d: rule table full (limits.max_sessions): %w", in.s.ID, err)
	}
	s := in.s
	ulFAR := xupfFar{Action: uint32(xupfFarActionFAR_FORWARD)}
	dlFAR := xupfFar{
		Action:    uint32(xupfFarActionFAR_ENCAP),
		Teid:      be32(s.DownlinkTEID),
		PeerAddr:  addrBE(s.GNB),
		LocalAddr: addrBE(s.GTPUAddr),
	}
	ulPDR := xupfPdr{Far: in.ulRule, Counter: in.ulCounter, Qfi: s.QFI}
	dlPDR := xupfPdr{Far: in.dlRule, Counter: in.dlCounter, Qfi: s.QFI}
	err = errors.Join(
		d.objs.XupfFars.Put(in.ulRule, ulFAR),
		d.objs.XupfFars.Put(in.dlRule, dlFAR),
		d.objs.XupfPdrs.Put(in.ulRule, ulPDR),
		d.objs.XupfPdrs.Put(in.dlRule, dlPDR),
	)
	if err == nil {
		err = d.objs.XupfUlRules.Put(xupfUlKey{Teid: be32(s.UplinkTEID)}, xupfRuleRef{Pdr: in.ulRule})
	}
	if err == nil {
		err = d.objs.XupfDlRules.Put(xupfDlKey{UeAddr: addrBE(s.UE)}, xupfRuleRef{Pdr: in.dlRule})
		if err != nil {
			d.undoUplinkKey(s.UplinkTEID, prev)
		}
	}
	if err != nil {
		d.rules.release(in.ulRule)
		d.rules.release(in.dlRule)
		return fmt.Errorf("session %d: write rules: %w", s.ID, err)
	}
	return nil
}

// undoUplinkKey takes back the uplink entry writeRules wrote for teid: it points again at
// prev's rule when prev used the same TEID, and is removed otherwise.
func (d *Datapath) undoUplinkKey(teid uint32, prev *installed) {
	if prev != nil && prev.s.UplinkTEID == teid {
		if err := d.objs.XupfUlRules.Put(xupfUlKey{Teid: be32(teid)}, xupfRuleRef{Pdr: prev.ulRule}); err != nil {
			d.log.Error("restore uplink rule after a failed modification", "session", prev.s.ID, "err", err)
		}
		return
	}
	d.deleteKey(d.objs.XupfUlRules, be32(teid))
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

func (d *Datapath) usage(in *installed) (session.Usage, error) {
	ul, err := d.readCounter(in.ulCounter)
	if err != nil {
		return session.Usage{}, err
	}
	dl, err := d.readCounter(in.dlCounter)
	return session.Usage{Uplink: ul, Downlink: dl}, err
}

func (d *Datapath) readCounter(slot uint32) (session.Counters, error) {
	var perCPU []xupfCounters
	if err := d.objs.XupfUsage.Lookup(slot, &perCPU); err != nil {
		return session.Counters{}, fmt.Errorf("read usage counters: %w", err)
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
