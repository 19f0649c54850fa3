// Package returndev keeps the return device of flow_cache.kernel_n6: a veth pair through which
// the kernel hands the datapath the packets it sends to UEs. The kernel routes the UE pools
// into one end (the device, named by the configuration); the datapath's XDP program runs on
// the other (Peer), and takes each packet through its session's downlink rules.
//
// Why a veth pair: the kernel can only hand a packet to XDP by sending it out of an interface,
// and a veth delivers what one end sends to the other end's XDP program, natively, where the
// whole downlink pipeline (QERs, usage, buffering, encapsulation, the redirect to N3) runs as
// for any downlink packet. A TC program could not run that pipeline, which is XDP code.
package returndev

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/ethtool"
)

// peerSuffix ends the peer's name.
const peerSuffix = "-xdp"

// MaxName is the longest device name: the peer's, with its suffix, must fit IFNAMSIZ.
const MaxName = unix.IFNAMSIZ - 1 - len(peerSuffix)

// Peer is the name of the end of device name that the XDP program runs on.
func Peer(name string) string { return name + peerSuffix }

// recordFile, in the directory given to Ensure, names the device Ensure made, so that the
// device is found and removed after a crash, a restart without kernel_n6 or a change of name.
const recordFile = "return_device"

// Made names the device Ensure made with dir, "" if none.
func Made(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("return device: read its record: %w", err)
	}
	name := strings.TrimSpace(string(b))
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("%w; the record %s is damaged: delete the device it was for by hand, then the record",
			err, filepath.Join(dir, recordFile))
	}
	return name, nil
}

// checkName refuses what the kernel would not take as the device's name, or its peer's, and
// what would reach outside a directory as part of a file name (the peer's link pin).
func checkName(name string) error {
	if len(name) > MaxName || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("return device %q: give a name of 1 to %d characters, without '/', ':' or spaces", name, MaxName)
	}
	return nil
}

// Ensure makes the veth pair name and Peer(name), or keeps the one an earlier run made,
// first recording its name in dir (Made, Forget). In the calling thread's network namespace.
// It routes nothing: Route does, once a program runs on the peer, so that a crash between
// them leaves no route into a device that drops what it is sent.
//
// The device sends without ARP: the kernel gives every packet the device's own MAC as its
// destination, and the peer has the same MAC, so that a packet the datapath hands to the
// kernel there (an encapsulated one whose gNB's MAC is not resolved yet) is taken as the
// host's and forwarded, which accept_local allows with its source, the UPF's GTP-U address.
// Transmit checksum offload is off on the device: the kernel then completes checksums before
// the peer's XDP program forwards the packet. IPv6 is off on both ends: nothing but the
// kernel's IPv4 packets to UEs goes through.
func Ensure(name, dir string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dev, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		if err := record(dir, name); err != nil {
			return err
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: Peer(name)}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("return device %q: create the veth pair: %w", name, err)
		}
		if dev, err = netlink.LinkByName(name); err != nil {
			return fmt.Errorf("return device %q: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("return device %q: %w", name, err)
	case dev.Type() != "veth":
		return fmt.Errorf("return device %q: an interface of that name exists and is not a veth; "+
			"set flow_cache.return_device to a free name", name)
	default:
		if err := record(dir, name); err != nil { // kept: it may be the record that is missing
			return err
		}
	}
	peer, err := netlink.LinkByName(Peer(name))
	if err != nil {
		return fmt.Errorf("return device %q: its peer %q: %w; delete the device (`ip link del %s`) and start again",
			name, Peer(name), err, name)
	}
	if err := configure(dev, peer); err != nil {
		return fmt.Errorf("return device %q: %w", name, err)
	}
	return nil
}

// record writes name into dir's record, durably: the device must not outlive it.
func record(dir, name string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("return device %q: record it in %s: %w", name, dir, err)
	}
	path := filepath.Join(dir, recordFile)
	f, err := os.CreateTemp(dir, recordFile+".*")
	if err == nil {
		_, err = f.WriteString(name + "\n")
		err = errors.Join(err, f.Sync(), f.Close())
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}
	if err != nil {
		return fmt.Errorf("return device %q: record it in %s: %w", name, path, err)
	}
	return nil
}

// configure sets up the pair as Ensure describes.
func configure(dev, peer netlink.Link) error {
	if err := netlink.LinkSetARPOff(dev); err != nil {
		return fmt.Errorf("turn ARP off: %w", err)
	}
	if err := netlink.LinkSetHardwareAddr(peer, dev.Attrs().HardwareAddr); err != nil {
		return fmt.Errorf("give the peer the device's MAC: %w", err)
	}
	if err := ethtool.DisableTxChecksum(dev.Attrs().Name); err != nil {
		return err
	}
	for _, l := range []netlink.Link{dev, peer} {
		err := os.WriteFile("/proc/sys/net/ipv6/conf/"+l.Attrs().Name+"/disable_ipv6", []byte("1"), 0o644)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // no IPv6 in this kernel: nothing to turn off
			return fmt.Errorf("turn IPv6 off on %s: %w", l.Attrs().Name, err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+peer.Attrs().Name+"/accept_local", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("set accept_local on %s: %w", peer.Attrs().Name, err)
	}
	for _, l := range []netlink.Link{peer, dev} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// Route makes the IPv4 routes (main table) into the device name exactly pools. It refuses a
// pool the main table routes elsewhere: that route is the operator's, and replacing it would
// take its traffic silently, and deleting the device would not bring it back.
func Route(name string, pools []netip.Prefix) error {
	dev, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("return device %q: %w", name, err)
	}
	if err := foreignRoutes(dev, pools); err != nil {
		return fmt.Errorf("return device %q: %w", name, err)
	}
	if err := route(dev, pools); err != nil {
		return fmt.Errorf("return device %q: %w", name, err)
	}
	return nil
}

// foreignRoutes refuses a pool that a route of the main table, other than one into dev, has
// as its destination. A route to a wider or narrower prefix stays: the pool's route into dev
// does not replace it.
func foreignRoutes(dev netlink.Link, pools []netip.Prefix) error {
	for _, p := range pools {
		filter := &netlink.Route{Dst: ipNet(p), Table: unix.RT_TABLE_MAIN}
		have, err := netlink.RouteListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("list the routes to %s: %w", p, err)
		}
		for _, r := range have {
			if r.LinkIndex != dev.Attrs().Index || len(r.MultiPath) > 0 {
				return fmt.Errorf("ue_pools %s: the main table routes it already (%s): xupfd routes each pool "+
					"into the return device and does not replace another route; delete that route "+
					"(`ip route del %s ...`) or take the prefix out of ue_pools", p, r, p)
			}
		}
	}
	return nil
}

// ipNet is p as netlink takes it.
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// route makes the routes of dev (IPv4, main table) exactly pools.
func route(dev netlink.Link, pools []netip.Prefix) error {
	have, err := netlink.RouteList(dev, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list its routes: %w", err)
	}
	for _, r := range have {
		if r.Dst == nil || r.Table != unix.RT_TABLE_MAIN {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		if a, ok := netip.AddrFromSlice(r.Dst.IP.To4()); ok && slices.Contains(pools, netip.PrefixFrom(a, ones)) {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			return fmt.Errorf("remove the route to %s: %w", r.Dst, err)
		}
	}
	for _, p := range pools {
		r := &netlink.Route{LinkIndex: dev.Attrs().Index, Dst: ipNet(p), Scope: netlink.SCOPE_LINK}
		if err := netlink.RouteReplace(r); err != nil { // only ever one into dev: foreignRoutes saw to it
			return fmt.Errorf("route %s into it: %w", p, err)
		}
	}
	return nil
}

// Remove deletes the pair name (with its routes), if it is there and a veth.
func Remove(name string) error {
	dev, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		return nil
	case err != nil:
		return fmt.Errorf("return device %q: %w", name, err)
	case dev.Type() != "veth":
		return nil // not one Ensure made: an operator's since
	}
	if err := netlink.LinkDel(dev); err != nil {
		return fmt.Errorf("return device %q: delete it: %w", name, err)
	}
	return nil
}

// Forget removes the record in dir, once what it names is gone.
func Forget(dir string) error {
	if err := os.Remove(filepath.Join(dir, recordFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("return device: remove its record: %w", err)
	}
	return nil
}
