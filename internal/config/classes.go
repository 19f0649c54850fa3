package config

import (
	"fmt"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
)

// Traffic classes and policer contracts may be written in the file. The daemon adds them at
// start-up through the same classifier manager and SetContract as the API, so they take the
// API's checks and limits; they are checked here too, with the API's own checks, so that a
// mistake is reported with its place in the file before anything starts.

// Contract is a policer contract: the class it is for (0: the default contract) and what it
// does, as PUT /api/v1/policer/contracts/{class} takes it.
type Contract struct {
	Class        uint32 `yaml:"class"`
	api.Contract `yaml:",inline"`
}

// classes checks classifier_classes: each class as the API checks it, ids unique, and the
// whole set as the classifier compiles it (its size).
func (v *validator) classes(raws []classifier.Class) {
	nerrs := len(v.errs)
	seen := make(map[uint32]int, len(raws))
	rules := make([]classifier.Rule, 0, len(raws))
	for i, c := range raws {
		path := fmt.Sprintf("classifier_classes[%d]", i)
		r, err := c.Parse()
		if err != nil {
			v.addf("%s: %w", path, err)
			continue
		}
		if j, dup := seen[c.ID]; dup {
			v.addf("%s.id: %d is classifier_classes[%d]'s too; give each class its own id", path, c.ID, j)
			continue
		}
		seen[c.ID] = i
		rules = append(rules, r)
	}
	if len(v.errs) > nerrs {
		return
	}
	if _, err := classifier.Compile(rules); err != nil {
		v.addf("classifier_classes: %w", err)
		return
	}
	v.cfg.Classes = raws
}

// contracts checks policer_contracts: each as the API checks it, one per class.
func (v *validator) contracts(raws []Contract) {
	nerrs := len(v.errs)
	seen := make(map[uint32]int, len(raws))
	for i, c := range raws {
		path := fmt.Sprintf("policer_contracts[%d]", i)
		if err := c.Check(c.Class); err != nil {
			v.addf("%s: %w", path, err)
			continue
		}
		if j, dup := seen[c.Class]; dup {
			v.addf("%s.class: %d is policer_contracts[%d]'s too; give each class one contract", path, c.Class, j)
			continue
		}
		seen[c.Class] = i
	}
	if len(v.errs) == nerrs {
		v.cfg.Contracts = raws
	}
}
