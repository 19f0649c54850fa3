package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
	"unsafe"

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
	return s.m.Put(slot, nexthopValue(nh))
}

func nexthopValue(nh router.Nexthop) xupfNexthop {
	return xupfNexthop{Kind: uint8(nh.Kind), Ifindex: uint32(nh.Ifindex), Mtu: uint32(nh.MTU), Dmac: nh.Dst, Smac: nh.Src}
}

// A pin entry's copy of a next hop is a struct nexthop in routedir.CopyWords words: these
// fail to compile when the sizes differ.
var (
	_ [unsafe.Sizeof(xupfNexthop{}) - 8*routedir.CopyWords]struct{}
	_ [8*routedir.CopyWords - unsafe.Sizeof(xupfNexthop{})]struct{}
)

// pinCopy lays nh out as a pin entry's copy (struct nh_pin), in the mapped array's words.
func pinCopy(nh router.Nexthop) [routedir.CopyWords]uint64 {
	var c [routedir.CopyWords]uint64
	// A struct of fixed size: Append cannot fail.
	b, _ := binary.Append(make([]byte, 0, 8*len(c)), binary.NativeEndian, nexthopValue(nh))
	for k := range c {
		c[k] = binary.NativeEndian.Uint64(b[8*k:])
	}
	return c
}

func (s nexthopSlots) Get(slot uint32) (router.Nexthop, error) {
	var v xupfNexthop
	if err := s.m.Lookup(slot, &v); err != nil {
		return router.Nexthop{}, err
	}
	return router.Nexthop{Kind: router.Kind(v.Kind), Ifindex: int(v.Ifindex), MTU: int(v.Mtu), Dst: v.Dmac, Src: v.Smac}, nil
}

// routeTable is xupf_route_dir and xupf_nh_pins, mapped, as the router and the rule sets
// write them: the router changes routes while rule sets pin their tunnels' peers, so both
// go through mu.
type routeTable struct {
	mu    sync.Mutex
	table *routedir.Table
	mem   mappedArray
	pins  mappedArray
	// settle runs the table's SettlePins once a pin's spare copy has rested; closed stops it
	// touching the mappings once they are gone.
	settle *time.Timer
	closed bool
}

var _ router.Table = (*routeTable)(nil)

// mapRouteTable maps xupf_route_dir and xupf_nh_pins and takes over what an earlier run
// left in the route table; its pins are cleared (see routedir.Table.SetPins).
func mapRouteTable(dir, nexthops, pins *ebpf.Map, opts Options) (*routeTable, error) {
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
	pinMem, err := mapArray(pins)
	if err != nil {
		mem.unmap()
		return nil, err
	}
	rt := &routeTable{table: t, mem: mem, pins: pinMem}
	t.SetPins(pinMem.words64(), pinCopy, rt.wake)
	return rt, nil
}

// wake has the table's SettlePins run after d; it is called holding mu.
func (t *routeTable) wake(d time.Duration) {
	t.settle = time.AfterFunc(d, func() {
		t.locked(func() {
			if !t.closed {
				t.table.SettlePins()
			}
		})
	})
}

// locked runs fn holding mu.
func (t *routeTable) locked(fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn()
}

// Put implements router.Table.
func (t *routeTable) Put(p netip.Prefix, nh router.Nexthop) (err error) {
	t.locked(func() { err = t.table.Put(p, nh) })
	return err
}

// Delete implements router.Table.
func (t *routeTable) Delete(p netip.Prefix) (err error) {
	t.locked(func() { err = t.table.Delete(p) })
	return err
}

// Entries implements router.Table.
func (t *routeTable) Entries() (m map[netip.Prefix]router.Nexthop, _ error) {
	t.locked(func() { m = t.table.Entries() })
	return m, nil
}

// pin returns the xupf_nh_pins word that keeps a tunnel peer's next hop (0: none, the
// packets walk the route table); each pin is matched by an unpin.
func (t *routeTable) pin(peer netip.Addr) (i uint16) {
	t.locked(func() { i = uint16(t.table.Pin(peer)) }) // routedir.MaxPins keeps it in 16 bits
	return i
}

func (t *routeTable) unpin(peer netip.Addr) {
	t.locked(func() { t.table.Unpin(peer) })
}

func (t *routeTable) close() error {
	if t == nil {
		return nil
	}
	t.locked(func() {
		t.closed = true
		if t.settle != nil {
			t.settle.Stop()
		}
	})
	return errors.Join(t.mem.unmap(), t.pins.unmap())
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
