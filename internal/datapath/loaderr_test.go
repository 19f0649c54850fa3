package datapath

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestVerifierRejectionPrintedInFull loads a program the verifier must refuse (it reads R2,
// never written) and checks that the error carries the verifier's log from its first line.
func TestVerifierRejectionPrintedInFull(t *testing.T) {
	requireRoot(t)
	_, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2),
			asm.Mov.Imm(asm.R3, 1),
			asm.Mov.Reg(asm.R0, asm.R2), // R2 is not initialised for XDP: rejected
			asm.Return(),
		},
	})
	if err == nil {
		t.Fatal("the verifier accepted an invalid program")
	}
	msg := loadError(err, "/sys/fs/bpf/x").Error()
	for _, want := range []string{"the verifier rejected the program", "0: (b7) r0 = 2", "1: (b7) r3 = 1", "R2 !read_ok"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}
