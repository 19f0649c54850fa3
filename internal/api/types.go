// Package api is the daemon's HTTP API: the contract (these types, api/openapi.yaml), the
// server handlers and the client that xupfctl uses.
package api

import (
	"time"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/session"
)

// Interface is one interface the datapath is attached to.
type Interface struct {
	Name    string   `json:"name" yaml:"name"`
	Ifindex int      `json:"ifindex" yaml:"ifindex"`
	Roles   []string `json:"roles" yaml:"roles"`       // "n3", "n6"
	XDPMode string   `json:"xdp_mode" yaml:"xdp_mode"` // "native" or "generic": the mode in use
}

// Status is the daemon's overall state.
type Status struct {
	Version       string      `json:"version" yaml:"version"`
	StartedAt     time.Time   `json:"started_at" yaml:"started_at"`
	UptimeSeconds float64     `json:"uptime_seconds" yaml:"uptime_seconds"`
	Interfaces    []Interface `json:"interfaces" yaml:"interfaces"`
	GTPUAddresses []string    `json:"gtpu_addresses" yaml:"gtpu_addresses"`
	PFCPAddress   string      `json:"pfcp_address" yaml:"pfcp_address"`
	// PFCPAssociations is how many SMFs have a PFCP association with the daemon.
	PFCPAssociations int `json:"pfcp_associations" yaml:"pfcp_associations"`
	// Sessions is how many sessions the datapath has: static ones and PFCP ones.
	Sessions    int    `json:"sessions" yaml:"sessions"`
	MaxSessions int    `json:"max_sessions" yaml:"max_sessions"`
	BPFFSPath   string `json:"bpffs_path" yaml:"bpffs_path"`
	// QoSAlgorithm and QoSClock are the rate-limiting algorithm and the clock of every meter
	// (QER MBRs and policer contracts), chosen in the configuration when the daemon starts.
	QoSAlgorithm string `json:"qos_algorithm" yaml:"qos_algorithm"`
	QoSClock     string `json:"qos_clock" yaml:"qos_clock"`
}

// SessionInfo is a static session (from the configuration) with what the datapath counted
// for it.
type SessionInfo struct {
	session.Session `yaml:",inline"`
	Usage           session.Usage `json:"usage" yaml:"usage"`
}

// PFCPSessionInfo is a session an SMF established over PFCP, with what the datapath counted
// for each of its PDRs.
type PFCPSessionInfo struct {
	pfcp.Session `yaml:",inline"`
	// Usage has one entry per PDR of the session, sorted by PDR id; never null.
	Usage []PDRUsage `json:"usage" yaml:"usage"`
}

// PDRUsage is what the datapath counted for one PDR of a PFCP session: the packets it was
// the matching PDR for, and their bytes. PDR ids are unique within a session; whether the
// PDR is uplink (it has an F-TEID) or downlink is in the PDR itself.
type PDRUsage struct {
	PDR     uint16 `json:"pdr_id" yaml:"pdr_id"`
	Packets uint64 `json:"packets" yaml:"packets"`
	Bytes   uint64 `json:"bytes" yaml:"bytes"`
}

// ClassInfo is a traffic class with what the datapath counted for it: the packets the class
// was the winning match for, and their bytes.
type ClassInfo struct {
	classifier.Class `yaml:",inline"`
	Counters         session.Counters `json:"counters" yaml:"counters"`
}

// Contract is what the policer does with the packets of one traffic class, as a client sets
// it (the body of PUT /api/v1/policer/contracts/{class}): pass them all, drop them all, or
// limit them to a rate with a burst. Rate and burst go with "limit" only.
type Contract struct {
	// Action is "pass", "drop" or "limit".
	Action string `json:"action" yaml:"action"`
	// RateBPS is the rate of a limit in bits per second: a multiple of 8 (the policer meters
	// whole bytes per second), from 8 to 1000000000000 (1 Tbit/s).
	RateBPS uint64 `json:"rate_bps,omitempty" yaml:"rate_bps,omitempty"`
	// BurstBytes is how many bytes a limit lets through at once, from 1 to 4611686018; a
	// packet larger than the burst never passes.
	BurstBytes uint64 `json:"burst_bytes,omitempty" yaml:"burst_bytes,omitempty"`
}

// ContractInfo is the policer's contract for a traffic class with what it let through and
// dropped. Class 0 is the default contract: it applies to the packets that match no class
// and to those of a class without a contract.
type ContractInfo struct {
	Class    uint32 `json:"class" yaml:"class"`
	Contract `yaml:",inline"`
	Counters PoliceCounters `json:"counters" yaml:"counters"`
}

// PoliceCounters are the packets (and their bytes) a contract let through and dropped,
// summed over CPUs, since the contract was created: replacing a class's contract keeps them.
type PoliceCounters struct {
	PassedPackets  uint64 `json:"passed_packets" yaml:"passed_packets"`
	PassedBytes    uint64 `json:"passed_bytes" yaml:"passed_bytes"`
	DroppedPackets uint64 `json:"dropped_packets" yaml:"dropped_packets"`
	DroppedBytes   uint64 `json:"dropped_bytes" yaml:"dropped_bytes"`
}

// Stats are the datapath's counters summed over CPUs: Counters by name (packets seen per
// path), Drops by drop reason name. Every known name is present, zero or not.
type Stats struct {
	Counters map[string]uint64 `json:"counters" yaml:"counters"`
	Drops    map[string]uint64 `json:"drops" yaml:"drops"`
	// PFCPDrops are the PFCP datagrams left unanswered, by reason (pfcp.DropReason).
	PFCPDrops map[string]uint64 `json:"pfcp_drops" yaml:"pfcp_drops"`
	// PFCPReports are the Session Report Requests sent to SMFs, by outcome.
	PFCPReports map[string]uint64 `json:"pfcp_reports" yaml:"pfcp_reports"`
	// GTPU is the GTP-U signalling xupfd received and sent itself, by event.
	GTPU map[string]uint64 `json:"gtpu_signalling" yaml:"gtpu_signalling"`
	// Buffer is what became of the packets buffering FARs handed to xupfd, by outcome.
	Buffer map[string]uint64 `json:"buffer" yaml:"buffer"`
	// FlowCache is the flow cache's state; absent when it is off. Its hits and misses are
	// the counters flow_hit and flow_miss.
	FlowCache *FlowCacheStats `json:"flow_cache,omitempty" yaml:"flow_cache,omitempty"`
}

// FlowCacheStats are the flow cache's entries and the removals the daemon made.
type FlowCacheStats struct {
	Entries int `json:"entries" yaml:"entries"`
	// Evicted counts the flows removed, by reason: aged (idle), flushed (through the API),
	// invalidated (a route, neighbour, nftables or conntrack change).
	Evicted map[string]uint64 `json:"evicted" yaml:"evicted"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Error string `json:"error" yaml:"error"`
}
