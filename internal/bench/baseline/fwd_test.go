package baseline

import (
	"bytes"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// TestForwarder: a frame comes out with the next hop's and the egress interface's MACs and
// nothing else changed, redirected. (BPF_PROG_TEST_RUN refuses frames shorter than an
// Ethernet header, so the program's own bound check cannot be run this way.)
func TestForwarder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF programs")
	}
	lo, err := net.InterfaceByName("lo") // any interface of this namespace will do: nothing is sent
	if err != nil {
		t.Fatal(err)
	}
	next := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	out := net.HardwareAddr{2, 0, 0, 0, 0, 8}
	f, err := LoadForwarder(ForwardOptions{Out: lo.Index, OutMAC: out, NextHop: next})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	frame := append([]byte{1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 0x08, 0x00}, bytes.Repeat([]byte{0x45, 7}, 30)...)
	want := append(append(append([]byte{}, next...), out...), frame[12:]...)
	got := make([]byte, len(frame))
	ret, err := f.Program().Run(&ebpf.RunOptions{Data: frame, DataOut: got})
	if err != nil {
		t.Fatal(err)
	}
	if ret != 4 { // XDP_REDIRECT
		t.Errorf("verdict %d, want XDP_REDIRECT (4)", ret)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("out\n% x\nwant\n% x", got, want)
	}
}
