package config

import (
	"maps"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/kerneln6"
	"github.com/xupf/xupf/internal/returndev"
)

// Bounds of flow_cache.max_flows and flow_cache.idle_timeout.
const (
	MaxMaxFlows            = 1 << 24
	DefaultFlowIdleTimeout = 30 * time.Second
	MinFlowIdleTimeout     = time.Second
	MaxFlowIdleTimeout     = 24 * time.Hour
)

// FlowCache configures the flow cache: transit flows the kernel forwards are learnt from their
// first packet and forwarded by the datapath after it.
type FlowCache struct {
	// MaxFlows sizes the flow table (allocated at start-up, about 64 bytes a flow); 0, the
	// default, turns the cache off. A flow that finds the table full stays with the kernel.
	MaxFlows int `yaml:"max_flows"`
	// IdleTimeout is how long a flow may go without a packet before it is forgotten.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// KernelN6 has the kernel treat UE traffic on N6 (conntrack, nftables NAT and
	// filtering, routing), by network instance (the one a session's uplink FAR names): a UE's
	// packet without a tunnel goes to the kernel once decapsulated, and the cache learns
	// each flow's translation both ways. kernel_n6 is the default, off: the datapath routes
	// UE traffic itself and the kernel never sees it; kernel_n6_instances overrides it for
	// the network instances it names.
	KernelN6 kerneln6.Choice `yaml:",inline"`
	// ReturnDevice names the veth pair xupfd makes when the kernel treats some network
	// instance's UE traffic (KernelN6.Any) for the packets the kernel sends to UEs: the
	// kernel routes the ue_pools into it, and they take their session's downlink rules (its
	// peer is ReturnDevice plus "-xdp").
	ReturnDevice string `yaml:"return_device"`
}

// DefaultReturnDevice is flow_cache.return_device's default.
const DefaultReturnDevice = "xupfret"

type rawFlowCache struct {
	MaxFlows          yaml.Node       `yaml:"max_flows"`
	IdleTimeout       string          `yaml:"idle_timeout"`
	KernelN6          bool            `yaml:"kernel_n6"`
	KernelN6Instances map[string]bool `yaml:"kernel_n6_instances"`
	ReturnDevice      string          `yaml:"return_device"`
}

// flowCache checks the flow_cache section.
func (v *validator) flowCache(raw rawFlowCache) {
	fc := &v.cfg.FlowCache
	n, present, err := intNode(&raw.MaxFlows, 0, MaxMaxFlows)
	switch {
	case err != nil:
		v.addf("flow_cache.max_flows: %w; use 0 (off) to %d", err, MaxMaxFlows)
	case present:
		fc.MaxFlows = int(n)
	}
	fc.KernelN6.Default = raw.KernelN6
	if fc.KernelN6.Default && fc.MaxFlows == 0 {
		v.addf("flow_cache.kernel_n6 needs the flow cache: set flow_cache.max_flows, e.g. 65536")
	}
	for _, ni := range slices.Sorted(maps.Keys(raw.KernelN6Instances)) {
		on := raw.KernelN6Instances[ni]
		_, known := v.cfg.NetworkInstances[ni]
		switch {
		case ni == "":
			v.addf("flow_cache.kernel_n6_instances: an empty name; give the network instance as the SMF sends it, e.g. internet")
		case len(v.cfg.NetworkInstances) > 0 && !known:
			v.addf("flow_cache.kernel_n6_instances.%s: not a network instance; use one of network_instances %v",
				ni, slices.Sorted(maps.Keys(v.cfg.NetworkInstances)))
		case on && fc.MaxFlows == 0:
			v.addf("flow_cache.kernel_n6_instances.%s needs the flow cache: set flow_cache.max_flows, e.g. 65536", ni)
		default:
			if fc.KernelN6.Instances == nil {
				fc.KernelN6.Instances = map[string]bool{}
			}
			fc.KernelN6.Instances[ni] = on
		}
	}
	if fc.KernelN6.Any() && fc.MaxFlows > 0 && len(v.cfg.UEPools) == 0 {
		v.addf("flow_cache.kernel_n6 (or kernel_n6_instances) needs ue_pools: the kernel routes them into " +
			"flow_cache.return_device, which is how the packets it sends to UEs reach their sessions")
	}
	if raw.ReturnDevice != "" {
		fc.ReturnDevice = raw.ReturnDevice
	}
	if n := len(fc.ReturnDevice); n == 0 || n > returndev.MaxName {
		v.addf("flow_cache.return_device: %q; give an interface name of 1 to %d characters", fc.ReturnDevice, returndev.MaxName)
	}
	if raw.IdleTimeout == "" {
		return
	}
	if d, ok := v.duration("flow_cache.idle_timeout", raw.IdleTimeout, "s, m, h",
		`use a duration from 1s to 24h, e.g. "30s"`, MinFlowIdleTimeout, MaxFlowIdleTimeout); ok {
		fc.IdleTimeout = d
	}
}
