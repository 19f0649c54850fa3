// Package nfwatch follows netfilter's netlink events that can change the kernel's decision for
// a flow: the nftables ruleset changing, and conntrack entries going. Those who keep copies of
// the kernel's decisions (the flow cache) drop them on these events.
package nfwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/nlns"
)

// Tuple is one direction of a connection, as conntrack reports it: IPv4 TCP or UDP.
type Tuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
}

// Events is what one read of the socket brought.
type Events struct {
	// Ruleset: the nftables ruleset changed, or events were lost (the socket's buffer
	// overflowed): any decision may differ now.
	Ruleset bool
	// Gone are both directions (original and reply) of the IPv4 TCP and UDP connections
	// conntrack removed.
	Gone []Tuple
}

// receiveBuffer holds the events that arrive while fn runs; past it events are lost, which
// Watch reports as a ruleset change.
const receiveBuffer = 4 << 20

// Watch subscribes to the nftables and conntrack-destroy events of namespace ns and calls fn
// with each read's events, from its own goroutine, until stop is called. It needs
// CAP_NET_ADMIN.
func Watch(ns netns.NsHandle, log *slog.Logger, fn func(Events)) (stop func(), err error) {
	groups := []uint{unix.NFNLGRP_NFTABLES, unix.NFNLGRP_CONNTRACK_DESTROY}
	var s *nl.NetlinkSocket
	if nlns.InProcess(ns) {
		s, err = nl.Subscribe(unix.NETLINK_NETFILTER, groups...)
	} else {
		s, err = nl.SubscribeAt(ns, netns.None(), unix.NETLINK_NETFILTER, groups...)
	}
	if err != nil {
		return nil, fmt.Errorf("subscribe to netfilter events (needs CAP_NET_ADMIN): %w", err)
	}
	if err := s.SetReceiveBufferSize(receiveBuffer, true); err != nil {
		// Without FORCE (no CAP_NET_ADMIN in the init namespace): net.core.rmem_max's.
		if err := s.SetReceiveBufferSize(receiveBuffer, false); err != nil {
			s.Close()
			return nil, fmt.Errorf("netfilter events: socket buffer: %w", err)
		}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			msgs, _, err := s.Receive()
			select {
			case <-done:
				return
			default:
			}
			switch {
			case errors.Is(err, unix.ENOBUFS):
				fn(Events{Ruleset: true})
			case err != nil:
				// Events may have been missed: report a change, so that nothing copied
				// outlives one, and try again a second later.
				log.Error("netfilter events: receive", "err", err)
				fn(Events{Ruleset: true})
				select {
				case <-done:
					return
				case <-time.After(time.Second):
				}
			default:
				if ev := parse(msgs); ev.Ruleset || len(ev.Gone) > 0 {
					fn(ev)
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); s.Close(); <-exited }) }, nil
}

// IPCTNL_MSG_CT_DELETE in the conntrack subsystem: a connection removed.
const ctDelete = unix.NFNL_SUBSYS_CTNETLINK<<8 | nl.IPCTNL_MSG_CT_DELETE

// parse takes the events out of msgs; what it does not understand it skips.
func parse(msgs []syscall.NetlinkMessage) Events {
	var ev Events
	for _, m := range msgs {
		switch {
		case m.Header.Type>>8 == unix.NFNL_SUBSYS_NFTABLES:
			ev.Ruleset = true
		case m.Header.Type == ctDelete:
			if len(m.Data) < nl.SizeofNfgenmsg || m.Data[0] != unix.AF_INET {
				continue
			}
			attrs, err := nl.ParseRouteAttr(m.Data[nl.SizeofNfgenmsg:])
			if err != nil {
				continue
			}
			for _, a := range attrs {
				if t := a.Attr.Type & nl.NLA_TYPE_MASK; t == nl.CTA_TUPLE_ORIG || t == nl.CTA_TUPLE_REPLY {
					if tu, ok := parseTuple(a.Value); ok {
						ev.Gone = append(ev.Gone, tu)
					}
				}
			}
		}
	}
	return ev
}

// parseTuple reads a CTA_TUPLE_ORIG or CTA_TUPLE_REPLY: ok for IPv4 TCP and UDP only.
func parseTuple(b []byte) (t Tuple, ok bool) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return Tuple{}, false
	}
	for _, a := range attrs {
		inner, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return Tuple{}, false
		}
		for _, f := range inner {
			v := f.Value
			switch [2]uint16{a.Attr.Type & nl.NLA_TYPE_MASK, f.Attr.Type & nl.NLA_TYPE_MASK} {
			case [2]uint16{nl.CTA_TUPLE_IP, nl.CTA_IP_V4_SRC}:
				if len(v) == 4 {
					t.Src = netip.AddrFrom4([4]byte(v))
				}
			case [2]uint16{nl.CTA_TUPLE_IP, nl.CTA_IP_V4_DST}:
				if len(v) == 4 {
					t.Dst = netip.AddrFrom4([4]byte(v))
				}
			case [2]uint16{nl.CTA_TUPLE_PROTO, nl.CTA_PROTO_NUM}:
				if len(v) == 1 {
					t.Proto = v[0]
				}
			case [2]uint16{nl.CTA_TUPLE_PROTO, nl.CTA_PROTO_SRC_PORT}:
				if len(v) == 2 {
					t.SrcPort = binary.BigEndian.Uint16(v)
				}
			case [2]uint16{nl.CTA_TUPLE_PROTO, nl.CTA_PROTO_DST_PORT}:
				if len(v) == 2 {
					t.DstPort = binary.BigEndian.Uint16(v)
				}
			}
		}
	}
	ok = t.Src.IsValid() && t.Dst.IsValid() && (t.Proto == unix.IPPROTO_TCP || t.Proto == unix.IPPROTO_UDP)
	return t, ok
}
