package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
)

func (v *validator) settings(raw *rawConfig) {
	if raw.XDPMode.Valid() {
		v.cfg.XDPMode = raw.XDPMode
	} else {
		v.addf(`xdp_mode: %q is not a mode; use "native" or "generic"`, raw.XDPMode)
	}
	v.cfg.XDPFallback = raw.XDPFallback

	switch {
	case raw.BPFFS == "":
		v.addf("bpffs: empty; give an absolute directory on the BPF filesystem, e.g. %s", DefaultBPFFS)
	case !filepath.IsAbs(raw.BPFFS):
		v.addf("bpffs: %q is not an absolute path; give an absolute directory on the BPF filesystem, e.g. %s", raw.BPFFS, DefaultBPFFS)
	default:
		v.cfg.BPFFS = raw.BPFFS
	}
	if !filepath.IsAbs(raw.StateDir) {
		v.addf("state_dir: %q is not an absolute path; give the directory of the state file, e.g. %s", raw.StateDir, DefaultStateDir)
	} else {
		v.cfg.StateDir = raw.StateDir
	}

	if err := checkListen(raw.HTTPListen); err != nil {
		v.addf(`http_listen: %w; use host:port, e.g. "127.0.0.1:8080", or ":8080" for all addresses`, err)
	} else {
		v.cfg.HTTPListen = raw.HTTPListen
	}
	switch err := checkListen(raw.PFCPListen); {
	case raw.PFCPListen == "":
		// Where the SMFs reach this UPF is not known; its first GTP-U address is an address
		// of its own, unlike all of them (N6 included).
		if v.gtpuOK && len(v.cfg.GTPUAddresses) > 0 {
			v.cfg.PFCPListen = netip.AddrPortFrom(v.cfg.GTPUAddresses[0], DefaultPFCPPort).String()
		}
	case err != nil:
		v.addf(`pfcp_listen: %w; use host:port of the address the SMFs reach, e.g. "192.0.2.1:8805"`, err)
	default:
		v.cfg.PFCPListen = raw.PFCPListen
	}

	if raw.LogLevel.Valid() {
		v.cfg.LogLevel = raw.LogLevel
	} else {
		v.addf("log_level: %q is not a level; use debug, info, warn or error", raw.LogLevel)
	}
}

// uplinkSpread checks uplink_spread, uplink_spread_cpus and uplink_spread_queue. Whether the
// CPUs are online is the datapath's to check, on the machine it runs on.
func (v *validator) uplinkSpread(raw *rawConfig) {
	if raw.Spread.Valid() {
		v.cfg.UplinkSpread = raw.Spread
	} else {
		v.addf("uplink_spread: %q is not a mode; use %s (the default: the NIC's RSS spreads already), "+
			"%s (each session's uplink on one CPU) or %s (each inner flow on one CPU)", raw.Spread, SpreadOff, SpreadTEID, SpreadFlow)
	}
	off := raw.Spread == SpreadOff
	if len(raw.SpreadCPUs) > 0 && off {
		v.addf("uplink_spread_cpus: listed, but uplink_spread is off; set uplink_spread to %s or %s, or remove uplink_spread_cpus",
			SpreadTEID, SpreadFlow)
	}
	if len(raw.SpreadCPUs) > MaxUplinkSpreadCPUs {
		v.addf("uplink_spread_cpus: %d CPUs listed; at most %d, list fewer", len(raw.SpreadCPUs), MaxUplinkSpreadCPUs)
	}
	for i := range raw.SpreadCPUs {
		n, _, err := intNode(&raw.SpreadCPUs[i], 0, MaxCPU)
		switch {
		case err != nil:
			v.addf("uplink_spread_cpus[%d]: %w; give a CPU number from 0 to %d, as in /sys/devices/system/cpu/online", i, err, MaxCPU)
		case slices.Contains(v.cfg.UplinkSpreadCPUs, int(n)):
			v.addf("uplink_spread_cpus[%d]: CPU %d is already listed; list each CPU once", i, n)
		default:
			v.cfg.UplinkSpreadCPUs = append(v.cfg.UplinkSpreadCPUs, int(n))
		}
	}
	n, present, err := intNode(&raw.SpreadQueue, 1, MaxUplinkSpreadQueue)
	switch {
	case err != nil:
		v.addf("uplink_spread_queue: %w; use 1 to %d packets (default %d)", err, MaxUplinkSpreadQueue, DefaultUplinkSpreadQueue)
	case present:
		v.cfg.UplinkSpreadQueue = int(n)
	}
}

// checkListen checks a host:port listen address; the host may be empty.
func checkListen(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("%q is not host:port (%s)", s, ae.Err)
		}
		return fmt.Errorf("%q is not host:port", s)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("port %q in %q is not a port number from 1 to 65535", port, s)
	}
	return nil
}
