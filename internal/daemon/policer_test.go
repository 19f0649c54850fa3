package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/policer"
)

// fakePolicer keeps contracts as the datapath does: a replaced contract keeps its counters,
// a deleted one loses them.
type fakePolicer struct {
	mu        sync.Mutex
	contracts map[uint32]policer.Info
	setErr    error // returned by SetContract and DeleteContract when set
	readErr   error // returned by Contract and Contracts when set
}

func newFakePolicer() fakePolicer {
	return fakePolicer{contracts: map[uint32]policer.Info{}}
}

func (f *fakePolicer) SetContract(c policer.Contract) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setErr != nil {
		return f.setErr
	}
	info := f.contracts[c.Class]
	info.Contract = c
	f.contracts[c.Class] = info
	return nil
}

func (f *fakePolicer) DeleteContract(class uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setErr != nil {
		return f.setErr
	}
	if _, ok := f.contracts[class]; !ok {
		return fmt.Errorf("class %d has no contract: %w", class, datapath.ErrNotFound)
	}
	delete(f.contracts, class)
	return nil
}

func (f *fakePolicer) Contract(class uint32) (policer.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return policer.Info{}, f.readErr
	}
	c, ok := f.contracts[class]
	if !ok {
		return policer.Info{}, fmt.Errorf("class %d has no contract: %w", class, datapath.ErrNotFound)
	}
	return c, nil
}

func (f *fakePolicer) Contracts() ([]policer.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	var out []policer.Info
	for _, class := range slices.Sorted(maps.Keys(f.contracts)) {
		out = append(out, f.contracts[class])
	}
	return out, nil
}

func (f *fakePolicer) setCounters(class uint32, c policer.Counters) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info := f.contracts[class]
	info.Counters = c
	f.contracts[class] = info
}

func TestDaemonContracts(t *testing.T) {
	_, dp, c := newClassDaemon(t)
	ctx := t.Context()

	list, err := c.Contracts(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("Contracts of a new daemon = %v, %v; want none", list, err)
	}

	limit := api.Contract{Action: "limit", RateBPS: 10_000_000, BurstBytes: 65536}
	info, err := c.SetContract(ctx, 3, limit)
	if want := (api.ContractInfo{Class: 3, Contract: limit}); err != nil || info != want {
		t.Fatalf("SetContract(3) = %+v, %v; want %+v", info, err, want)
	}
	// The datapath meters bytes per second.
	if got, want := dp.contracts[3].Contract, (policer.Contract{Class: 3, Action: policer.Limit,
		Rate: 1_250_000, Burst: 65536}); got != want {
		t.Errorf("datapath contract %+v, want %+v", got, want)
	}
	if _, err := c.SetContract(ctx, 0, api.Contract{Action: "drop"}); err != nil {
		t.Fatalf("SetContract(0): %v", err)
	}

	// Counters come from the datapath, and carry on when the contract is replaced.
	counters := policer.Counters{PassedPackets: 9, PassedBytes: 9000, DroppedPackets: 1, DroppedBytes: 1000}
	dp.setCounters(3, counters)
	pass := api.Contract{Action: "pass"}
	info, err = c.SetContract(ctx, 3, pass)
	want3 := api.ContractInfo{Class: 3, Contract: pass, Counters: api.PoliceCounters{PassedPackets: 9, PassedBytes: 9000,
		DroppedPackets: 1, DroppedBytes: 1000}}
	if err != nil || info != want3 {
		t.Errorf("SetContract(3) again = %+v, %v; want %+v", info, err, want3)
	}
	list, err = c.Contracts(ctx)
	want := []api.ContractInfo{{Class: 0, Contract: api.Contract{Action: "drop"}}, want3}
	if err != nil || !reflect.DeepEqual(list, want) {
		t.Errorf("Contracts = %+v, %v; want %+v", list, err, want)
	}
	if one, err := c.Contract(ctx, 3); err != nil || one != want3 {
		t.Errorf("Contract(3) = %+v, %v; want %+v", one, err, want3)
	}

	if err := c.DeleteContract(ctx, 3); err != nil {
		t.Fatalf("DeleteContract(3): %v", err)
	}
	if _, err := c.Contract(ctx, 3); statusCode(err) != http.StatusNotFound || err.Error() != "class 3 has no contract" {
		t.Errorf("Contract(3) after delete: %v (code %d), want 404 class 3 has no contract", err, statusCode(err))
	}
	if err := c.DeleteContract(ctx, 0); err != nil {
		t.Fatalf("DeleteContract(0): %v", err)
	}
	if err := c.DeleteContract(ctx, 0); statusCode(err) != http.StatusNotFound || err.Error() != "there is no default contract (class 0)" {
		t.Errorf("DeleteContract(0) again: %v (code %d), want 404", err, statusCode(err))
	}
}

func TestDaemonContractErrors(t *testing.T) {
	d, dp, c := newClassDaemon(t)
	ctx := t.Context()
	if _, err := c.SetContract(ctx, 3, api.Contract{Action: "drop"}); err != nil {
		t.Fatal(err)
	}

	_, errAction := c.SetContract(ctx, 3, api.Contract{Action: "police"})
	_, errRate := c.SetContract(ctx, 3, api.Contract{Action: "limit", RateBPS: 1001, BurstBytes: 1500})
	_, errBoth := c.SetContract(ctx, 0, api.Contract{Action: "limit"})
	_, errPass := c.SetContract(ctx, 4, api.Contract{Action: "pass", BurstBytes: 1})
	dp.fakePolicer.setErr = errors.New("contract for class 3: write it: no space left on device")
	_, errWrite := c.SetContract(ctx, 3, api.Contract{Action: "pass"})
	errDelete := c.DeleteContract(ctx, 3)
	dp.fakePolicer.setErr = nil
	dp.fakePolicer.readErr = errors.New("counters of the contract for class 3: operation not permitted")
	_, errList := c.Contracts(ctx)
	dp.fakePolicer.readErr = nil

	for _, tt := range []struct {
		name     string
		err      error
		wantCode int
		wantMsg  string
	}{
		{"unknown action", errAction, 400, `contract for class 3: action: "police" is not an action; use pass, drop or limit`},
		{"rate not whole bytes", errRate, 400,
			"contract for class 3: rate_bps: 1001 is not a multiple of 8 (the policer meters whole bytes per second); use 1000 or 1008"},
		{"limit without rate and burst", errBoth, 400, "default contract: " +
			"rate_bps: a limit needs a rate in bits per second, e.g. 10000000 for 10 Mbit/s\n" +
			"burst_bytes: a limit needs a burst in bytes, at least the largest packet, e.g. 65536"},
		{"pass with a burst", errPass, 400,
			"contract for class 4: burst_bytes: pass takes no burst; leave burst_bytes out, or use action limit"},
		// The datapath's failures are the daemon's, not the client's.
		{"datapath fails on set", errWrite, 500, "contract for class 3: write it: no space left on device"},
		{"datapath fails on delete", errDelete, 500, "contract for class 3: write it: no space left on device"},
		{"datapath fails on list", errList, 500, "counters of the contract for class 3: operation not permitted"},
	} {
		if statusCode(tt.err) != tt.wantCode || tt.err.Error() != tt.wantMsg {
			t.Errorf("%s: error %v (code %d), want %d %q", tt.name, tt.err, statusCode(tt.err), tt.wantCode, tt.wantMsg)
		}
	}
	// Nothing that failed changed the contracts.
	list, err := d.Contracts()
	if want := []api.ContractInfo{{Class: 3, Contract: api.Contract{Action: "drop"}}}; err != nil || !reflect.DeepEqual(list, want) {
		t.Errorf("Contracts = %+v, %v; want %+v", list, err, want)
	}
	// The kinds api documents, with the messages unprefixed.
	if _, err := d.SetContract(1, api.Contract{}); !errors.Is(err, api.ErrInvalid) ||
		err.Error() != "contract for class 1: action: missing; use pass, drop or limit" {
		t.Errorf("invalid: %v is not ErrInvalid with Check's message", err)
	}
	if err := d.DeleteContract(9); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("delete unknown: %v is not ErrNotFound", err)
	}
	if _, err := d.Contract(9); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("get unknown: %v is not ErrNotFound", err)
	}
}

// The API's action names are internal/policer's: a contract that passes api.Contract.Check
// is one the policer takes (its bounds and default class are policer's constants).
func TestContractActionsMatchPolicer(t *testing.T) {
	for _, name := range []string{api.ActionPass, api.ActionDrop, api.ActionLimit} {
		if a, ok := policer.ParseAction(name); !ok || a.String() != name {
			t.Errorf("action %q is %v, %v in the policer", name, a, ok)
		}
	}
}
