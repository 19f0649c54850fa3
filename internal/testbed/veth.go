package testbed

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// VethPair is a veth pair to create in the calling thread's network namespace, both ends
// there: the test rigs of the datapath and of the evaluation suite, which need no second
// namespace.
type VethPair struct {
	Name, Peer string
	// MAC and PeerMAC are the ends' addresses; nil leaves the kernel's choice.
	MAC, PeerMAC net.HardwareAddr
	// Queues is the number of transmit and receive queues on each end; 0 is one. One per
	// CPU lets traffic sent from several CPUs land in queues of their own, each with its own
	// NAPI, rather than overflow one shared ring.
	Queues int
}

// Add creates the pair, brings both ends up and returns their interface indexes.
func (v VethPair) Add() (ifindex, peerIfindex int, err error) {
	q := max(v.Queues, 1)
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: v.Name, HardwareAddr: v.MAC, NumTxQueues: q, NumRxQueues: q},
		PeerName:  v.Peer, PeerHardwareAddr: v.PeerMAC, PeerNumTxQueues: uint32(q), PeerNumRxQueues: uint32(q),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return 0, 0, fmt.Errorf("testbed: create veth %s/%s: %w", v.Name, v.Peer, err)
	}
	var idx [2]int
	for i, name := range []string{v.Name, v.Peer} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return 0, 0, fmt.Errorf("testbed: veth %s: %w", name, err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return 0, 0, fmt.Errorf("testbed: set %s up: %w", name, err)
		}
		idx[i] = l.Attrs().Index
	}
	return idx[0], idx[1], nil
}
