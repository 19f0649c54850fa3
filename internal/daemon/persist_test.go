package daemon

import (
	"context"
	"slices"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/state"
)

// TestClassesSurviveRestart: the classes and policer contracts the API sets are in the state
// file once answered, and a restarted daemon applies them again over the configuration
// file's: what the API deleted stays deleted, the file's own classes and contracts included.
func TestClassesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *state.Store {
		st, err := state.Open(dir, nil, storeBuckets...)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	file := &config.Config{
		Classes: []classifier.Class{{ID: 5, Priority: 20, Protocol: "tcp"}, {ID: 6, Priority: 50, Protocol: "udp"}},
		Contracts: []config.Contract{{Class: 5, Contract: api.Contract{Action: "drop"}},
			{Class: 6, Contract: api.Contract{Action: "drop"}}},
	}
	d, _, c := newClassDaemon(t)
	d.cfg = file
	d.store = open()
	if err := d.configureClasses(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sip := classifier.Class{ID: 3, Priority: 100, Protocol: "udp", DstPort: "5060"}
	web := classifier.Class{ID: 1, Priority: 10, Protocol: "tcp", DstPort: "443"}
	for _, cl := range []classifier.Class{sip, web} {
		if _, err := c.AddClass(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	limit := api.Contract{Action: "limit", RateBPS: 10_000_000, BurstBytes: 65536}
	if _, err := c.SetContract(ctx, 3, limit); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetContract(ctx, 1, api.Contract{Action: "drop"}); err != nil {
		t.Fatal(err)
	}
	// Deleted through the API: one class and contract of its own, one of the file's each.
	for _, id := range []uint32{1, 5} {
		if err := c.DeleteClass(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint32{1, 6} {
		if err := c.DeleteContract(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	d.store.Close()

	d2, dp2, c2 := newClassDaemon(t)
	d2.cfg = file
	d2.store = open()
	defer d2.store.Close()
	if err := d2.configureClasses(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dp2.applied, []uint32{3, 6}) {
		t.Errorf("classes applied after the restart %v, want [3 6]", dp2.applied)
	}
	got, err := c2.Contracts(ctx)
	want := []api.Contract{{Action: "drop"}, limit} // classes 5 and 3
	if err != nil || len(got) != 2 || got[0].Class != 3 || got[0].Contract != want[1] ||
		got[1].Class != 5 || got[1].Contract != want[0] {
		t.Errorf("contracts after the restart %+v, %v; want class 3's %+v and class 5's %+v", got, err, limit, want[0])
	}
}
