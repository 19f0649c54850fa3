package datapath

import "fmt"

// Stats are the datapath counters summed over CPUs, by name (see names.go).
type Stats struct {
	Counters map[string]uint64
	Drops    map[string]uint64
}

// Stats reads every counter and drop reason.
func (d *Datapath) Stats() (Stats, error) {
	perCPU, err := d.statsPerCPU()
	if err != nil {
		return Stats{}, err
	}
	counters := make(map[string]uint64, len(d.names.stats))
	for i, name := range d.names.stats {
		for _, cpu := range perCPU {
			counters[name] += cpu.N[i]
		}
	}
	drops, err := sumPerCPU(d.objs.XupfDrops.Lookup, d.names.drops)
	if err != nil {
		return Stats{}, fmt.Errorf("read drop counters: %w", err)
	}
	delete(drops, "unspecified") // slot 0 means "no drop" and is never counted
	return Stats{Counters: counters, Drops: drops}, nil
}

// statsPerCPU reads each CPU's counters (enum stat), which xupf_stats holds in its one element.
func (d *Datapath) statsPerCPU() ([]xupfStats, error) {
	var perCPU []xupfStats
	if err := d.objs.XupfStats.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return perCPU, nil
}

func sumPerCPU(lookup func(key, value any) error, names []string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(names))
	for i, name := range names {
		var perCPU []uint64
		if err := lookup(uint32(i), &perCPU); err != nil {
			return nil, err
		}
		var sum uint64
		for _, v := range perCPU {
			sum += v
		}
		out[name] = sum
	}
	return out, nil
}
