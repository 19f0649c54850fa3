package keytable

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// SlotWords is the size of a Direct slot in 64-bit words: a struct rule_ref, one cache line.
const SlotWords = 8

// KeyWord is the word of a slot whose low half holds the key: the rule_ref's pdr.far, which a
// key of rule set 0 never reads (bpf/lib/rules.h direct_ref).
const KeyWord = 1

// Direct is a direct-mapped cache in front of a key table: a slot of words, chosen by the
// key's low bits, holds a copy of the key's value (SlotWords words) with the key in it, so
// that the datapath finds a key's value in one cache line. The key table stays the source
// of truth: a key whose slot another key holds is simply not cached. Readers may run at any
// time, so a slot's value is never rewritten while a reader may take it for a key's: the key
// is cleared first, and the slot rests for the grace (how long a reader may still use what it
// read) before it is written again. A Put or Delete that leaves a slot resting queues the
// write; Refill does it once the grace is over. Writers must be serialised by the caller.
type Direct struct {
	words []uint64
	mask  uint32
	grace time.Duration
	owner map[uint32]uint32    // slot -> the key it holds or waits to hold
	queue map[uint32][]uint64  // slot -> the value it waits to hold
	rest  map[uint32]time.Time // slot -> when it may be written again
	since time.Time            // no slot is written before: readers may hold what an earlier writer left
}

// DirectSlots returns the slot count (a power of two) for up to keys keys: one slot per key
// at least, so that consecutive keys (a pool's addresses) each have their own, and a random
// one (a TEID) finds a free slot more often than not.
func DirectSlots(keys int) int {
	return 1 << bits.Len64(uint64(max(keys, 1)-1))
}

// NewDirect returns the cache over words, whose length is a power of two times SlotWords. It
// clears every slot's key (an earlier writer's copies may be stale) and writes none before
// the grace is over.
func NewDirect(words []uint64, grace time.Duration, now time.Time) (*Direct, error) {
	n := len(words) / SlotWords
	if n == 0 || n&(n-1) != 0 || len(words)%SlotWords != 0 {
		return nil, fmt.Errorf("direct cache of %d words: need a power of two times %d", len(words), SlotWords)
	}
	for i := KeyWord; i < len(words); i += SlotWords {
		atomic.StoreUint64(&words[i], 0)
	}
	return &Direct{words: words, mask: uint32(n - 1), grace: grace, owner: map[uint32]uint32{},
		queue: map[uint32][]uint64{}, rest: map[uint32]time.Time{}, since: now.Add(grace)}, nil
}

// Put caches value (SlotWords words; its key word is overwritten) for key, replacing what is
// cached for it, when key's slot is free or key's already.
func (c *Direct) Put(key uint32, value []uint64, now time.Time) {
	if key == 0 {
		return
	}
	i := c.slot(key)
	if o, ok := c.owner[i]; ok && o != key {
		return
	}
	c.clear(i, now)
	c.owner[i] = key
	c.queue[i] = append([]uint64(nil), value[:SlotWords]...)
	c.fill(i, now)
}

// Delete stops caching key.
func (c *Direct) Delete(key uint32, now time.Time) {
	i := c.slot(key)
	if o, ok := c.owner[i]; !ok || o != key {
		return
	}
	c.clear(i, now)
	delete(c.owner, i)
	delete(c.queue, i)
}

// Free reports whether key's slot is free for it: no other key holds it or waits for it.
func (c *Direct) Free(key uint32) bool {
	o, ok := c.owner[c.slot(key)]
	return !ok || o == key
}

// Refill writes the queued values whose slots have rested, and returns how long until the
// next can be written (0 when none waits).
func (c *Direct) Refill(now time.Time) time.Duration {
	var next time.Duration
	for i := range c.queue {
		c.fill(i, now)
		if _, waits := c.queue[i]; waits {
			if d := c.free(i).Sub(now); next == 0 || d < next {
				next = d
			}
		}
	}
	return next
}

// slot returns key's slot: its low bits in host order (bpf_ntohl in direct_ref), where a
// pool's consecutive addresses differ; key is as the datapath reads it, network order on a
// little-endian host.
func (c *Direct) slot(key uint32) uint32 { return bits.ReverseBytes32(key) & c.mask }

// free returns when slot i may be written.
func (c *Direct) free(i uint32) time.Time {
	if r, ok := c.rest[i]; ok && r.After(c.since) {
		return r
	}
	return c.since
}

// clear takes slot i's key away from the readers, if it has one, and lets the slot rest.
func (c *Direct) clear(i uint32, now time.Time) {
	p := &c.words[int(i)*SlotWords+KeyWord]
	if uint32(atomic.LoadUint64(p)) == 0 {
		return
	}
	atomic.StoreUint64(p, 0)
	c.rest[i] = now.Add(c.grace)
}

// fill writes slot i's queued value if the slot has rested: the value first, its key last.
func (c *Direct) fill(i uint32, now time.Time) {
	v, ok := c.queue[i]
	if !ok || now.Before(c.free(i)) {
		return
	}
	s := c.words[int(i)*SlotWords : int(i+1)*SlotWords]
	for j := range s {
		if j != KeyWord {
			atomic.StoreUint64(&s[j], v[j])
		}
	}
	atomic.StoreUint64(&s[KeyWord], v[KeyWord]&^0xffffffff|uint64(c.owner[i]))
	delete(c.queue, i)
	delete(c.rest, i)
}
