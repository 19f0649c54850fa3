// Package kerneln6 holds which network instances' UE traffic the kernel treats on N6
// (conntrack, nftables NAT and filtering, routing) rather than the datapath: a default and
// the network instances that differ from it. The configuration (flow_cache.kernel_n6 and
// kernel_n6_instances) and the datapath's options hold the same value, and every answer
// about it (is any network instance the kernel's, is this one) is worked out here, so the
// two can never disagree.
package kerneln6

import (
	"maps"
	"slices"
)

// Choice is the kernel's N6 treatment by network instance: the one a session's uplink FAR
// forwards to ("" when it names none). The YAML tags are the configuration's keys in its
// flow_cache section, where a Choice is inlined.
type Choice struct {
	// Default is the treatment of the network instances Instances does not name: true for
	// the kernel's, false for the datapath's own routing.
	Default bool `yaml:"kernel_n6"`
	// Instances sets the treatment of the network instances it names, overriding Default.
	Instances map[string]bool `yaml:"kernel_n6_instances"`
}

// Kernel reports whether the kernel treats network instance ni's UE traffic.
func (c Choice) Kernel(ni string) bool {
	if on, named := c.Instances[ni]; named {
		return on
	}
	return c.Default
}

// Any reports whether the kernel treats some network instance's UE traffic: by default, or
// for one Instances names.
func (c Choice) Any() bool {
	return c.Default || slices.Contains(slices.Collect(maps.Values(c.Instances)), true)
}

// Overrides reports whether network instance ni's treatment differs from Default.
func (c Choice) Overrides(ni string) bool { return c.Kernel(ni) != c.Default }
