package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/router"
)

// The router's routes and neighbours through the API: in private mode they are added and
// deleted here (and from router.routes and router.neighbours at start-up); in mirror mode
// they are the kernel's, listed only.

// Routes implements api.Backend.
func (d *Daemon) Routes() ([]api.Route, error) {
	r := d.dp.Router()
	var out []api.Route
	for _, rt := range r.Routes() {
		a := api.Route{Prefix: rt.Prefix.String(), Type: rt.Type.String(), MTU: rt.MTU}
		if rt.Gateway.IsValid() {
			a.Via = rt.Gateway.String()
		}
		if rt.Type == router.Unicast {
			a.Interface = r.LinkName(rt.Ifindex)
		}
		out = append(out, a)
	}
	return out, nil
}

// AddRoute implements api.Backend: the route is kept in the state file too.
func (d *Daemon) AddRoute(a api.Route) (api.Route, error) {
	out, err := d.addRoute(a)
	if err != nil {
		return api.Route{}, err
	}
	return out, d.keep(bucketRoutes, []byte(out.Prefix), out)
}

// addRoute adds a private route (the API's, the configuration's, the state file's).
func (d *Daemon) addRoute(a api.Route) (api.Route, error) {
	rt, err := d.routeOf(a)
	if err == nil {
		err = d.dp.Router().AddRoute(rt)
	}
	if err != nil {
		return api.Route{}, routerError(err)
	}
	if a.Type == "" {
		a.Type = rt.Type.String()
	}
	a.Prefix = rt.Prefix.String()
	return a, nil
}

// DeleteRoute implements api.Backend.
func (d *Daemon) DeleteRoute(prefix string) error {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return api.WithKind(api.ErrInvalid, fmt.Errorf("prefix: %q is not a prefix; give it as listed by `xupfctl route list`, e.g. 192.0.2.0/24", prefix))
	}
	if err := d.dp.Router().DeleteRoute(p); err != nil {
		return routerError(err)
	}
	return d.keep(bucketRoutes, []byte(p.String()), nil)
}

// Neighbours implements api.Backend.
func (d *Daemon) Neighbours() ([]api.Neighbour, error) {
	r := d.dp.Router()
	var out []api.Neighbour
	for _, n := range r.Neighbours() {
		out = append(out, api.Neighbour{Address: n.Addr.String(), Interface: r.LinkName(n.Ifindex), MAC: n.MAC.String()})
	}
	return out, nil
}

// AddNeighbour implements api.Backend: the neighbour is kept in the state file too.
func (d *Daemon) AddNeighbour(a api.Neighbour) (api.Neighbour, error) {
	out, err := d.addNeighbour(a)
	if err != nil {
		return api.Neighbour{}, err
	}
	return out, d.keep(bucketNeighbours, neighbourKey(out.Interface, netip.MustParseAddr(out.Address)), out)
}

// addNeighbour adds a private neighbour (the API's, the configuration's, the state file's).
func (d *Daemon) addNeighbour(a api.Neighbour) (api.Neighbour, error) {
	n, err := d.neighbourOf(a)
	if err == nil {
		err = d.dp.Router().AddNeighbour(n)
	}
	if err != nil {
		return api.Neighbour{}, routerError(err)
	}
	return api.Neighbour{Address: n.Addr.String(), Interface: a.Interface, MAC: n.MAC.String()}, nil
}

// DeleteNeighbour implements api.Backend.
func (d *Daemon) DeleteNeighbour(iface, address string) error {
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return api.WithKind(api.ErrInvalid, fmt.Errorf("address: %q is not an IPv4 address", address))
	}
	ifindex, err := d.attachedIfindex(iface)
	if err != nil {
		return routerError(err)
	}
	if err := d.dp.Router().DeleteNeighbour(addr, ifindex); err != nil {
		return routerError(err)
	}
	return d.keep(bucketNeighbours, neighbourKey(iface, addr), nil)
}

// routeOf parses a route as the API and the configuration give it.
func (d *Daemon) routeOf(a api.Route) (router.Route, error) {
	var rt router.Route
	var err error
	if rt.Type, err = router.ParseRouteType(a.Type); err != nil {
		return rt, err
	}
	if rt.Prefix, err = netip.ParsePrefix(a.Prefix); err != nil {
		return rt, fmt.Errorf("prefix: %q is not an IPv4 prefix; give e.g. 0.0.0.0/0 or 192.0.2.0/24", a.Prefix)
	}
	if a.Via != "" {
		if rt.Gateway, err = netip.ParseAddr(a.Via); err != nil {
			return rt, fmt.Errorf("via: %q is not an IPv4 address; give the gateway's, or leave via out for an on-link prefix", a.Via)
		}
	}
	if a.Interface != "" {
		if rt.Ifindex, err = d.attachedIfindex(a.Interface); err != nil {
			return rt, err
		}
	}
	rt.MTU = a.MTU
	return rt, nil
}

func (d *Daemon) neighbourOf(a api.Neighbour) (router.Neighbour, error) {
	var n router.Neighbour
	var err error
	if n.Addr, err = netip.ParseAddr(a.Address); err != nil {
		return n, fmt.Errorf("address: %q is not an IPv4 address", a.Address)
	}
	if n.MAC, err = net.ParseMAC(a.MAC); err != nil {
		return n, fmt.Errorf("mac: %q is not an Ethernet address; give e.g. 02:00:00:00:02:02", a.MAC)
	}
	n.Ifindex, err = d.attachedIfindex(a.Interface)
	return n, err
}

// attachedIfindex is the ifindex of name, one of the interfaces xupfd is attached to: the
// datapath forwards out of no other.
func (d *Daemon) attachedIfindex(name string) (int, error) {
	if name == "" {
		return 0, errors.New("interface: missing; give one of the interfaces xupfd is attached to")
	}
	if !slices.ContainsFunc(d.cfg.Interfaces, func(i config.Interface) bool { return i.Name == name }) {
		return 0, fmt.Errorf("interface: %q is not one xupfd is attached to (interfaces[].name); the datapath forwards out of no other", name)
	}
	l, ok := d.dp.Router().LinkByName(name)
	if !ok {
		return 0, fmt.Errorf("interface: %q does not exist", name)
	}
	return l.Index, nil
}

// routerError marks the router's errors for the API: ErrMirror is a conflict (the routes are
// the kernel's), ErrNotFound not found, a failed table write the daemon's own failure, any
// other an invalid request.
func routerError(err error) error {
	switch {
	case err == nil, errors.Is(err, router.ErrTable):
		return err
	case errors.Is(err, router.ErrMirror):
		return api.WithKind(api.ErrConflict, err)
	case errors.Is(err, router.ErrNotFound):
		return api.WithKind(api.ErrNotFound, err)
	}
	return api.WithKind(api.ErrInvalid, err)
}

// installRoutes adds router.routes and router.neighbours (private mode).
func (d *Daemon) installRoutes() error {
	for i, n := range d.cfg.Router.Neighbours {
		a := api.Neighbour{Address: n.Address.String(), Interface: n.Interface, MAC: n.MAC}
		if _, err := d.addNeighbour(a); err != nil {
			return fmt.Errorf("router.neighbours[%d]: %w", i, err)
		}
	}
	for i, r := range d.cfg.Router.Routes {
		a := api.Route{Prefix: r.Prefix.String(), Interface: r.Interface, Type: r.Type, MTU: r.MTU}
		if r.Via.IsValid() {
			a.Via = r.Via.String()
		}
		if _, err := d.addRoute(a); err != nil {
			return fmt.Errorf("router.routes[%d]: %w", i, err)
		}
	}
	return nil
}
