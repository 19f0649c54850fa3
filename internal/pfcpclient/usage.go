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
