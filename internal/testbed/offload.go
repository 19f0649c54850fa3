package testbed

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtool ioctl constants (linux/ethtool.h); no ethtool binary or library is needed.
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

// disableTxChecksum turns off transmit checksum offload on ifname, in the calling thread's
// namespace (call it inside Do). A veth never computes offloaded checksums: it hands the
// packet over marked "checksum partial", and an XDP redirect on the far side drops that mark,
// so the receiver would see a half-done UDP checksum. A real host's NIC puts a complete
// checksum on the wire, which is what the UPF must preserve, so the hosts do it in software.
func disableTxChecksum(ifname string) error {
	if err := ethtool(ifname, &ethtoolValue{cmd: ethtoolSTxCsum, data: 0}); err != nil {
		return fmt.Errorf("disable tx checksum offload (ETHTOOL_STXCSUM): %w", err)
	}
	return nil
}

// disableTxVLAN turns off VLAN tag insertion offload on ifname, in the calling thread's
// namespace (call it inside Do). A veth carries an offloaded tag beside the frame, where the
// XDP program on its peer does not see it; with the offload off the tag is in the frame, as
// on a wire.
func disableTxVLAN(ifname string) error {
	v := &ethtoolValue{cmd: ethtoolGFlags}
	if err := ethtool(ifname, v); err != nil {
		return fmt.Errorf("read offload flags (ETHTOOL_GFLAGS): %w", err)
	}
	v.cmd, v.data = ethtoolSFlags, v.data&^ethFlagTxVLAN
	if err := ethtool(ifname, v); err != nil {
		return fmt.Errorf("disable tx VLAN offload (ETHTOOL_SFLAGS): %w", err)
	}
	return nil
}

// ethtool runs the SIOCETHTOOL request v on ifname.
func ethtool(ifname string, v *ethtoolValue) error {
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
