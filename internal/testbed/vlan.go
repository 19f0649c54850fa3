package testbed

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xupf/xupf/internal/ethtool"
)

// TagDNLink puts the link between the UPF and the DN host (n6 — dn0) on VLAN vid: every frame
// either end sends carries the tag, and a frame arriving without it is dropped. TC programs
// stand in for VLAN devices, which kernels without 8021q cannot create: on egress one pushes
// the tag, ahead of any other program (as a VLAN device adds it before its parent sends), on
// ingress one checks and pops it. The DN host puts its tags in the frame (no VLAN offload), so
// that XDP on n6 sees them; the UPF's kernel offloads them, as with a VLAN device on n6.
func (t *Topology) TagDNLink(vid uint16) error {
	if err := t.Do(t.DNNS, func() error { return ethtool.DisableTxVLAN(DNIf) }); err != nil {
		return fmt.Errorf("testbed: %s in %s: %w", DNIf, t.DNNS, err)
	}
	push, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xupf_tb_vpush", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{
			// bpf_skb_vlan_push(skb, htons(ETH_P_8021Q), vid)
			asm.Mov.Imm(asm.R2, int32(binary.NativeEndian.Uint16([]byte{0x81, 0x00}))),
			asm.Mov.Imm(asm.R3, int32(vid)),
			asm.FnSkbVlanPush.Call(),
			asm.Mov.Imm(asm.R0, tcxNext),
			asm.Return(),
		}})
	if err != nil {
		return fmt.Errorf("testbed: load VLAN push program: %w", err)
	}
	defer push.Close()
	pop, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xupf_tb_vpop", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.LoadMem(asm.R2, asm.R6, skbVLANPresent, asm.Word),
			asm.JEq.Imm(asm.R2, 0, "drop"),
			asm.LoadMem(asm.R2, asm.R6, skbVLANTCI, asm.Word),
			asm.And.Imm(asm.R2, 0x0fff),
			asm.JNE.Imm(asm.R2, int32(vid), "drop"),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.FnSkbVlanPop.Call(),
			asm.Mov.Imm(asm.R0, tcxNext),
			asm.Return(),
			asm.Mov.Imm(asm.R0, tcxDrop).WithSymbol("drop"),
			asm.Return(),
		}})
	if err != nil {
		return fmt.Errorf("testbed: load VLAN pop program: %w", err)
	}
	defer pop.Close()
	for _, s := range []struct{ ns, ifname string }{{t.UPFNS, N6If}, {t.DNNS, DNIf}} {
		err := t.Do(s.ns, func() error {
			ifc, err := net.InterfaceByName(s.ifname)
			if err != nil {
				return err
			}
			for _, a := range []link.TCXOptions{
				{Interface: ifc.Index, Program: push, Attach: ebpf.AttachTCXEgress, Anchor: link.Head()},
				{Interface: ifc.Index, Program: pop, Attach: ebpf.AttachTCXIngress},
			} {
				l, err := link.AttachTCX(a)
				if err != nil {
					return fmt.Errorf("attach VLAN %s program: %w", a.Attach, err)
				}
				t.tcx = append(t.tcx, l)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("testbed: VLAN %d on %s in %s: %w", vid, s.ifname, s.ns, err)
		}
	}
	return nil
}

// What the VLAN programs need of TC: their verdicts (enum tcx_action_base) and the offsets of
// struct __sk_buff's vlan_present and vlan_tci.
const (
	tcxNext        = -1
	tcxDrop        = 2
	skbVLANPresent = 20
	skbVLANTCI     = 24
)
