package datapath

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/testbed"
)

// TestClassifierSwapUnderTraffic sends real frames through the attached datapath (into n6,
// out of n3) while the class set changes over and over. Both versions have classes 1 and 2
// and the frames match both; version A gives class 1 the higher priority and classifies on
// the destination port, version B gives class 2 the higher priority and classifies on the
// source address, so every change swaps in a differently specialised program. Every frame
// must come out of n3 and be counted in exactly one of the two classes: none lost, none
// unclassified or misclassified.
func TestClassifierSwapUnderTraffic(t *testing.T) {
	e := newTestEnv(t, 4)
	if err := e.addSession(sessPlain); err != nil {
		t.Fatal(err)
	}
	versions := [][]classifier.Class{
		{{ID: 1, Priority: 10, Protocol: "udp", DstPort: "6000"}, {ID: 2, Priority: 5, Protocol: "udp"}},
		{{ID: 1, Priority: 5, SrcIP: addrDN.String()}, {ID: 2, Priority: 10, SrcIP: "192.0.2.0/24"}},
	}
	apply := func(v int) {
		_, compiled := compileClasses(t, versions[v]...)
		if err := e.dp.SetClasses(compiled); err != nil {
			t.Fatalf("swap to version %d: %v", v, err)
		}
	}
	apply(0)

	// A receiver on n3's peer (which needs an XDP program of its own to accept redirected
	// frames) and a sender on n6's peer, both raw sockets in the test namespace.
	var tx, rx int
	err := e.do(func() error {
		l, err := testbed.AttachXDPPass("n3p")
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		if tx, err = packetSocket("n6p"); err != nil {
			return err
		}
		rx, err = packetSocket("n3p")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	defer unix.Close(rx)
	if err := unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
		t.Fatal(err)
	}

	const swaps = 30
	var received atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // count the GTP-U frames that come out of n3
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			n, _, err := unix.Recvfrom(rx, buf, 0)
			if err != nil {
				select {
				case <-done:
					return
				default:
					continue // EAGAIN from the receive timeout
				}
			}
			if n >= 14+20+8 && binary.BigEndian.Uint16(buf[14+20+2:]) == 2152 {
				received.Add(1)
			}
		}
	}()

	before, _ := e.dp.Stats()
	frame := dlIn(t, sessPlain, 64)
	var stop atomic.Bool
	type result struct {
		n   uint64
		err error
	}
	sent := make(chan result, 1)
	go func() { // send until the swaps are over
		var n uint64
		for !stop.Load() {
			if err := unix.Send(tx, frame, 0); err != nil {
				sent <- result{n, err}
				return
			}
			n++
			if n%64 == 0 {
				time.Sleep(50 * time.Microsecond) // let the receiver keep up
			}
		}
		sent <- result{n, nil}
	}()
	for i := range swaps {
		apply((i + 1) % 2)
	}
	stop.Store(true)
	res := <-sent
	if res.err != nil {
		t.Fatalf("send: %v", res.err)
	}
	frames := res.n
	deadline := time.Now().Add(5 * time.Second)
	for uint64(received.Load()) < frames && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	wg.Wait()

	after, _ := e.dp.Stats()
	c1, _ := e.dp.ClassCounters(1)
	c2, _ := e.dp.ClassCounters(2)
	delta := func(name string) uint64 { return after.Counters[name] - before.Counters[name] }
	t.Logf("%d frames, %d class swaps: class 1 %d, class 2 %d, out of n3 %d", frames, swaps, c1.Packets, c2.Packets, received.Load())
	if frames < 1000 {
		t.Errorf("only %d frames were sent during %d swaps", frames, swaps)
	}
	if delta("dl_rx") != frames || delta("dl_tx") != frames {
		t.Errorf("datapath saw %d and forwarded %d of %d frames", delta("dl_rx"), delta("dl_tx"), frames)
	}
	if delta("cls_hit") != frames || delta("cls_miss") != 0 || c1.Packets+c2.Packets != frames {
		t.Errorf("classified %d (missed %d), classes 1+2 counted %d, of %d frames",
			delta("cls_hit"), delta("cls_miss"), c1.Packets+c2.Packets, frames)
	}
	if c1.Packets == 0 || c2.Packets == 0 {
		t.Errorf("one version never classified anything: class 1 %d, class 2 %d", c1.Packets, c2.Packets)
	}
	if got := uint64(received.Load()); got != frames {
		t.Errorf("%d of %d frames came out of n3", got, frames)
	}
	for name, n := range after.Drops {
		if n != before.Drops[name] {
			t.Errorf("drop %s rose by %d", name, n-before.Drops[name])
		}
	}
}

// packetSocket opens a raw AF_PACKET socket bound to ifname in the calling thread's
// namespace, with a receive timeout so a reader can notice it should stop.
func packetSocket(ifname string) (int, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, err
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	tv := unix.Timeval{Usec: 100000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
