package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/xupf/xupf/internal/ethtool"
)

// configure wires the namespaces New created: links, addresses, routes, sysctls, the XDP_PASS
// programs on the veth peers and the gNB's GTP-U socket.
func (t *Topology) configure() error {
	gnb, err := netlink.NewHandleAt(t.handles[t.GNBNS])
	if err != nil {
		return fmt.Errorf("testbed: netlink in %s: %w", t.GNBNS, err)
	}
	defer gnb.Close()
	upf, err := netlink.NewHandleAt(t.handles[t.UPFNS])
	if err != nil {
		return fmt.Errorf("testbed: netlink in %s: %w", t.UPFNS, err)
	}
	defer upf.Close()
	dn, err := netlink.NewHandleAt(t.handles[t.DNNS])
	if err != nil {
		return fmt.Errorf("testbed: netlink in %s: %w", t.DNNS, err)
	}
	defer dn.Close()

	// The pairs are created inside upf with the peer placed directly in its namespace, so
	// the short names never exist in the caller's namespace and cannot clash there.
	queues := t.queues
	if t.stack {
		queues++
	}
	if err := addVeth(upf, N3If, GNBIf, int(t.handles[t.GNBNS]), queues); err != nil {
		return err
	}
	if err := addVeth(upf, N6If, DNIf, int(t.handles[t.DNNS]), queues); err != nil {
		return err
	}
	if t.stack {
		if err := t.steerStack(); err != nil {
			return err
		}
	}

	// Sysctls first: forwarding and rp_filter must be right before the first packet moves.
	if err := t.sysctls(); err != nil {
		return err
	}

	steps := []struct {
		h          *netlink.Handle
		ns, ifname string
		addr       netip.Addr
	}{
		{gnb, t.GNBNS, GNBIf, GNBAddr},
		{gnb, t.GNBNS, GNBIf, GNB2Addr},
		{gnb, t.GNBNS, GNBIf, PeerUPFAddr},
		{upf, t.UPFNS, N3If, N3Addr},
		{upf, t.UPFNS, N6If, N6Addr},
		{dn, t.DNNS, DNIf, DNAddr},
	}
	for _, s := range steps {
		if err := addrUp(s.h, s.ifname, s.addr); err != nil {
			return fmt.Errorf("testbed: %s in %s: %w", s.ifname, s.ns, err)
		}
	}
	// The HTTP API listens on 127.0.0.1 in upf; a fresh namespace has lo down.
	for ns, h := range map[string]*netlink.Handle{t.GNBNS: gnb, t.UPFNS: upf, t.DNNS: dn} {
		if err := linkUp(h, "lo"); err != nil {
			return fmt.Errorf("testbed: lo in %s: %w", ns, err)
		}
	}

	// upf sends decapsulated uplink packets (to any address) to the DN host.
	if err := addRoute(upf, N6If, netip.Prefix{}, DNAddr); err != nil {
		return fmt.Errorf("testbed: default route in %s: %w", t.UPFNS, err)
	}
	// The DN host answers UEs through the UPF.
	if err := addRoute(dn, DNIf, UENet, N6Addr); err != nil {
		return fmt.Errorf("testbed: route %s in %s: %w", UENet, t.DNNS, err)
	}

	if err := t.attachPeerXDPs(); err != nil {
		return err
	}
	for _, p := range []struct{ ns, ifname string }{{t.GNBNS, GNBIf}, {t.DNNS, DNIf}} {
		if err := t.Do(p.ns, func() error { return ethtool.DisableTxChecksum(p.ifname) }); err != nil {
			return fmt.Errorf("testbed: %s in %s: %w", p.ifname, p.ns, err)
		}
	}
	return t.openGNBConn()
}

// steerStack maps every CPU to the last transmit queue of each veth end with XPS
// (Options.StackQueue). The queue a packet leaves a veth on is the one it arrives on at the
// peer.
func (t *Topology) steerStack() error {
	mask := cpuMask(runtime.NumCPU())
	for _, e := range []struct{ ns, dev string }{{t.GNBNS, GNBIf}, {t.UPFNS, N3If}, {t.UPFNS, N6If}, {t.DNNS, DNIf}} {
		// sysfs shows a namespace's devices only where it is mounted from inside it, as `ip
		// netns exec` does.
		path := fmt.Sprintf("/sys/class/net/%s/queues/tx-%d/xps_cpus", e.dev, t.queues)
		if _, err := t.Run(context.Background(), e.ns, "sh", "-c", fmt.Sprintf("echo %s > %s", mask, path)); err != nil {
			return fmt.Errorf("testbed: steer the kernel's packets on %s to its last queue: %w", e.dev, err)
		}
	}
	return nil
}

// cpuMask is the sysfs CPU mask of CPUs 0..n-1: hex, in comma-separated 32-bit groups.
func cpuMask(n int) string {
	var groups []string
	for ; n > 0; n -= 32 {
		groups = append([]string{fmt.Sprintf("%x", uint64(1)<<min(n, 32)-1)}, groups...)
	}
	return strings.Join(groups, ",")
}

func addVeth(h *netlink.Handle, name, peer string, peerNS, queues int) error {
	veth := &netlink.Veth{
		LinkAttrs:       netlink.LinkAttrs{Name: name, NumTxQueues: queues, NumRxQueues: queues},
		PeerName:        peer,
		PeerNamespace:   netlink.NsFd(peerNS),
		PeerNumTxQueues: uint32(queues), PeerNumRxQueues: uint32(queues),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("testbed: create veth %s/%s: %w", name, peer, err)
	}
	return nil
}

func linkUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find link: %w", err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}

func addrUp(h *netlink.Handle, name string, addr netip.Addr) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find link: %w", err)
	}
	ipnet := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(subnetBits, 32)}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("add address %s: %w", ipnet, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}

// addRoute adds dst via gw on dev; an invalid dst means the default route.
func addRoute(h *netlink.Handle, dev string, dst netip.Prefix, gw netip.Addr) error {
	l, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("find link: %w", err)
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw.AsSlice()}
	if dst.IsValid() {
		r.Dst = &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)}
	}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("add route via %s: %w", gw, err)
	}
	return nil
}

// sysctls sets the per-namespace knobs. New IPv4 namespaces inherit the host's "all" and
// "default" values, so nothing is assumed about them.
func (t *Topology) sysctls() error {
	type kv struct{ key, value string }
	common := []kv{
		// Strict reverse-path filtering would drop the encapsulated packets the datapath
		// hands to the kernel on n6 (their source is the local GTP-U address).
		{"net/ipv4/conf/all/rp_filter", "0"},
		{"net/ipv4/conf/default/rp_filter", "0"},
	}
	// IPv6 only adds router solicitations and neighbour discovery to the links, which the
	// datapath counts as "pass"; nothing here uses it.
	quiet := []kv{{"net/ipv6/conf/all/disable_ipv6", "1"}, {"net/ipv6/conf/default/disable_ipv6", "1"}}
	per := map[string][]kv{
		t.GNBNS: {{"net/ipv4/conf/" + GNBIf + "/rp_filter", "0"}},
		t.UPFNS: {
			// xupfd refuses to start without forwarding: bpf_fib_lookup needs it.
			{"net/ipv4/conf/all/forwarding", "1"},
			{"net/ipv4/conf/" + N3If + "/forwarding", "1"},
			{"net/ipv4/conf/" + N6If + "/forwarding", "1"},
			{"net/ipv4/conf/" + N3If + "/rp_filter", "0"},
			{"net/ipv4/conf/" + N6If + "/rp_filter", "0"},
		},
		t.DNNS: {{"net/ipv4/conf/" + DNIf + "/rp_filter", "0"}},
	}
	for ns, list := range per {
		err := t.Do(ns, func() error {
			for _, s := range append(append([]kv{}, common...), list...) {
				if err := writeSysctl(s.key, s.value); err != nil {
					return err
				}
			}
			for _, s := range quiet {
				if err := writeSysctl(s.key, s.value); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("testbed: sysctls in %s: %w", ns, err)
		}
	}
	return nil
}

// writeSysctl writes /proc/sys/<key>; /proc/sys/net resolves to the namespace of the thread
// that opens it, so call it inside Do.
func writeSysctl(key, value string) error {
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
