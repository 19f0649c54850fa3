// Package config loads and validates the xupfd configuration file (YAML).
//
// Parse decodes the file, fills in defaults and checks every rule; it reports every problem it
// finds, one per line, each naming the field by its path (for example "sessions[2].uplink_teid"),
// the bad value and the fix. testdata/example.yaml is a complete, commented example.
package config

import (
	"net/netip"
	"slices"
	"time"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
)

// Defaults and limits.
const (
	DefaultXDPMode     = XDPModeNative
	DefaultXDPFallback = true
	DefaultBPFFS       = "/sys/fs/bpf/xupf"
	// DefaultStateDir is state_dir, under the systemd unit's StateDirectory.
	DefaultStateDir   = "/var/lib/xupf/state"
	DefaultHTTPListen = "127.0.0.1:8080"
	// DefaultPFCPPort is pfcp_listen's port; its host defaults to the first of gtpu_addresses.
	DefaultPFCPPort    = 8805
	DefaultLogLevel    = LogLevelInfo
	DefaultMaxSessions = 100000
	// DefaultMaxAssociations is limits.max_associations: more SMFs than a UPF serves, far
	// fewer than a flood of Association Setup Requests would leave.
	DefaultMaxAssociations = 64
	MaxMaxAssociations     = 65536

	// PFCP heartbeats: how often each associated SMF is sent a Heartbeat Request (and how
	// long it has to answer), and how many unanswered ones in a row declare it lost.
	DefaultPFCPHeartbeatInterval = 10 * time.Second
	MinPFCPHeartbeatInterval     = 100 * time.Millisecond
	MaxPFCPHeartbeatInterval     = 10 * time.Minute
	DefaultPFCPHeartbeatRetries  = 3

	// Error Indications a second to one GTP-U peer (gtpu_error_indication_rate): enough to
	// tell a gNB promptly about a stale tunnel, too few to flood it, or anyone a spoofed
	// source names.
	DefaultGTPUErrorIndicationRate = 10
	MaxGTPUErrorIndicationRate     = 10000
	// Bounds of buffering (FAR BUFF): per session in packets and bytes, in bytes for all
	// sessions, and how long a packet is held at most.
	DefaultBufferMaxPacketsPerSession = 10000
	MaxBufferMaxPacketsPerSession     = 1000000
	DefaultBufferMaxBytesPerSession   = 10 << 20
	MaxBufferMaxBytesPerSession       = 1 << 30
	DefaultBufferMaxBytes             = 256 << 20
	MaxBufferMaxBytes                 = 64 << 30
	DefaultBufferMaxDuration          = 30 * time.Second
	MaxBufferMaxDuration              = time.Hour

	// DefaultQoSMBRBurst and its range.
	DefaultQoSMBRBurst = 50 * time.Millisecond
	MinQoSMBRBurst     = time.Millisecond
	MaxQoSMBRBurst     = 10 * time.Second

	// MaxStaticSessionID is the largest static session id: PFCP sessions are named by SEIDs
	// above it (pfcp.FirstSEID), so the two never collide.
	MaxStaticSessionID      = 1<<32 - 1
	MaxPFCPHeartbeatRetries = 100

	// MaxDNSNameLen is the longest DNS name (RFC 1035, without the trailing dot), and
	// MaxDNSLabelLen its longest label.
	MaxDNSNameLen  = 253
	MaxDNSLabelLen = 63

	// Classification limits: how many rule sets (TEIDs or UEs with several PDRs or SDF
	// filters) and SDF table entries the datapath holds, and the largest values allowed.
	// max_rule_sets defaults to max_sessions (capped at MaxMaxRuleSets): one classified key
	// per session, which is what free5GC's sessions need (the uplink PDR's SDF filter is
	// narrowed to the UE's address).
	DefaultMaxRuleSets   = DefaultMaxSessions
	DefaultMaxSDFEntries = 262144
	MaxMaxRuleSets       = 1048576
	MaxMaxSDFEntries     = 16777216

	// MaxMaxSessions is the largest limits.max_sessions; it sizes the TEID and UE-address
	// hash maps.
	MaxMaxSessions = 4194304

	// MaxGTPUAddresses is the size of the datapath's local-address table
	// (XUPF_MAX_GTPU_ADDRS in bpf/lib/gtpu.h).
	MaxGTPUAddresses = 16

	// MaxInterfaceNameLen is the longest Linux interface name (IFNAMSIZ-1).
	MaxInterfaceNameLen = 15

	// Uplink spreading: each CPU's queue (the kernel caps a CPU map queue at 16384), how
	// many CPUs may be listed (XUPF_MAX_SPREAD_CPUS) and the largest CPU number (the
	// kernel's NR_CPUS limit).
	DefaultUplinkSpreadQueue = 2048
	MaxUplinkSpreadQueue     = 16384
	MaxUplinkSpreadCPUs      = 256
	MaxCPU                   = 8191
)

// Config is the daemon's configuration after defaults are applied and every rule is checked.
type Config struct {
	// Interfaces the XDP program attaches to; at least one has role n3 and one has role n6.
	Interfaces []Interface `yaml:"interfaces"`
	// GTPUAddresses are the local N3 GTP-U addresses (IPv4, unique, at least one). The first
	// one is the default gtpu_address of static sessions.
	GTPUAddresses []netip.Addr `yaml:"gtpu_addresses"`
	// XDPMode is XDPModeNative or XDPModeGeneric.
	XDPMode XDPMode `yaml:"xdp_mode"`
	// UplinkSpread is how uplink G-PDUs are spread over CPUs when the NIC's RSS puts a gNB's
	// on one: SpreadOff (the default), SpreadTEID or SpreadFlow.
	UplinkSpread SpreadMode `yaml:"uplink_spread"`
	// UplinkSpreadCPUs are the CPUs they are spread over; empty: every online CPU.
	UplinkSpreadCPUs []int `yaml:"uplink_spread_cpus"`
	// UplinkSpreadQueue is the length of each CPU's queue (1..MaxUplinkSpreadQueue).
	UplinkSpreadQueue int `yaml:"uplink_spread_queue"`
	// XDPFallback allows falling back to generic mode, with a warning, when the driver does not
	// support native XDP.
	XDPFallback bool `yaml:"xdp_fallback"`
	// BPFFS is the absolute directory on the BPF filesystem where maps and links are pinned.
	BPFFS string `yaml:"bpffs"`
	// StateDir is the absolute directory of the state file, which keeps the PFCP sessions
	// and associations across restarts.
	StateDir string `yaml:"state_dir"`
	// HTTPListen is the host:port of the HTTP API; the host may be empty (all addresses).
	HTTPListen string `yaml:"http_listen"`
	// PFCPListen is the host:port of the PFCP (N4) endpoint; it defaults to the first of
	// GTPUAddresses and DefaultPFCPPort, so it is empty only in Default().
	PFCPListen string `yaml:"pfcp_listen"`
	// PFCPNodeID is this UPF's PFCP Node ID: an IPv4 address or a DNS name. It defaults to
	// the first of GTPUAddresses, so it is empty only in Default().
	PFCPNodeID string `yaml:"pfcp_node_id"`
	// PFCPAllowedPeers are the IPv4 networks SMFs may associate from (an address is a /32),
	// besides PFCPSMFPeers; empty allows none of the others, and 0.0.0.0/0 allows any.
	PFCPAllowedPeers []netip.Prefix `yaml:"pfcp_allowed_peers"`
	// PFCPPeerAddresses are, per SMF Node ID, the IPv4 networks that SMF may use: its
	// association may be set up, and its session requests sent, from any of them (and from
	// no other). A Node ID not listed is bound to the address its association came from.
	PFCPPeerAddresses map[string][]netip.Prefix `yaml:"pfcp_peer_addresses"`
	// PFCPSMFPeers are SMFs (IPv4 address and port) this UPF associates with on its own
	// initiative, retrying every PFCPHeartbeatInterval until accepted; empty: it only answers.
	PFCPSMFPeers []netip.AddrPort `yaml:"pfcp_smf_peers"`
	// PFCPHeartbeatInterval is how often each associated SMF is sent a Heartbeat Request
	// (MinPFCPHeartbeatInterval..MaxPFCPHeartbeatInterval).
	PFCPHeartbeatInterval time.Duration `yaml:"pfcp_heartbeat_interval"`
	// PFCPHeartbeatRetries is how many unanswered heartbeats in a row declare an SMF lost
	// (1..MaxPFCPHeartbeatRetries).
	PFCPHeartbeatRetries int `yaml:"pfcp_heartbeat_retries"`
	// PFCPLostPeerSessions is what happens to the sessions of an SMF declared lost:
	// LostPeerKeep (they keep forwarding, the default) or LostPeerDelete.
	PFCPLostPeerSessions LostPeerPolicy `yaml:"pfcp_lost_peer_sessions"`
	// GTPUErrorIndicationRate is how many GTP-U Error Indications a second, at most, answer
	// the G-PDUs one peer sends to unknown TEIDs (0..MaxGTPUErrorIndicationRate; 0 sends
	// none).
	GTPUErrorIndicationRate int `yaml:"gtpu_error_indication_rate"`
	// BufferMaxPacketsPerSession and BufferMaxBytesPerSession bound the packets a session's
	// buffering FARs hold, BufferMaxBytes those of all sessions together, and
	// BufferMaxDuration how long one is held (an SMF's DL Buffering Duration may shorten it).
	BufferMaxPacketsPerSession int           `yaml:"buffer_max_packets_per_session"`
	BufferMaxBytesPerSession   int           `yaml:"buffer_max_bytes_per_session"`
	BufferMaxBytes             int           `yaml:"buffer_max_bytes"`
	BufferMaxDuration          time.Duration `yaml:"buffer_max_duration"`
	// UEPools are the IPv4 networks UE addresses are chosen from when an SMF asks the UPF to
	// choose (UE IP Address with CHV4); empty: SMFs must give the addresses.
	UEPools []netip.Prefix `yaml:"ue_pools"`
	// UEPoolsOnly refuses UE addresses SMFs give outside UEPools.
	UEPoolsOnly bool `yaml:"ue_pools_only"`
	// NetworkInstances maps each network instance an SMF may name (in a PDI or forwarding
	// parameters) to the interface it is reached through; empty accepts any name.
	NetworkInstances map[string]string `yaml:"network_instances"`
	// QoSAlgorithm is the rate-limiting algorithm of QER MBRs and policer contracts:
	// AlgoTokenBucket (the default), AlgoSlidingWindow or AlgoFixedWindow.
	QoSAlgorithm QoSAlgorithm `yaml:"qos_algorithm"`
	// QoSClock is the meters' time source: ClockKtime (the default), ClockCoarse or ClockUser.
	QoSClock QoSClock `yaml:"qos_clock"`
	// QoSMBRBurst is how long a QER's MBR may be exceeded in a burst: the meter's burst is
	// MBR × QoSMBRBurst (at least 3000 bytes).
	QoSMBRBurst time.Duration `yaml:"qos_mbr_burst"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel LogLevel `yaml:"log_level"`
	Limits   Limits   `yaml:"limits"`
	// Sessions are static sessions installed at start-up; their GTPUAddr is always set.
	Sessions []session.Session `yaml:"sessions"`
	// APIAccess says who may use the HTTP API, and over what.
	APIAccess `yaml:",inline"`

	// Datapath hardening.

	// PFCPAllowAnySource turns anti-spoofing off for PFCP sessions: their uplink packets may
	// have any inner source address, not only the session's UE address. Static sessions
	// have their own switch (allow_any_source).
	PFCPAllowAnySource bool `yaml:"pfcp_allow_any_source"`
	// UEToUPFAllowed are the services on the UPF itself UEs may reach; every other uplink
	// packet to one of the UPF's own addresses is dropped.
	UEToUPFAllowed []UEToUPF `yaml:"ue_to_upf_allowed"`

	// Router says where the datapath's routes and neighbours come from.
	Router Router `yaml:"router"`
	// FlowCache configures the flow cache (off by default).
	FlowCache FlowCache `yaml:"flow_cache"`

	// Classes are traffic classes and Contracts policer contracts the daemon sets at
	// start-up, as the API would (classes.go); the API may change them afterwards.
	Classes   []classifier.Class `yaml:"classifier_classes,omitempty"`
	Contracts []Contract         `yaml:"policer_contracts,omitempty"`
}

// Interface is one network interface and the roles it plays.
type Interface struct {
	// Name is the Linux interface name, as shown by "ip link".
	Name string `yaml:"name"`
	// Roles holds RoleN3, RoleN6 or both.
	Roles []Role `yaml:"roles"`
}

// Limits sizes the datapath.
type Limits struct {
	// MaxSessions is the most sessions the datapath holds (1..MaxMaxSessions).
	MaxSessions int `yaml:"max_sessions"`
	// MaxRuleSets is how many TEIDs and UE addresses may have several PDRs or SDF filters
	// at once (each such rule set takes a classification step).
	MaxRuleSets int `yaml:"max_rule_sets"`
	// MaxSDFEntries sizes each SDF classification table (entries are made on demand; only
	// rule sets of more than 16 compare rules use them).
	MaxSDFEntries int `yaml:"max_sdf_entries"`
	// MaxAssociations is the most PFCP associations at once (1..MaxMaxAssociations).
	MaxAssociations int `yaml:"max_associations"`
	// MaxSessionsPerAssociation is the most PFCP sessions one SMF's association may hold
	// (1..MaxMaxSessions; MaxSessions bounds them all anyway); it defaults to MaxSessions.
	MaxSessionsPerAssociation int `yaml:"max_sessions_per_association"`
	// DirectCacheSlots sizes each key table's direct cache (64 bytes a slot, rounded up to a
	// power of two, 0..2×MaxMaxSessions); 0, the default, gives a slot per key the key table
	// is sized for.
	DirectCacheSlots int `yaml:"direct_cache_slots"`
}

// HasRole reports whether the interface plays role.
func (i Interface) HasRole(role Role) bool {
	return slices.Contains(i.Roles, role)
}

// InterfacesWithRole returns the interfaces that play role, in file order.
func (c *Config) InterfacesWithRole(role Role) []Interface {
	var out []Interface
	for _, ifc := range c.Interfaces {
		if ifc.HasRole(role) {
			out = append(out, ifc)
		}
	}
	return out
}

// Default returns a configuration holding every default. It has no interfaces and no GTP-U
// addresses, which a valid configuration needs, so it does not pass validation by itself.
func Default() *Config {
	return &Config{
		XDPMode:           DefaultXDPMode,
		UplinkSpread:      SpreadOff,
		UplinkSpreadQueue: DefaultUplinkSpreadQueue,
		XDPFallback:       DefaultXDPFallback,
		BPFFS:             DefaultBPFFS,
		StateDir:          DefaultStateDir,
		HTTPListen:        DefaultHTTPListen,
		// PFCPListen's and PFCPNodeID's defaults come from the first of gtpu_addresses, which
		// Default does not have.
		PFCPHeartbeatInterval:      DefaultPFCPHeartbeatInterval,
		PFCPHeartbeatRetries:       DefaultPFCPHeartbeatRetries,
		PFCPLostPeerSessions:       LostPeerKeep,
		GTPUErrorIndicationRate:    DefaultGTPUErrorIndicationRate,
		BufferMaxPacketsPerSession: DefaultBufferMaxPacketsPerSession,
		BufferMaxBytesPerSession:   DefaultBufferMaxBytesPerSession,
		BufferMaxBytes:             DefaultBufferMaxBytes,
		BufferMaxDuration:          DefaultBufferMaxDuration,
		QoSAlgorithm:               AlgoTokenBucket,
		QoSClock:                   ClockKtime,
		QoSMBRBurst:                DefaultQoSMBRBurst,
		LogLevel:                   DefaultLogLevel,
		Limits: Limits{MaxSessions: DefaultMaxSessions, MaxRuleSets: DefaultMaxRuleSets, MaxSDFEntries: DefaultMaxSDFEntries,
			MaxAssociations: DefaultMaxAssociations, MaxSessionsPerAssociation: DefaultMaxSessions},
		APIAccess: APIAccess{TokenFile: DefaultAPITokenFile},
		Router: Router{Mode: RouterMirror, MaxRoutes: DefaultMaxRoutes, MaxRouteChunks: DefaultMaxRouteChunks,
			MaxNexthops: DefaultMaxNexthops},
		FlowCache: FlowCache{IdleTimeout: DefaultFlowIdleTimeout, ReturnDevice: DefaultReturnDevice},
	}
}
