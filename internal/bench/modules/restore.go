package modules

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// restorer runs the datapath on one frame many times in one BPF_PROG_TEST_RUN. In repeat
// mode the kernel runs the program again on the frame the last run left, decapsulated or
// encapsulated; so a wrapper program puts the frame back first (moves the head to where the
// frame began, writes its bytes from a map) and then tail-calls the program measured. The
// wrapper's own cost is measured the same way with a tail call into a program that only
// returns, and subtracted.
type restorer struct {
	frame   *ebpf.Map     // one entry: the frame
	target  *ebpf.Map     // prog array: slot 0 is the program the wrapper tail-calls
	wrapper *ebpf.Program // restore, then tail-call slot 0
	noop    *ebpf.Program // returns XDP_REDIRECT at once: the wrapper alone
}

func newRestorer(frame []byte) (_ *restorer, err error) {
	r := &restorer{}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
		}
	}()
	r.frame, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: uint32(len(frame)), MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("frame map: %w", err)
	}
	if err := r.frame.Put(uint32(0), frame); err != nil {
		return nil, fmt.Errorf("write frame: %w", err)
	}
	r.target, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("prog array: %w", err)
	}
	n := int32(len(frame))
	r.wrapper, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		// A tail call needs the programs of a prog array to agree on the expected attach
		// type: the datapath's is XDP (its section is "xdp").
		Name: "restore_frame", Type: ebpf.XDP, AttachType: ebpf.AttachXDP, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			// Move the head so that the frame is n bytes again: only the head moves in the
			// datapath (encapsulation, decapsulation), so this is where the frame began.
			asm.FnXdpGetBuffLen.Call(),
			asm.Mov.Reg(asm.R2, asm.R0),
			asm.Sub.Imm(asm.R2, n),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.FnXdpAdjustHead.Call(),
			asm.JNE.Imm(asm.R0, 0, "abort"),
			// Write the frame's bytes over whatever the last run left there.
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, r.frame.FD()),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "abort"),
			asm.Mov.Reg(asm.R3, asm.R0),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, 0),
			asm.Mov.Imm(asm.R4, n),
			asm.FnXdpStoreBytes.Call(),
			asm.JNE.Imm(asm.R0, 0, "abort"),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.LoadMapPtr(asm.R2, r.target.FD()),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnTailCall.Call(),
			// Reached when a step failed or slot 0 is empty: an XDP_ABORTED verdict the
			// caller sees.
			asm.Mov.Imm(asm.R0, 0).WithSymbol("abort"),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("load the restoring wrapper: %w", err)
	}
	r.noop, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "restore_noop", Type: ebpf.XDP, AttachType: ebpf.AttachXDP, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpRedirect), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("load the no-op program: %w", err)
	}
	return r, nil
}

// output runs the wrapper on frame twice in one BPF_PROG_TEST_RUN, tail-calling prog, and
// returns the second run's verdict and output frame: what prog made of the restored frame.
func (r *restorer) output(prog *ebpf.Program, frame []byte) (uint32, []byte, error) {
	if err := r.target.Put(uint32(0), prog); err != nil {
		return 0, nil, fmt.Errorf("point the wrapper at the program: %w", err)
	}
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256), Repeat: 2}
	ret, err := r.wrapper.Run(opts)
	if err != nil {
		return 0, nil, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
	}
	return ret, opts.DataOut, nil
}

// time runs the wrapper on frame repeat times in one BPF_PROG_TEST_RUN, tail-calling prog,
// and returns the last run's verdict and the kernel's mean time per run.
func (r *restorer) time(prog *ebpf.Program, frame []byte, repeat int) (uint32, time.Duration, error) {
	if err := r.target.Put(uint32(0), prog); err != nil {
		return 0, 0, fmt.Errorf("point the wrapper at the program: %w", err)
	}
	ret, d, err := r.wrapper.Benchmark(frame, repeat, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
	}
	return ret, d, nil
}

func (r *restorer) close() error {
	return errors.Join(r.wrapper.Close(), r.noop.Close(), r.target.Close(), r.frame.Close())
}
