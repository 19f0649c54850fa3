package testbed

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// attachPeerXDP loads a program that returns XDP_PASS and attaches it, in driver mode, to the
// veth peers gnb0 and dn0. A veth only accepts frames redirected to it by another XDP program
// (xupfd's on n3/n6 does exactly that, and XDP_TX of Echo Responses too) when its peer runs
// native XDP; without one the kernel drops them silently. The links are kept until Close.
func (t *Topology) attachPeerXDP() error {
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
		return fmt.Errorf("testbed: load XDP_PASS program: %w", err)
	}
	// The attachments hold their own reference to the program.
	defer prog.Close()

	for _, p := range []struct{ ns, ifname string }{{t.GNBNS, GNBIf}, {t.DNNS, DNIf}} {
		err := t.Do(p.ns, func() error {
			// The ifindex is only meaningful inside the namespace, and so is the attach.
			ifc, err := net.InterfaceByName(p.ifname)
			if err != nil {
				return fmt.Errorf("find interface: %w", err)
			}
			l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
			if err != nil {
				return fmt.Errorf("attach XDP_PASS (driver mode): %w", err)
			}
			t.xdp = append(t.xdp, l)
			return nil
		})
		if err != nil {
			return fmt.Errorf("testbed: %s in %s: %w", p.ifname, p.ns, err)
		}
	}
	return nil
}
