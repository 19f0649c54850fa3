package datapath

import "fmt"

// StopUsageCounting makes the PDRs of owner count nothing: each PDR slot's usage counter is
// pointed one past the end of xupf_usage, so count_usage finds no counter and skips the
// update. The datapath has no switch for usage counting (every PDR counts), yet the
// module-overhead benchmark (internal/bench/modules) measures it as a module of its own;
// this is its way to take it out. The control plane never calls it. Installing owner's
// rules again writes fresh slots, which count.
func (d *Datapath) StopUsageCounting(owner uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	sets, ok := d.owners[owner]
	if !ok {
		return fmt.Errorf("session %d: %w", owner, ErrNotFound)
	}
	outside := d.objs.XupfUsage.MaxEntries()
	for _, set := range sets {
		for _, slot := range set.slots {
			var p xupfPdr
			if err := d.objs.XupfPdrs.Lookup(slot, &p); err != nil {
				return fmt.Errorf("session %d: read PDR slot %d: %w", owner, slot, err)
			}
			p.Counter = outside
			if err := d.objs.XupfPdrs.Put(slot, p); err != nil {
				return fmt.Errorf("session %d: write PDR slot %d: %w", owner, slot, err)
			}
		}
	}
	return nil
}
