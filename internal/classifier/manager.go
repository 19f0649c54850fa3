package classifier

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ErrNotFound is returned for an unknown class id.
var ErrNotFound = errors.New("class not found")

// Datapath is where compiled classes go.
type Datapath interface {
	// SetClasses replaces the datapath's classes with c, atomically for packets.
	SetClasses(c Compiled) error
}

// Manager owns the class set: every change is validated, compiled and applied as a whole,
// and on any error nothing changes.
type Manager struct {
	mu      sync.Mutex
	dp      Datapath
	classes map[uint32]Class
}

// NewManager returns a Manager with no classes.
func NewManager(dp Datapath) *Manager {
	return &Manager{dp: dp, classes: map[uint32]Class{}}
}

// Add adds classes, all or none, compiled and applied once; their ids must be new.
func (m *Manager) Add(cs ...Class) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := maps.Clone(m.classes)
	for _, c := range cs {
		if _, ok := next[c.ID]; ok {
			return fmt.Errorf("class %d already exists; delete it first or use another id", c.ID)
		}
		next[c.ID] = c
	}
	return m.apply(next)
}

// Delete removes a class.
func (m *Manager) Delete(id uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.classes[id]; !ok {
		return fmt.Errorf("class %d: %w", id, ErrNotFound)
	}
	next := maps.Clone(m.classes)
	delete(next, id)
	return m.apply(next)
}

// Get returns one class.
func (m *Manager) Get(id uint32) (Class, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.classes[id]
	if !ok {
		return Class{}, fmt.Errorf("class %d: %w", id, ErrNotFound)
	}
	return c, nil
}

// List returns every class, sorted by id.
func (m *Manager) List() []Class {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Class, 0, len(m.classes))
	for _, c := range m.classes {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Class) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// apply compiles next and hands it to the datapath; only then does it become the set.
func (m *Manager) apply(next map[uint32]Class) error {
	rules := make([]Rule, 0, len(next))
	for _, c := range next {
		r, err := c.Parse()
		if err != nil {
			return err
		}
		rules = append(rules, r)
	}
	compiled, err := Compile(rules)
	if err != nil {
		return err
	}
	if err := m.dp.SetClasses(compiled); err != nil {
		return fmt.Errorf("apply classes to the datapath: %w", err)
	}
	m.classes = next
	return nil
}
