package daemon

import (
	"cmp"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/config"
)

// RunningConfig implements api.Backend: the configuration New was given (defaults filled in),
// with the traffic classes and policer contracts as they are now, written as the file is.
// Parsing it gives that configuration back (TestRunningConfigRoundTrip).
func (d *Daemon) RunningConfig() ([]byte, error) {
	cfg := *d.cfg
	d.classMu.RLock()
	classes := d.classes.List()
	contracts, err := d.classDP.Contracts()
	d.classMu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("read the policer contracts: %w", err)
	}
	cfg.Classes, cfg.Contracts = nil, nil
	if len(classes) > 0 {
		cfg.Classes = classes
	}
	for _, c := range contracts {
		info := apiContract(c)
		cfg.Contracts = append(cfg.Contracts, config.Contract{Class: info.Class, Contract: info.Contract})
	}
	slices.SortFunc(cfg.Contracts, func(a, b config.Contract) int { return cmp.Compare(a.Class, b.Class) })
	data, err := yaml.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("write the configuration: %w", err)
	}
	head := fmt.Sprintf("# xupfd %s: the running configuration (classifier_classes and policer_contracts as they are now)\n", d.version)
	return append([]byte(head), data...), nil
}
