// Package sockbuf sizes a socket's receive buffer past net.core.rmem_max when the process
// may (CAP_NET_ADMIN), so that a burst of datagrams waits in the kernel instead of being
// dropped: a UDP socket's buffer counts each datagram's whole allocation (about 1 KB for a
// 200-byte PFCP request), so the default 208 KiB holds only some 200 requests, fewer than an
// SMF with a few hundred UEs attaching at once sends.
package sockbuf

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Receive sets conn's receive buffer to bytes, forcing it past net.core.rmem_max when
// allowed and otherwise taking what rmem_max grants, and returns the size the kernel now
// reports (twice what was asked: the kernel's bookkeeping share).
func Receive(conn syscall.Conn, bytes int) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var got int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bytes) != nil {
			// Without CAP_NET_ADMIN: as much as net.core.rmem_max allows.
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, bytes); serr != nil {
				return
			}
		}
		got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("socket receive buffer: %w", serr)
	}
	return got, nil
}
