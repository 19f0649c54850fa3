package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"gopkg.in/yaml.v3"
)

// Bounds of router.max_routes, router.max_route_chunks and router.max_nexthops.
const (
	DefaultMaxRoutes      = 1 << 20
	MaxMaxRoutes          = 1 << 24
	DefaultMaxRouteChunks = 4096
	MaxMaxRouteChunks     = 1 << 22
	DefaultMaxNexthops    = 1 << 16
	MaxMaxNexthops        = 1 << 24
)

// Router says where the datapath's routes and neighbours come from.
type Router struct {
	// Mode is RouterMirror (the default) or RouterPrivate.
	Mode RouterMode `yaml:"mode"`
	// MaxRoutes sizes the route table: routes plus a /32 per neighbour on an on-link route.
	MaxRoutes int `yaml:"max_routes"`
	// MaxRouteChunks sizes the route table's second and third levels: a chunk (1 KiB) per
	// /16 with longer prefixes inside, and per /24 with longer ones.
	MaxRouteChunks int `yaml:"max_route_chunks"`
	// MaxNexthops sizes the route table's next hops: one per distinct next hop (each
	// neighbour's MAC on each interface), plus those of changes in the last moments.
	MaxNexthops int `yaml:"max_nexthops"`
	// Routes and Neighbours are the private mode's at start-up (the API adds more).
	Routes     []Route     `yaml:"routes"`
	Neighbours []Neighbour `yaml:"neighbours"`
}

// Route is a private route. The daemon checks what needs the interfaces (router.Route.Check).
type Route struct {
	Prefix netip.Prefix `yaml:"prefix"`
	// Via is the gateway; none: the prefix is on link.
	Via netip.Addr `yaml:"via,omitempty"`
	// Interface is the interface the route leaves by, one of interfaces[].name (none for a
	// blackhole).
	Interface string `yaml:"interface,omitempty"`
	// Type is unicast (the default) or blackhole.
	Type string `yaml:"type,omitempty"`
	// MTU is the route's; 0 takes the interface's.
	MTU int `yaml:"mtu,omitempty"`
}

// MarshalYAML writes r as the file gives it. yaml.v3 takes a struct whose fields are all
// unexported, as netip.Addr's are, for empty: with omitempty it would leave the gateway out.
func (r Route) MarshalYAML() (any, error) {
	type file struct {
		Prefix    netip.Prefix `yaml:"prefix"`
		Via       string       `yaml:"via,omitempty"`
		Interface string       `yaml:"interface,omitempty"`
		Type      string       `yaml:"type,omitempty"`
		MTU       int          `yaml:"mtu,omitempty"`
	}
	f := file{Prefix: r.Prefix, Interface: r.Interface, Type: r.Type, MTU: r.MTU}
	if r.Via.IsValid() {
		f.Via = r.Via.String()
	}
	return f, nil
}

// Neighbour is a static neighbour entry.
type Neighbour struct {
	Address   netip.Addr `yaml:"address"`
	Interface string     `yaml:"interface"`
	MAC       string     `yaml:"mac"`
}

type rawRouter struct {
	Mode       RouterMode     `yaml:"mode"`
	MaxRoutes  yaml.Node      `yaml:"max_routes"`
	MaxChunks  yaml.Node      `yaml:"max_route_chunks"`
	MaxNexthop yaml.Node      `yaml:"max_nexthops"`
	Routes     []rawRoute     `yaml:"routes"`
	Neighbours []rawNeighbour `yaml:"neighbours"`
}

type rawRoute struct {
	Prefix    string    `yaml:"prefix"`
	Via       string    `yaml:"via"`
	Interface string    `yaml:"interface"`
	Type      string    `yaml:"type"`
	MTU       yaml.Node `yaml:"mtu"`
}

type rawNeighbour struct {
	Address   string `yaml:"address"`
	Interface string `yaml:"interface"`
	MAC       string `yaml:"mac"`
}

// router checks the router section.
func (v *validator) router(raw rawRouter) {
	r := &v.cfg.Router
	switch {
	case raw.Mode == "":
		r.Mode = RouterMirror
	case raw.Mode.Valid():
		r.Mode = raw.Mode
	default:
		v.addf("router.mode: %q is not a mode; use mirror (the kernel's routes and neighbours) or private (router.routes and the API)", raw.Mode)
	}
	for _, l := range []struct {
		node     *yaml.Node
		key      string
		min, max int
		to       *int
	}{
		{&raw.MaxRoutes, "max_routes", 1, MaxMaxRoutes, &r.MaxRoutes},
		{&raw.MaxChunks, "max_route_chunks", 1, MaxMaxRouteChunks, &r.MaxRouteChunks},
		{&raw.MaxNexthop, "max_nexthops", 2, MaxMaxNexthops, &r.MaxNexthops},
	} {
		n, present, err := intNode(l.node, uint64(l.min), uint64(l.max))
		switch {
		case err != nil:
			v.addf("router.%s: %w; use %d to %d", l.key, err, l.min, l.max)
		case present:
			*l.to = int(n)
		}
	}
	if r.Mode != RouterPrivate && (len(raw.Routes) > 0 || len(raw.Neighbours) > 0) {
		v.addf("router: routes and neighbours are only for router.mode: private; in mirror mode they come from the kernel (ip route, ip neigh)")
		return
	}
	for i, rr := range raw.Routes {
		path := fmt.Sprintf("router.routes[%d]", i)
		var rt Route
		var err error
		nerrs := len(v.errs)
		if rt.Prefix, err = netip.ParsePrefix(rr.Prefix); err != nil {
			v.addf("%s.prefix: %q is not a prefix; give e.g. 0.0.0.0/0 or 192.0.2.0/24", path, rr.Prefix)
		}
		if rr.Via != "" {
			if rt.Via, err = parseAddr(rr.Via, "the gateway's IPv4 address"); err != nil {
				v.addf("%s.via: %w", path, err)
			}
		}
		rt.Interface, rt.Type = rr.Interface, rr.Type
		if rt.Interface != "" {
			v.attachedInterface(path, rt.Interface)
		}
		mtu, _, err := intNode(&rr.MTU, 68, 65535)
		if err != nil {
			v.addf("%s.mtu: %w; use 68 to 65535, or leave it out for the interface's", path, err)
		}
		rt.MTU = int(mtu)
		if len(v.errs) > nerrs {
			continue
		}
		if j := slices.IndexFunc(r.Routes, func(o Route) bool { return o.Prefix == rt.Prefix }); j >= 0 {
			v.addf("%s.prefix: %s is router.routes[%d]'s too; list each prefix once", path, rt.Prefix, j)
			continue
		}
		r.Routes = append(r.Routes, rt)
	}
	for i, rn := range raw.Neighbours {
		path := fmt.Sprintf("router.neighbours[%d]", i)
		var nb Neighbour
		var err error
		nerrs := len(v.errs)
		if nb.Address, err = parseAddr(rn.Address, "the neighbour's IPv4 address"); err != nil {
			v.addf("%s.address: %w", path, err)
		}
		nb.Interface, nb.MAC = rn.Interface, rn.MAC
		v.attachedInterface(path, rn.Interface)
		if _, err := net.ParseMAC(rn.MAC); err != nil {
			v.addf("%s.mac: %q is not an Ethernet address; give e.g. 02:00:00:00:02:02", path, rn.MAC)
		}
		if len(v.errs) > nerrs {
			continue
		}
		if j := slices.IndexFunc(r.Neighbours, func(o Neighbour) bool {
			return o.Address == nb.Address && o.Interface == nb.Interface
		}); j >= 0 {
			v.addf("%s: %s on %s is router.neighbours[%d] too; list each once", path, nb.Address, nb.Interface, j)
			continue
		}
		r.Neighbours = append(r.Neighbours, nb)
	}
}

// attachedInterface checks that name, at path, is one of the interfaces xupfd attaches to.
func (v *validator) attachedInterface(path, name string) {
	if name == "" {
		v.addf("%s.interface: missing; give one of interfaces[].name", path)
		return
	}
	if !slices.ContainsFunc(v.cfg.Interfaces, func(i Interface) bool { return i.Name == name }) {
		v.addf("%s.interface: %q is not one of interfaces[].name; the datapath forwards only out of the interfaces it is attached to", path, name)
	}
}
