package pfcpclient

import (
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
)

// TestMonitoringIEs: a Monitoring sends its time and the subsequent values given, nothing
// without a time, and the second and later ones in Additional Monitoring Time IEs; a report's
// Usage Information is read.
func TestMonitoringIEs(t *testing.T) {
	if ies := (Monitoring{VolumeQuota: 5}).ies(); len(ies) != 0 {
		t.Errorf("no monitoring time: %d IEs", len(ies))
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ies := Monitoring{Time: at, VolumeThreshold: 100, VolumeQuota: 200}.ies()
	if len(ies) != 3 {
		t.Fatalf("%d IEs, want Monitoring Time and two subsequent", len(ies))
	}
	if v, err := ies[0].MonitoringTime(); err != nil || !v.Equal(at) {
		t.Errorf("Monitoring Time %v, %v", v, err)
	}
	if v, err := ies[1].SubsequentVolumeThreshold(); err != nil || v.TotalVolume != 100 {
		t.Errorf("Subsequent Volume Threshold %+v, %v", v, err)
	}
	if v, err := ies[2].SubsequentVolumeQuota(); err != nil || v.TotalVolume != 200 {
		t.Errorf("Subsequent Volume Quota %+v, %v", v, err)
	}
	later := at.Add(time.Hour)
	ies = monitoringIEs([]Monitoring{{Time: at}, {}, {Time: later, VolumeQuota: 300}})
	if len(ies) != 2 || ies[0].Type != ie.MonitoringTime || ies[1].Type != ie.AdditionalMonitoringTime {
		t.Fatalf("IEs %v, want Monitoring Time and one Additional Monitoring Time", ies)
	}
	if c := ies[1].ChildIEs; len(c) != 2 {
		t.Errorf("Additional Monitoring Time holds %d IEs, want its time and subsequent quota", len(c))
	} else if v, err := c[0].MonitoringTime(); err != nil || !v.Equal(later) {
		t.Errorf("additional Monitoring Time %v, %v", v, err)
	}
	rs, err := ParseUsageReports([]*ie.IE{ie.NewUsageReportWithinSessionReportRequest(ie.NewURRID(1),
		ie.NewUsageInformation(0, 1, 0, 0))})
	if err != nil || len(rs) != 1 || rs[0].Info != UsageAfter {
		t.Errorf("reports %+v, %v; want one with Usage Information AFT", rs, err)
	}
}
