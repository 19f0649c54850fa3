package gen

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/testbed"
)

// vethEnv is a fresh network namespace of the test's own holding a veth pair: the generator
// sends out of gen0, the sink counts on sink0. The namespace has no name; it goes away when
// its last handle is closed (at the test's cleanup). IPv6 is off so that the kernel sends
// nothing of its own (neighbour discovery) into the sink.
type vethEnv struct {
	ns          netns.NsHandle
	gen, sink   int // ifindexes
	genMAC      net.HardwareAddr
	sinkMAC     net.HardwareAddr
	sinkLinkIdx int
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF programs, XDP and network namespaces")
	}
}

func newVethEnv(t testing.TB) *vethEnv {
	t.Helper()
	requireRoot(t)
	e := &vethEnv{}
	errc := make(chan error, 1)
	go func() {
		// The thread ends in the new namespace: never unlocked, the runtime ends it.
		runtime.LockOSThread()
		var err error
		e.ns, err = netns.New()
		if err != nil {
			errc <- err
			return
		}
		errc <- e.setup()
	}()
	if err := <-errc; err != nil {
		if e.ns > 0 {
			e.ns.Close()
		}
		t.Fatalf("test namespace: %v", err)
	}
	t.Cleanup(func() { e.ns.Close() })
	return e
}

// setup runs on a thread inside the namespace.
func (e *vethEnv) setup() error {
	for _, p := range []string{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"} {
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	gm := net.HardwareAddr{2, 0xbe, 0, 0, 0, 1}
	sm := net.HardwareAddr{2, 0xbe, 0, 0, 0, 2}
	// One queue per CPU on both ends: a frame sent into gen0 from CPU c lands in sink0's
	// queue c % queues, and each queue has its own NAPI. With one queue, two sending CPUs
	// share one 256-frame ring and overflow it while the other CPU's NAPI drains it.
	var err error
	e.gen, e.sink, err = testbed.VethPair{Name: "gen0", Peer: "sink0", MAC: gm, PeerMAC: sm, Queues: runtime.NumCPU()}.Add()
	if err != nil {
		return err
	}
	e.genMAC, e.sinkMAC = gm, sm
	return nil
}

// uplinkFlows returns n G-PDU frames gNB → UPF of frameSize bytes (with FCS), one per UE,
// with a PDU Session Container, as the generator would send them into N3.
func uplinkFlows(t testing.TB, e *vethEnv, n int, sizes ...int) ([]pkt.Flow, []Template) {
	t.Helper()
	var flows []pkt.Flow
	var ts []Template
	for i := range n {
		f := pkt.Flow{
			ID:     uint32(i),
			SrcMAC: e.genMAC, DstMAC: e.sinkMAC,
			Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 45, byte(i >> 8), byte(i)}), 40000),
			Dst: netip.MustParseAddrPort("10.100.6.2:5001"),
			Tunnel: &pkt.Tunnel{
				Src: netip.MustParseAddr("10.100.3.2"), Dst: netip.MustParseAddr("10.100.3.1"),
				TEID: 0x1000 + uint32(i), PSC: true, QFI: uint8(1 + i%9), PDUType: pkt.PDUTypeUplink,
			},
		}
		size := 128
		if len(sizes) > 0 {
			size = sizes[i%len(sizes)]
		}
		fr, err := pkt.Build(f, size)
		if err != nil {
			t.Fatal(err)
		}
		flows = append(flows, f)
		ts = append(ts, FromFrame(fr))
	}
	return flows, ts
}
