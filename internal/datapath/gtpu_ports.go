package datapath

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
)

// GTP-U is accepted only on interfaces with the n3 role, to a local GTP-U address: both are
// constants of the program (cfg_gtpu_addrs and cfg_n3_ifindex in bpf/lib/gtpu.h), compared on
// every packet instead of looked up in a map. GTP-U that arrives elsewhere (from the data
// network on N6) is dropped as gtpu_not_n3 instead of being decapsulated as uplink.

// maxGTPUAddrs and maxN3Ports are XUPF_MAX_GTPU_ADDRS and XUPF_MAX_N3_PORTS (bpf/lib/gtpu.h).
const (
	maxGTPUAddrs = 16
	maxN3Ports   = 16
)

// setGTPUAddrs makes addrs the program's local GTP-U addresses, accepted on the interfaces
// named n3, in spec (before it is loaded: every program loaded from it has them).
func setGTPUAddrs(spec *ebpf.CollectionSpec, addrs []netip.Addr, n3 []string) error {
	if len(addrs) > maxGTPUAddrs {
		return fmt.Errorf("%d GTP-U addresses: the datapath has room for %d", len(addrs), maxGTPUAddrs)
	}
	if len(n3) > maxN3Ports {
		return fmt.Errorf("%d n3 interfaces: the datapath accepts GTP-U on at most %d", len(n3), maxN3Ports)
	}
	var addrVals [maxGTPUAddrs]uint32
	for i, a := range addrs {
		if !a.Is4() {
			return fmt.Errorf("gtp-u address %s: only IPv4 is supported", a)
		}
		addrVals[i] = addrBE(a)
	}
	var ifindexes [maxN3Ports]uint32
	for i, name := range n3 {
		iface, err := net.InterfaceByName(name)
		if err != nil {
			return fmt.Errorf("n3 interface %q: %w", name, err)
		}
		ifindexes[i] = uint32(iface.Index)
	}
	return setVars(spec, map[string]any{
		xupfVarCfgGtpuNaddrs: uint32(len(addrs)),
		xupfVarCfgGtpuAddrs:  addrVals,
		xupfVarCfgN3Nports:   uint32(len(n3)),
		xupfVarCfgN3Ifindex:  ifindexes,
	})
}
