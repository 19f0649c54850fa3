package config

import (
	"fmt"
	"net/netip"
	"slices"

	"gopkg.in/yaml.v3"
)

// UEToUPF is a service on the UPF itself that UEs may reach through their tunnels (a DNS
// resolver, say). Every other uplink packet to one of the UPF's own addresses is dropped as
// ue_to_upf.
type UEToUPF struct {
	Address netip.Addr `yaml:"address"`
	// Protocol is one of UEToUPFProtocols.
	Protocol Protocol `yaml:"protocol"`
	// Port is the destination port, for protocols with ports (1 to 65535); 0 for icmp.
	Port uint16 `yaml:"port,omitempty"`
}

// UEToUPFProtocols are the protocols ue_to_upf_allowed takes, with their IP protocol numbers.
var UEToUPFProtocols = map[Protocol]uint8{"icmp": 1, "tcp": 6, "udp": 17, "sctp": 132}

// MaxUEToUPF is how many services ue_to_upf_allowed may list (XUPF_MAX_UE_ALLOWED in
// bpf/lib/route.h).
const MaxUEToUPF = 64

type rawUEToUPF struct {
	Address  string    `yaml:"address"`
	Protocol Protocol  `yaml:"protocol"`
	Port     yaml.Node `yaml:"port"`
}

// ueToUPF checks ue_to_upf_allowed.
func (v *validator) ueToUPF(raws []rawUEToUPF) {
	if len(raws) > MaxUEToUPF {
		v.addf("ue_to_upf_allowed: %d services listed; the datapath holds at most %d, list fewer", len(raws), MaxUEToUPF)
		return
	}
	for i, raw := range raws {
		path := fmt.Sprintf("ue_to_upf_allowed[%d]", i)
		var s UEToUPF
		var err error
		nerrs := len(v.errs)
		if s.Address, err = parseAddr(raw.Address, "one of the UPF's own IPv4 addresses"); err != nil {
			v.addf("%s.address: %w", path, err)
		} else if !s.Address.Is4() {
			v.addf("%s.address: %s is not IPv4; only IPv4 is supported", path, s.Address)
		}
		known := raw.Protocol.Valid()
		if !known {
			v.addf(`%s.protocol: %q is not a protocol; use "udp", "tcp", "sctp" or "icmp"`, path, raw.Protocol)
		}
		s.Protocol = raw.Protocol
		port, present, err := intNode(&raw.Port, 1, 65535)
		switch {
		case err != nil:
			v.addf("%s.port: %w; use 1 to 65535", path, err)
		case raw.Protocol == "icmp" && present:
			v.addf("%s.port: icmp has no ports; remove the port", path)
		case known && raw.Protocol != "icmp" && !present:
			v.addf("%s.port: missing; give the destination port (1 to 65535) UEs may reach", path)
		}
		s.Port = uint16(port)
		if len(v.errs) > nerrs {
			continue
		}
		if j := slices.Index(v.cfg.UEToUPFAllowed, s); j >= 0 {
			v.addf("%s: the same service as ue_to_upf_allowed[%d]; list each once", path, j)
			continue
		}
		v.cfg.UEToUPFAllowed = append(v.cfg.UEToUPFAllowed, s)
	}
}
