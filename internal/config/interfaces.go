package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode"
)

func (v *validator) interfaces(ifcs []Interface) {
	if len(ifcs) == 0 {
		v.addf(`interfaces: missing; list at least one interface, e.g. [{name: eth0, roles: [n3, n6]}]`)
		return
	}
	seen := make(map[string]int, len(ifcs))
	for i, ifc := range ifcs {
		path := fmt.Sprintf("interfaces[%d]", i)
		if err := checkInterfaceName(ifc.Name); err != nil {
			v.addf("%s.name: %w", path, err)
		} else if j, dup := seen[ifc.Name]; dup {
			v.addf("%s.name: %q is already listed as interfaces[%d]; list each interface once and give it all its roles, e.g. roles: [n3, n6]", path, ifc.Name, j)
		} else {
			seen[ifc.Name] = i
		}
		if len(ifc.Roles) == 0 {
			v.addf(`%s.roles: missing; give "n3", "n6" or both, e.g. roles: [n3]`, path)
		}
		for k, role := range ifc.Roles {
			switch {
			case !role.Valid():
				v.addf(`%s.roles[%d]: %q is not a role; use "n3" (facing the gNBs) or "n6" (facing the data network)`, path, k, role)
			case k > 0 && slices.Contains(ifc.Roles[:k], role):
				v.addf("%s.roles[%d]: %q is listed twice; list each role once", path, k, role)
			}
		}
	}
	v.cfg.Interfaces = ifcs
	for _, role := range []Role{RoleN3, RoleN6} {
		if len(v.cfg.InterfacesWithRole(role)) == 0 {
			side := "the gNBs"
			if role == RoleN6 {
				side = "the data network"
			}
			v.addf("interfaces: no interface has role %q; give the interface facing %s the role %s (one interface may have both n3 and n6)", role, side, role)
		}
	}
}

// checkInterfaceName applies the kernel's rules for interface names (dev_valid_name).
func checkInterfaceName(name string) error {
	switch {
	case name == "":
		return errors.New(`missing; give the Linux interface name as shown by "ip link", e.g. eth0`)
	case len(name) > MaxInterfaceNameLen:
		return fmt.Errorf("%q is %d bytes long; Linux interface names have at most %d", name, len(name), MaxInterfaceNameLen)
	case name == "." || name == "..":
		return fmt.Errorf(`%q is not an interface name; give the name shown by "ip link"`, name)
	case strings.ContainsAny(name, "/:"):
		return fmt.Errorf(`%q contains '/' or ':', which Linux interface names cannot; give the name shown by "ip link"`, name)
	case strings.ContainsFunc(name, unicode.IsSpace):
		return fmt.Errorf(`%q contains whitespace, which Linux interface names cannot; give the name shown by "ip link"`, name)
	}
	return nil
}

func (v *validator) gtpuAddresses(addrs []string) {
	if len(addrs) == 0 {
		v.addf(`gtpu_addresses: missing; list at least one local IPv4 address that the gNBs send GTP-U to, e.g. [192.0.2.1]`)
		return
	}
	if len(addrs) > MaxGTPUAddresses {
		v.addf("gtpu_addresses: %d addresses listed; the datapath holds at most %d, list fewer", len(addrs), MaxGTPUAddresses)
	}
	ok := true
	seen := make(map[netip.Addr]int, len(addrs))
	for i, s := range addrs {
		path := fmt.Sprintf("gtpu_addresses[%d]", i)
		addr, err := parseAddr(s, "a local IPv4 address on an n3 interface")
		if err != nil {
			v.addf("%s: %w", path, err)
			ok = false
			continue
		}
		switch {
		case addr.Is4In6():
			v.addf("%s: %q is an IPv4-mapped IPv6 address; write it as %s", path, s, addr.Unmap())
			ok = false
		case !addr.Is4():
			v.addf("%s: %q is not an IPv4 address; only IPv4 N3 addresses are supported, give a local IPv4 address", path, s)
			ok = false
		case addr.IsUnspecified() || addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			v.addf("%s: %q is not a unicast address; give the address configured on the n3 interface", path, s)
			ok = false
		default:
			if j, dup := seen[addr]; dup {
				v.addf("%s: %q is already listed as gtpu_addresses[%d]; list each address once", path, s, j)
				ok = false
				continue
			}
			seen[addr] = i
			v.cfg.GTPUAddresses = append(v.cfg.GTPUAddresses, addr)
		}
	}
	v.gtpuOK = ok
}

// parseAddr parses a required IP address; want says what to give instead.
func parseAddr(s, want string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("missing; give %s", want)
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address; give %s", s, want)
	}
	return addr, nil
}
