// Package conntrack changes the kernel's conntrack entries over netlink (ctnetlink): the flow
// cache keeps alive the entries of the flows it forwards, whose packets conntrack no longer
// sees.
package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Tuple is an IPv4 TCP or UDP tuple as conntrack keys an entry by it.
type Tuple struct {
	Src, Dst netip.AddrPort
	Proto    uint8 // 6 TCP, 17 UDP
}

// Change is what Update changes in an entry; a zero field is left as it is.
type Change struct {
	// Timeout is how long the entry lives from now, to the second (rounded up).
	Timeout time.Duration
	// Status bits to set (enum ip_conntrack_status; the kernel refuses to clear some).
	Status uint32
}

// ErrNotExist is Update's error when no entry has the tuple.
var ErrNotExist = errors.New("no conntrack entry")

// Conn is a ctnetlink socket in one network namespace.
type Conn struct {
	h nl.SocketHandle
}

// Open opens a ctnetlink socket in ns (CAP_NET_ADMIN).
func Open(ns netns.NsHandle) (*Conn, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack: netlink socket: %w", err)
	}
	return &Conn{h: nl.SocketHandle{Socket: s}}, nil
}

// Close closes the socket.
func (c *Conn) Close() { c.h.Socket.Close() }

// Update changes the entry whose original tuple is t. It waits for the kernel's answer: one
// round trip per entry.
func (c *Conn) Update(t Tuple, ch Change) error {
	if !t.Src.Addr().Is4() || !t.Dst.Addr().Is4() {
		return fmt.Errorf("conntrack: %s -> %s: IPv4 only", t.Src, t.Dst)
	}
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_NEW, unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: &c.h}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
	orig := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_ORIG, nil)
	ip := orig.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	ip.AddRtAttr(nl.CTA_IP_V4_SRC, t.Src.Addr().AsSlice())
	ip.AddRtAttr(nl.CTA_IP_V4_DST, t.Dst.Addr().AsSlice())
	proto := orig.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
	proto.AddRtAttr(nl.CTA_PROTO_NUM, []byte{t.Proto})
	proto.AddRtAttr(nl.CTA_PROTO_SRC_PORT, binary.BigEndian.AppendUint16(nil, t.Src.Port()))
	proto.AddRtAttr(nl.CTA_PROTO_DST_PORT, binary.BigEndian.AppendUint16(nil, t.Dst.Port()))
	req.AddData(orig)
	if ch.Timeout > 0 {
		secs := uint32((ch.Timeout + time.Second - 1) / time.Second)
		req.AddData(nl.NewRtAttr(nl.CTA_TIMEOUT, binary.BigEndian.AppendUint32(nil, secs)))
	}
	if ch.Status != 0 {
		req.AddData(nl.NewRtAttr(nl.CTA_STATUS, binary.BigEndian.AppendUint32(nil, ch.Status)))
	}
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("conntrack: %s -> %s: %w", t.Src, t.Dst, ErrNotExist)
	} else if err != nil {
		return fmt.Errorf("conntrack: update %s -> %s: %w", t.Src, t.Dst, err)
	}
	return nil
}
