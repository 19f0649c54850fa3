package datapath

import (
	"fmt"
	"net"
	"net/netip"
)

// GTP-U is accepted only on interfaces with the n3 role: xupf_gtpu_addrs holds each local
// GTP-U address with every n3 interface's ifindex (and with gtpuAnyIfindex, which only says
// the address is ours). The dispatch looks the pair up in the one lookup it made before, so the
// check is free; GTP-U that arrives elsewhere (from the data network on N6) is dropped as
// gtpu_not_n3 instead of being decapsulated as uplink.

// maxN3Ports is XUPF_MAX_N3_PORTS (bpf/lib/gtpu.h): n3 interfaces the address table holds.
const maxN3Ports = 16

// gtpuAnyIfindex is GTPU_ANY_IFINDEX: the entry every local GTP-U address has.
const gtpuAnyIfindex = 0

// setGTPUAddrs makes addrs the only local GTP-U addresses, accepted on the interfaces named
// n3. Entries are written before stale ones go, so a program of an earlier run, still
// attached, never misses the addresses both runs have.
func (d *Datapath) setGTPUAddrs(addrs []netip.Addr, n3 []string) error {
	ifindexes := []uint32{gtpuAnyIfindex}
	for _, name := range n3 {
		iface, err := net.InterfaceByName(name)
		if err != nil {
			return fmt.Errorf("n3 interface %q: %w", name, err)
		}
		ifindexes = append(ifindexes, uint32(iface.Index))
	}
	if len(ifindexes) > maxN3Ports+1 {
		return fmt.Errorf("%d n3 interfaces: the datapath accepts GTP-U on at most %d", len(n3), maxN3Ports)
	}
	want := map[xupfGtpuAddrKey]bool{}
	for _, a := range addrs {
		if !a.Is4() {
			return fmt.Errorf("gtp-u address %s: only IPv4 is supported", a)
		}
		for _, ifindex := range ifindexes {
			want[xupfGtpuAddrKey{Addr: addrBE(a), Ifindex: ifindex}] = true
		}
	}
	return setKeys(d.objs.XupfGtpuAddrs, want)
}
