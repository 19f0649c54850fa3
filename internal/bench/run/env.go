package run

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/testbed"
)

// side is one end of the topology where traffic starts or ends.
type side struct {
	ns      string
	handle  netns.NsHandle
	ifname  string
	ifindex int
}

// env is the testbed topology with what a benchmark adds: static neighbours and routes in
// the upf namespace for the plan's address blocks, and the MAC addresses frames need.
type env struct {
	t        *testbed.Topology
	gnb, dn  side
	m        macs
	n3, n6   int // ifindexes in upf
	upf      netns.NsHandle
	queueCnt int
}

// newEnv builds the topology with one queue per CPU on every veth, so that generator threads
// on different CPUs do not share one ring.
func newEnv(pl plan) (_ *env, err error) {
	t, err := testbed.NewWith("xb", testbed.Options{Queues: runtime.NumCPU()})
	if err != nil {
		return nil, err
	}
	e := &env{t: t, queueCnt: runtime.NumCPU()}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Close())
		}
	}()
	e.gnb = side{ns: t.GNBNS, ifname: testbed.GNBIf}
	e.dn = side{ns: t.DNNS, ifname: testbed.DNIf}
	for _, s := range []*side{&e.gnb, &e.dn} {
		if s.handle, err = t.Handle(s.ns); err != nil {
			return nil, err
		}
	}
	if e.upf, err = t.Handle(t.UPFNS); err != nil {
		return nil, err
	}
	var gnbMAC, dnMAC, n3MAC, n6MAC net.HardwareAddr
	steps := []struct {
		ns, name string
		mac      *net.HardwareAddr
		index    *int
	}{
		{t.GNBNS, testbed.GNBIf, &gnbMAC, &e.gnb.ifindex},
		{t.DNNS, testbed.DNIf, &dnMAC, &e.dn.ifindex},
		{t.UPFNS, testbed.N3If, &n3MAC, &e.n3},
		{t.UPFNS, testbed.N6If, &n6MAC, &e.n6},
	}
	for _, s := range steps {
		ifc, err := t.Interface(s.ns, s.name)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		*s.mac, *s.index = ifc.HardwareAddr, ifc.Index
	}
	copy(e.m.gnb[:], gnbMAC)
	copy(e.m.dn[:], dnMAC)
	copy(e.m.n3[:], n3MAC)
	copy(e.m.n6[:], n6MAC)
	if err := e.routeUPF(pl); err != nil {
		return nil, err
	}
	return e, nil
}

// routeUPF adds, in upf, permanent neighbours for the gNB and the DN host (so that no
// frame waits for ARP) and the routes of pl.upfRoutes.
func (e *env) routeUPF(pl plan) error {
	h, err := netlink.NewHandleAt(e.upf)
	if err != nil {
		return fmt.Errorf("bench: netlink in upf: %w", err)
	}
	defer h.Close()
	neigh := []struct {
		ifindex int
		ip      netip.Addr
		mac     [6]byte
	}{{e.n3, testbed.GNBAddr, e.m.gnb}, {e.n6, testbed.DNAddr, e.m.dn}}
	for _, n := range neigh {
		err := h.NeighSet(&netlink.Neigh{LinkIndex: n.ifindex, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: n.ip.AsSlice(), HardwareAddr: net.HardwareAddr(n.mac[:])})
		if err != nil {
			return fmt.Errorf("bench: neighbour %s in upf: %w", n.ip, err)
		}
	}
	add := func(dst netip.Prefix, ifindex int, gw netip.Addr) error {
		r := &netlink.Route{LinkIndex: ifindex, Gw: gw.AsSlice(),
			Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)}}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("bench: route %s via %s in upf: %w", dst, gw, err)
		}
		return nil
	}
	for _, r := range pl.upfRoutes() {
		ifindex, gw := e.n3, testbed.GNBAddr
		if r.toDN {
			ifindex, gw = e.n6, testbed.DNAddr
		}
		if err := add(r.dst, ifindex, gw); err != nil {
			return err
		}
	}
	return nil
}

// near and far are where direction dir's traffic enters and leaves.
func (e *env) near(uplink bool) side {
	if uplink {
		return e.gnb
	}
	return e.dn
}

func (e *env) far(uplink bool) side {
	if uplink {
		return e.dn
	}
	return e.gnb
}

// attachSink replaces the XDP_PASS program of s's interface with a sink that counts,
// samples and drops the generated frames (the payload magic at one of offsets) and passes
// the rest: the PFCP answers to the SMF in gnb arrive on the same interface.
func (e *env) attachSink(s side, sampleEvery int, offsets []int) (*gen.Sink, error) {
	if err := e.t.DetachPeerXDP(s.ifname); err != nil {
		return nil, err
	}
	return gen.AttachSink(gen.SinkOptions{Ifindex: s.ifindex, Netns: s.handle, SampleEvery: uint64(sampleEvery), MagicOffsets: offsets})
}

// calibration is a veth pair of its own in the gnb namespace, whose far end drops: the
// generator's own maximum rate with a point's frames is measured into it.
type calibration struct {
	send int
	sink *gen.Sink
	ns   netns.NsHandle
}

// calibrationPair creates cal0/cal1 in gnb (multi-queue like the topology's veths) with a
// dropping sink on cal1. It goes away with the namespace.
func (e *env) calibrationPair() (*calibration, error) {
	c := &calibration{ns: e.gnb.handle}
	err := e.t.Do(e.gnb.ns, func() error {
		send, recv, err := testbed.VethPair{Name: "cal0", Peer: "cal1", Queues: e.queueCnt}.Add()
		if err != nil {
			return err
		}
		c.send = send
		c.sink, err = gen.AttachSink(gen.SinkOptions{Ifindex: recv})
		if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: calibration pair in gnb: %w", err)
	}
	return c, nil
}
