package daemon

import (
	"errors"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/policer"
)

// policerDatapath is what the policer needs of the datapath: *datapath.Datapath, or a fake in
// tests. The policer is keyed by the classifier's class ids, and the daemon reaches both
// through one datapath (classDatapath).
type policerDatapath interface {
	SetContract(c policer.Contract) error
	DeleteContract(class uint32) error
	Contract(class uint32) (policer.Info, error)
	Contracts() ([]policer.Info, error)
}

// apiContract is a datapath contract in the API's terms: bit/s for bytes/s.
func apiContract(c policer.Info) api.ContractInfo {
	return api.ContractInfo{
		Class:    c.Class,
		Contract: api.Contract{Action: c.Action.String(), RateBPS: c.Rate * 8, BurstBytes: c.Burst},
		Counters: api.PoliceCounters(c.Counters),
	}
}

// Contracts implements api.Backend.
func (d *Daemon) Contracts() ([]api.ContractInfo, error) {
	d.classMu.RLock()
	defer d.classMu.RUnlock()
	list, err := d.classDP.Contracts()
	if err != nil {
		return nil, err
	}
	out := make([]api.ContractInfo, 0, len(list))
	for _, c := range list {
		out = append(out, apiContract(c))
	}
	return out, nil
}

// Contract implements api.Backend.
func (d *Daemon) Contract(class uint32) (api.ContractInfo, error) {
	d.classMu.RLock()
	defer d.classMu.RUnlock()
	return d.contract(class)
}

func (d *Daemon) contract(class uint32) (api.ContractInfo, error) {
	c, err := d.classDP.Contract(class)
	if errors.Is(err, datapath.ErrNotFound) {
		return api.ContractInfo{}, api.WithKind(api.ErrNotFound, err)
	}
	if err != nil {
		return api.ContractInfo{}, err
	}
	return apiContract(c), nil
}

// applyContract gives the datapath c, a checked contract, for class.
func (d *Daemon) applyContract(class uint32, c api.Contract) error {
	action, _ := policer.ParseAction(c.Action) // c.Check accepted it
	return d.classDP.SetContract(policer.Contract{Class: class, Action: action, Rate: c.RateBPS / 8, Burst: c.BurstBytes})
}

// SetContract implements api.Backend. The rate is checked to be whole bytes per second
// (c.Check), so the datapath meters exactly the rate asked for and lists it back as it was
// set.
func (d *Daemon) SetContract(class uint32, c api.Contract) (api.ContractInfo, error) {
	if err := c.Check(class); err != nil {
		return api.ContractInfo{}, api.WithKind(api.ErrInvalid, err)
	}
	// classMu orders the contract changes too, so that the answer is the contract just set
	// (with its counters), not one set or deleted by a request in between.
	d.classMu.Lock()
	defer d.classMu.Unlock()
	if err := d.applyContract(class, c); err != nil {
		return api.ContractInfo{}, err
	}
	if err := d.keep(bucketContracts, idKey(class), c); err != nil {
		return api.ContractInfo{}, err
	}
	d.log.Info("policer contract set", "class", class, "action", c.Action, "rate_bps", c.RateBPS,
		"burst_bytes", c.BurstBytes)
	return d.contract(class)
}

// DeleteContract implements api.Backend.
func (d *Daemon) DeleteContract(class uint32) error {
	d.classMu.Lock()
	defer d.classMu.Unlock()
	err := d.classDP.DeleteContract(class)
	if errors.Is(err, datapath.ErrNotFound) {
		return api.WithKind(api.ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	d.log.Info("policer contract deleted", "class", class)
	return d.keep(bucketContracts, idKey(class), nil)
}
