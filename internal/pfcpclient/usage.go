package pfcpclient

import (
	"context"
	"fmt"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
)

// UsageReport is one Usage Report IE a UPF sent (TS 29.244 7.5.5.2, 7.5.7.2, 7.5.8.3),
// decoded.
type UsageReport struct {
	URR, Seq uint32
	// Trigger is the Usage Report Trigger's octets.
	Trigger []byte
	// Start and End bound the measurement (one-second resolution).
	Start, End time.Time
	// Volume is nil when the report has no Volume Measurement.
	Volume   *ie.VolumeMeasurementFields
	Duration time.Duration
	// FirstPacket and LastPacket are zero when the report has none.
	FirstPacket, LastPacket time.Time
	// Info is the Usage Information (UsageBefore, UsageAfter: which side of a monitoring
	// time the report measures), 0 without the IE.
	Info uint8
}

// Usage Information bits (TS 29.244 8.2.81).
const (
	UsageBefore = 0x01 // BEF
	UsageAfter  = 0x02 // AFT
)

// Monitoring is a URR's Monitoring Time (whole seconds) and the total volume threshold and
// quota in bytes it takes then (Subsequent Volume Threshold and Quota; 0: not given).
type Monitoring struct {
	Time                         time.Time
	VolumeThreshold, VolumeQuota uint64
}

// ies are the IEs of m in a Create or Update URR; none for a zero Time.
func (m Monitoring) ies() []*ie.IE {
	if m.Time.IsZero() {
		return nil
	}
	ies := []*ie.IE{ie.NewMonitoringTime(m.Time)}
	if m.VolumeThreshold != 0 {
		ies = append(ies, ie.NewSubsequentVolumeThreshold(0x01, m.VolumeThreshold, 0, 0)) // TOVOL
	}
	if m.VolumeQuota != 0 {
		ies = append(ies, ie.NewSubsequentVolumeQuota(0x01, m.VolumeQuota, 0, 0)) // TOVOL
	}
	return ies
}

// monitoringIEs are the IEs of ms in a Create or Update URR: the first as the URR's own
// Monitoring Time and subsequent values, each other one in an Additional Monitoring Time IE.
func monitoringIEs(ms []Monitoring) []*ie.IE {
	var out []*ie.IE
	for i, m := range ms {
		switch ies := m.ies(); {
		case len(ies) == 0:
		case i == 0:
			out = append(out, ies...)
		default:
			out = append(out, ie.NewAdditionalMonitoringTime(ies...))
		}
	}
	return out
}

// SetMonitoring gives URR id of the session the Monitoring Times and subsequent values of ms
// (Update URR; the second and later ones as Additional Monitoring Times).
func (c *Client) SetMonitoring(ctx context.Context, s *Session, id uint32, ms ...Monitoring) error {
	_, err := c.Modify(ctx, s, ie.NewUpdateURR(append([]*ie.IE{ie.NewURRID(id)}, monitoringIEs(ms)...)...))
	return err
}

// ParseUsageReports decodes Usage Report IEs of any message kind.
func ParseUsageReports(l []*ie.IE) ([]UsageReport, error) {
	out := make([]UsageReport, 0, len(l))
	for _, g := range l {
		var r UsageReport
		for _, x := range g.ChildIEs {
			var err error
			switch x.Type {
			case ie.URRID:
				r.URR, err = x.URRID()
			case ie.URSEQN:
				r.Seq, err = x.URSEQN()
			case ie.UsageReportTrigger:
				r.Trigger, err = x.UsageReportTrigger()
			case ie.StartTime:
				r.Start, err = x.StartTime()
			case ie.EndTime:
				r.End, err = x.EndTime()
			case ie.VolumeMeasurement:
				r.Volume, err = x.VolumeMeasurement()
			case ie.DurationMeasurement:
				r.Duration, err = x.DurationMeasurement()
			case ie.TimeOfFirstPacket:
				r.FirstPacket, err = x.TimeOfFirstPacket()
			case ie.TimeOfLastPacket:
				r.LastPacket, err = x.TimeOfLastPacket()
			case ie.UsageInformation:
				r.Info, err = x.UsageInformation()
			}
			if err != nil {
				return nil, fmt.Errorf("usage report IE type %d: %w", x.Type, err)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// QueryURR asks the UPF for a usage report of each of the session's URRs ids (Query URR),
// or of every URR with none (PFCPSMReq-Flags QAURR), and returns the reports the
// Modification Response carries.
func (c *Client) QueryURR(ctx context.Context, s *Session, ids ...uint32) ([]UsageReport, error) {
	var ies []*ie.IE
	for _, id := range ids {
		ies = append(ies, ie.NewQueryURR(ie.NewURRID(id)))
	}
	if len(ids) == 0 {
		const qaurr = 0x04 // PFCPSMReq-Flags (TS 29.244 8.2.59) bit 3
		ies = append(ies, ie.NewPFCPSMReqFlags(qaurr))
	}
	r, err := c.Modify(ctx, s, ies...)
	if err != nil {
		return nil, err
	}
	return ParseUsageReports(r.UsageReport)
}
