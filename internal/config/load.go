package config

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/yamlerr"
)

// Load reads and parses the configuration file at path. Every error line starts with
// "config: <path>: ".
func Load(path string) (*Config, error) {
	data, err := yamlerr.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, errs := parse(data)
	if len(errs) > 0 {
		return nil, yamlerr.Join("config: "+path+": ", errs)
	}
	return cfg, nil
}

// Parse decodes a YAML configuration, applies defaults and validates it. The error, if any,
// has one line per problem, each starting with "config: ".
func Parse(data []byte) (*Config, error) {
	cfg, errs := parse(data)
	if len(errs) > 0 {
		return nil, yamlerr.Join("config: ", errs)
	}
	return cfg, nil
}

// rawConfig is what the file decodes into: addresses stay strings and numbers stay YAML nodes
// so that a bad value is reported with its field path instead of yaml's Go-typed message.
// Its keys must match Config's (TestMarshalRoundTrip checks this).
type rawConfig struct {
	Interfaces    []Interface         `yaml:"interfaces"`
	GTPUAddresses []string            `yaml:"gtpu_addresses"`
	XDPMode       XDPMode             `yaml:"xdp_mode"`
	Spread        SpreadMode          `yaml:"uplink_spread"`
	SpreadCPUs    []yaml.Node         `yaml:"uplink_spread_cpus"`
	SpreadQueue   yaml.Node           `yaml:"uplink_spread_queue"`
	XDPFallback   bool                `yaml:"xdp_fallback"`
	BPFFS         string              `yaml:"bpffs"`
	StateDir      string              `yaml:"state_dir"`
	HTTPListen    string              `yaml:"http_listen"`
	PFCPListen    string              `yaml:"pfcp_listen"`
	PFCPNodeID    string              `yaml:"pfcp_node_id"`
	PFCPAllowed   []string            `yaml:"pfcp_allowed_peers"`
	PFCPPeerAddrs map[string][]string `yaml:"pfcp_peer_addresses"`
	PFCPSMFs      []string            `yaml:"pfcp_smf_peers"`
	PFCPInterval  string              `yaml:"pfcp_heartbeat_interval"`
	PFCPRetries   yaml.Node           `yaml:"pfcp_heartbeat_retries"`
	PFCPLost      LostPeerPolicy      `yaml:"pfcp_lost_peer_sessions"`
	GTPUErrInd    yaml.Node           `yaml:"gtpu_error_indication_rate"`
	BufPackets    yaml.Node           `yaml:"buffer_max_packets_per_session"`
	BufBytes      yaml.Node           `yaml:"buffer_max_bytes_per_session"`
	BufTotal      yaml.Node           `yaml:"buffer_max_bytes"`
	BufDuration   string              `yaml:"buffer_max_duration"`
	UEPools       []string            `yaml:"ue_pools"`
	UEPoolsOnly   bool                `yaml:"ue_pools_only"`
	Instances     map[string]string   `yaml:"network_instances"`
	QoSAlgorithm  QoSAlgorithm        `yaml:"qos_algorithm"`
	QoSClock      QoSClock            `yaml:"qos_clock"`
	QoSMBRBurst   string              `yaml:"qos_mbr_burst"`
	LogLevel      LogLevel            `yaml:"log_level"`
	Limits        rawLimits           `yaml:"limits"`
	Sessions      []rawSession        `yaml:"sessions"`
	APIAccess     `yaml:",inline"`

	// Datapath hardening.
	PFCPAllowAnySource bool         `yaml:"pfcp_allow_any_source"`
	UEToUPFAllowed     []rawUEToUPF `yaml:"ue_to_upf_allowed"`

	Router    rawRouter    `yaml:"router"`
	FlowCache rawFlowCache `yaml:"flow_cache"`

	Classes   []classifier.Class `yaml:"classifier_classes"`
	Contracts []Contract         `yaml:"policer_contracts"`
}

type rawLimits struct {
	MaxSessions   yaml.Node `yaml:"max_sessions"`
	MaxRuleSets   yaml.Node `yaml:"max_rule_sets"`
	MaxSDFEntries yaml.Node `yaml:"max_sdf_entries"`
	MaxAssocs     yaml.Node `yaml:"max_associations"`
	MaxPerAssoc   yaml.Node `yaml:"max_sessions_per_association"`
	DirectSlots   yaml.Node `yaml:"direct_cache_slots"`
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
		StateDir:    def.StateDir,
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
	v.limits(&raw.Limits)
	v.uplinkSpread(&raw)
	v.pfcp(&raw)
	v.qos(&raw)
	v.sessions(raw.Sessions)
	v.apiAccess(raw.APIAccess)
	v.cfg.PFCPAllowAnySource = raw.PFCPAllowAnySource
	v.ueToUPF(raw.UEToUPFAllowed)
	v.router(raw.Router)
	v.flowCache(raw.FlowCache)
	v.classes(raw.Classes)
	v.contracts(raw.Contracts)
	if len(v.errs) > 0 {
		return nil, v.errs
	}
	return v.cfg, nil
}
