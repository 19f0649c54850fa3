package datapath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// XDPMode is how the program is attached.
type XDPMode string

const (
	XDPNative  XDPMode = "native"  // in the driver: the fast one
	XDPGeneric XDPMode = "generic" // after the skb is built: works on every interface, slower
)

type attachment struct {
	link    link.Link
	learn   link.Link // the flow cache's learner on TC egress; nil with the cache off
	ifindex int
	mode    XDPMode
	ret     bool // the return device's peer: runs xupf_xdp_return
}

// program is the XDP program of a's link, of progs (the running ones, or ones to swap in).
func (a *attachment) program(progs xdpPrograms) *ebpf.Program {
	if a.ret {
		return progs.ret
	}
	return progs.xdp
}

// close closes the links, after unpinning them with unpin (which detaches them).
func (a *attachment) close(unpin bool) error {
	var errs []error
	for _, l := range []link.Link{a.link, a.learn} {
		if l == nil {
			continue
		}
		if unpin {
			errs = append(errs, l.Unpin())
		}
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// Attachment describes an interface the datapath is attached to.
type Attachment struct {
	Name    string
	Ifindex int
	Mode    XDPMode
}

// Attach attaches the XDP program to the interface name and lets the datapath redirect to
// it. With fallback, an interface whose driver lacks native XDP gets generic XDP and a
// warning. When a link from an earlier run is pinned for this interface, the program is
// swapped into it atomically: traffic keeps flowing across a daemon restart.
func (d *Datapath) Attach(name string, mode XDPMode, fallback bool) (Attachment, error) {
	a, err := d.attach(name, mode, fallback, false)
	if err == nil {
		d.resyncAddrs() // its addresses first in xupf_own_addrs; outside mu, as the router is told
	}
	return a, err
}

// AttachReturn attaches xupf_xdp_return, natively, to the return device's peer name (with
// flow_cache.kernel_n6): the packets the kernel routes to a UE arrive there and take their
// session's downlink rules. The datapath does not redirect to it, and the learner is not
// attached there. Like Attach it takes over a link an earlier run pinned for name.
func (d *Datapath) AttachReturn(name string) (Attachment, error) {
	if !d.opts.FlowCache.KernelN6.Any() {
		return Attachment{}, errors.New("attach the return device: only with flow_cache.kernel_n6")
	}
	return d.attach(name, XDPNative, false, true)
}

// attach is Attach, or AttachReturn with ret.
func (d *Datapath) attach(name string, mode XDPMode, fallback, ret bool) (Attachment, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return Attachment{}, fmt.Errorf("attach to %q: no such interface; check interfaces[].name "+
			"against `ip link`: %w", name, err)
	}
	if _, ok := d.links[name]; ok {
		return Attachment{}, fmt.Errorf("attach to %q: already attached", name)
	}
	pin := d.linkPin(name)

	a := &attachment{ifindex: iface.Index, mode: mode, ret: ret}
	prog := a.program(d.objs.programs())
	l, err := link.LoadPinnedLink(pin, nil)
	tookOver := err == nil
	if tookOver {
		if err := l.Update(prog); err != nil {
			l.Close()
			return Attachment{}, fmt.Errorf("attach to %q: replace program in pinned link %s: %w", name, pin, err)
		}
		a.link = l
		a.mode = attachedMode(iface.Index, mode)
		d.earlierTakenOver(name, false)
		d.log.Info("took over pinned XDP link", "interface", name, "pin", pin, "xdp_mode", a.mode)
	} else if !errors.Is(err, os.ErrNotExist) {
		return Attachment{}, fmt.Errorf("attach to %q: open pinned link %s: %w", name, pin, err)
	} else {
		a.link, err = attachNew(prog, iface, mode)
		if err != nil && mode == XDPNative && fallback && errors.Is(err, unix.EOPNOTSUPP) {
			d.log.Warn("native XDP is not supported by this interface's driver; falling back to generic XDP, "+
				"which is much slower", "interface", name)
			a.mode = XDPGeneric
			a.link, err = attachNew(prog, iface, XDPGeneric)
		}
		if err != nil {
			return Attachment{}, err
		}
		if err := a.link.Pin(pin); err != nil {
			a.link.Close()
			return Attachment{}, fmt.Errorf("attach to %q: pin link: %w", name, err)
		}
	}
	if ret {
		d.links[name] = a
		return Attachment{Name: name, Ifindex: iface.Index, Mode: a.mode}, nil
	}
	if err := d.objs.XupfTxPorts.Put(uint32(iface.Index), uint32(iface.Index)); err != nil {
		a.close(true)
		return Attachment{}, fmt.Errorf("attach to %q: add to redirect map: %w", name, err)
	}
	if a.learn, err = d.attachLearner(name, iface.Index); err != nil {
		d.objs.XupfTxPorts.Delete(uint32(iface.Index))
		a.close(true)
		return Attachment{}, err
	}
	d.links[name] = a
	if tookOver && d.opts.FlowCache.on() {
		// Until now the earlier run's programs learnt and ended flows here, in counters this
		// run may not read (an xupf_stats migrated, a build without flow_ended): the base
		// of the entry count Load took misses them. Counted again once they stopped here.
		if err := d.countFlows(); err != nil {
			d.log.Warn("flow cache: count the flows after the take-over; xupf_flow_cache_entries may be off until the next restart",
				"interface", name, "err", err)
		}
	}
	if a.mode == XDPNative && isVeth(iface.Index) {
		d.log.Warn("native XDP on a veth: packets redirected into it are dropped unless its peer "+
			"also runs an XDP program (any, even one that passes everything)", "interface", name)
	}
	return Attachment{Name: name, Ifindex: iface.Index, Mode: a.mode}, nil
}

func attachNew(prog *ebpf.Program, iface *net.Interface, mode XDPMode) (link.Link, error) {
	flags := link.XDPDriverMode
	if mode == XDPGeneric {
		flags = link.XDPGenericMode
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: iface.Index, Flags: flags})
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return nil, fmt.Errorf("attach to %q: %s XDP is not supported by this interface "+
			"(set xdp_mode: generic, or xdp_fallback: true): %w", iface.Name, mode, err)
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EEXIST):
		return nil, fmt.Errorf("attach to %q: another XDP program is attached; remove it with "+
			"`ip link set dev %s xdp off` or stop its owner: %w", iface.Name, iface.Name, err)
	}
	return nil, fmt.Errorf("attach to %q in %s mode: %w", iface.Name, mode, err)
}

// Detach removes the program from the interface name.
func (d *Datapath) Detach(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.links[name]
	if !ok {
		return fmt.Errorf("detach from %q: not attached", name)
	}
	delete(d.links, name)
	err := d.objs.XupfTxPorts.Delete(uint32(a.ifindex))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	return errors.Join(err, a.close(true))
}

// Attachments lists the interfaces the datapath is attached to.
func (d *Datapath) Attachments() []Attachment {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Attachment, 0, len(d.links))
	for name, a := range d.links {
		out = append(out, Attachment{Name: name, Ifindex: a.ifindex, Mode: a.mode})
	}
	return out
}

func (d *Datapath) linkPin(ifname string) string {
	return filepath.Join(d.opts.PinPath, "link_"+ifname)
}

// pruneTxPorts removes redirect targets of interfaces this run has not attached to. The
// caller holds d.mu.
func (d *Datapath) pruneTxPorts() error {
	attached := map[uint32]bool{}
	for _, a := range d.links {
		attached[uint32(a.ifindex)] = true
	}
	var k, v uint32
	var stale []uint32
	it := d.objs.XupfTxPorts.Iterate()
	for it.Next(&k, &v) {
		if !attached[k] {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := d.objs.XupfTxPorts.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove stale redirect target %d: %w", k, err)
		}
	}
	return it.Err()
}

// attachedMode asks the kernel how the XDP program on ifindex is attached; when it cannot
// tell, it returns guess.
func attachedMode(ifindex int, guess XDPMode) XDPMode {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil || l.Attrs().Xdp == nil {
		return guess
	}
	switch l.Attrs().Xdp.AttachMode {
	case nl.XDP_ATTACHED_SKB:
		return XDPGeneric
	case nl.XDP_ATTACHED_DRV:
		return XDPNative
	}
	return guess
}

func isVeth(ifindex int) bool {
	l, err := netlink.LinkByIndex(ifindex)
	return err == nil && l.Type() == "veth"
}
