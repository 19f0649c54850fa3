package datapath

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/xupf/xupf/internal/meter"
	"github.com/xupf/xupf/internal/policer"
)

// The policer's contract model is internal/policer's; these names stay for the callers of
// the datapath.
type (
	PoliceAction   = policer.Action
	Contract       = policer.Contract
	PoliceCounters = policer.Counters
	ContractInfo   = policer.Info
)

const (
	PolicePass           = policer.Pass
	PoliceDrop           = policer.Drop
	PoliceLimit          = policer.Limit
	DefaultContractClass = policer.DefaultClass
)

// noContractError is ErrNotFound for a class without a contract.
type noContractError struct{ class uint32 }

func (e noContractError) Error() string        { return fmt.Sprintf("class %d has no contract", e.class) }
func (e noContractError) Is(target error) bool { return target == ErrNotFound }

// contractEntry is c's xupf_contracts value: for a limit, a fresh meter (full bucket, open
// windows); for pass and drop, the action alone.
func contractEntry(c Contract) (xupfMeter, error) {
	if err := c.Validate(); err != nil {
		return xupfMeter{}, err
	}
	var m xupfMeter
	if c.Action == PoliceLimit {
		s, err := meter.New(c.Rate, c.Burst)
		if err != nil {
			return xupfMeter{}, err
		}
		m = meterEntry(s)
	}
	m.Action = uint32(c.Action)
	return m, nil
}

// contractOf is the contract a xupf_contracts entry holds.
func contractOf(class uint32, m xupfMeter) Contract {
	c := Contract{Class: class, Action: PoliceAction(m.Action)}
	if c.Action == PoliceLimit {
		c.Rate, c.Burst = m.Rate, m.Burst
	}
	return c
}

// contractState is a contract the datapath holds: the contract, its xupf_contracts slot
// (fresh for every change) and its counters' xupf_police_stats slot (for the class's
// contract's life, across changes).
type contractState struct {
	c     Contract
	meter uint32
	stats uint32
}

// SetContract creates or replaces the contract of c.Class. A new contract's counters start
// at zero; a replaced one's carry on. Setting the contract a class already has changes
// nothing: its meter keeps its state, so re-applying a configuration grants no extra burst.
// A different contract starts with a fresh meter (a full burst) and applies from the next
// packet.
//
// The contract is never changed where packets read it: it is written whole into a fresh
// xupf_contracts slot, and the class entries that point to it are published with the next
// classifier buffer (setClasses, a program swap), so a packet sees the old contract or the
// new one, never a LIMIT with the old rate and the new burst, or a PASS turned LIMIT whose
// rate is still zero. The old slot rests in the FIFO before another contract gets it.
func (d *Datapath) SetContract(c Contract) error {
	m, err := contractEntry(c)
	if err != nil {
		return fmt.Errorf("contract for class %d: %w", c.Class, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.contracts[c.Class]
	c = contractOf(c.Class, m)
	if had && old.c == c {
		return nil
	}
	st := &contractState{c: c}
	if st.meter, err = d.contractMeter(c, m); err != nil {
		return fmt.Errorf("contract for class %d: %w", c.Class, err)
	}
	if had {
		st.stats = old.stats
	} else if st.stats, err = d.newPoliceCounters(c.Class); err != nil {
		d.releaseSlot(d.contractSlots, st.meter)
		return fmt.Errorf("contract for class %d: %w", c.Class, err)
	}
	d.contracts[c.Class] = st
	if err := d.publishContracts(); err != nil {
		if had {
			d.contracts[c.Class] = old
		} else {
			delete(d.contracts, c.Class)
			d.releaseSlot(d.policeSlots, st.stats)
		}
		d.releaseSlot(d.contractSlots, st.meter)
		return fmt.Errorf("contract for class %d: %w", c.Class, err)
	}
	if had {
		d.releaseSlot(d.contractSlots, old.meter)
	}
	return nil
}

// contractMeter gives contract c, whose xupf_contracts entry is m, a slot: the earlier run's
// of its class when that holds the same contract, so that its meter goes on where it was and
// a restart grants no extra burst; otherwise a fresh slot with m written into it.
func (d *Datapath) contractMeter(c Contract, m xupfMeter) (uint32, error) {
	if slot, ok := d.takeEarlier(d.contractSlots, c.Class); ok {
		var earlier xupfMeter
		if err := d.objs.XupfContracts.Lookup(slot, &earlier); err == nil && contractOf(c.Class, earlier) == c {
			return slot, nil
		}
		d.releaseSlot(d.contractSlots, slot)
	}
	slot, err := d.contractSlots.alloc()
	if err != nil {
		return 0, fmt.Errorf("contracts full: %w", err)
	}
	if err := writeMeter(d.objs.XupfContracts, d.objs.XupfContractCredits, slot, m); err != nil {
		d.contractSlots.release(slot)
		return 0, err
	}
	return slot, nil
}

// newPoliceCounters gives the new contract of class a counter slot: the one the earlier
// run's contract of the class counts in, so that its counters carry on across a restart, or
// a fresh one, zeroed.
func (d *Datapath) newPoliceCounters(class uint32) (uint32, error) {
	if slot, ok := d.takeEarlier(d.policeSlots, class); ok {
		return slot, nil
	}
	slot, err := d.policeSlots.alloc()
	if err != nil {
		return 0, fmt.Errorf("contract counters full: %w", err)
	}
	if err := d.objs.XupfPoliceStats.Put(slot, make([]xupfPoliceCounters, possibleCPUs())); err != nil {
		d.policeSlots.release(slot)
		return 0, fmt.Errorf("zero its counters: %w", err)
	}
	return slot, nil
}

// publishContracts makes the packets see d.contracts: with classes, a classifier buffer whose
// class entries point to them (and the policer switched on or off with it); without, the
// policer is out of the program and nothing needs writing. The caller holds d.mu.
func (d *Datapath) publishContracts() error {
	if d.prog.clsWords == 0 {
		return nil
	}
	return d.setClasses(d.classes)
}

// DeleteContract removes the contract of class, and its counters; ErrNotFound when it has
// none. The packets of the class then fall under the default contract, if there is one.
func (d *Datapath) DeleteContract(class uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.contracts[class]
	if !ok {
		return noContractError{class}
	}
	delete(d.contracts, class)
	if err := d.publishContracts(); err != nil {
		d.contracts[class] = st
		return fmt.Errorf("delete the contract for class %d: %w", class, err)
	}
	d.releaseSlot(d.contractSlots, st.meter)
	d.releaseSlot(d.policeSlots, st.stats)
	return nil
}

// Contract returns the contract of class with its counters; ErrNotFound when it has none.
func (d *Datapath) Contract(class uint32) (ContractInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.contracts[class]
	if !ok {
		return ContractInfo{}, noContractError{class}
	}
	return d.contractInfo(st)
}

// Contracts returns every contract with its counters, by class id.
func (d *Datapath) Contracts() ([]ContractInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ContractInfo
	for _, st := range d.contracts {
		info, err := d.contractInfo(st)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ContractInfo) int { return cmp.Compare(a.Class, b.Class) })
	return out, nil
}

// contractInfo adds its counters to the contract st. The caller holds d.mu.
func (d *Datapath) contractInfo(st *contractState) (ContractInfo, error) {
	info := ContractInfo{Contract: st.c}
	var perCPU []xupfPoliceCounters
	if err := d.objs.XupfPoliceStats.Lookup(st.stats, &perCPU); err != nil {
		return ContractInfo{}, fmt.Errorf("counters of the contract for class %d: %w", st.c.Class, err)
	}
	for _, v := range perCPU {
		info.Counters.PassedPackets += v.PassedPackets
		info.Counters.PassedBytes += v.PassedBytes
		info.Counters.DroppedPackets += v.DroppedPackets
		info.Counters.DroppedBytes += v.DroppedBytes
	}
	return info, nil
}
