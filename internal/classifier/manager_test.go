package classifier

import (
	"errors"
	"testing"
)

type recordingDatapath struct {
	applied int
	err     error
}

func (r *recordingDatapath) SetClasses(Compiled) error {
	r.applied++
	return r.err
}

// Add of several classes applies them once, and all or none.
func TestManagerAddSeveral(t *testing.T) {
	dp := &recordingDatapath{}
	m := NewManager(dp)
	if err := m.Add(Class{ID: 1}, Class{ID: 2, Priority: 3}); err != nil {
		t.Fatal(err)
	}
	if dp.applied != 1 || len(m.List()) != 2 {
		t.Errorf("applied %d times, %d classes; want once, 2", dp.applied, len(m.List()))
	}
	for _, cs := range [][]Class{
		{{ID: 3}, {ID: 3}},                // twice in one call
		{{ID: 3}, {ID: 1}},                // one already there
		{{ID: 3}, {ID: 4, Protocol: "x"}}, // one does not parse
	} {
		if err := m.Add(cs...); err == nil {
			t.Errorf("Add(%+v) succeeded", cs)
		}
	}
	dp.err = errors.New("map full")
	if err := m.Add(Class{ID: 5}); err == nil {
		t.Error("Add succeeded though the datapath refused")
	}
	if got := m.List(); len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
		t.Errorf("classes after refused adds: %+v, want 1 and 2", got)
	}
}
