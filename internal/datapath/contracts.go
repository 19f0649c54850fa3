package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

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

// SetContract creates or replaces the contract of c.Class. A new contract's counters start
// at zero; a replaced one's carry on. Setting the contract a class already has changes
// nothing: its meter keeps its state, so re-applying a configuration grants no extra burst.
// A different contract starts with a fresh meter (a full burst) and applies from the next
// packet.
//
// The contract is written with one update of the whole hash element, never field by field:
// the kernel links a new element in place of the old one, so a packet sees the old contract
// or the new one, never a LIMIT with the old rate and the new burst, or a PASS turned LIMIT
// whose rate is still zero. (A packet that looked the old element up finishes with it: the
// map is not preallocated, so the old element is freed only after such readers are done.)
func (d *Datapath) SetContract(c Contract) error {
	m, err := contractEntry(c)
	if err != nil {
		return fmt.Errorf("contract for class %d: %w", c.Class, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var old xupfMeter
	if err := d.objs.XupfContracts.Lookup(c.Class, &old); err == nil {
		if contractOf(c.Class, old) == contractOf(c.Class, m) {
			return nil
		}
	} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("contract for class %d: read the current one: %w", c.Class, err)
	}
	// The counters exist before the contract, so that its first packets are counted. They
	// are kept if they exist: the counters of a class carry on when its contract changes.
	created := false
	zero := make([]xupfPoliceCounters, possibleCPUs())
	switch err := d.objs.XupfPoliceStats.Update(c.Class, zero, ebpf.UpdateNoExist); {
	case err == nil:
		created = true
	case !errors.Is(err, ebpf.ErrKeyExist):
		return fmt.Errorf("contract for class %d: create its counters: %w", c.Class, err)
	}
	if err := d.objs.XupfContracts.Update(c.Class, m, ebpf.UpdateAny); err != nil {
		if created {
			d.deleteKey(d.objs.XupfPoliceStats, c.Class)
		}
		return fmt.Errorf("contract for class %d: write it (contracts full?): %w", c.Class, err)
	}
	// The first contract turns the policer on. Should that fail, the contract goes again.
	if err := d.ensurePolicer(); err != nil {
		if created {
			d.deleteKey(d.objs.XupfContracts, c.Class)
			d.deleteKey(d.objs.XupfPoliceStats, c.Class)
		}
		return fmt.Errorf("contract for class %d: %w", c.Class, err)
	}
	return nil
}

// anyContract says whether xupf_contracts holds a contract. The caller holds d.mu.
func (d *Datapath) anyContract() (bool, error) {
	var (
		class uint32
		m     xupfMeter
	)
	it := d.objs.XupfContracts.Iterate()
	found := it.Next(&class, &m)
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("list contracts: %w", err)
	}
	return found, nil
}

// DeleteContract removes the contract of class, and its counters; ErrNotFound when it has
// none. The packets of the class then fall under the default contract, if there is one.
func (d *Datapath) DeleteContract(class uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.objs.XupfContracts.Delete(class); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return noContractError{class}
		}
		return fmt.Errorf("delete the contract for class %d: %w", class, err)
	}
	// After the contract: a packet that found the contract may still look its counters up,
	// and finds them or nothing, which the datapath allows for.
	if err := d.objs.XupfPoliceStats.Delete(class); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete the counters of the contract for class %d: %w", class, err)
	}
	// The last contract turns the policer off. Should that fail, the running program finds
	// no contract and lets every packet pass, as without the policer.
	if err := d.ensurePolicer(); err != nil {
		d.log.Warn("policer left on without contracts", "err", err)
	}
	return nil
}

// Contract returns the contract of class with its counters; ErrNotFound when it has none.
func (d *Datapath) Contract(class uint32) (ContractInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var m xupfMeter
	if err := d.objs.XupfContracts.Lookup(class, &m); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return ContractInfo{}, noContractError{class}
		}
		return ContractInfo{}, fmt.Errorf("read the contract for class %d: %w", class, err)
	}
	return d.contractInfo(class, m)
}

// Contracts returns every contract with its counters, by class id.
func (d *Datapath) Contracts() ([]ContractInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var (
		class uint32
		m     xupfMeter
		out   []ContractInfo
	)
	it := d.objs.XupfContracts.Iterate()
	for it.Next(&class, &m) {
		info, err := d.contractInfo(class, m)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list contracts: %w", err)
	}
	slices.SortFunc(out, func(a, b ContractInfo) int { return cmp.Compare(a.Class, b.Class) })
	return out, nil
}

// contractInfo adds its counters to the contract of class, read as m. The caller holds d.mu.
func (d *Datapath) contractInfo(class uint32, m xupfMeter) (ContractInfo, error) {
	info := ContractInfo{Contract: contractOf(class, m)}
	var perCPU []xupfPoliceCounters
	if err := d.objs.XupfPoliceStats.Lookup(class, &perCPU); err != nil {
		return ContractInfo{}, fmt.Errorf("counters of the contract for class %d: %w", class, err)
	}
	for _, v := range perCPU {
		info.Counters.PassedPackets += v.PassedPackets
		info.Counters.PassedBytes += v.PassedBytes
		info.Counters.DroppedPackets += v.DroppedPackets
		info.Counters.DroppedBytes += v.DroppedBytes
	}
	return info, nil
}
