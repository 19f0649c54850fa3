// Package meter is the meters' arithmetic in Go: the bounds within which bpf/lib/meter.h is
// exact, a fresh meter's state for a rate and a burst, and Model, the plain reference of
// meter.h's three algorithms that the datapath's verdicts are tested against. It needs no
// BPF and no root; internal/datapath writes its State into struct meter.
package meter

import (
	"fmt"
	"time"
)

// Algo is a rate-limiting algorithm: enum meter_algo (bpf/lib/meter.h), checked by a test in
// internal/datapath.
type Algo uint32

const (
	TokenBucket   Algo = 0 // METER_TOKEN_BUCKET
	SlidingWindow Algo = 1 // METER_SLIDING_WINDOW
	FixedWindow   Algo = 2 // METER_FIXED_WINDOW
)

// MaxBurst is the largest burst a meter holds: token buckets count byte-nanoseconds in a
// signed 64-bit integer, and a full bucket stays below 2^62 so that a refund racing a refill
// (each adds up to a burst) cannot overflow it.
const MaxBurst = (1 << 62) / nsPerSec

// MaxRate is the highest meter rate, 1 Tbit/s in bytes/s: every product and shift of meter.h
// stays exact below it.
const MaxRate = 125_000_000_000

const nsPerSec = 1_000_000_000 // NSEC_PER_SEC

// SWShift is SW_SHIFT: sliding-window times are in 1/2^SWShift ns.
const SWShift = 10

// A token bucket refills at most every Refill ns: a 64th of burst / rate, within
// [MinRefillNS, MaxRefillNS] (struct meter's refill).
const (
	refillDiv   = 64
	MinRefillNS = 1_000
	MaxRefillNS = 1_000_000
)

// ChunkDiv: a CPU's credit takes a token bucket's tokens ChunkDiv-th of the burst at a time
// (struct meter's chunk), so that it touches the shared bucket once per chunk rather than per
// packet. Each CPU then holds less than a chunk, and a meter passes at most one chunk per CPU
// more than burst + rate × time over any interval.
const ChunkDiv = 64

// RebaseNS is SW_REBASE_NS: the sliding window's origin moves when it is this old.
const RebaseNS = 1 << 40

// MaxWindow is the longest burst/rate in ns: shifted by SWShift it stays below 2^60, so the
// sliding window's start plus its window cannot overflow.
const MaxWindow = 1 << 50

// State is one meter as struct meter holds it (without its lock and the policer's action):
// Rate and Burst, the fields derived from them, and each algorithm's state.
type State struct {
	Rate, Burst uint64 // bytes per second (at least 1), bytes

	Tokens int64  // token bucket: byte-nanoseconds, at most Burst × 1e9
	Last   uint64 // token bucket: clock of the last refill
	Refill uint64 // token bucket: the least time between refills, ns
	Chunk  int64  // token bucket: byte-nanoseconds a CPU's credit takes at once

	Base   uint64 // sliding window: clock origin of Start
	Start  int64  // sliding window: window start, (clock - Base) << SWShift
	Window uint64 // sliding window: Burst / Rate, << SWShift

	Wstart uint64 // fixed window: clock at which the current window began
	Wlen   uint64 // fixed window: window length in ns, Burst / Rate
	Count  int64  // fixed window: bytes admitted in the current window
}

// New is a fresh meter for rate bytes/s and burst bytes: full bucket, open windows.
func New(rate, burst uint64) (State, error) {
	switch {
	case rate == 0 || rate > MaxRate:
		return State{}, fmt.Errorf("rate %d bytes/s: use 1 to %d (1 Tbit/s)", rate, uint64(MaxRate))
	case burst == 0 || burst > MaxBurst:
		return State{}, fmt.Errorf("burst %d bytes: use 1 to %d", burst, uint64(MaxBurst))
	}
	scaled := burst * nsPerSec // byte-nanoseconds: fits, burst ≤ MaxBurst
	ns, rem := scaled/rate, scaled%rate
	if ns > MaxWindow {
		// The sliding window keeps burst/rate in 1/1024 ns beside times that must not
		// overflow: about 13 days of burst is the most it holds.
		return State{}, fmt.Errorf("burst %d bytes at %d bytes/s lasts %v: use a burst that lasts at most %v",
			burst, rate, time.Duration(ns), time.Duration(MaxWindow))
	}
	s := State{
		Rate:   rate,
		Burst:  burst,
		Tokens: int64(scaled),
		Refill: min(max(ns/refillDiv, MinRefillNS), MaxRefillNS),
		Chunk:  int64(scaled / ChunkDiv),
		// burst / rate in 1/2^SWShift ns, without shifting scaled (which would overflow)
		Window: max(1, ns<<SWShift+(rem<<SWShift)/rate),
		Wlen:   max(1, ns),
	}
	s.Start = -int64(s.Window) // a window behind the origin: the whole burst is available
	return s, nil
}

// Model is the plain reference of meter.h's algorithms: exact integer arithmetic, written for
// reading rather than speed. The datapath must give the same verdict for every packet sent
// on one CPU (Pass); PassOn models several CPUs taking turns, each with its token bucket
// credit.
type Model struct {
	Algo   Algo
	State  State
	Credit []int64 // token bucket: each CPU's credit in byte-nanoseconds (struct meter_credit)
}

// Pass charges a packet of size bytes at clock now on CPU 0 and says whether it conforms; a
// packet that does not is not charged.
func (r *Model) Pass(size uint32, now uint64) bool {
	return r.PassOn(0, size, now)
}

// PassOn is Pass on CPU cpu.
func (r *Model) PassOn(cpu int, size uint32, now uint64) bool {
	m := &r.State
	switch r.Algo {
	case SlidingWindow:
		if now < m.Base {
			m.Base, m.Start = now, -int64(m.Window)
		} else if now-m.Base >= RebaseNS {
			if delta := now - m.Base; delta >= m.Window>>SWShift {
				m.Start = -int64(m.Window)
			} else {
				m.Start -= int64(delta << SWShift)
			}
			m.Start = max(m.Start, -int64(m.Window))
			m.Base = now
		}
		t := int64((now - m.Base) << SWShift)
		tx := int64((uint64(size) * nsPerSec << SWShift) / m.Rate)
		m.Start = min(m.Start, t)
		if m.Start+tx > t {
			return false
		}
		m.Start = max(m.Start, t-int64(m.Window))
		m.Start += tx
		return true
	case FixedWindow:
		if now < m.Wstart {
			m.Wstart, m.Count = now, 0
		} else if now-m.Wstart >= m.Wlen {
			m.Wstart, m.Count = now-(now-m.Wstart)%m.Wlen, 0
		}
		if m.Count+int64(size) > int64(m.Burst) {
			return false
		}
		m.Count += int64(size)
		return true
	}
	if cpu >= len(r.Credit) {
		r.Credit = append(r.Credit, make([]int64, cpu+1-len(r.Credit))...)
	}
	credit := &r.Credit[cpu]
	need := int64(size) * nsPerSec
	if *credit >= need {
		*credit -= need
		return true
	}
	// The credit falls short: refill, then take a chunk while the bucket holds one, else just
	// what the packet misses.
	if now < m.Last {
		m.Last = now
	} else if now-m.Last >= m.Refill {
		elapsed := now - m.Last
		m.Last = now
		if room := int64(m.Burst*nsPerSec) - m.Tokens; room > 0 {
			add := uint64(room)
			if elapsed < uint64(room)/m.Rate+1 {
				add = elapsed * m.Rate
			}
			m.Tokens += int64(add)
		}
	}
	miss := need - *credit
	take := miss
	if m.Chunk > miss && m.Tokens >= m.Chunk {
		take = m.Chunk
	}
	if m.Tokens < take {
		return false
	}
	m.Tokens -= take
	*credit += take - need
	return true
}
