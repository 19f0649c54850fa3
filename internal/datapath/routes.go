package datapath

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/xupf/xupf/internal/router"
)

// DefaultMaxRoutes sizes xupf_routes: routes, plus a /32 per neighbour on an on-link subnet.
// The trie allocates entries as they come, so the size is a cap, not memory taken.
const DefaultMaxRoutes = 1 << 20

// routeTable is xupf_routes as the router writes it.
type routeTable struct{ m *ebpf.Map }

var _ router.Table = routeTable{}

func routeKeyOf(p netip.Prefix) xupfRouteKey {
	return xupfRouteKey{Prefixlen: uint32(p.Bits()), Addr: addrBE(p.Addr())}
}

func (t routeTable) Put(p netip.Prefix, nh router.Nexthop) error {
	v := xupfNexthop{Kind: uint8(nh.Kind), Ifindex: uint32(nh.Ifindex), Mtu: uint32(nh.MTU), Dmac: nh.Dst, Smac: nh.Src}
	return t.m.Put(routeKeyOf(p), v)
}

func (t routeTable) Delete(p netip.Prefix) error {
	if err := t.m.Delete(routeKeyOf(p)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

func (t routeTable) Entries() (map[netip.Prefix]router.Nexthop, error) {
	out := map[netip.Prefix]router.Nexthop{}
	var k xupfRouteKey
	var v xupfNexthop
	it := t.m.Iterate()
	for it.Next(&k, &v) {
		p := netip.PrefixFrom(addrFromBE(k.Addr), int(k.Prefixlen))
		out[p] = router.Nexthop{Kind: router.Kind(v.Kind), Ifindex: int(v.Ifindex), MTU: int(v.Mtu), Dst: v.Dmac, Src: v.Smac}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read xupf_routes: %w", err)
	}
	return out, nil
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
