// Package ethtool turns interface offloads off through the SIOCETHTOOL ioctl: no ethtool
// binary or library is needed.
package ethtool

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctl constants (linux/ethtool.h).
const (
	ethtoolSTxCsum = 0x17   // ETHTOOL_STXCSUM
	ethtoolGFlags  = 0x25   // ETHTOOL_GFLAGS
	ethtoolSFlags  = 0x26   // ETHTOOL_SFLAGS
	ethFlagTxVLAN  = 1 << 7 // ETH_FLAG_TXVLAN
)

type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with its union used as ifr_data.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// DisableTxChecksum turns off transmit checksum offload on ifname, in the calling thread's
// namespace. A veth never computes offloaded checksums: it hands the packet over marked
// "checksum partial", and an XDP program on the far side sees the frame without that mark,
// so what it forwards carries a half-done checksum. With the offload off the kernel sums it
// before the veth, as a NIC would on the wire.
func DisableTxChecksum(ifname string) error {
	if err := run(ifname, &ethtoolValue{cmd: ethtoolSTxCsum, data: 0}); err != nil {
		return fmt.Errorf("disable tx checksum offload (ETHTOOL_STXCSUM): %w", err)
	}
	return nil
}

// DisableTxVLAN turns off VLAN tag insertion offload on ifname, in the calling thread's
// namespace. A veth carries an offloaded tag beside the frame, where the
// XDP program on its peer does not see it; with the offload off the tag is in the frame, as
// on a wire.
func DisableTxVLAN(ifname string) error {
	v := &ethtoolValue{cmd: ethtoolGFlags}
	if err := run(ifname, v); err != nil {
		return fmt.Errorf("read offload flags (ETHTOOL_GFLAGS): %w", err)
	}
	v.cmd, v.data = ethtoolSFlags, v.data&^ethFlagTxVLAN
	if err := run(ifname, v); err != nil {
		return fmt.Errorf("disable tx VLAN offload (ETHTOOL_SFLAGS): %w", err)
	}
	return nil
}

// run runs the SIOCETHTOOL request v on ifname.
func run(ifname string, v *ethtoolValue) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for ethtool: %w", err)
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = unsafe.Pointer(v)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return errno
	}
	return nil
}
