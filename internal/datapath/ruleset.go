package datapath

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/xupf/xupf/internal/keytable"
	"github.com/xupf/xupf/internal/lbvs"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

// installedSet is a rule set written to the datapath: one PDR/FAR slot per PDR, a usage
// counter per PDR id, and classification tables when the set needs them.
type installedSet struct {
	rs       rules.RuleSet
	ref      uint32                 // its xupf_refs slot, what its key points at once published
	value    xupfRuleRef            // what it wrote there, which the direct cache copies
	slots    []uint32               // PDR/FAR slot of rs.PDRs[i], when classified (tables != nil)
	counters map[uint32]pdrCounters // PDR id -> its usage counter slots
	tables   *setTables             // nil: one PDR without filters, no classification step
	draining map[uint32]bool        // PDR ids whose FAR was written FAR_DRAIN
	// quotaLists are the quota slots holding the quota lists of its PDRs with several quotas.
	quotaLists []uint32
	peers      []netip.Addr // the tunnel peers its FARs pinned (routeTable.pin), once each per FAR
	// earlier: it stands for an earlier run's entry (adoptedPrev), whose rule_ref this run
	// never wrote: value is not what ref holds, so the direct cache must not copy it.
	earlier bool
}

// pdrCounters are a PDR's usage counter slots: after QoS, and before it when the PDR asks
// (rules.PDR.BeforeQoS).
type pdrCounters struct {
	after, before uint32
	hasBefore     bool
}

// slots are the counter slots c holds.
func (c pdrCounters) slots() []uint32 {
	if c.hasBefore {
		return []uint32{c.after, c.before}
	}
	return []uint32{c.after}
}

// setTables is what writeTables wrote for one rule set, to be deleted with it.
type setTables struct {
	id    uint32
	exact []xupfSdfExactKey
	lpm   []xupfSdfLpmKey
}

// counterSlots are the usage counter slots of sets.
func counterSlots(sets []*installedSet) map[uint32]bool {
	out := map[uint32]bool{}
	for _, s := range sets {
		for _, c := range s.counters {
			for _, slot := range c.slots() {
				out[slot] = true
			}
		}
	}
	return out
}

// countersOf returns the counter slots of the PDRs of sets in one direction, by PDR id: the
// counters a replacement carries on (a PDR id names one PDR per direction of a session, even
// when its TEID or UE address changes).
func countersOf(sets []*installedSet, uplink bool) map[uint32]pdrCounters {
	out := map[uint32]pdrCounters{}
	for _, s := range sets {
		if s.rs.Uplink == uplink {
			for id, c := range s.counters {
				out[id] = c
			}
		}
	}
	return out
}

// writeSet writes rs's FARs, PDRs and classification tables without publishing them. The
// PDRs whose ids are in prev (counter slots of the rules being replaced) keep those counters;
// meters are the owner's QER meters (assignMeters); a forwarding FAR of a PDR in drain is
// written FAR_DRAIN (buffer.go).
func (d *Datapath) writeSet(rs rules.RuleSet, prev map[uint32]pdrCounters, meters map[meterKey]ownedMeter,
	quotas map[uint32]ownedQuota, drain map[uint32]bool) (_ *installedSet, err error) {
	if err := checkKey(rs); err != nil {
		return nil, err
	}
	ref, err := d.refs.alloc()
	if err != nil {
		return nil, fmt.Errorf("rule reference table full (limits.max_sessions): %w (%w)", err, rules.ErrNoResources)
	}
	set := &installedSet{rs: rs, ref: ref, counters: map[uint32]pdrCounters{},
		draining: map[uint32]bool{}}
	keep := map[uint32]bool{}
	for _, c := range prev {
		for _, slot := range c.slots() {
			keep[slot] = true
		}
	}
	defer func() {
		if err != nil {
			d.releaseSet(set, keep)
		}
	}()
	if len(rs.PDRs) == 0 {
		return nil, errors.New("no PDRs")
	}
	if rs.Source.IsValid() && (!rs.Uplink || !rs.Source.Is4() || rs.Source.IsUnspecified()) {
		return nil, fmt.Errorf("source %s: only an uplink rule set has one, and it must be an IPv4 address", rs.Source)
	}
	classified := len(rs.PDRs) > 1 || !matchesAll(rs.PDRs[0].Filters)
	var value xupfRuleRef // what the key leads to
	for _, p := range rs.PDRs {
		if _, dup := set.counters[p.ID]; dup {
			return nil, fmt.Errorf("PDR id %d appears twice", p.ID)
		}
		pc, found := prev[p.ID]
		counters, err := d.pdrCounters(p, pc, found)
		if err != nil {
			return nil, err
		}
		set.counters[p.ID] = counters
		far, err := farEntry(p.FAR)
		if err != nil {
			return nil, fmt.Errorf("PDR %d: %w", p.ID, err)
		}
		if far.Flags&uint8(xupfFarFlagFAR_F_OHC) != 0 {
			// The tunnel's packets read their peer's next hop from its pin.
			if far.NhPin = d.routes.pin(p.FAR.OHC.Peer); far.NhPin != 0 {
				set.peers = append(set.peers, p.FAR.OHC.Peer)
			}
		}
		if rs.Uplink && far.Action == uint32(xupfFarActionFAR_FORWARD) {
			far.Flags |= d.opts.FlowCache.n6Override(p.FAR.NetworkInstance)
		}
		if far.Action == uint32(xupfFarActionFAR_FORWARD) && drain[p.ID] {
			far.Action = uint32(xupfFarActionFAR_DRAIN)
			set.draining[p.ID] = true
		}
		entry := xupfPdr{Counter: counters.after, Qfi: p.QFI}
		if err := pdrQoS(&entry, p, rs.Uplink, meters); err != nil {
			return nil, fmt.Errorf("PDR %d: %w", p.ID, err)
		}
		if counters.hasBefore {
			entry.Usage |= uint8(xupfPdrUsagePDR_U_BEFORE_QOS)
			entry.CounterBeforeQos = counters.before
		}
		listSlot, list, err := d.pdrQuotas(&entry, p.Quotas, quotas)
		if err != nil {
			return nil, fmt.Errorf("PDR %d: %w", p.ID, err)
		}
		if list {
			set.quotaLists = append(set.quotaLists, listSlot)
		}
		if !classified {
			// The key's one PDR and FAR go into its rule_ref: no PDR or FAR slot.
			value.Pdr, value.Far = entry, far
			continue
		}
		slot, err := d.rules.alloc()
		if err != nil {
			return nil, fmt.Errorf("rule table full (limits.max_sessions): %w", err)
		}
		set.slots = append(set.slots, slot)
		entry.Far = slot
		if err := d.objs.XupfFars.Put(slot, &far); err != nil {
			return nil, fmt.Errorf("write FAR: %w", err)
		}
		if err := d.objs.XupfPdrs.Put(slot, &entry); err != nil {
			return nil, fmt.Errorf("write PDR: %w", err)
		}
	}
	if classified {
		if set.tables, err = d.writeTables(set); err != nil {
			return nil, err
		}
		value.Ruleset = set.tables.id
	}
	if rs.Source.IsValid() {
		value.UeAddr = addrBE(rs.Source)
	}
	// By pointer: cilium/ebpf then hands the struct's own memory to the kernel (it has no
	// padding), where a value goes through encoding/binary's reflection, 4 % of xupfd's CPU
	// while SMFs establish sessions.
	if err := d.objs.XupfRefs.Put(set.ref, &value); err != nil {
		return nil, fmt.Errorf("write rule reference: %w", err)
	}
	set.value = value
	return set, nil
}

// checkKey refuses a key the key tables cannot hold: 0 marks their free slots (TEID 0 is
// GTP-U signalling, the UE address 0.0.0.0 no UE's).
func checkKey(rs rules.RuleSet) error {
	switch {
	case rs.Uplink && rs.TEID == 0:
		return errors.New("TEID 0 is reserved for GTP-U signalling")
	case !rs.Uplink && (!rs.UE.Is4() || rs.UE.IsUnspecified()):
		return fmt.Errorf("UE address %s: the datapath needs an IPv4 address other than 0.0.0.0", rs.UE)
	}
	return nil
}

// matchesAll reports whether filters select every packet: none, or one that matches all. A
// key whose one PDR has such filters needs no classification step (and no rule set id).
func matchesAll(filters []sdf.Filter) bool {
	return len(filters) == 0 || slices.ContainsFunc(filters, sdf.Filter.MatchesAll)
}

// farEntry is f as the datapath's struct far. A forwarding FAR's tunnel needs IPv4 ends: the
// datapath builds IPv4 outer headers only. Drop and Buffer FARs leave the tunnel out (the
// datapath reads it only when forwarding), so one kept across a switch to BUFF is not checked.
// AccessNoTunnel and DropNotify have no tunnel to check.
func farEntry(f rules.FAR) (xupfFar, error) {
	switch f.Action {
	case rules.Drop:
		return xupfFar{Action: uint32(xupfFarActionFAR_DROP)}, nil
	case rules.Buffer:
		return xupfFar{Action: uint32(xupfFarActionFAR_BUFFER)}, nil
	case rules.AccessNoTunnel:
		return xupfFar{Action: uint32(xupfFarActionFAR_ACCESS_NO_TUNNEL)}, nil
	case rules.DropNotify:
		return xupfFar{Action: uint32(xupfFarActionFAR_DROP_NOTIFY)}, nil
	case rules.Forward: // below
	default:
		return xupfFar{}, fmt.Errorf("FAR action %d unknown", f.Action)
	}
	e := xupfFar{Action: uint32(xupfFarActionFAR_FORWARD)}
	if o := f.OHC; o != nil {
		for _, a := range []struct {
			name string
			addr netip.Addr
		}{{"peer", o.Peer}, {"local", o.Local}} {
			if !a.addr.Is4() || a.addr.IsUnspecified() {
				return xupfFar{}, fmt.Errorf("outer header creation needs an IPv4 %s address, got %s", a.name, a.addr)
			}
		}
		e.Flags |= uint8(xupfFarFlagFAR_F_OHC)
		e.Teid, e.PeerAddr, e.LocalAddr = be32(o.TEID), addrBE(o.Peer), addrBE(o.Local)
	}
	if f.HasTOS {
		e.Flags |= uint8(xupfFarFlagFAR_F_TLM)
		e.Tos = f.TOS
	}
	return e, nil
}

// publish points the set's key at it: the moment packets start using it. A key already
// there is repointed with one atomic store, so packets meet the old rules or the new.
func (d *Datapath) publish(set *installedSet) error {
	t, key := d.keyTableOf(set)
	if err := t.Put(key, set.ref); errors.Is(err, keytable.ErrFull) {
		return fmt.Errorf("%w; limits.max_sessions sizes the table (%w)", err, rules.ErrNoResources)
	} else if err != nil {
		return err
	}
	d.cacheSet(set)
	return nil
}

func (d *Datapath) deleteSetKey(set *installedSet) {
	t, key := d.keyTableOf(set)
	d.uncacheSet(set)
	t.Delete(key)
}

// releaseSet frees what writeSet took, except the counter slots in keep (now owned by the
// set that replaced this one). The set must no longer be published.
func (d *Datapath) releaseSet(set *installedSet, keep map[uint32]bool) {
	d.refs.release(set.ref)
	for _, slot := range set.slots {
		d.rules.release(slot)
	}
	for _, c := range set.counters {
		for _, slot := range c.slots() {
			if !keep[slot] {
				d.counters.release(slot)
			}
		}
	}
	if set.tables != nil {
		d.retireTables(set.tables)
	}
	d.releaseQuotas(set.quotaLists)
	for _, peer := range set.peers {
		d.routes.unpin(peer)
	}
}

// retireTables deletes t after the grace: a packet that read the old rule_ref just before the
// switch may still be walking these tables.
func (d *Datapath) retireTables(t *setTables) {
	d.retired = append(d.retired, retiredTables{t, time.Now()})
}

// retiredTables are a rule set's classification tables that no key points at any more.
type retiredTables struct {
	t  *setTables
	at time.Time
}

// reapTables deletes the retired tables whose grace is over and frees their rule set ids;
// with wait, it first waits out the grace of every retired table.
func (d *Datapath) reapTables(wait bool) {
	if wait && len(d.retired) > 0 {
		time.Sleep(time.Until(d.retired[len(d.retired)-1].at.Add(grace)))
	}
	n := 0
	for _, r := range d.retired {
		if time.Since(r.at) < grace {
			break // retired in order: the rest are younger
		}
		for _, k := range r.t.exact {
			if err := d.objs.XupfSdfExact.Delete(k); err != nil {
				d.log.Warn("delete classification entry", "err", err)
			}
		}
		for _, k := range r.t.lpm {
			if err := d.objs.XupfSdfLpm.Delete(k); err != nil {
				d.log.Warn("delete classification entry", "err", err)
			}
		}
		d.rulesets.release(r.t.id - 1)
		n++
	}
	d.retired = d.retired[n:]
}

// sdfFields are the classification fields, indexed by enum sdf_field (pdr_select.h).
var sdfFields = []lbvs.Field{
	xupfSdfFieldSDF_PROTO:       {Name: "protocol", Kind: lbvs.ExactMatch},
	xupfSdfFieldSDF_QFI:         {Name: "qfi", Kind: lbvs.ExactMatch},
	xupfSdfFieldSDF_SPI:         {Name: "spi", Kind: lbvs.ExactMatch},
	xupfSdfFieldSDF_REMOTE_ADDR: {Name: "remote address", Kind: lbvs.PrefixMatch, Bits: 32},
	xupfSdfFieldSDF_LOCAL_ADDR:  {Name: "local address", Kind: lbvs.PrefixMatch, Bits: 32},
	xupfSdfFieldSDF_REMOTE_PORT: {Name: "remote port", Kind: lbvs.PrefixMatch, Bits: 16},
	xupfSdfFieldSDF_LOCAL_PORT:  {Name: "local port", Kind: lbvs.PrefixMatch, Bits: 16},
	xupfSdfFieldSDF_TOS:         {Name: "tos", Kind: lbvs.PrefixMatch, Bits: 8},
}

// maxSetRules is the number of bits of a rule set's vector (SDF_MAX_RULES).
const maxSetRules = 64

// sdfTables are a rule set's classification: its descriptor and its LBVS table entries (keys
// with rule set id 0 until written), each a function of its PDRs and the slots they are in.
type sdfTables struct {
	desc  xupfRuleset
	exact map[xupfSdfExactKey]uint64
	lpm   map[xupfSdfLpmKey]uint64
}

// compileTables compiles rs's PDRs, the PDR of rs.PDRs[i] in slot slots[i], into one rule per
// SDF filter, in precedence order. A set whose filters make at most SDF_LINEAR_RULES compare
// rules keeps them in its descriptor (SDF_LINEAR: no lookup per field); a larger one gets LBVS
// tables (SDF_BITS).
func compileTables(rs rules.RuleSet, slots []uint32) (*sdfTables, error) {
	order := make([]int, len(rs.PDRs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := rs.PDRs[a], rs.PDRs[b]
		return cmp.Or(cmp.Compare(pa.Precedence, pb.Precedence), cmp.Compare(pa.ID, pb.ID))
	})
	var (
		conds   [][]lbvs.Cond
		bitPDRs []uint32 // bit -> PDR slot
		all     uint64   // the bits that can match IPv4
		linear  []xupfSdfRule
		fits    = true // linear holds every rule
		out     = &sdfTables{exact: map[xupfSdfExactKey]uint64{}, lpm: map[xupfSdfLpmKey]uint64{}}
		desc    = &out.desc
	)
	for _, i := range order {
		p := rs.PDRs[i]
		filters := p.Filters
		if len(filters) == 0 {
			filters = []sdf.Filter{{Protocol: sdf.AnyProtocol}}
		}
		for _, f := range filters {
			if err := f.Validate(); err != nil {
				return nil, fmt.Errorf("PDR %d: %w", p.ID, err)
			}
			bit := len(conds)
			if bit >= maxSetRules {
				return nil, fmt.Errorf("%d SDF filters and filterless PDRs: a rule set holds at most %d",
					countRules(rs.PDRs), maxSetRules)
			}
			conds = append(conds, filterConds(f, p.QFI, rs.Uplink))
			bitPDRs = append(bitPDRs, slots[i])
			if !f.MatchesIPv4() { // a flow label or IPv6 addresses never match IPv4 packets
				continue
			}
			all |= 1 << bit
			if fits {
				rules := compareRules(f, p.QFI, slots[i], rs.Uplink, len(desc.Rules)-len(linear))
				fits = rules != nil
				linear = append(linear, rules...)
			}
		}
	}
	for _, c := range conds {
		for f := range c {
			if !c[f].Any {
				desc.Fields |= 1 << f
			}
		}
	}
	if fits {
		desc.Method = xupfSdfMethodSDF_LINEAR
		desc.Nrules = uint32(len(linear))
		copy(desc.Rules[:], linear)
		return out, nil
	}
	desc.Method = xupfSdfMethodSDF_BITS
	desc.All = all
	copy(desc.Pdr[:], bitPDRs)
	tables, err := lbvs.Compile(sdfFields, conds)
	if err != nil {
		return nil, err
	}
	for f, t := range tables {
		if !t.Used {
			continue
		}
		switch t.Field.Kind {
		case lbvs.ExactMatch:
			if f < len(desc.Wild) {
				desc.Wild[f] = t.Wildcard[0]
			}
			for v, vec := range t.Values {
				out.exact[xupfSdfExactKey{Field: uint32(f), Value: uint32(v)}] = vec[0]
			}
		case lbvs.PrefixMatch:
			for _, e := range t.Prefixes {
				out.lpm[xupfSdfLpmKey{
					Prefixlen: 64 + uint32(e.Prefix.Len),
					Field:     uint32(f),
					Value:     be32(uint32(e.Prefix.Value << (32 - t.Field.Bits))),
				}] = e.Bits[0]
			}
		}
	}
	return out, nil
}

// writeTables writes set's classification (compileTables) under a fresh rule set id, its
// descriptor last.
func (d *Datapath) writeTables(set *installedSet) (_ *setTables, err error) {
	c, err := compileTables(set.rs, set.slots)
	if err != nil {
		return nil, err
	}
	if err := d.ensureSDFFields(c.desc.Fields); err != nil {
		return nil, err
	}
	d.reapTables(false)
	slot, err := d.rulesets.alloc()
	if errors.Is(err, errNoSlots) && len(d.retired) > 0 {
		d.reapTables(true)
		slot, err = d.rulesets.alloc()
	}
	if err != nil {
		return nil, fmt.Errorf("classification rule sets full (limits.max_rule_sets): %w", err)
	}
	st := &setTables{id: slot + 1} // rule set 0 means "no classification"
	defer func() {
		if err != nil {
			d.retireTables(st)
		}
	}()
	for k, vec := range c.exact {
		k.Ruleset = st.id
		if err := d.objs.XupfSdfExact.Put(k, vec); err != nil {
			return nil, fmt.Errorf("write %s entry (limits.max_sdf_entries?): %w", sdfFields[k.Field].Name, err)
		}
		st.exact = append(st.exact, k)
	}
	for k, vec := range c.lpm {
		k.Ruleset = st.id
		if err := d.objs.XupfSdfLpm.Put(k, vec); err != nil {
			return nil, fmt.Errorf("write %s entry (limits.max_sdf_entries?): %w", sdfFields[k.Field].Name, err)
		}
		st.lpm = append(st.lpm, k)
	}
	if err := d.objs.XupfRulesets.Put(st.id, c.desc); err != nil {
		return nil, fmt.Errorf("write rule set: %w", err)
	}
	return st, nil
}

// compareRules is filter f (of the PDR with qfi in PDR slot pdr) as SDF_LINEAR rules, from
// the UE's point of view like filterConds: one rule per pair of remote and local port
// ranges. It returns nil when that makes more than limit rules (the rule set then goes to
// LBVS).
func compareRules(f sdf.Filter, qfi uint8, pdr uint32, uplink bool, limit int) []xupfSdfRule {
	remote, local := portRanges(f.RemotePorts), portRanges(f.LocalPorts)
	if len(remote)*len(local) > limit {
		return nil
	}
	r := xupfSdfRule{Pdr: pdr}
	if f.Protocol != sdf.AnyProtocol {
		r.Key.Proto, r.KeyMask.Proto = uint8(f.Protocol), 0xff
	}
	r.Key.Tos, r.KeyMask.Tos = f.TOSValue&f.TOSMask, f.TOSMask
	if uplink && qfi != 0 {
		r.Key.Qfi, r.KeyMask.Qfi = qfi, 0xff
		r.Key.HasQfi, r.KeyMask.HasQfi = 1, 0xff
	}
	if f.HasSPI {
		r.Spi = f.SPI
		r.Key.HasSpi, r.KeyMask.HasSpi = 1, 0xff
	}
	r.Remote, r.RemoteMask = maskedPrefix(f.Remote)
	r.Local, r.LocalMask = maskedPrefix(f.Local)
	if remote[0] != anyPort || local[0] != anyPort {
		r.Key.HasPorts, r.KeyMask.HasPorts = 1, 0xff
	}
	out := make([]xupfSdfRule, 0, len(remote)*len(local))
	for _, rp := range remote {
		for _, lp := range local {
			r.RemoteFirst, r.RemoteLast, r.LocalFirst, r.LocalLast = rp.First, rp.Last, lp.First, lp.Last
			out = append(out, r)
		}
	}
	return out
}

// anyPort is the range of a port condition that accepts anything, even a packet without
// ports (as LBVS does: its prefix is the zero-length one).
var anyPort = sdf.PortRange{First: 0, Last: 0xffff}

// portRanges is a port condition as ranges: [anyPort] when it accepts anything.
func portRanges(ranges []sdf.PortRange) []sdf.PortRange {
	if len(ranges) == 0 || slices.Contains(ranges, anyPort) {
		return []sdf.PortRange{anyPort}
	}
	return ranges
}

// maskedPrefix is p as the big-endian value and mask an address is compared with; mask 0
// when p accepts any address.
func maskedPrefix(p netip.Prefix) (value, mask uint32) {
	if !p.IsValid() || p.Bits() == 0 {
		return 0, 0
	}
	a := p.Masked().Addr().As4()
	return be32(binary.BigEndian.Uint32(a[:])), be32(^uint32(0) << (32 - p.Bits()))
}

func countRules(pdrs []rules.PDR) int {
	n := 0
	for _, p := range pdrs {
		n += max(1, len(p.Filters))
	}
	return n
}

// filterConds is one filter's condition per field, from the UE's point of view (as the
// datapath's struct sdf_pkt). qfi constrains uplink PDRs only: downlink it is a marking.
func filterConds(f sdf.Filter, qfi uint8, uplink bool) []lbvs.Cond {
	c := make([]lbvs.Cond, len(sdfFields))
	any := lbvs.Cond{Any: true}
	c[xupfSdfFieldSDF_PROTO] = any
	if f.Protocol != sdf.AnyProtocol {
		c[xupfSdfFieldSDF_PROTO] = lbvs.Cond{Values: []uint64{uint64(f.Protocol)}}
	}
	c[xupfSdfFieldSDF_QFI] = any
	if uplink && qfi != 0 {
		c[xupfSdfFieldSDF_QFI] = lbvs.Cond{Values: []uint64{uint64(qfi)}}
	}
	c[xupfSdfFieldSDF_SPI] = any
	if f.HasSPI {
		c[xupfSdfFieldSDF_SPI] = lbvs.Cond{Values: []uint64{uint64(f.SPI)}}
	}
	c[xupfSdfFieldSDF_REMOTE_ADDR] = prefixCond(f.Remote)
	c[xupfSdfFieldSDF_LOCAL_ADDR] = prefixCond(f.Local)
	c[xupfSdfFieldSDF_REMOTE_PORT] = portsCond(f.RemotePorts)
	c[xupfSdfFieldSDF_LOCAL_PORT] = portsCond(f.LocalPorts)
	c[xupfSdfFieldSDF_TOS] = any
	if f.TOSMask != 0 {
		c[xupfSdfFieldSDF_TOS] = lbvs.Cond{Prefixes: []lbvs.Prefix{
			{Value: uint64(f.TOSValue), Len: bits.LeadingZeros8(^f.TOSMask)}}}
	}
	return c
}

func prefixCond(p netip.Prefix) lbvs.Cond {
	if !p.IsValid() || p.Bits() == 0 {
		return lbvs.Cond{Any: true}
	}
	a := p.Addr().As4()
	return lbvs.Cond{Prefixes: []lbvs.Prefix{{Value: uint64(binary.BigEndian.Uint32(a[:])), Len: p.Bits()}}}
}

func portsCond(ranges []sdf.PortRange) lbvs.Cond {
	if len(ranges) == 0 {
		return lbvs.Cond{Any: true}
	}
	var c lbvs.Cond
	for _, r := range ranges {
		c.Prefixes = append(c.Prefixes, lbvs.RangePrefixes(uint64(r.First), uint64(r.Last), 16)...)
	}
	return c
}
