package datapath

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/meter"
	"github.com/xupf/xupf/internal/rules"
)

// MeterAlgo is the rate-limiting algorithm of every meter (QER MBRs and policer contracts),
// chosen at load time (cfg_meter_algo, bpf/lib/meter.h).
type MeterAlgo uint32

const (
	TokenBucket   = MeterAlgo(meter.TokenBucket)
	SlidingWindow = MeterAlgo(meter.SlidingWindow)
	FixedWindow   = MeterAlgo(meter.FixedWindow)
)

// Clock is the time source of the meters (cfg_clock).
type Clock uint32

const (
	ClockKtime  = Clock(xupfMeterClockCLOCK_KTIME)  // bpf_ktime_get_ns
	ClockCoarse = Clock(xupfMeterClockCLOCK_COARSE) // bpf_ktime_get_coarse_ns
	ClockUser   = Clock(xupfMeterClockCLOCK_USER)   // xupf_clock, written by RunClock or SetClock
)

// MinMBRBurst is the smallest burst a QER's meter gets, whatever its rate: two full-size
// packets, so that a low rate still lets a packet of the largest common size through.
const MinMBRBurst = 3000

// DefaultMBRBurst is how long a QER's MBR may be exceeded in a burst unless configured: the
// meter's burst is MBR × this.
const DefaultMBRBurst = 50 * time.Millisecond

// meterEntry is s as a xupf_meters or xupf_contracts value.
func meterEntry(s meter.State) xupfMeter {
	return xupfMeter{
		Rate: s.Rate, Burst: s.Burst,
		Tokens: s.Tokens, Last: s.Last, Refill: s.Refill, Chunk: s.Chunk,
		Base: s.Base, Start: s.Start, Window: s.Window,
		Wstart: s.Wstart, Wlen: s.Wlen, Count: s.Count,
	}
}

// writeMeter writes m into slot of meters (xupf_meters, xupf_contracts) and zeroes every
// CPU's credit of it in credits, so that a fresh meter starts with its burst and no more.
func writeMeter(meters, credits *ebpf.Map, slot uint32, m xupfMeter) error {
	if err := credits.Put(slot, make([]int64, possibleCPUs())); err != nil {
		return fmt.Errorf("zero the meter's credits: %w", err)
	}
	if err := meters.Put(slot, m); err != nil {
		return fmt.Errorf("write meter: %w", err)
	}
	return nil
}

// mbrMeter is the meter a QER's MBR in kbit/s gets: kbit/s × 125 bytes/s (exact), and a burst
// of MBR × d (at least MinMBRBurst).
func mbrMeter(kbps uint64, d time.Duration) (meter.State, error) {
	rate := kbps * 125
	burst := max(uint64(MinMBRBurst), uint64(float64(rate)*d.Seconds()))
	return meter.New(rate, min(burst, meter.MaxBurst))
}

// meterKey names one meter of an owner: a QER in one direction.
type meterKey struct {
	qer    uint32
	uplink bool
}

// ownedMeter is a meter slot an owner holds and the meter it was written with.
type ownedMeter struct {
	slot        uint32
	rate, burst uint64
}

func (m ownedMeter) slotIndex() uint32 { return m.slot }

// assignMeters gives every QER with an MBR in the direction of a rule set its meter: the
// owner's existing slot when the rate and burst did not change (its state carries on), a
// freshly written one otherwise. It returns the slots by key and those it took, which the
// caller releases if the install fails. The caller holds d.mu.
func (d *Datapath) assignMeters(owner uint64, sets []rules.RuleSet) (map[meterKey]ownedMeter, []uint32, error) {
	prev := d.meters[owner]
	out := map[meterKey]ownedMeter{}
	var taken []uint32
	for _, rs := range sets {
		for _, p := range rs.PDRs {
			for _, q := range p.QERs {
				kbps := q.MBRDL
				if rs.Uplink {
					kbps = q.MBRUL
				}
				k := meterKey{q.ID, rs.Uplink}
				if _, done := out[k]; done || kbps == 0 {
					continue
				}
				m, err := mbrMeter(kbps, d.opts.MBRBurst)
				if err != nil {
					d.releaseMeters(taken)
					return nil, nil, fmt.Errorf("QER %d: %w", q.ID, err)
				}
				if old, ok := prev[k]; ok && old.rate == m.Rate && old.burst == m.Burst {
					out[k] = old
					continue
				}
				slot, err := d.meterSlots.alloc()
				if err != nil {
					d.releaseMeters(taken)
					return nil, nil, fmt.Errorf("QER %d: meter table full (limits.max_sessions): %w", q.ID, err)
				}
				taken = append(taken, slot)
				if err := writeMeter(d.objs.XupfMeters, d.objs.XupfMeterCredits, slot, meterEntry(m)); err != nil {
					d.releaseMeters(taken)
					return nil, nil, fmt.Errorf("QER %d: %w", q.ID, err)
				}
				out[k] = ownedMeter{slot: slot, rate: m.Rate, burst: m.Burst}
			}
		}
	}
	return out, taken, nil
}

func (d *Datapath) releaseMeters(slots []uint32) {
	for _, s := range slots {
		d.meterSlots.release(s)
	}
}

// pdrQoS fills the QER part of a PDR slot: its gate in the set's direction and its meters.
func pdrQoS(e *xupfPdr, p rules.PDR, uplink bool, meters map[meterKey]ownedMeter) error {
	for _, q := range p.QERs {
		if (uplink && q.ULClosed) || (!uplink && q.DLClosed) {
			e.GateClosed = 1
		}
		m, ok := meters[meterKey{q.ID, uplink}]
		if !ok {
			continue // no MBR this way
		}
		if int(e.Nmeters) == len(e.Meters) {
			return fmt.Errorf("more than %d QERs with an MBR in one direction", len(e.Meters))
		}
		e.Meters[e.Nmeters] = m.slot
		e.Nmeters++
	}
	return nil
}

// UserClockPeriod is how often the daemon advances the user clock (ClockUser): the papers'
// choice. A token bucket then refills once per period, under one lock, whatever the rate.
const UserClockPeriod = time.Millisecond

// SetClock sets the user clock (ClockUser) to ns.
func (d *Datapath) SetClock(ns uint64) error {
	return d.objs.XupfClock.Put(uint32(0), ns)
}

// RunClock keeps the user clock at the monotonic time since start, updated every period,
// until ctx is done; it returns then. It is the clock of ClockUser when the daemon runs.
func (d *Datapath) RunClock(ctx context.Context, period time.Duration) {
	start := time.Now()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		if err := d.SetClock(uint64(time.Since(start))); err != nil {
			d.log.Warn("update the meters' user clock", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
