package routedir

import (
	"time"
)

// grace is how long a freed chunk or next-hop slot rests before it is written for someone
// else: a packet that read the entry pointing at it just before the entry changed runs to
// completion in microseconds, so it has long finished with it.
const grace = 10 * time.Millisecond

// pool hands out the indexes [first, size) of an array (chunks, next-hop slots) that the
// datapath may be reading. A released index is pending for grace before it is handed out
// again; indexes never used come before pending ones, so memory the kernel has allocated
// anyway is used before anyone waits.
type pool struct {
	free    []uint32 // past their grace
	pending []freed  // in the order they were released
	next    uint32   // next never-used index
	size    uint32
	now     func() time.Time
	sleep   func(time.Duration)
}

type freed struct {
	v  uint32
	at time.Time
}

func newPool(first, size uint32) *pool {
	return &pool{next: first, size: size, now: time.Now, sleep: time.Sleep}
}

// available is how many indexes alloc can still hand out (some may first need a wait).
func (p *pool) available() int {
	return len(p.free) + len(p.pending) + int(p.size-p.next)
}

// alloc returns an index nobody reads, false when all are in use.
func (p *pool) alloc() (uint32, bool) {
	for len(p.pending) > 0 && p.now().Sub(p.pending[0].at) >= grace {
		p.free = append(p.free, p.pending[0].v)
		p.pending = p.pending[1:]
	}
	switch {
	case len(p.free) > 0:
		v := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		return v, true
	case p.next < p.size:
		p.next++
		return p.next - 1, true
	case len(p.pending) > 0:
		f := p.pending[0]
		p.pending = p.pending[1:]
		p.sleep(grace - p.now().Sub(f.at))
		return f.v, true
	}
	return 0, false
}

// release returns v, which no entry points at any more.
func (p *pool) release(v uint32) {
	p.pending = append(p.pending, freed{v, p.now()})
}

// reserve builds the pool of an array already in use: the indexes for which used is true
// stay taken, the others are free at once (nothing points at them).
func (p *pool) reserve(used func(uint32) bool) {
	for v := p.size; v > p.next; v-- { // popped from the end: lowest first
		if !used(v - 1) {
			p.free = append(p.free, v-1)
		}
	}
	p.next = p.size
}
