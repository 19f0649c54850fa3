package router

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/nlns"
)

// subscribeRules subscribes to the IPv4 policy routing rules' events of ns (ip rule add,
// del): the router does not copy the rules, but the kernel's decisions depend on them. The
// returned channel receives after each read that brought any (a burst may come as one) and is
// closed when the subscription ends: stop closed, or a failed read (a full socket buffer
// loses events), which the follower answers as it does a route subscription's end.
func subscribeRules(ns netns.NsHandle, stop <-chan struct{}) (<-chan struct{}, error) {
	var s *nl.NetlinkSocket
	var err error
	if nlns.InProcess(ns) {
		s, err = nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_RULE)
	} else {
		s, err = nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_RULE)
	}
	if err != nil {
		return nil, fmt.Errorf("subscribe to rule events: %w", err)
	}
	ch := make(chan struct{}, 1)
	go func() {
		<-stop
		s.Close() // ends the read below
	}()
	go func() {
		defer close(ch)
		for {
			msgs, _, err := s.Receive()
			if err != nil {
				return
			}
			for _, m := range msgs {
				if m.Header.Type == unix.RTM_NEWRULE || m.Header.Type == unix.RTM_DELRULE {
					select {
					case ch <- struct{}{}:
					default: // one is waiting: the follower takes this read with it
					}
					break
				}
			}
		}
	}()
	return ch, nil
}
