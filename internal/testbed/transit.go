package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/flowtable"
)

// Transit traffic crosses the box between the gnb and dn hosts as plain IP, no GTP-U: what
// the flow cache accelerates. AddTransitRoutes makes the two hosts reach each other through
// the UPF.

// AddTransitRoutes routes the DN host's subnet from the gnb host through the UPF's n3
// address, and the gnb host's subnet from the DN host through its n6 address.
func (t *Topology) AddTransitRoutes() error {
	return errors.Join(
		t.addRouteIn(t.GNBNS, GNBIf, netip.PrefixFrom(DNAddr, subnetBits).Masked(), N3Addr),
		t.addRouteIn(t.DNNS, DNIf, netip.PrefixFrom(GNBAddr, subnetBits).Masked(), N6Addr))
}

func (t *Topology) addRouteIn(ns, dev string, dst netip.Prefix, gw netip.Addr) error {
	err := t.withHandle(ns, func(h *netlink.Handle) error { return addRoute(h, dev, dst, gw) })
	if err != nil {
		return fmt.Errorf("testbed: route %s in %s: %w", dst, ns, err)
	}
	return nil
}

// withHandle runs fn with a netlink handle in namespace ns.
func (t *Topology) withHandle(ns string, fn func(*netlink.Handle) error) error {
	nsh, err := t.Handle(ns)
	if err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	return fn(h)
}

// ListenUDP starts receiving UDP on addr in namespace ns. Close it.
func (t *Topology) ListenUDP(ns string, addr netip.AddrPort) (*Receiver, error) {
	c, err := t.listenUDP(ns, addr)
	if err != nil {
		return nil, err
	}
	return &Receiver{conn: c}, nil
}

// SendUDP sends n datagrams with payload(i) from src to dst in namespace ns, with TTL
// InnerTTL.
func (t *Topology) SendUDP(ns string, src, dst netip.AddrPort, n int, payload func(i int) []byte) error {
	conn, err := t.UDPConn(ns, src)
	if err != nil {
		return err
	}
	defer conn.Close()
	to := net.UDPAddrFromAddrPort(dst)
	for i := range n {
		if _, err := conn.WriteToUDP(payload(i), to); err != nil {
			return fmt.Errorf("testbed: send packet %d of %d to %s: %w", i+1, n, dst, err)
		}
	}
	return nil
}

// UDPConn is a UDP socket bound to src in namespace ns, sending with TTL InnerTTL: fixed, so
// that a check of the TTL the box leaves does not depend on the host's ip_default_ttl. Close it.
func (t *Topology) UDPConn(ns string, src netip.AddrPort) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := t.Do(ns, func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(src))
		conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: udp socket %s in %s: %w", src, ns, err)
	}
	if err := setSockopts(conn, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TTL, InnerTTL)
	}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("testbed: set IP_TTL: %w", err)
	}
	return conn, nil
}

// CachedFlow is an entry of the daemon's flow cache, as the tests look at it.
type CachedFlow struct {
	Src, Dst netip.AddrPort
	Proto    uint8  // 6 TCP, 17 UDP
	VLAN     uint16 // the arrival VLAN ID, 0 untagged
	Packets  uint64 // forwarded, the learnt one included
}

// cachedKey and cachedValue are the pinned xupf_flows' struct flow_key and struct flow
// (bpf/lib/flowtable.h), as far as the tests read them.
type cachedKey struct {
	Saddr, Daddr [4]byte
	Sport, Dport [2]byte // big-endian
	Proto, _     uint8
	VLAN         uint16
	Ifindex      uint32
}

type cachedValue struct {
	_       [5]uint64 // the action
	Packets uint64
	_       [3]uint64 // bytes, first and last seen
}

// CachedFlows reads the flow cache the daemon pinned in t.BPFFS, through a read-only mapping
// of its table.
func (t *Topology) CachedFlows() ([]CachedFlow, error) {
	// Opened for writing although only read: the kernel maps a BPF array only shared, which
	// a read-only file cannot be.
	m, err := ebpf.LoadPinnedMap(filepath.Join(t.BPFFS, "xupf_flows"), nil)
	if err != nil {
		return nil, fmt.Errorf("testbed: open the flow cache: %w", err)
	}
	defer m.Close()
	if m.ValueSize() != flowtable.SlotSize {
		return nil, fmt.Errorf("testbed: xupf_flows has %d-byte values, want %d-byte slots", m.ValueSize(), flowtable.SlotSize)
	}
	mem, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries())*flowtable.SlotSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("testbed: map the flow cache: %w", err)
	}
	defer unix.Munmap(mem)
	entries, err := flowtable.Entries[cachedKey, cachedValue](mem)
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	var out []CachedFlow
	port := func(b [2]byte) uint16 { return binary.BigEndian.Uint16(b[:]) }
	for k, v := range entries {
		out = append(out, CachedFlow{
			Src:     netip.AddrPortFrom(netip.AddrFrom4(k.Saddr), port(k.Sport)),
			Dst:     netip.AddrPortFrom(netip.AddrFrom4(k.Daddr), port(k.Dport)),
			Proto:   k.Proto,
			VLAN:    k.VLAN,
			Packets: v.Packets,
		})
	}
	return out, nil
}
