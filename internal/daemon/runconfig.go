package daemon

import (
	"cmp"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/router"
)

// RunningConfig implements api.Backend: the configuration New was given (defaults filled in),
// with the traffic classes and policer contracts, and in private router mode the routes and
// neighbours, as they are now, written as the file is. Parsing it gives that configuration
// back (TestRunningConfigRoundTrip, and TestPrivateRoutes end to end).
func (d *Daemon) RunningConfig() ([]byte, error) {
	cfg := *d.cfg
	if cfg.Router.Mode == config.RouterPrivate {
		cfg.Router.Routes, cfg.Router.Neighbours = d.privateRoutes()
	}
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
	head := fmt.Sprintf("# xupfd %s: the running configuration (classifier_classes, policer_contracts and private "+
		"routes and neighbours as they are now)\n", d.version)
	return append([]byte(head), data...), nil
}

// privateRoutes are the private router's routes and neighbours as the configuration gives
// them (a unicast route's type left out, as it may be in the file).
func (d *Daemon) privateRoutes() ([]config.Route, []config.Neighbour) {
	r := d.dp.Router()
	var routes []config.Route
	for _, rt := range r.Routes() {
		c := config.Route{Prefix: rt.Prefix, Via: rt.Gateway, MTU: rt.MTU}
		if rt.Type == router.Unicast {
			c.Interface = r.LinkName(rt.Ifindex)
		} else {
			c.Type = rt.Type.String()
		}
		routes = append(routes, c)
	}
	var neighbours []config.Neighbour
	for _, n := range r.Neighbours() {
		neighbours = append(neighbours, config.Neighbour{Address: n.Addr, Interface: r.LinkName(n.Ifindex), MAC: n.MAC.String()})
	}
	return routes, neighbours
}
