// Package config loads and validates the xupfd configuration file (YAML).
//
// Parse decodes the file, fills in defaults and checks every rule; it reports every problem it
// finds, one per line, each naming the field by its path (for example "sessions[2].uplink_teid"),
// the bad value and the fix. testdata/example.yaml is a complete, commented example.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/yamlerr"
)

// Interface roles.
const (
	// RoleN3 marks the interface facing the gNBs: uplink GTP-U arrives and downlink GTP-U
	// leaves here.
	RoleN3 = "n3"
	// RoleN6 marks the interface facing the data network: downlink packets to UEs arrive and
	// decapsulated uplink packets leave here.
	RoleN6 = "n6"
)

// XDP attach modes.
const (
	XDPModeNative  = "native"
	XDPModeGeneric = "generic"
)

// uplink_spread values.
const (
	SpreadOff  = "off"
	SpreadTEID = "teid"
	SpreadFlow = "flow"
)

// Log levels.
const (
	LogLevelDebug = "debug"
	LogLevelInfo  = "info"
	LogLevelWarn  = "warn"
	LogLevelError = "error"
)

// Defaults and limits.
const (
	DefaultXDPMode     = XDPModeNative
	DefaultXDPFallback = true
	DefaultBPFFS       = "/sys/fs/bpf/xupf"
	DefaultHTTPListen  = "127.0.0.1:8080"
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

	// qos_algorithm values.
	AlgoTokenBucket   = "token_bucket"
	AlgoSlidingWindow = "sliding_window"
	AlgoFixedWindow   = "fixed_window"
	// qos_clock values.
	ClockKtime  = "ktime"
	ClockCoarse = "coarse"
	ClockUser   = "user"
	// DefaultQoSMBRBurst and its range.
	DefaultQoSMBRBurst = 50 * time.Millisecond
	MinQoSMBRBurst     = time.Millisecond
	MaxQoSMBRBurst     = 10 * time.Second

	// pfcp_lost_peer_sessions values.
	LostPeerKeep   = "keep"
	LostPeerDelete = "delete"

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
	XDPMode string `yaml:"xdp_mode"`
	// UplinkSpread is how uplink G-PDUs are spread over CPUs when the NIC's RSS puts a gNB's
	// on one: SpreadOff (the default), SpreadTEID or SpreadFlow.
	UplinkSpread string `yaml:"uplink_spread"`
	// UplinkSpreadCPUs are the CPUs they are spread over; empty: every online CPU.
	UplinkSpreadCPUs []int `yaml:"uplink_spread_cpus"`
	// UplinkSpreadQueue is the length of each CPU's queue (1..MaxUplinkSpreadQueue).
	UplinkSpreadQueue int `yaml:"uplink_spread_queue"`
	// XDPFallback allows falling back to generic mode, with a warning, when the driver does not
	// support native XDP.
	XDPFallback bool `yaml:"xdp_fallback"`
	// BPFFS is the absolute directory on the BPF filesystem where maps and links are pinned.
	BPFFS string `yaml:"bpffs"`
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
	PFCPLostPeerSessions string `yaml:"pfcp_lost_peer_sessions"`
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
	QoSAlgorithm string `yaml:"qos_algorithm"`
	// QoSClock is the meters' time source: ClockKtime (the default), ClockCoarse or ClockUser.
	QoSClock string `yaml:"qos_clock"`
	// QoSMBRBurst is how long a QER's MBR may be exceeded in a burst: the meter's burst is
	// MBR × QoSMBRBurst (at least 3000 bytes).
	QoSMBRBurst time.Duration `yaml:"qos_mbr_burst"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel string `yaml:"log_level"`
	Limits   Limits `yaml:"limits"`
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
}

// Interface is one network interface and the roles it plays.
type Interface struct {
	// Name is the Linux interface name, as shown by "ip link".
	Name string `yaml:"name"`
	// Roles holds RoleN3, RoleN6 or both.
	Roles []string `yaml:"roles"`
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
}

// HasRole reports whether the interface plays role.
func (i Interface) HasRole(role string) bool {
	return slices.Contains(i.Roles, role)
}

// InterfacesWithRole returns the interfaces that play role, in file order.
func (c *Config) InterfacesWithRole(role string) []Interface {
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
		FlowCache: FlowCache{IdleTimeout: DefaultFlowIdleTimeout},
	}
}

// Load reads and parses the configuration file at path. Every error line starts with
// "config: <path>: ".
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in our message
		}
		return nil, fmt.Errorf("config: cannot read %s: %w", path, err)
	}
	cfg, errs := parse(data)
	if len(errs) > 0 {
		return nil, joinErrors("config: "+path+": ", errs)
	}
	return cfg, nil
}

// Parse decodes a YAML configuration, applies defaults and validates it. The error, if any,
// has one line per problem, each starting with "config: ".
func Parse(data []byte) (*Config, error) {
	cfg, errs := parse(data)
	if len(errs) > 0 {
		return nil, joinErrors("config: ", errs)
	}
	return cfg, nil
}

func joinErrors(prefix string, errs []error) error {
	wrapped := make([]error, len(errs))
	for i, err := range errs {
		wrapped[i] = fmt.Errorf("%s%w", prefix, err)
	}
	return errors.Join(wrapped...)
}

// rawConfig is what the file decodes into: addresses stay strings and numbers stay YAML nodes
// so that a bad value is reported with its field path instead of yaml's Go-typed message.
// Its keys must match Config's (TestMarshalRoundTrip checks this).
type rawConfig struct {
	Interfaces    []Interface         `yaml:"interfaces"`
	GTPUAddresses []string            `yaml:"gtpu_addresses"`
	XDPMode       string              `yaml:"xdp_mode"`
	Spread        string              `yaml:"uplink_spread"`
	SpreadCPUs    []yaml.Node         `yaml:"uplink_spread_cpus"`
	SpreadQueue   yaml.Node           `yaml:"uplink_spread_queue"`
	XDPFallback   bool                `yaml:"xdp_fallback"`
	BPFFS         string              `yaml:"bpffs"`
	HTTPListen    string              `yaml:"http_listen"`
	PFCPListen    string              `yaml:"pfcp_listen"`
	PFCPNodeID    string              `yaml:"pfcp_node_id"`
	PFCPAllowed   []string            `yaml:"pfcp_allowed_peers"`
	PFCPPeerAddrs map[string][]string `yaml:"pfcp_peer_addresses"`
	PFCPSMFs      []string            `yaml:"pfcp_smf_peers"`
	PFCPInterval  string              `yaml:"pfcp_heartbeat_interval"`
	PFCPRetries   yaml.Node           `yaml:"pfcp_heartbeat_retries"`
	PFCPLost      string              `yaml:"pfcp_lost_peer_sessions"`
	GTPUErrInd    yaml.Node           `yaml:"gtpu_error_indication_rate"`
	BufPackets    yaml.Node           `yaml:"buffer_max_packets_per_session"`
	BufBytes      yaml.Node           `yaml:"buffer_max_bytes_per_session"`
	BufTotal      yaml.Node           `yaml:"buffer_max_bytes"`
	BufDuration   string              `yaml:"buffer_max_duration"`
	UEPools       []string            `yaml:"ue_pools"`
	UEPoolsOnly   bool                `yaml:"ue_pools_only"`
	Instances     map[string]string   `yaml:"network_instances"`
	QoSAlgorithm  string              `yaml:"qos_algorithm"`
	QoSClock      string              `yaml:"qos_clock"`
	QoSMBRBurst   string              `yaml:"qos_mbr_burst"`
	LogLevel      string              `yaml:"log_level"`
	Limits        rawLimits           `yaml:"limits"`
	Sessions      []rawSession        `yaml:"sessions"`
	APIAccess     `yaml:",inline"`

	// Datapath hardening.
	PFCPAllowAnySource bool         `yaml:"pfcp_allow_any_source"`
	UEToUPFAllowed     []rawUEToUPF `yaml:"ue_to_upf_allowed"`

	Router    rawRouter    `yaml:"router"`
	FlowCache rawFlowCache `yaml:"flow_cache"`
}

type rawLimits struct {
	MaxSessions   yaml.Node `yaml:"max_sessions"`
	MaxRuleSets   yaml.Node `yaml:"max_rule_sets"`
	MaxSDFEntries yaml.Node `yaml:"max_sdf_entries"`
	MaxAssocs     yaml.Node `yaml:"max_associations"`
	MaxPerAssoc   yaml.Node `yaml:"max_sessions_per_association"`
}

// rawSession mirrors session.Session's YAML keys.
type rawSession struct {
	ID           yaml.Node `yaml:"id"`
	UE           string    `yaml:"ue_ipv4"`
	UplinkTEID   yaml.Node `yaml:"uplink_teid"`
	GNB          string    `yaml:"gnb_ipv4"`
	DownlinkTEID yaml.Node `yaml:"downlink_teid"`
	QFI          yaml.Node `yaml:"qfi"`
	GTPUAddr     string    `yaml:"gtpu_address"`
	Flows        []rawFlow `yaml:"flows"`
	AllowAny     bool      `yaml:"allow_any_source"`
}

// rawFlow mirrors session.Flow's YAML keys.
type rawFlow struct {
	Precedence   yaml.Node `yaml:"precedence"`
	QFI          yaml.Node `yaml:"qfi"`
	SDF          []string  `yaml:"sdf"`
	DownlinkTEID yaml.Node `yaml:"downlink_teid"`
}

// document names the configuration file in yamlerr's messages.
var document = yamlerr.Document{
	Empty:       `the file is empty; it needs at least "interfaces" (with an n3 and an n6 role) and "gtpu_addresses"`,
	OneDocument: `keep the whole configuration in one document (remove the "---" separator)`,
}

// parse returns the configuration or every problem found, without the "config: " prefix.
func parse(data []byte) (*Config, []error) {
	def := Default()
	raw := rawConfig{
		XDPMode:     def.XDPMode,
		Spread:      def.UplinkSpread,
		XDPFallback: def.XDPFallback,
		BPFFS:       def.BPFFS,
		HTTPListen:  def.HTTPListen,
		// A null or absent pfcp_heartbeat_interval keeps this default.
		PFCPInterval: def.PFCPHeartbeatInterval.String(),
		PFCPLost:     def.PFCPLostPeerSessions,
		BufDuration:  def.BufferMaxDuration.String(),
		QoSAlgorithm: def.QoSAlgorithm,
		QoSClock:     def.QoSClock,
		QoSMBRBurst:  def.QoSMBRBurst.String(),
		LogLevel:     def.LogLevel,
		APIAccess:    def.APIAccess,
	}
	if errs := yamlerr.Decode(data, &raw, document); len(errs) > 0 {
		return nil, errs
	}

	v := validator{cfg: def}
	v.interfaces(raw.Interfaces)
	v.gtpuAddresses(raw.GTPUAddresses)
	v.settings(&raw)
	v.uplinkSpread(&raw)
	v.pfcp(&raw)
	v.qos(&raw)
	v.sessions(raw.Sessions)
	v.apiAccess(raw.APIAccess)
	v.cfg.PFCPAllowAnySource = raw.PFCPAllowAnySource
	v.ueToUPF(raw.UEToUPFAllowed)
	v.router(raw.Router)
	v.flowCache(raw.FlowCache)
	if len(v.errs) > 0 {
		return nil, v.errs
	}
	return v.cfg, nil
}

// validator converts the raw configuration into cfg and collects every problem.
type validator struct {
	cfg  *Config
	errs []error
	// gtpuOK is set when gtpu_addresses is present and valid, so sessions can be checked
	// against it.
	gtpuOK bool
}

func (v *validator) addf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

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
			case role != RoleN3 && role != RoleN6:
				v.addf(`%s.roles[%d]: %q is not a role; use "n3" (facing the gNBs) or "n6" (facing the data network)`, path, k, role)
			case k > 0 && slices.Contains(ifc.Roles[:k], role):
				v.addf("%s.roles[%d]: %q is listed twice; list each role once", path, k, role)
			}
		}
	}
	v.cfg.Interfaces = ifcs
	for _, role := range []string{RoleN3, RoleN6} {
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

func (v *validator) settings(raw *rawConfig) {
	switch raw.XDPMode {
	case XDPModeNative, XDPModeGeneric:
		v.cfg.XDPMode = raw.XDPMode
	default:
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

	switch raw.LogLevel {
	case LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError:
		v.cfg.LogLevel = raw.LogLevel
	default:
		v.addf("log_level: %q is not a level; use debug, info, warn or error", raw.LogLevel)
	}

	n, present, err := intNode(&raw.Limits.MaxSessions, 1, MaxMaxSessions)
	switch {
	case err != nil:
		v.addf("limits.max_sessions: %w; use 1 to %d", err, MaxMaxSessions)
		v.cfg.Limits.MaxSessions = 0 // unknown: skip the session-count check
	case present:
		v.cfg.Limits.MaxSessions = int(n)
	}
	if v.cfg.Limits.MaxSessions > 0 {
		v.cfg.Limits.MaxRuleSets = min(v.cfg.Limits.MaxSessions, MaxMaxRuleSets)
		v.cfg.Limits.MaxSessionsPerAssociation = v.cfg.Limits.MaxSessions
	}
	for _, l := range []struct {
		name string
		node *yaml.Node
		max  uint64
		dst  *int
	}{
		{"max_rule_sets", &raw.Limits.MaxRuleSets, MaxMaxRuleSets, &v.cfg.Limits.MaxRuleSets},
		{"max_sdf_entries", &raw.Limits.MaxSDFEntries, MaxMaxSDFEntries, &v.cfg.Limits.MaxSDFEntries},
		{"max_associations", &raw.Limits.MaxAssocs, MaxMaxAssociations, &v.cfg.Limits.MaxAssociations},
		{"max_sessions_per_association", &raw.Limits.MaxPerAssoc, MaxMaxSessions, &v.cfg.Limits.MaxSessionsPerAssociation},
	} {
		n, present, err := intNode(l.node, 1, l.max)
		switch {
		case err != nil:
			v.addf("limits.%s: %w; use 1 to %d", l.name, err, l.max)
		case present:
			*l.dst = int(n)
		}
	}
}

// uplinkSpread checks uplink_spread, uplink_spread_cpus and uplink_spread_queue. Whether the
// CPUs are online is the datapath's to check, on the machine it runs on.
func (v *validator) uplinkSpread(raw *rawConfig) {
	switch raw.Spread {
	case SpreadOff, SpreadTEID, SpreadFlow:
		v.cfg.UplinkSpread = raw.Spread
	default:
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

	switch raw.PFCPLost {
	case LostPeerKeep, LostPeerDelete:
		v.cfg.PFCPLostPeerSessions = raw.PFCPLost
	default:
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

// buffering checks the bounds of buffering.
func (v *validator) buffering(raw *rawConfig) {
	for _, b := range []struct {
		node   *yaml.Node
		name   string
		lo, hi uint64
		dst    *int
		what   string
	}{
		{&raw.BufPackets, "buffer_max_packets_per_session", 1, MaxBufferMaxPacketsPerSession, &v.cfg.BufferMaxPacketsPerSession, "packets"},
		{&raw.BufBytes, "buffer_max_bytes_per_session", 4096, MaxBufferMaxBytesPerSession, &v.cfg.BufferMaxBytesPerSession, "bytes"},
		{&raw.BufTotal, "buffer_max_bytes", 4096, MaxBufferMaxBytes, &v.cfg.BufferMaxBytes, "bytes"},
	} {
		n, present, err := intNode(b.node, b.lo, b.hi)
		switch {
		case err != nil:
			v.addf("%s: %w; use %d to %d %s", b.name, err, b.lo, b.hi, b.what)
		case present:
			*b.dst = int(n)
		}
	}
	const durationRange = `use a duration from 1s to 1h, e.g. "30s"`
	if d, err := time.ParseDuration(raw.BufDuration); err != nil {
		v.addf("buffer_max_duration: %q is not a duration (a number with a unit: s, m); %s", raw.BufDuration, durationRange)
	} else if d < time.Second || d > MaxBufferMaxDuration {
		v.addf("buffer_max_duration: %s is out of range; %s", raw.BufDuration, durationRange)
	} else {
		v.cfg.BufferMaxDuration = d
	}
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

// qos checks the meters' settings: qos_algorithm, qos_clock, qos_mbr_burst.
func (v *validator) qos(raw *rawConfig) {
	switch raw.QoSAlgorithm {
	case AlgoTokenBucket, AlgoSlidingWindow, AlgoFixedWindow:
		v.cfg.QoSAlgorithm = raw.QoSAlgorithm
	default:
		v.addf("qos_algorithm: %q is not an algorithm; use %s (the default), %s or %s",
			raw.QoSAlgorithm, AlgoTokenBucket, AlgoSlidingWindow, AlgoFixedWindow)
	}
	switch raw.QoSClock {
	case ClockKtime, ClockCoarse, ClockUser:
		v.cfg.QoSClock = raw.QoSClock
	default:
		v.addf("qos_clock: %q is not a clock; use %s (the default), %s or %s", raw.QoSClock, ClockKtime, ClockCoarse, ClockUser)
	}
	if d, ok := v.duration("qos_mbr_burst", raw.QoSMBRBurst, "ms, s",
		`use a duration from 1ms to 10s, e.g. "20ms"`, MinQoSMBRBurst, MaxQoSMBRBurst); ok {
		v.cfg.QoSMBRBurst = d
	}
}

// duration parses raw, the value of key, as a duration from lo to hi; a problem is reported
// with the units the setting takes and hint (the range, in words, and an example).
func (v *validator) duration(key, raw, units, hint string, lo, hi time.Duration) (time.Duration, bool) {
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		v.addf("%s: %q is not a duration (a number with a unit: %s); %s", key, raw, units, hint)
	case d < lo || d > hi:
		v.addf("%s: %s is out of range; %s", key, raw, hint)
	default:
		return d, true
	}
	return 0, false
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

// intNode decodes an optional YAML integer (decimal, hex 0x.., octal 0o.., binary 0b..) that
// must lie in [lo, hi]. present is false when the key is absent or null.
func intNode(n *yaml.Node, lo, hi uint64) (value uint64, present bool, err error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if yamlerr.IsNull(n) {
		return 0, false, nil
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		what := strconv.Quote(n.Value)
		if n.Kind != yaml.ScalarNode {
			what = yamlerr.Describe(n)
		}
		return 0, true, fmt.Errorf("%s is not an integer", what)
	}
	var x any
	if err := n.Decode(&x); err != nil {
		return 0, true, fmt.Errorf("%q is not an integer", n.Value)
	}
	inRange := false
	switch x := x.(type) {
	case int:
		inRange = x >= 0 && uint64(x) >= lo && uint64(x) <= hi
		value = uint64(x)
	case int64:
		inRange = x >= 0 && uint64(x) >= lo && uint64(x) <= hi
		value = uint64(x)
	case uint64:
		inRange = x >= lo && x <= hi
		value = x
	}
	if !inRange {
		return 0, true, fmt.Errorf("%s is out of range", n.Value)
	}
	return value, true, nil
}

func (v *validator) sessions(raws []rawSession) {
	if limit := v.cfg.Limits.MaxSessions; limit > 0 && len(raws) > limit {
		v.addf("sessions: %d sessions exceed limits.max_sessions (%d); raise limits.max_sessions or remove sessions", len(raws), limit)
	}
	var (
		ids    = make(map[uint64]int, len(raws))
		ues    = make(map[netip.Addr]int, len(raws))
		teids  = make(map[uint32]int, len(raws))
		result = make([]session.Session, 0, len(raws))
	)
	for i := range raws {
		s, ok := v.session(i, &raws[i])
		if !ok {
			continue
		}
		path := fmt.Sprintf("sessions[%d]", i)
		if j, dup := ids[s.ID]; dup {
			v.addf("%s.id: %d is already used by sessions[%d]; give each session its own id", path, s.ID, j)
		} else {
			ids[s.ID] = i
		}
		if j, dup := ues[s.UE]; dup {
			v.addf("%s.ue_ipv4: %s is already used by sessions[%d]; give each session its own UE address", path, s.UE, j)
		} else {
			ues[s.UE] = i
		}
		if j, dup := teids[s.UplinkTEID]; dup {
			v.addf("%s.uplink_teid: %d is already used by sessions[%d]; give each session its own uplink TEID", path, s.UplinkTEID, j)
		} else {
			teids[s.UplinkTEID] = i
		}
		result = append(result, s)
	}
	if len(raws) > 0 {
		v.cfg.Sessions = result
	}
}

// session converts and checks sessions[i]; ok is false when it has a problem (already
// recorded).
func (v *validator) session(i int, raw *rawSession) (s session.Session, ok bool) {
	path := fmt.Sprintf("sessions[%d]", i)
	nerrs := len(v.errs)

	const teidRange = "use 1 to 4294967295 (decimal, or hex such as 0x100)"
	if id, present, err := intNode(&raw.ID, 1, MaxStaticSessionID); err != nil {
		v.addf("%s.id: %w; give each session a unique id from 1 to %d (higher ids are PFCP sessions')", path, err, uint64(MaxStaticSessionID))
	} else if !present {
		v.addf("%s.id: missing; give each session a unique id from 1 to %d", path, uint64(MaxStaticSessionID))
	} else {
		s.ID = id
	}
	// A TEID of 0 is left to session.Validate, which explains why it is reserved.
	if teid, present, err := intNode(&raw.UplinkTEID, 0, 1<<32-1); err != nil {
		v.addf("%s.uplink_teid: %w; %s", path, err, teidRange)
	} else if !present {
		v.addf("%s.uplink_teid: missing; give the TEID the gNB puts on this session's uplink packets, %s", path, teidRange)
	} else {
		s.UplinkTEID = uint32(teid)
	}
	if teid, present, err := intNode(&raw.DownlinkTEID, 0, 1<<32-1); err != nil {
		v.addf("%s.downlink_teid: %w; %s", path, err, teidRange)
	} else if !present {
		v.addf("%s.downlink_teid: missing; give the TEID the gNB assigned to this session's downlink, %s", path, teidRange)
	} else {
		s.DownlinkTEID = uint32(teid)
	}
	if qfi, _, err := intNode(&raw.QFI, 0, session.MaxQFI); err != nil {
		v.addf("%s.qfi: %w; use 1 to %d, or 0 for no PDU Session Container", path, err, session.MaxQFI)
	} else {
		s.QFI = uint8(qfi)
	}
	var err error
	if s.UE, err = parseAddr(raw.UE, "the UE's IPv4 address"); err != nil {
		v.addf("%s.ue_ipv4: %w", path, err)
	}
	if s.GNB, err = parseAddr(raw.GNB, "the gNB's N3 IPv4 address"); err != nil {
		v.addf("%s.gnb_ipv4: %w", path, err)
	}

	for j := range raw.Flows {
		if f, ok := v.flow(fmt.Sprintf("%s.flows[%d]", path, j), &raw.Flows[j]); ok {
			s.Flows = append(s.Flows, f)
		}
	}

	gtpuPath := path + ".gtpu_address"
	if raw.GTPUAddr == "" {
		if len(v.cfg.GTPUAddresses) > 0 {
			s.GTPUAddr = v.cfg.GTPUAddresses[0]
		}
	} else if s.GTPUAddr, err = parseAddr(raw.GTPUAddr, "one of gtpu_addresses"); err != nil {
		v.addf("%s: %w", gtpuPath, err)
	}
	s.AllowAnySource = raw.AllowAny
	if len(v.errs) > nerrs {
		return s, false
	}

	check := s
	if !check.GTPUAddr.IsValid() {
		// gtpu_address defaults to gtpu_addresses[0], which is missing or invalid and already
		// reported; do not report it again for every session.
		check.GTPUAddr = netip.IPv4Unspecified()
	}
	if err := check.Validate(); err != nil {
		v.addf("%s.%w", path, err)
		return s, false
	}
	if v.gtpuOK && !slices.Contains(v.cfg.GTPUAddresses, s.GTPUAddr) {
		v.addf("%s: %s is not in gtpu_addresses; use one of %s, or add it to gtpu_addresses", gtpuPath, s.GTPUAddr, joinAddrs(v.cfg.GTPUAddresses))
		return s, false
	}
	return s, true
}

func joinAddrs(list []netip.Addr) string {
	s := make([]string, len(list))
	for i, a := range list {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// flow decodes one QoS flow of a session; session.Validate checks the rest (QFI range, SDF
// syntax) with messages relative to the session.
func (v *validator) flow(path string, raw *rawFlow) (f session.Flow, ok bool) {
	nerrs := len(v.errs)
	if p, present, err := intNode(&raw.Precedence, 0, session.DefaultPrecedence-1); err != nil || !present {
		if err == nil {
			err = errors.New("missing")
		}
		v.addf("%s.precedence: %w; give the flow's precedence, 0 to %d (lower wins)", path, err,
			uint64(session.DefaultPrecedence-1))
	} else {
		f.Precedence = uint32(p)
	}
	if qfi, present, err := intNode(&raw.QFI, 1, session.MaxQFI); err != nil || !present {
		if err == nil {
			err = errors.New("missing")
		}
		v.addf("%s.qfi: %w; give the flow's QFI, 1 to %d", path, err, session.MaxQFI)
	} else {
		f.QFI = uint8(qfi)
	}
	if teid, _, err := intNode(&raw.DownlinkTEID, 0, 1<<32-1); err != nil {
		v.addf("%s.downlink_teid: %w; use 1 to 4294967295, or leave it out to use the session's", path, err)
	} else {
		f.DownlinkTEID = uint32(teid)
	}
	f.SDF = raw.SDF
	return f, len(v.errs) == nerrs
}

// DefaultAPITokenFile is where xupfd keeps the API token unless api_token_file says otherwise;
// /var/lib/xupf is the systemd unit's StateDirectory.
const DefaultAPITokenFile = "/var/lib/xupf/api-token"

// APIAccess is the HTTP API's access control (README.md, "API security"): every request
// carries the bearer token of TokenFile, except reads of /metrics unless MetricsAuth.
type APIAccess struct {
	// TokenFile is the absolute path of the file holding the API token; xupfd creates it,
	// mode 0600, with a random token when it does not exist.
	TokenFile string `yaml:"api_token_file"`
	// AllowedHosts are the DNS names the API answers to in the Host header, besides IP
	// addresses and "localhost"; other names are refused (DNS rebinding).
	AllowedHosts []string `yaml:"api_allowed_hosts,omitempty"`
	// MetricsAuth makes /metrics require the token too; by default Prometheus reads it
	// without.
	MetricsAuth bool `yaml:"api_metrics_auth"`
	// TLSCert and TLSKey are the PEM certificate (chain) and key the API is served with over
	// HTTPS; both empty: plain HTTP.
	TLSCert string `yaml:"api_tls_cert,omitempty"`
	TLSKey  string `yaml:"api_tls_key,omitempty"`
}

// apiAccess checks the api_* keys.
func (v *validator) apiAccess(raw APIAccess) {
	switch {
	case raw.TokenFile == "":
		v.addf("api_token_file: empty; give an absolute file path, e.g. %s", DefaultAPITokenFile)
	case !filepath.IsAbs(raw.TokenFile) || strings.HasSuffix(raw.TokenFile, "/"):
		v.addf("api_token_file: %q is not an absolute file path; give one, e.g. %s", raw.TokenFile, DefaultAPITokenFile)
	default:
		v.cfg.TokenFile = raw.TokenFile
	}

	const hostFix = "list DNS names only (IP addresses and localhost are always accepted), e.g. upf1.example.net"
	for i, h := range raw.AllowedHosts {
		if err := checkDNSName(h, hostFix); err != nil {
			v.addf("api_allowed_hosts[%d]: %w", i, err)
			continue
		}
		v.cfg.AllowedHosts = append(v.cfg.AllowedHosts, strings.ToLower(h))
	}
	v.cfg.MetricsAuth = raw.MetricsAuth

	switch {
	case (raw.TLSCert == "") != (raw.TLSKey == ""):
		v.addf("api_tls_cert, api_tls_key: only one is set; give both (the certificate and its key, PEM) for HTTPS, or neither for HTTP")
	case raw.TLSCert != "" && (!filepath.IsAbs(raw.TLSCert) || !filepath.IsAbs(raw.TLSKey)):
		v.addf("api_tls_cert, api_tls_key: %q and %q must both be absolute paths", raw.TLSCert, raw.TLSKey)
	default:
		v.cfg.TLSCert, v.cfg.TLSKey = raw.TLSCert, raw.TLSKey
	}
}
