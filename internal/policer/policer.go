// Package policer is the policer's contract model, without BPF: a contract per traffic class
// (the classifier's class id, or DefaultClass) passes, drops or limits the class's packets;
// its bounds are the meters' (internal/meter). internal/datapath writes contracts into
// xupf_contracts (bpf/lib/policer.h); internal/api and the daemon speak of them in bit/s.
package policer

import (
	"errors"
	"fmt"

	"github.com/xupf/xupf/internal/meter"
)

// Action is what a contract does with the packets of its class: enum police_action
// (bpf/lib/policer.h), checked by a test in internal/datapath.
type Action uint32

const (
	Pass  Action = 0 // every packet goes on
	Drop  Action = 1 // every packet is dropped
	Limit Action = 2 // packets within the rate and burst go on
)

var actionNames = [...]string{Pass: "pass", Drop: "drop", Limit: "limit"}

// String is the action's name in the API and xupfctl: pass, drop or limit.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint32(a))
}

// ParseAction is the Action named name (String's names); false for any other name.
func ParseAction(name string) (Action, bool) {
	for a, n := range actionNames {
		if n == name {
			return Action(a), true
		}
	}
	return 0, false
}

// DefaultClass is the class id of the default contract: the one for packets that match no
// class, or whose class has no contract of its own.
const DefaultClass = 0

// Bounds of a limit as the API gives them: the rate in bits per second, a multiple of 8
// because the meters count whole bytes per second, and the burst in bytes.
const (
	MinRateBPS = 8
	MaxRateBPS = meter.MaxRate * 8 // 1 Tbit/s
	MaxBurst   = meter.MaxBurst
)

// Contract is the policer's contract for one traffic class. Rate and Burst are set with Limit
// only.
type Contract struct {
	Class  uint32
	Action Action
	Rate   uint64 // bytes per second, 1 to meter.MaxRate
	Burst  uint64 // bytes, 1 to meter.MaxBurst; a packet larger than the burst never passes
}

// Validate says what is wrong with c, one line per field; nil when the datapath can take it.
func (c Contract) Validate() error {
	var errs []error
	switch c.Action {
	case Limit:
		if c.Rate == 0 {
			errs = append(errs, errors.New("rate: a limit needs a rate in bytes/s"))
		}
		if c.Burst == 0 {
			errs = append(errs, errors.New("burst: a limit needs a burst in bytes"))
		}
		if len(errs) == 0 {
			if _, err := meter.New(c.Rate, c.Burst); err != nil {
				errs = append(errs, err)
			}
		}
	case Pass, Drop:
		if c.Rate != 0 {
			errs = append(errs, fmt.Errorf("rate: a %s contract has no rate; set one with Limit only", c.Action))
		}
		if c.Burst != 0 {
			errs = append(errs, fmt.Errorf("burst: a %s contract has no burst; set one with Limit only", c.Action))
		}
	default:
		errs = append(errs, fmt.Errorf("action %d: use Pass, Drop or Limit", uint32(c.Action)))
	}
	return errors.Join(errs...)
}

// Counters are what a contract let through and dropped, summed over CPUs.
type Counters struct {
	PassedPackets, PassedBytes   uint64
	DroppedPackets, DroppedBytes uint64
}

// Info is a contract with its counters.
type Info struct {
	Contract
	Counters Counters
}
