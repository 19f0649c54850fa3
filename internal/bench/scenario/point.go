package scenario

import (
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/config"
)

// Directions.
const (
	Uplink        = "uplink"        // gNB → UPF (GTP-U) → DN
	Downlink      = "downlink"      // DN → UPF (encapsulated) → gNB
	Bidirectional = "bidirectional" // both at once, each at the rate given
)

// Tester modes.
const (
	// ModeMaxRate offers as much as the generator can and measures what arrives.
	ModeMaxRate = "max_rate"
	// ModeFixedRate offers tester.rate.
	ModeFixedRate = "fixed_rate"
	// ModeRFC2544 searches for the highest rate with loss ≤ tester.rfc2544.loss_tolerance.
	ModeRFC2544 = "rfc2544"
)

// Datapaths: what forwards the traffic. The two baselines run in the same topology with the
// same traffic as xupf, so that every result can be read against them.
const (
	// DatapathXUPF is xupfd with the pipeline's sessions.
	DatapathXUPF = "xupf"
	// DatapathXDPForwarder is a bare XDP program that rewrites MACs and redirects to the
	// other side: the practical ceiling. Frames keep their GTP-U encapsulation.
	DatapathXDPForwarder = "xdp_forwarder"
	// DatapathGTPU is the minimal GTP-U datapath: uplink frames are decapsulated, downlink
	// frames all put in one tunnel (to the first base station), with no lookup: what a UPF
	// cannot do without.
	DatapathGTPU = "gtpu_minimal"
	// DatapathKernel is the Linux kernel forwarding plain IPv4 (the frames are the flows'
	// inner packets, of the same frame size).
	DatapathKernel = "kernel"
	// DatapathFlowCache is xupfd with its flow cache on and no session, given the kernel's
	// frames: transit traffic, which the kernel forwards first and the cache after.
	DatapathFlowCache = "xupf_flow_cache"
	// DatapathKernelNAT is DatapathKernel with nftables masquerading the UE addresses out
	// of n6: Linux forwarding and NAT.
	DatapathKernelNAT = "kernel_nat"
	// DatapathXUPFKernelNAT is xupf with the pipeline's sessions handing every
	// decapsulated uplink packet to the kernel, which masquerades it (flow_cache.kernel_n6
	// with a one-entry table, which holds no pair of a flow's two entries): xupf and
	// kernel NAT without the cache.
	DatapathXUPFKernelNAT = "xupf_kernel_nat"
	// DatapathXUPFNATCache is DatapathXUPFKernelNAT with a flow table of room for every
	// flow: the kernel masquerades each flow's first packets, the cache the rest.
	DatapathXUPFNATCache = "xupf_nat_cache"
)

// PlainFrames reports whether datapath is given plain IPv4 frames both ways (the flows'
// inner packets), not GTP-U uplink.
func PlainFrames(datapath string) bool {
	return datapath == DatapathKernel || datapath == DatapathFlowCache || datapath == DatapathKernelNAT
}

// HasSessions reports whether datapath is xupf with the pipeline's sessions.
func HasSessions(datapath string) bool {
	return datapath == DatapathXUPF || datapath == DatapathXUPFKernelNAT || datapath == DatapathXUPFNATCache
}

// Masquerades reports whether the kernel masquerades the UE addresses out of n6 with
// datapath: uplink frames leave with n6's address as their source.
func Masquerades(datapath string) bool {
	return datapath == DatapathKernelNAT || datapath == DatapathXUPFKernelNAT || datapath == DatapathXUPFNATCache
}

// IMIX as the packet size is the simple IMIX: 64, 594 and 1518-byte frames, 7:4:1, each
// raised to the direction's smallest frame.
const IMIX = 0

// Policer algorithms: the daemon's qos_algorithm values.
const (
	PolicerTokenBucket   = "token_bucket"
	PolicerSlidingWindow = "sliding_window"
	PolicerFixedWindow   = "fixed_window"
)

// SMF layouts of the sessions (internal/pfcpclient's styles).
const (
	// SMFOpen5GS: the UPF chooses the uplink TEID, the SMF the UE address, which only the
	// downlink PDRs carry.
	SMFOpen5GS = "open5gs"
	// SMFFree5GC: the SMF chooses the uplink TEID and the UE address, which the uplink PDRs
	// carry too.
	SMFFree5GC = "free5gc"
)

// Who chooses the UE addresses.
const (
	// UEBySMF: the SMF sends each session's UE address.
	UEBySMF = "smf"
	// UEByUPF: the SMF asks the UPF to choose one (CHV4) from its pool.
	UEByUPF = "upf"
)

// The CPUs xupfd spreads uplink G-PDUs over (with uplink_spread teid or flow).
const (
	// SpreadCPUsAll: every online CPU, those the generator runs on included.
	SpreadCPUsAll = "all"
	// SpreadCPUsOthers: the CPUs the generator does not run on. The CPU that receives the
	// frames then only spreads them, as a core a NIC delivers to would, at no generator cost.
	SpreadCPUsOthers = "others"
)

// Point is one fully specified benchmark run: every parameter has one value.
type Point struct {
	// Name is the scenario's name, then "/" and the swept settings, e.g.
	// "uplink/users=1000,packet_size=512"; a point of a scenario without sweep is named
	// after the scenario alone.
	Name string `json:"name" yaml:"name"`
	// Index is the point's position in the sweep (0-based).
	Index int `json:"index" yaml:"index"`
	// Sweep holds the settings of the swept parameters, in axis order.
	Sweep    []Setting `json:"sweep,omitempty" yaml:"sweep,omitempty"`
	Pipeline Pipeline  `json:"pipeline" yaml:"pipeline"`
	Traffic  Traffic   `json:"traffic" yaml:"traffic"`
	Tester   Tester    `json:"tester" yaml:"tester"`
	Events   Events    `json:"events" yaml:"events"`
}

// Pipeline is how the UPF is configured.
type Pipeline struct {
	// Users is the number of UEs, one PDU session each.
	Users int `json:"users" yaml:"users"`
	// BaseStations is the number of gNB addresses the users are spread over (round robin).
	BaseStations int `json:"base_stations" yaml:"base_stations"`
	// Servers is the number of DN server addresses the flows go to.
	Servers int `json:"servers" yaml:"servers"`
	// Routes is the number of N6 routes (prefixes) the servers are spread over.
	Routes int `json:"routes" yaml:"routes"`
	// FlowsPerUser is the number of distinct 5-tuples per user.
	FlowsPerUser int `json:"flows_per_user" yaml:"flows_per_user"`
	// PDRsPerUser is the number of PDRs per user and direction; 1 is the default PDR alone,
	// more add PDRs with SDF filters.
	PDRsPerUser int `json:"pdrs_per_user" yaml:"pdrs_per_user"`
	// SDFFiltersPerPDR is the number of SDF filters of each PDR other than the default one.
	SDFFiltersPerPDR int `json:"sdf_filters_per_pdr" yaml:"sdf_filters_per_pdr"`
	// QERsPerUser is the number of QERs per user, shared by its PDRs.
	QERsPerUser int `json:"qers_per_user" yaml:"qers_per_user"`
	// MBRUplink and MBRDownlink are the QERs' maximum bit rates (bit/s); 0 is no MBR.
	MBRUplink   uint64 `json:"mbr_uplink" yaml:"mbr_uplink"`
	MBRDownlink uint64 `json:"mbr_downlink" yaml:"mbr_downlink"`
	// ClassifierClasses is the number of traffic classifier classes installed.
	ClassifierClasses int `json:"classifier_classes" yaml:"classifier_classes"`
	// Policer is the meter algorithm (the daemon's qos_algorithm).
	Policer string `json:"policer" yaml:"policer"`
	// PolicerContract is the rate (bit/s) of a LIMIT policer contract on class 1, the class
	// of the generated packets; 0 is no contract.
	PolicerContract uint64 `json:"policer_contract,omitempty" yaml:"policer_contract,omitempty"`
	// VolumeQuota is the session URR's total volume quota in bytes, with a volume threshold
	// of half of it, which the datapath checks on every packet; 0 is neither.
	VolumeQuota uint64 `json:"volume_quota,omitempty" yaml:"volume_quota,omitempty"`
	// SMF is the layout of the sessions: SMFOpen5GS or SMFFree5GC.
	SMF string `json:"smf,omitempty" yaml:"smf,omitempty"`
	// UEAddress is who chooses the UE addresses: UEBySMF or UEByUPF.
	UEAddress string `json:"ue_address,omitempty" yaml:"ue_address,omitempty"`
	// UplinkSpread is the daemon's uplink_spread: off, or teid or flow to spread uplink
	// G-PDUs over every CPU through a CPU map.
	UplinkSpread config.SpreadMode `json:"uplink_spread,omitempty" yaml:"uplink_spread,omitempty"`
	// UplinkSpreadCPUs is SpreadCPUsAll or SpreadCPUsOthers.
	UplinkSpreadCPUs string `json:"uplink_spread_cpus,omitempty" yaml:"uplink_spread_cpus,omitempty"`
	// Datapath is DatapathXUPF or a baseline; the baselines ignore the rest of the
	// pipeline but the addresses (users, base stations, servers, routes).
	Datapath string `json:"datapath" yaml:"datapath"`
}

// Traffic is what the generator offers.
type Traffic struct {
	// Direction is Uplink, Downlink or Bidirectional.
	Direction string `json:"direction" yaml:"direction"`
	// PacketSize is the size of the generated frames with FCS (RFC 2544 convention), or
	// IMIX ("imix" in the file).
	PacketSize int `json:"packet_size" yaml:"packet_size"`
	// Flows is the number of flows in the generated packet set, chosen among the
	// active_users × flows_per_user flows with Seed. 0 in the file (the default) means all of
	// them; 0 and values above that are replaced by it, so that one value caps the packet set
	// across a sweep of users.
	Flows int `json:"flows" yaml:"flows"`
	// ActiveUsers is how many users (the first ones) the flows are chosen among; 0 in the
	// file (the default) and values above users mean all of them. Fewer active users than
	// installed show what the installed sessions alone cost.
	ActiveUsers int `json:"active_users" yaml:"active_users"`
	// Seed chooses the flows and their order.
	Seed uint64 `json:"seed" yaml:"seed"`
	// PDUSessionContainer adds a PDU Session Container (with the QFI) to uplink G-PDUs.
	PDUSessionContainer bool `json:"pdu_session_container" yaml:"pdu_session_container"`
}

// Tester is how the run is driven and measured.
type Tester struct {
	// Mode is ModeMaxRate, ModeFixedRate or ModeRFC2544.
	Mode string `json:"mode" yaml:"mode"`
	// Duration is the length of one trial in nanoseconds (a time.Duration).
	Duration Duration `json:"duration" yaml:"duration"`
	// Warmup is sent before each trial and not counted.
	Warmup Duration `json:"warmup" yaml:"warmup"`
	// Rate is the offered rate of ModeFixedRate, frames per second (per direction).
	Rate float64 `json:"rate" yaml:"rate"`
	// Repetitions runs the point this many times.
	Repetitions int `json:"repetitions" yaml:"repetitions"`
	// GeneratorThreads is the number of generator threads per direction, each on its own CPU.
	GeneratorThreads int `json:"generator_threads" yaml:"generator_threads"`
	// SampleEvery makes the sink keep the head of one frame in this many for the correctness
	// check; 0 keeps none.
	SampleEvery int     `json:"sample_every" yaml:"sample_every"`
	RFC2544     RFC2544 `json:"rfc2544" yaml:"rfc2544"`
}

// RFC2544 bounds the throughput search of ModeRFC2544 (see internal/bench/rfc2544).
type RFC2544 struct {
	// LossTolerance is the largest fraction of frames a passing trial may lose.
	LossTolerance float64 `json:"loss_tolerance" yaml:"loss_tolerance"`
	// MinRate and MaxRate bound the search (frames/s); MaxRate 0 is the generator's
	// maximum rate, measured before the search.
	MinRate float64 `json:"min_rate" yaml:"min_rate"`
	MaxRate float64 `json:"max_rate" yaml:"max_rate"`
	// Resolution ends the search (frames/s); 0 is 1 % of the maximum rate.
	Resolution    float64 `json:"resolution" yaml:"resolution"`
	MaxIterations int     `json:"max_iterations" yaml:"max_iterations"`
	// Retries and Confirm: see rfc2544.Config.
	Retries int `json:"retries" yaml:"retries"`
	Confirm int `json:"confirm" yaml:"confirm"`
}

// Events are the control-plane events injected during a trial, per second.
type Events struct {
	// SessionAdd establishes this many extra sessions per second.
	SessionAdd float64 `json:"session_add" yaml:"session_add"`
	// SessionDelete deletes this many sessions per second.
	SessionDelete float64 `json:"session_delete" yaml:"session_delete"`
	// Handover moves this many users per second to another gNB (a FAR update with the new
	// gNB's address).
	Handover float64 `json:"handover" yaml:"handover"`
}

// Default returns a point with every default.
func Default() Point {
	return Point{
		Pipeline: Pipeline{
			Users: 1, BaseStations: 1, Servers: 1, Routes: 1, FlowsPerUser: 1,
			PDRsPerUser: 1, SDFFiltersPerPDR: 1, Policer: PolicerTokenBucket, SMF: SMFOpen5GS, UEAddress: UEBySMF, UplinkSpread: config.SpreadOff, UplinkSpreadCPUs: SpreadCPUsAll, Datapath: DatapathXUPF,
		},
		Traffic: Traffic{
			Direction: Uplink, PacketSize: 128, Seed: 1, PDUSessionContainer: true,
		},
		Tester: Tester{
			Mode: ModeMaxRate, Duration: Duration(DefaultDuration), Warmup: Duration(DefaultWarmup),
			Repetitions: 1, GeneratorThreads: 1, SampleEvery: DefaultSampleEvery,
			RFC2544: RFC2544{LossTolerance: DefaultLossTolerance, MaxIterations: DefaultMaxIterations},
		},
	}
}

// MinPacketSize is the smallest frame (with FCS) direction can be generated with: uplink
// frames are GTP-U encapsulated, with a PDU Session Container when psc.
func MinPacketSize(direction string, psc bool) int {
	if direction == Downlink {
		return pkt.MinFrameSize(false, false)
	}
	return pkt.MinFrameSize(true, psc)
}

// MaxPacketSize is the largest frame (with FCS) direction can be generated with on 1500-byte
// MTU links: downlink frames grow by the UPF's encapsulation, counted with a PDU Session
// Container.
func MaxPacketSize(direction string) int {
	if direction == Uplink {
		return pkt.MaxFrameSize
	}
	return pkt.MaxFrameSize - pkt.EncapOverhead(true)
}
