package config

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// pfcp checks the PFCP node settings: pfcp_node_id, pfcp_allowed_peers and the heartbeats.
// It runs after gtpuAddresses, whose first address is the default Node ID.
func (v *validator) pfcp(raw *rawConfig) {
	switch {
	case raw.PFCPNodeID == "":
		if v.gtpuOK && len(v.cfg.GTPUAddresses) > 0 {
			v.cfg.PFCPNodeID = v.cfg.GTPUAddresses[0].String()
		}
		// Otherwise gtpu_addresses is missing or invalid, which is reported already.
	default:
		if err := checkNodeID(raw.PFCPNodeID); err != nil {
			v.addf("pfcp_node_id: %w", err)
		} else {
			v.cfg.PFCPNodeID = raw.PFCPNodeID
		}
	}

	seen := make(map[netip.Prefix]int, len(raw.PFCPAllowed))
	for i, s := range raw.PFCPAllowed {
		path := fmt.Sprintf("pfcp_allowed_peers[%d]", i)
		p, err := parsePeerPrefix(s)
		if err != nil {
			v.addf("%s: %w", path, err)
			continue
		}
		if j, dup := seen[p]; dup {
			v.addf("%s: %q is already listed as pfcp_allowed_peers[%d]; list each network once", path, s, j)
			continue
		}
		seen[p] = i
		v.cfg.PFCPAllowedPeers = append(v.cfg.PFCPAllowedPeers, p)
	}

	v.peerAddresses(raw.PFCPPeerAddrs)

	for i, s := range raw.PFCPSMFs {
		path := fmt.Sprintf("pfcp_smf_peers[%d]", i)
		ap, err := parseSMFPeer(s)
		if err != nil {
			v.addf("%s: %w", path, err)
			continue
		}
		if slices.Contains(v.cfg.PFCPSMFPeers, ap) {
			v.addf("%s: %s is listed twice; list each SMF once", path, ap)
			continue
		}
		v.cfg.PFCPSMFPeers = append(v.cfg.PFCPSMFPeers, ap)
	}

	if d, ok := v.duration("pfcp_heartbeat_interval", raw.PFCPInterval, "ms, s, m",
		`use a duration from 100ms to 10m, e.g. "10s"`, MinPFCPHeartbeatInterval, MaxPFCPHeartbeatInterval); ok {
		v.cfg.PFCPHeartbeatInterval = d
	}

	if raw.PFCPLost.Valid() {
		v.cfg.PFCPLostPeerSessions = raw.PFCPLost
	} else {
		v.addf("pfcp_lost_peer_sessions: %q is not a policy; use %q (lost SMFs' sessions keep forwarding) or %q",
			raw.PFCPLost, LostPeerKeep, LostPeerDelete)
	}
	v.uePools(raw.UEPools)
	switch {
	case raw.UEPoolsOnly && len(v.cfg.UEPools) == 0:
		v.addf("ue_pools_only: true without ue_pools would refuse every UE address; configure ue_pools or leave it false")
	default:
		v.cfg.UEPoolsOnly = raw.UEPoolsOnly
	}
	v.networkInstances(raw.Instances)

	n, present, err := intNode(&raw.PFCPRetries, 1, MaxPFCPHeartbeatRetries)
	switch {
	case err != nil:
		v.addf("pfcp_heartbeat_retries: %w; use 1 to %d (unanswered heartbeats in a row that declare an SMF lost)", err, MaxPFCPHeartbeatRetries)
	case present:
		v.cfg.PFCPHeartbeatRetries = int(n)
	}
	n, present, err = intNode(&raw.GTPUErrInd, 0, MaxGTPUErrorIndicationRate)
	switch {
	case err != nil:
		v.addf("gtpu_error_indication_rate: %w; use 0 (none) to %d Error Indications a second to one peer",
			err, MaxGTPUErrorIndicationRate)
	case present:
		v.cfg.GTPUErrorIndicationRate = int(n)
	}
	v.buffering(raw)
}

// checkNodeID checks a PFCP Node ID: an IPv4 unicast address or a DNS name.
func checkNodeID(s string) error {
	const fix = "give an IPv4 address of this UPF, e.g. 192.0.2.1, or its DNS name, e.g. upf1.5gc.example, or leave pfcp_node_id out to use the first of gtpu_addresses"
	if addr, err := netip.ParseAddr(s); err == nil {
		switch {
		case addr.Is4In6():
			return fmt.Errorf("%q is an IPv4-mapped IPv6 address; write it as %s", s, addr.Unmap())
		case !addr.Is4():
			return fmt.Errorf("%q is an IPv6 address, which is not supported as a Node ID; %s", s, fix)
		case addr.IsUnspecified() || addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return fmt.Errorf("%q is not a unicast address; %s", s, fix)
		}
		return nil
	}
	return checkDNSName(s, fix)
}

// checkDNSName checks a DNS name: letters, digits and hyphens in labels joined by dots, with
// the length limits. fix ends the messages.
func checkDNSName(s, fix string) error {
	if len(s) > MaxDNSNameLen {
		return fmt.Errorf("%q is %d characters long; a DNS name has at most %d", s, len(s), MaxDNSNameLen)
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		switch {
		case l == "":
			return fmt.Errorf("%q has an empty label (a dot at the start or the end, or two in a row); %s", s, fix)
		case len(l) > MaxDNSLabelLen:
			return fmt.Errorf("%q has a label of %d characters; a DNS label has at most %d", s, len(l), MaxDNSLabelLen)
		case strings.IndexFunc(l, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
		}) >= 0:
			return fmt.Errorf("%q is neither an IPv4 address nor a DNS name (DNS names hold only letters, digits, hyphens and dots); %s", s, fix)
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Errorf("%q has a label that starts or ends with a hyphen, which a DNS name cannot; %s", s, fix)
		}
	}
	// A name whose last label is all digits is a mistyped address (RFC 3696 2: top-level
	// domains are not all-numeric), e.g. 192.0.2.256 or 10.0.1.
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("%q is not a valid IPv4 address; %s", s, fix)
	}
	return nil
}

// parseSMFPeer parses a pfcp_smf_peers entry: an IPv4 address, with a port or the PFCP port.
func parseSMFPeer(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return netip.AddrPortFrom(a, 8805), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%q is not an SMF address; write an IPv4 address, with a port if it is not 8805 (192.0.2.10 or 192.0.2.10:8805)", s)
	}
	return ap, nil
}

func (v *validator) uePools(raws []string) {
	const want = `an IPv4 network such as "10.45.0.0/16"`
	for i, r := range raws {
		path := fmt.Sprintf("ue_pools[%d]", i)
		p, err := netip.ParsePrefix(r)
		switch {
		case err != nil || !p.Addr().Is4():
			v.addf("%s: %q is not an IPv4 network; give %s", path, r, want)
			continue
		case p != p.Masked():
			v.addf("%s: %q has host bits set; write the network, %s", path, r, p.Masked())
			continue
		}
		for j, q := range v.cfg.UEPools {
			if q.Overlaps(p) {
				v.addf("%s: %s overlaps ue_pools[%d] %s; give pools that do not overlap", path, p, j, q)
				p = netip.Prefix{}
				break
			}
		}
		if p.IsValid() {
			v.cfg.UEPools = append(v.cfg.UEPools, p)
		}
	}
}

func (v *validator) networkInstances(raw map[string]string) {
	var names []string
	for _, i := range v.cfg.Interfaces {
		names = append(names, i.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		ifc := raw[name]
		switch {
		case name == "":
			v.addf("network_instances: an empty name; give the network instance as the SMF sends it, e.g. internet")
		case !slices.Contains(names, ifc):
			v.addf("network_instances.%s: %q is not one of the interfaces; use one of %v", name, ifc, names)
		default:
			if v.cfg.NetworkInstances == nil {
				v.cfg.NetworkInstances = map[string]string{}
			}
			v.cfg.NetworkInstances[name] = ifc
		}
	}
}

// peerAddresses checks pfcp_peer_addresses: Node IDs, each with a list of networks.
func (v *validator) peerAddresses(raw map[string][]string) {
	for _, id := range slices.Sorted(maps.Keys(raw)) {
		if checkNodeID(id) != nil {
			v.addf("pfcp_peer_addresses: %q is not a Node ID; give the SMF's Node ID as it sends it, an IPv4 address or a DNS name", id)
			continue
		}
		if len(raw[id]) == 0 {
			v.addf("pfcp_peer_addresses.%s: empty; list the addresses or networks the SMF sends from", id)
			continue
		}
		for i, s := range raw[id] {
			p, err := parsePeerPrefix(s)
			if err != nil {
				v.addf("pfcp_peer_addresses.%s[%d]: %w", id, i, err)
				continue
			}
			if v.cfg.PFCPPeerAddresses == nil {
				v.cfg.PFCPPeerAddresses = map[string][]netip.Prefix{}
			}
			v.cfg.PFCPPeerAddresses[id] = append(v.cfg.PFCPPeerAddresses[id], p)
		}
	}
}

// parsePeerPrefix parses a pfcp_allowed_peers entry: an IPv4 prefix without host bits, or
// an IPv4 address, which is a /32.
func parsePeerPrefix(s string) (netip.Prefix, error) {
	const want = "an IPv4 address or prefix of the SMFs, e.g. 192.0.2.10 or 192.0.2.0/24"
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("missing; give %s", want)
	}
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP prefix; give %s", s, want)
		}
	} else {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or prefix; give %s", s, want)
		}
		p = netip.PrefixFrom(addr, addr.BitLen())
	}
	switch {
	case p.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address; write it as IPv4, e.g. %s", s, p.Addr().Unmap())
	case !p.Addr().Is4():
		return netip.Prefix{}, fmt.Errorf("%q is not IPv4; only IPv4 SMF addresses are supported, give %s", s, want)
	case p != p.Masked():
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; write the network, %s", s, p.Masked())
	}
	return p, nil
}
