package datapath

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/xupf/xupf/internal/routedir"
	"github.com/xupf/xupf/internal/router"
)

// Defaults of the route table's sizes (router.max_routes, max_route_chunks, max_nexthops).
// Routes cost the daemon's memory as they come; the chunks (1 KiB each) and next-hop slots
// are allocated when the maps are made.
const (
	DefaultMaxRoutes      = 1 << 20
	DefaultMaxRouteChunks = 4096
	DefaultMaxNexthops    = 1 << 16
)

// nexthopSlots is xupf_nexthops, where the route table's words point.
type nexthopSlots struct{ m *ebpf.Map }

func (s nexthopSlots) Put(slot uint32, nh router.Nexthop) error {
	return s.m.Put(slot, xupfNexthop{Kind: uint8(nh.Kind), Ifindex: uint32(nh.Ifindex), Mtu: uint32(nh.MTU), Dmac: nh.Dst, Smac: nh.Src})
}

func (s nexthopSlots) Get(slot uint32) (router.Nexthop, error) {
	var v xupfNexthop
	if err := s.m.Lookup(slot, &v); err != nil {
		return router.Nexthop{}, err
	}
	return router.Nexthop{Kind: router.Kind(v.Kind), Ifindex: int(v.Ifindex), MTU: int(v.Mtu), Dst: v.Dmac, Src: v.Smac}, nil
}

// routeTable is xupf_route_dir, mapped, as the router writes it.
type routeTable struct {
	*routedir.Table
	mem mappedArray
}

var _ router.Table = (*routeTable)(nil)

// mapRouteTable maps xupf_route_dir and takes over what an earlier run left in it.
func mapRouteTable(dir, nexthops *ebpf.Map, opts Options) (*routeTable, error) {
	mem, err := mapArray(dir)
	if err != nil {
		return nil, err
	}
	t, err := routedir.New(mem.words32(), nexthopSlots{nexthops}, routedir.Limits{
		Routes: opts.MaxRoutes, Chunks: opts.MaxRouteChunks, Slots: opts.MaxNexthops,
		RoutesKey: "router.max_routes", ChunksKey: "router.max_route_chunks", SlotsKey: "router.max_nexthops",
	})
	if err != nil {
		mem.unmap()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &routeTable{Table: t, mem: mem}, nil
}

// Entries implements router.Table.
func (t *routeTable) Entries() (map[netip.Prefix]router.Nexthop, error) {
	return t.Table.Entries(), nil
}

func (t *routeTable) close() error {
	if t == nil {
		return nil
	}
	return t.mem.unmap()
}

// Router is the datapath's router: its routes and neighbours in private mode, its entries.
func (d *Datapath) Router() *router.Router { return d.router }

// followRoutes has the router follow the namespace of the calling thread (see router.Follow).
func (d *Datapath) followRoutes() (stop func(), err error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	return d.router.Follow(ns)
}
