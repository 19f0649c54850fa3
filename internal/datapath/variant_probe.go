//go:build xupf_upgrade_probe

package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// varyPrograms makes this build's programs differ from the release build's, for the test of
// an upgrade to a build whose program changed (`go build -tags xupf_upgrade_probe`): each
// program gets one instruction more, a move of r1 to itself after its first, so it has
// another tag and the same maps and behaviour. (Jumps are relative: only one into the first
// instruction, which a compiled function's entry never is, would land one further.)
func varyPrograms(spec *ebpf.CollectionSpec) error {
	for name, p := range spec.Programs {
		if len(p.Instructions) == 0 || p.Instructions[0].OpCode.Class().IsJump() {
			// A jump would need its offset moved, a call leaves r1 unset.
			return fmt.Errorf("vary program %s: its first instruction is a jump or call, or it has none", name)
		}
		p.Instructions = append(p.Instructions[:1:1], append(asm.Instructions{asm.Mov.Reg(asm.R1, asm.R1)}, p.Instructions[1:]...)...)
	}
	return nil
}
