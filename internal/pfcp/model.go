package pfcp

import (
	"maps"
	"math"
	"net/netip"
	"time"

	"github.com/xupf/xupf/internal/sdf"
)

// Session is one PFCP session as the SMF built it (TS 29.244 5.2): its rules by their ids,
// which are scoped to the session, and what this UPF allocated for it.
type Session struct {
	// SEID is this UPF's SEID for the session (the UP F-SEID) and its datapath owner id.
	SEID uint64 `json:"seid" yaml:"seid"`
	// CPSEID and CPAddress are the SMF's F-SEID; Peer is the Node ID of its association.
	CPSEID      uint64     `json:"cp_seid" yaml:"cp_seid"`
	CPAddress   netip.Addr `json:"cp_address" yaml:"cp_address"`
	Peer        string     `json:"peer" yaml:"peer"`
	Established time.Time  `json:"established" yaml:"established"`

	PDRs map[uint16]*PDR `json:"pdrs" yaml:"pdrs"`
	FARs map[uint32]*FAR `json:"fars" yaml:"fars"`
	QERs map[uint32]*QER `json:"qers,omitempty" yaml:"qers,omitempty"`
	URRs map[uint32]*URR `json:"urrs,omitempty" yaml:"urrs,omitempty"`
	BARs map[uint8]*BAR  `json:"bars,omitempty" yaml:"bars,omitempty"`
	// request is a digest of the Session Establishment Request that created the session
	// (establishmentDigest), which the state file keeps: a retransmission of it reaching a
	// restarted xupfd, whose response cache is empty, is answered as the first was.
	request uint64
}

// PDR is a Packet Detection Rule: its PDI (what it matches) and the rules it applies.
type PDR struct {
	ID         uint16 `json:"id" yaml:"id"`
	Precedence uint32 `json:"precedence" yaml:"precedence"`
	// SourceInterface: 0 access, 1 core, 2 SGi-LAN/N6-LAN, 3 CP-function.
	SourceInterface uint8 `json:"source_interface" yaml:"source_interface"`
	// FTEID is the local tunnel end the PDR matches, given by the SMF or chosen by this UPF
	// (Chosen; ChooseID > 0 shares one TEID between the PDRs with the same CHOOSE ID).
	FTEID *FTEID `json:"f_teid,omitempty" yaml:"f_teid,omitempty"`
	// UE is the UE's address; UEChosen says this UPF allocated it from its pool.
	UE       netip.Addr `json:"ue_ipv4,omitzero" yaml:"ue_ipv4"`
	UEChosen bool       `json:"ue_chosen,omitempty" yaml:"ue_chosen,omitempty"`
	// NetworkInstance is the PDI's network instance, decoded from either encoding.
	NetworkInstance string `json:"network_instance,omitempty" yaml:"network_instance,omitempty"`
	QFI             uint8  `json:"qfi,omitempty" yaml:"qfi,omitempty"`
	SDF             []SDF  `json:"sdf_filters,omitempty" yaml:"sdf_filters,omitempty"`
	// OuterHeaderRemoval is the description (0 GTP-U/UDP/IPv4, 6 GTP-U/UDP/IP), nil if absent.
	OuterHeaderRemoval *uint8   `json:"outer_header_removal,omitempty" yaml:"outer_header_removal,omitempty"`
	FAR                uint32   `json:"far_id" yaml:"far_id"`
	QERs               []uint32 `json:"qer_ids,omitempty" yaml:"qer_ids,omitempty"`
	URRs               []uint32 `json:"urr_ids,omitempty" yaml:"urr_ids,omitempty"`
}

// FTEID is a local F-TEID.
type FTEID struct {
	TEID     uint32     `json:"teid" yaml:"teid"`
	Addr     netip.Addr `json:"ipv4" yaml:"ipv4"`
	Chosen   bool       `json:"chosen,omitempty" yaml:"chosen,omitempty"`
	ChooseID uint8      `json:"choose_id,omitempty" yaml:"choose_id,omitempty"`
}

// SDF is one SDF filter: the description as the SMF sent it and what it parsed to.
type SDF struct {
	FlowDescription string     `json:"flow_description,omitempty" yaml:"flow_description,omitempty"`
	Filter          sdf.Filter `json:"-" yaml:"-"`
}

// Apply action bits (TS 29.244 8.2.26, first octet).
const (
	ApplyDrop = 1 << iota
	ApplyForward
	ApplyBuffer
	ApplyNotifyCP
	ApplyDuplicate
)

// FAR is a Forwarding Action Rule.
type FAR struct {
	ID uint32 `json:"id" yaml:"id"`
	// Apply is the first octet of the apply action: DROP, FORW, BUFF, NOCP, DUPL bits.
	Apply uint8 `json:"apply_action" yaml:"apply_action"`
	// DestinationInterface: 0 access, 1 core, 2 SGi-LAN/N6-LAN, 3 CP-function, 4 LI.
	DestinationInterface uint8  `json:"destination_interface" yaml:"destination_interface"`
	NetworkInstance      string `json:"network_instance,omitempty" yaml:"network_instance,omitempty"`
	// OHC is the outer header to create toward the peer, nil for none.
	OHC *OHC `json:"outer_header_creation,omitempty" yaml:"outer_header_creation,omitempty"`
	// TLM is the transport level marking (ToS value in the high octet, mask in the low), nil
	// for none.
	TLM   *uint16 `json:"transport_level_marking,omitempty" yaml:"transport_level_marking,omitempty"`
	BARID *uint8  `json:"bar_id,omitempty" yaml:"bar_id,omitempty"`
	// hasDestination: the FAR has been given a Destination Interface, which TS 29.244 makes
	// mandatory for a FAR that forwards.
	hasDestination bool
	// epoch changes each time the SMF creates or updates the FAR (Node.newEpochs): a NOCP FAR
	// notifies once per epoch.
	epoch uint64
}

// OHC is an Outer Header Creation as the SMF gave it. Only GTP-U/UDP/IPv4 toward Peer with
// TEID is supported, and it is checked when the FAR forwards: a FAR that buffers or drops
// may carry placeholders (TEID 0, address 0.0.0.0), as pfcpsim sends.
type OHC struct {
	Description uint16     `json:"description" yaml:"description"`
	TEID        uint32     `json:"teid" yaml:"teid"`
	Peer        netip.Addr `json:"ipv4,omitzero" yaml:"ipv4"`
}

// QER is a QoS Enforcement Rule. Bit rates are in kbit/s, as PFCP carries them.
type QER struct {
	ID uint32 `json:"id" yaml:"id"`
	// GateUL and GateDL: 0 open, 1 closed.
	GateUL uint8  `json:"gate_ul" yaml:"gate_ul"`
	GateDL uint8  `json:"gate_dl" yaml:"gate_dl"`
	MBRUL  uint64 `json:"mbr_ul_kbps,omitempty" yaml:"mbr_ul_kbps,omitempty"`
	MBRDL  uint64 `json:"mbr_dl_kbps,omitempty" yaml:"mbr_dl_kbps,omitempty"`
	GBRUL  uint64 `json:"gbr_ul_kbps,omitempty" yaml:"gbr_ul_kbps,omitempty"`
	GBRDL  uint64 `json:"gbr_dl_kbps,omitempty" yaml:"gbr_dl_kbps,omitempty"`
	QFI    uint8  `json:"qfi,omitempty" yaml:"qfi,omitempty"`
}

// URR is a Usage Reporting Rule.
type URR struct {
	ID uint32 `json:"id" yaml:"id"`
	// Method is the measurement method octet: DURAT 1, VOLUM 2, EVENT 4.
	Method uint8 `json:"measurement_method" yaml:"measurement_method"`
	// Triggers are the reporting trigger octets as sent.
	Triggers []byte `json:"reporting_triggers,omitempty" yaml:"reporting_triggers,omitempty"`
	// MeasurementInformation is the Measurement Information octet (MBQE 1, INAM 2, ...).
	MeasurementInformation uint8 `json:"measurement_information,omitempty" yaml:"measurement_information,omitempty"`
	// VolumeThreshold and VolumeQuota are total volumes in bytes, 0 for none.
	VolumeThreshold uint64 `json:"volume_threshold,omitempty" yaml:"volume_threshold,omitempty"`
	VolumeQuota     uint64 `json:"volume_quota,omitempty" yaml:"volume_quota,omitempty"`
	// The uplink and downlink volume thresholds and quotas in bytes, 0 for none.
	VolumeThresholdUL uint64 `json:"volume_threshold_uplink,omitempty" yaml:"volume_threshold_uplink,omitempty"`
	VolumeThresholdDL uint64 `json:"volume_threshold_downlink,omitempty" yaml:"volume_threshold_downlink,omitempty"`
	VolumeQuotaUL     uint64 `json:"volume_quota_uplink,omitempty" yaml:"volume_quota_uplink,omitempty"`
	VolumeQuotaDL     uint64 `json:"volume_quota_downlink,omitempty" yaml:"volume_quota_downlink,omitempty"`
	// VolumeQuotaFlags are the Volume Quota's flags (TOVOL 1, ULVOL 2, DLVOL 4): which of the
	// quotas were given, since a quota of 0 is one (nothing may pass).
	VolumeQuotaFlags uint8 `json:"volume_quota_flags,omitempty" yaml:"volume_quota_flags,omitempty"`
	// TimeThreshold, TimeQuota, MeasurementPeriod, QuotaHoldingTime, QuotaValidityTime and
	// InactivityTime (Inactivity Detection Time) are in seconds, 0 for none.
	TimeThreshold     uint32 `json:"time_threshold,omitempty" yaml:"time_threshold,omitempty"`
	TimeQuota         uint32 `json:"time_quota,omitempty" yaml:"time_quota,omitempty"`
	MeasurementPeriod uint32 `json:"measurement_period,omitempty" yaml:"measurement_period,omitempty"`
	QuotaHoldingTime  uint32 `json:"quota_holding_time,omitempty" yaml:"quota_holding_time,omitempty"`
	QuotaValidityTime uint32 `json:"quota_validity_time,omitempty" yaml:"quota_validity_time,omitempty"`
	InactivityTime    uint32 `json:"inactivity_detection_time,omitempty" yaml:"inactivity_detection_time,omitempty"`
	// DroppedThresholdFlags (DLPA 1, DLBY 2) say which of DroppedPackets and DroppedBytes the
	// Dropped DL Traffic Threshold gave: the downlink traffic the UPF may drop for the URR's
	// PDRs before it reports (DROTH).
	DroppedThresholdFlags uint8  `json:"dropped_dl_threshold_flags,omitempty" yaml:"dropped_dl_threshold_flags,omitempty"`
	DroppedPackets        uint64 `json:"dropped_dl_threshold_packets,omitempty" yaml:"dropped_dl_threshold_packets,omitempty"`
	DroppedBytes          uint64 `json:"dropped_dl_threshold_bytes,omitempty" yaml:"dropped_dl_threshold_bytes,omitempty"`
	// LinkedURRs are the Linked URR IDs: this URR reports whenever one of them does (LIUSA).
	LinkedURRs []uint32 `json:"linked_urr_ids,omitempty" yaml:"linked_urr_ids,omitempty"`
	// QuotaFAR is the FAR ID for Quota Action: the FAR the URR's PDRs apply once its quota is
	// used up, nil to stop forwarding.
	QuotaFAR *uint32 `json:"far_id_for_quota_action,omitempty" yaml:"far_id_for_quota_action,omitempty"`
	// Grant counts the quotas (Volume Quota or Time Quota IEs) the SMF gave: each new one
	// starts counting again, even if it is equal to the last.
	Grant uint64 `json:"quota_grant,omitempty" yaml:"quota_grant,omitempty"`
	// QuotaUsedUp is the Grant whose quota was reported used up (0 for none). It is kept in
	// the state file so that after a restart the URR's PDRs stay stopped (or on the FAR for
	// quota action) and the quota is not reported again.
	QuotaUsedUp uint64 `json:"quota_used_up_grant,omitempty" yaml:"quota_used_up_grant,omitempty"`
	// MonitoringTime is when the URR's usage is split (time-of-day charging): the usage
	// before it and after it are reported apart, and at it the URR takes Subsequent. Zero
	// for none, and once passed (one-second resolution, as the IE).
	MonitoringTime time.Time `json:"monitoring_time,omitzero" yaml:"monitoring_time,omitempty"`
	// Subsequent are the thresholds and quotas the URR takes at its MonitoringTime.
	Subsequent Subsequent `json:"subsequent,omitzero" yaml:"subsequent,omitempty"`
	// Additional are the monitoring times after MonitoringTime (Additional Monitoring Time
	// IEs, and a Monitoring Time later than one of them), in time order: each becomes the
	// MonitoringTime, with its subsequent values, once the one before has passed.
	Additional []Monitoring `json:"additional_monitoring_times,omitempty" yaml:"additional_monitoring_times,omitempty"`
}

// Monitoring is a monitoring time and the subsequent values the URR takes at it.
type Monitoring struct {
	Time       time.Time  `json:"time" yaml:"time"`
	Subsequent Subsequent `json:"subsequent,omitzero" yaml:"subsequent,omitempty"`
}

// Subsequent are the Subsequent Volume Threshold, Time Threshold, Volume Quota and Time
// Quota IEs of a URR: what replaces its threshold or quota at its Monitoring Time. A value
// not given leaves the URR's own: a threshold then counts afresh from the monitoring time,
// a quota goes on.
type Subsequent struct {
	// VolumeThresholdFlags and VolumeQuotaFlags (TOVOL 1, ULVOL 2, DLVOL 4) say which
	// volumes, in bytes, were given; 0 for no such IE.
	VolumeThresholdFlags uint8  `json:"volume_threshold_flags,omitempty" yaml:"volume_threshold_flags,omitempty"`
	VolumeThreshold      uint64 `json:"volume_threshold,omitempty" yaml:"volume_threshold,omitempty"`
	VolumeThresholdUL    uint64 `json:"volume_threshold_uplink,omitempty" yaml:"volume_threshold_uplink,omitempty"`
	VolumeThresholdDL    uint64 `json:"volume_threshold_downlink,omitempty" yaml:"volume_threshold_downlink,omitempty"`
	VolumeQuotaFlags     uint8  `json:"volume_quota_flags,omitempty" yaml:"volume_quota_flags,omitempty"`
	VolumeQuota          uint64 `json:"volume_quota,omitempty" yaml:"volume_quota,omitempty"`
	VolumeQuotaUL        uint64 `json:"volume_quota_uplink,omitempty" yaml:"volume_quota_uplink,omitempty"`
	VolumeQuotaDL        uint64 `json:"volume_quota_downlink,omitempty" yaml:"volume_quota_downlink,omitempty"`
	// TimeThreshold and TimeQuota are in seconds, 0 for none.
	TimeThreshold uint32 `json:"time_threshold,omitempty" yaml:"time_threshold,omitempty"`
	TimeQuota     uint32 `json:"time_quota,omitempty" yaml:"time_quota,omitempty"`
}

// BAR is a Buffering Action Rule.
type BAR struct {
	ID uint8 `json:"id" yaml:"id"`
	// NotificationDelay is the Downlink Data Notification Delay IE value (units of 50 ms).
	NotificationDelay uint8 `json:"downlink_data_notification_delay,omitempty" yaml:"downlink_data_notification_delay,omitempty"`
	// SuggestedPackets is the suggested buffering packets count.
	SuggestedPackets uint8 `json:"suggested_buffering_packets,omitempty" yaml:"suggested_buffering_packets,omitempty"`
	// BufferingDuration and BufferingPackets are what the SMF's Session Report Response last
	// allowed (TS 29.244 8.2.29, 8.2.30): how long and how many packets to buffer. nil is not
	// given; a duration of 0 stops buffering, InfiniteBuffering has no end.
	BufferingDuration *time.Duration `json:"dl_buffering_duration,omitempty" yaml:"dl_buffering_duration,omitempty"`
	BufferingPackets  *uint16        `json:"dl_buffering_suggested_packets,omitempty" yaml:"dl_buffering_suggested_packets,omitempty"`
	// BufferingUntil is when the BufferingDuration the SMF gave runs out, zero for none or
	// one without end: until then it wants no other Downlink Data Report (TS 23.401
	// 5.3.4.3, the throttling an SMF asks of a UPF), after it the next packet brings one.
	BufferingUntil time.Time `json:"dl_buffering_until,omitzero" yaml:"dl_buffering_until,omitempty"`
}

// InfiniteBuffering is a DL Buffering Duration without end.
const InfiniteBuffering = time.Duration(math.MaxInt64)

// clone copies s deeply enough that changing the copy's rule maps or rules leaves s as it
// was: a modification works on a clone and keeps it only when everything succeeded.
func (s *Session) clone() *Session {
	c := *s
	c.PDRs = cloneRules(s.PDRs)
	c.FARs = cloneRules(s.FARs)
	c.QERs = cloneRules(s.QERs)
	c.URRs = cloneRules(s.URRs)
	c.BARs = cloneRules(s.BARs)
	return &c
}

// cloneRules copies a rule map and each rule (the rule's own slices and pointers are
// replaced, never written through, by the decoders).
func cloneRules[K comparable, V any](m map[K]*V) map[K]*V {
	out := make(map[K]*V, len(m))
	for k, v := range maps.All(m) {
		c := *v
		out[k] = &c
	}
	return out
}
