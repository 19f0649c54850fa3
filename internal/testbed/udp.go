package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// rcvBuf is large enough for a burst of a few hundred datagrams: frames redirected by XDP
// are charged a whole page each, so the default buffer overflows after ~50 of them, and a
// testbed receiver must not lose what the UPF delivered.
const rcvBuf = 8 << 20

// Datagram is one UDP datagram as received, with the IPv4 header fields the checks need.
type Datagram struct {
	Src  netip.AddrPort
	Dst  netip.Addr // the IPv4 destination address (IP_PKTINFO)
	TTL  uint8      // the IPv4 TTL on arrival (IP_RECVTTL)
	Data []byte
}

// listenUDP opens a UDP socket bound to addr inside ns, reporting destination and TTL of
// every datagram it receives.
func (t *Topology) listenUDP(ns string, addr netip.AddrPort) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := t.Do(ns, func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: listen udp %s in %s: %w", addr, ns, err)
	}
	if err := setSockopts(conn, func(fd int) error {
		return errors.Join(
			unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1),
			unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTTL, 1),
			// FORCE: as root, beyond net.core.rmem_max.
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf),
		)
	}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("testbed: socket options on %s in %s: %w", addr, ns, err)
	}
	return conn, nil
}

func setSockopts(conn *net.UDPConn, fn func(fd int) error) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var optErr error
	if err := raw.Control(func(fd uintptr) { optErr = fn(int(fd)) }); err != nil {
		return err
	}
	return optErr
}

// collect reads datagrams from conn until n arrived or timeout passed; a timeout is not an
// error (the caller compares counts), anything else is.
func collect(conn *net.UDPConn, n int, timeout time.Duration, keep func(Datagram) bool) ([]Datagram, error) {
	deadline := time.Now().Add(timeout)
	if err := conn.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("testbed: set read deadline: %w", err)
	}
	defer conn.SetReadDeadline(time.Time{})
	var out []Datagram
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for len(out) < n {
		d, err := readDatagram(conn, buf, oob)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if keep == nil || keep(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// drain discards whatever is queued on conn, so a late datagram of an earlier exchange is not
// taken for an answer to the next one.
func drain(conn *net.UDPConn) error {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	// Bounded: nothing is being sent while we drain, so the queue only shrinks.
	for range 100000 {
		if err := conn.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
			return fmt.Errorf("testbed: set read deadline: %w", err)
		}
		_, err := readDatagram(conn, buf, oob)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return err
		}
	}
	return conn.SetReadDeadline(time.Time{})
}

func readDatagram(conn *net.UDPConn, buf, oob []byte) (Datagram, error) {
	n, oobn, _, src, err := conn.ReadMsgUDPAddrPort(buf, oob)
	if err != nil {
		return Datagram{}, fmt.Errorf("testbed: read udp on %s: %w", conn.LocalAddr(), err)
	}
	d := Datagram{Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Data: append([]byte(nil), buf[:n]...)}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return Datagram{}, fmt.Errorf("testbed: parse control messages: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Level != unix.IPPROTO_IP {
			continue
		}
		switch m.Header.Type {
		case unix.IP_PKTINFO:
			if len(m.Data) >= unix.SizeofInet4Pktinfo {
				// struct in_pktinfo: ifindex, spec_dst, addr (the header destination).
				d.Dst = netip.AddrFrom4([4]byte(m.Data[8:12]))
			}
		case unix.IP_TTL:
			if len(m.Data) >= 4 {
				d.TTL = uint8(binary.NativeEndian.Uint32(m.Data))
			}
		}
	}
	return d, nil
}
