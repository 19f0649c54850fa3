package config

import "slices"

// The settings that take one of a few names are typed, so a mode cannot be passed where a
// clock is expected; each type's Valid says whether a value read from the file is one of its
// names. The validators' messages say what each name means.

// Role is what an interface faces.
type Role string

const (
	// RoleN3 marks the interface facing the gNBs: uplink GTP-U arrives and downlink GTP-U
	// leaves here.
	RoleN3 Role = "n3"
	// RoleN6 marks the interface facing the data network: downlink packets to UEs arrive and
	// decapsulated uplink packets leave here.
	RoleN6 Role = "n6"
)

// Valid reports whether r is RoleN3 or RoleN6.
func (r Role) Valid() bool { return oneOf(r, RoleN3, RoleN6) }

// XDPMode is how the XDP program attaches (xdp_mode).
type XDPMode string

const (
	XDPModeNative  XDPMode = "native"
	XDPModeGeneric XDPMode = "generic"
)

// Valid reports whether m is one of the modes.
func (m XDPMode) Valid() bool { return oneOf(m, XDPModeNative, XDPModeGeneric) }

// SpreadMode is how uplink G-PDUs are spread over CPUs (uplink_spread).
type SpreadMode string

const (
	SpreadOff  SpreadMode = "off"
	SpreadTEID SpreadMode = "teid"
	SpreadFlow SpreadMode = "flow"
)

// Valid reports whether m is one of the modes.
func (m SpreadMode) Valid() bool { return oneOf(m, SpreadOff, SpreadTEID, SpreadFlow) }

// LogLevel is how much xupfd logs (log_level).
type LogLevel string

const (
	LogLevelDebug LogLevel = "debug"
	LogLevelInfo  LogLevel = "info"
	LogLevelWarn  LogLevel = "warn"
	LogLevelError LogLevel = "error"
)

// Valid reports whether l is one of the levels.
func (l LogLevel) Valid() bool {
	return oneOf(l, LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError)
}

// QoSAlgorithm is the rate-limiting algorithm of QER MBRs and policer contracts
// (qos_algorithm).
type QoSAlgorithm string

const (
	AlgoTokenBucket   QoSAlgorithm = "token_bucket"
	AlgoSlidingWindow QoSAlgorithm = "sliding_window"
	AlgoFixedWindow   QoSAlgorithm = "fixed_window"
)

// Valid reports whether a is one of the algorithms.
func (a QoSAlgorithm) Valid() bool {
	return oneOf(a, AlgoTokenBucket, AlgoSlidingWindow, AlgoFixedWindow)
}

// QoSClock is the meters' time source (qos_clock).
type QoSClock string

const (
	ClockKtime  QoSClock = "ktime"
	ClockCoarse QoSClock = "coarse"
	ClockUser   QoSClock = "user"
)

// Valid reports whether c is one of the clocks.
func (c QoSClock) Valid() bool { return oneOf(c, ClockKtime, ClockCoarse, ClockUser) }

// LostPeerPolicy is what happens to the sessions of an SMF declared lost
// (pfcp_lost_peer_sessions).
type LostPeerPolicy string

const (
	LostPeerKeep   LostPeerPolicy = "keep"
	LostPeerDelete LostPeerPolicy = "delete"
)

// Valid reports whether p is one of the policies.
func (p LostPeerPolicy) Valid() bool { return oneOf(p, LostPeerKeep, LostPeerDelete) }

// RouterMode says where the datapath's routes and neighbours come from (router.mode).
type RouterMode string

const (
	// RouterMirror: the datapath's routes and neighbours mirror the kernel's (ip route, ARP).
	RouterMirror RouterMode = "mirror"
	// RouterPrivate: they come from router.routes, router.neighbours and the API; the
	// kernel's tables are not read.
	RouterPrivate RouterMode = "private"
)

// Valid reports whether m is one of the modes.
func (m RouterMode) Valid() bool { return oneOf(m, RouterMirror, RouterPrivate) }

// Protocol is the protocol of a ue_to_upf_allowed service: a key of UEToUPFProtocols.
type Protocol string

// Valid reports whether p is one of UEToUPFProtocols.
func (p Protocol) Valid() bool {
	_, ok := UEToUPFProtocols[p]
	return ok
}

func oneOf[E ~string](e E, values ...E) bool { return slices.Contains(values, e) }
