package gen

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// progRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr.
type progRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// liveRun runs prog repeat times in live-frames mode and returns the kernel's mean time per
// run (the loop alone, without the page pool's setup and teardown). It calls bpf(2) itself
// rather than through ebpf.Program.Run, which restarts an interrupted run from zero and does
// not return that time. An interrupted run (EINTR) is returned as done, with time 0: the
// caller reads the slot's counters to learn what was sent.
func liveRun(progFD int, data, ctx []byte, repeat, batch uint32) (time.Duration, error) {
	attr := progRunAttr{
		progFD:     uint32(progFD),
		dataSizeIn: uint32(len(data)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&data[0]))),
		repeat:     repeat,
		ctxSizeIn:  uint32(len(ctx)),
		ctxIn:      uint64(uintptr(unsafe.Pointer(&ctx[0]))),
		flags:      unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		batchSize:  batch,
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(data)
	runtime.KeepAlive(ctx)
	switch errno {
	case 0:
		return time.Duration(attr.duration), nil
	case unix.EINTR:
		return 0, nil
	}
	return 0, fmt.Errorf("BPF_PROG_RUN in live-frames mode: %w", errno)
}

// ctxBytes encodes struct xdp_md.
func ctxBytes(m xdpMd) []byte {
	b, err := binary.Append(nil, binary.NativeEndian, m)
	if err != nil {
		panic(err) // a fixed-size struct of uint32s always encodes
	}
	return b
}
