package daemon

import (
	"context"
	"slices"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/state"
)

// TestClassesSurviveRestart: the classes and policer contracts the API sets are in the state
// file once answered, and a restarted daemon applies them again; deleted ones stay deleted.
func TestClassesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *state.Store {
		st, err := state.Open(dir, nil, storeBuckets...)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	d, _, c := newClassDaemon(t)
	d.store = open()
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
	if err := c.DeleteClass(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteContract(ctx, 1); err != nil {
		t.Fatal(err)
	}
	d.store.Close()

	d2, dp2, c2 := newClassDaemon(t)
	d2.store = open()
	defer d2.store.Close()
	classes, contracts, err := d2.restoreClasses()
	if err != nil || classes != 1 || contracts != 1 {
		t.Fatalf("restoreClasses = %d, %d, %v; want 1 class and 1 contract", classes, contracts, err)
	}
	if !slices.Equal(dp2.applied, []uint32{3}) {
		t.Errorf("classes applied after the restart %v, want [3]", dp2.applied)
	}
	got, err := c2.Contracts(ctx)
	if err != nil || len(got) != 1 || got[0].Class != 3 || got[0].Contract != limit {
		t.Errorf("contracts after the restart %+v, %v; want class 3's %+v", got, err, limit)
	}
}
