package testbed

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// attachPeerXDPs attaches AttachXDPPass to the veth peers gnb0 and dn0. A veth only accepts
// frames redirected to it by another XDP program (xupfd's on n3/n6 does exactly that, and
// XDP_TX of Echo Responses too) when its peer runs native XDP; without one the kernel drops
// them silently. The links are kept until Close.
func (t *Topology) attachPeerXDPs() error {
	for _, ifname := range []string{GNBIf, DNIf} {
		if err := t.AttachPeerXDP(ifname); err != nil {
			return err
		}
	}
	return nil
}

// AttachPeerXDP attaches AttachXDPPass to the veth peer ifname (GNBIf or DNIf), kept until
// Close: it puts back the program DetachPeerXDP removed.
func (t *Topology) AttachPeerXDP(ifname string) error {
	ns := map[string]string{GNBIf: t.GNBNS, DNIf: t.DNNS}[ifname]
	if ns == "" {
		return fmt.Errorf("testbed: %s is not a veth peer", ifname)
	}
	if _, ok := t.xdp[ifname]; ok {
		return fmt.Errorf("testbed: %s has its XDP_PASS program", ifname)
	}
	err := t.Do(ns, func() error {
		l, err := AttachXDPPass(ifname)
		if err != nil {
			return err
		}
		t.xdp[ifname] = l
		return nil
	})
	if err != nil {
		return fmt.Errorf("testbed: %s in %s: %w", ifname, ns, err)
	}
	return nil
}

// DetachPeerXDP removes the XDP_PASS program from the veth peer ifname (GNBIf or DNIf), so
// that another driver-mode program (a benchmark's sink) can take its place. That program
// must be attached before frames are redirected into the peer again.
func (t *Topology) DetachPeerXDP(ifname string) error {
	l, ok := t.xdp[ifname]
	if !ok {
		return fmt.Errorf("testbed: no XDP_PASS program on %s", ifname)
	}
	delete(t.xdp, ifname)
	if err := l.Close(); err != nil {
		return fmt.Errorf("testbed: detach XDP_PASS from %s: %w", ifname, err)
	}
	return nil
}

// AttachXDPPass attaches, in driver mode, a program that returns XDP_PASS to the interface
// ifname of the calling thread's namespace, so that frames redirected into its veth peer by
// native XDP are accepted. Closing the link detaches it.
func AttachXDPPass(ifname string) (link.Link, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xupf_tb_pass",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
		License: "GPL",
	})
	if err != nil {
		return nil, fmt.Errorf("load XDP_PASS program: %w", err)
	}
	// The attachment holds its own reference to the program.
	defer prog.Close()
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("find interface %s: %w", ifname, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attach XDP_PASS to %s (driver mode): %w", ifname, err)
	}
	return l, nil
}
