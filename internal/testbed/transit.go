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

// Offsets in the pinned xupf_flows (bpf/lib/flowcache.h struct flow_key and struct flow).
const (
	flowKeySize, flowValueSize = 20, 72
	flowPacketsOffset          = 40
)

// CachedFlows reads the flow cache the daemon pinned in t.BPFFS.
func (t *Topology) CachedFlows() ([]CachedFlow, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(t.BPFFS, "xupf_flows"), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("testbed: open the flow cache: %w", err)
	}
	defer m.Close()
	if m.KeySize() != flowKeySize || m.ValueSize() != flowValueSize {
		return nil, fmt.Errorf("testbed: xupf_flows has %d-byte keys and %d-byte values, want %d and %d",
			m.KeySize(), m.ValueSize(), flowKeySize, flowValueSize)
	}
	var out []CachedFlow
	k, v := make([]byte, flowKeySize), make([]byte, flowValueSize)
	it := m.Iterate()
	for it.Next(&k, &v) {
		port := func(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
		out = append(out, CachedFlow{
			Src:     netip.AddrPortFrom(netip.AddrFrom4([4]byte(k[0:4])), port(k[8:10])),
			Dst:     netip.AddrPortFrom(netip.AddrFrom4([4]byte(k[4:8])), port(k[10:12])),
			Proto:   k[12],
			VLAN:    binary.NativeEndian.Uint16(k[14:16]),
			Packets: binary.NativeEndian.Uint64(v[flowPacketsOffset:]),
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("testbed: read the flow cache: %w", err)
	}
	return out, nil
}
