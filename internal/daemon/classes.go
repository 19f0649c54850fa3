package daemon

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
)

// classDatapath is what the classifier, and the policer keyed by its class ids, need of the
// datapath: *datapath.Datapath, or a fake in tests.
type classDatapath interface {
	classifier.Datapath
	ClassCounters(id uint32) (session.Counters, error)
	policerDatapath
}

// initClassifier gives the daemon a classifier with no classes over dp. The datapath starts
// with none too, so the two agree.
func (d *Daemon) initClassifier(dp classDatapath) {
	d.classDP = dp
	d.classes = classifier.NewManager(applyErrors{dp})
}

// applyErrors marks the datapath's failures to apply a class set, so that they can be told
// apart from the Manager's own validation errors once the Manager has wrapped them: those
// are the client's mistakes (400), these are the daemon's (500).
type applyErrors struct{ dp classifier.Datapath }

func (a applyErrors) SetClasses(c classifier.Compiled) error {
	if err := a.dp.SetClasses(c); err != nil {
		return &applyError{err}
	}
	return nil
}

type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// classError turns a Manager error into what api.Backend promises: ErrNotFound for an unknown
// id, the datapath's failures as they are, and anything else (the class does not parse, or
// the class set does not compile, e.g. too many classes) as ErrInvalid with the Manager's
// message, which names the field.
func classError(err error) error {
	var applyErr *applyError
	switch {
	case errors.Is(err, classifier.ErrNotFound):
		return api.WithKind(api.ErrNotFound, err)
	case errors.As(err, &applyErr):
		return err
	default:
		return api.WithKind(api.ErrInvalid, err)
	}
}

// configureClasses sets the configuration's classes and policer contracts with the API's
// changes of earlier runs (the state file's) on top: a class or contract the API set replaces
// the file's of the same id, one the API deleted stays deleted. The classes go in one change
// of the Manager (one compilation, all or none), then each contract.
func (d *Daemon) configureClasses() error {
	classes := map[uint32]classifier.Class{}
	for _, c := range d.cfg.Classes {
		classes[c.ID] = c
	}
	contracts := map[uint32]api.Contract{}
	for _, c := range d.cfg.Contracts {
		contracts[c.Class] = c.Contract
	}
	if err := d.overlayClasses(classes, contracts); err != nil {
		return err
	}
	d.classMu.Lock()
	defer d.classMu.Unlock()
	if len(classes) > 0 {
		ids := slices.Sorted(maps.Keys(classes))
		all := make([]classifier.Class, len(ids))
		for i, id := range ids {
			all[i] = classes[id]
		}
		if err := d.classes.Add(all...); err != nil {
			return fmt.Errorf("classifier_classes: %w", err)
		}
		d.log.Info("classes added", "classes", len(all))
	}
	for _, class := range slices.Sorted(maps.Keys(contracts)) {
		c := contracts[class]
		if err := c.Check(class); err != nil {
			return fmt.Errorf("policer_contracts: %w", err)
		}
		if err := d.applyContract(class, c); err != nil {
			return fmt.Errorf("policer_contracts: contract for class %d: %w", class, err)
		}
	}
	return nil
}

// Classes implements api.Backend.
func (d *Daemon) Classes() ([]api.ClassInfo, error) {
	d.classMu.RLock()
	defer d.classMu.RUnlock()
	list := d.classes.List()
	out := make([]api.ClassInfo, 0, len(list))
	for _, c := range list {
		counters, err := d.classDP.ClassCounters(c.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, api.ClassInfo{Class: c, Counters: counters})
	}
	return out, nil
}

// Class implements api.Backend.
func (d *Daemon) Class(id uint32) (api.ClassInfo, error) {
	d.classMu.RLock()
	defer d.classMu.RUnlock()
	return d.classInfo(id)
}

func (d *Daemon) classInfo(id uint32) (api.ClassInfo, error) {
	c, err := d.classes.Get(id)
	if err != nil {
		return api.ClassInfo{}, classError(err)
	}
	counters, err := d.classDP.ClassCounters(id)
	if err != nil {
		return api.ClassInfo{}, err
	}
	return api.ClassInfo{Class: c, Counters: counters}, nil
}

// AddClass implements api.Backend.
func (d *Daemon) AddClass(c classifier.Class) (api.ClassInfo, error) {
	d.classMu.Lock()
	defer d.classMu.Unlock()
	// Checked here, not left to Add, whose duplicate error carries no sentinel.
	if _, err := d.classes.Get(c.ID); err == nil {
		return api.ClassInfo{}, api.WithKind(api.ErrConflict,
			fmt.Errorf("class %d already exists; delete it first or use another id", c.ID))
	}
	if err := d.classes.Add(c); err != nil {
		return api.ClassInfo{}, classError(err)
	}
	if err := d.keep(bucketClasses, idKey(c.ID), c); err != nil {
		return api.ClassInfo{}, err
	}
	d.log.Info("class added", "class", c.ID, "priority", c.Priority)
	return d.classInfo(c.ID)
}

// DeleteClass implements api.Backend.
func (d *Daemon) DeleteClass(id uint32) error {
	d.classMu.Lock()
	defer d.classMu.Unlock()
	if err := d.classes.Delete(id); err != nil {
		return classError(err)
	}
	d.log.Info("class deleted", "class", id)
	return d.keep(bucketClasses, idKey(id), nil)
}
