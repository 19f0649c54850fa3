package datapath

import (
	"cmp"
	"errors"
	"runtime"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/keytable"
)

// directCache is a key table's direct-mapped cache (bpf/lib/rules.h direct_ref) mapped into
// this process; nil on an architecture other than x86-64, where no slot is written and every
// lookup takes the key table (the readers rely on x86-64 keeping loads in order, as the flow
// table's: flowCacheArch).
type directCache struct {
	*keytable.Direct
	mem mappedArray
}

// mapDirect maps m, a direct cache, clearing it: the copies an earlier run left may be stale,
// and the sets this run installs fill it again.
func mapDirect(m *ebpf.Map) (*directCache, error) {
	if !loadsInOrder(runtime.GOARCH) {
		return nil, nil
	}
	mem, err := mapArray(m)
	if err != nil {
		return nil, err
	}
	c, err := keytable.NewDirect(mem.words64(), grace, time.Now())
	if err != nil {
		mem.unmap()
		return nil, err
	}
	return &directCache{Direct: c, mem: mem}, nil
}

// directSlots returns the slots of the uplink and downlink direct caches on goarch: a slot
// per key (64 bytes each, a rule_ref) unless opts.DirectSlots says otherwise, on x86-64; one
// elsewhere, where mapDirect writes none and a cache the size of the key tables would only
// take memory.
func directSlots(goarch string, opts Options) (ul, dl uint32) {
	if !loadsInOrder(goarch) {
		return 1, 1
	}
	return uint32(keytable.DirectSlots(cmp.Or(opts.DirectSlots, teidsPerSession*opts.MaxSessions))),
		uint32(keytable.DirectSlots(cmp.Or(opts.DirectSlots, opts.MaxSessions)))
}

// clearDirect clears the keys of m, a direct cache this run does not use.
func clearDirect(m *ebpf.Map) error {
	mem, err := mapArray(m)
	if err != nil {
		return err
	}
	_, err = keytable.NewDirect(mem.words64(), grace, time.Now())
	return errors.Join(err, mem.unmap())
}

func (c *directCache) close() error {
	if c == nil {
		return nil
	}
	return c.mem.unmap()
}

// directOf returns the direct cache of set's key, nil for none.
func (d *Datapath) directOf(set *installedSet) *directCache {
	if set.rs.Uplink {
		return d.ulDirect
	}
	return d.dlDirect
}

// cacheSet caches set's rule_ref for its key, or stops caching the key when set needs the
// classification step (only rule set 0 has a spare word for the key), its FAR notifies (the
// program itself makes that FAR_DROP after the first packet (buffer.h notify_once), in the
// rule_ref it reads, and a copy would notify again once it gave way to the ref), or it
// stands for an earlier run's entry, whose rule_ref it does not hold (a failed install
// publishes it again). d.mu is held.
func (d *Datapath) cacheSet(set *installedSet) {
	c := d.directOf(set)
	if c == nil {
		return
	}
	_, key := d.keyTableOf(set)
	if set.earlier || set.tables != nil || set.value.Far.Action == uint32(xupfFarActionFAR_DROP_NOTIFY) {
		c.Delete(key, time.Now())
		return
	}
	// Through an array of words: set.value, of 32-bit fields, need not be 8-byte aligned.
	var words [keytable.SlotWords]uint64
	*(*xupfRuleRef)(unsafe.Pointer(&words)) = set.value
	c.Put(key, words[:], time.Now())
	d.scheduleRefill()
}

// uncacheSet stops caching set's key. d.mu is held.
func (d *Datapath) uncacheSet(set *installedSet) {
	if c := d.directOf(set); c != nil {
		_, key := d.keyTableOf(set)
		c.Delete(key, time.Now())
	}
}

// TEIDCacheable reports whether teid has its uplink direct cache slot free, or the datapath
// no direct cache (any TEID is as good then).
func (d *Datapath) TEIDCacheable(teid uint32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ulDirect == nil || d.ulDirect.Free(be32(teid))
}

// scheduleRefill writes, once their grace is over, the copies the direct caches hold back.
// d.mu is held.
func (d *Datapath) scheduleRefill() {
	if d.refill != nil || d.ulDirect == nil {
		return
	}
	now := time.Now()
	wait := d.ulDirect.Refill(now)
	if dl := d.dlDirect.Refill(now); wait == 0 || (dl > 0 && dl < wait) {
		wait = dl
	}
	if wait > 0 {
		d.refill = time.AfterFunc(wait, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.refill == nil { // closed
				return
			}
			d.refill = nil
			d.scheduleRefill()
		})
	}
}

// stopRefill stops the refill timer. d.mu is held.
func (d *Datapath) stopRefill() {
	if d.refill != nil {
		d.refill.Stop()
		d.refill = nil
	}
}

// The copy is the rule_ref's memory, a whole slot, and the key word's low half (x86-64 is
// little-endian) is its pdr.far, where direct_ref looks for the key.
var (
	_ [keytable.SlotWords * 8]byte = [unsafe.Sizeof(xupfRuleRef{})]byte{}
	_ [keytable.KeyWord * 8]byte   = [unsafe.Offsetof(xupfRuleRef{}.Pdr) + unsafe.Offsetof(xupfPdr{}.Far)]byte{}
)
