package pfcpclient

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// TestAnswerReports: the client answers a Session Report Request with what OnReport says,
// and a retransmission of it with the same answer, without asking OnReport again.
func TestAnswerReports(t *testing.T) {
	upf, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer upf.Close()
	var got []*message.SessionReportRequest
	c, err := Dial(upf.LocalAddr().(*net.UDPAddr).AddrPort(), Options{OnReport: func(m *message.SessionReportRequest) ReportAnswer {
		got = append(got, m)
		if m.SEID() == 0x99 {
			return ReportAnswer{Cause: ie.CauseSessionContextNotFound}
		}
		return ReportAnswer{SEID: 0x1234, IEs: []*ie.IE{ie.NewUpdateBARWithinSessionReportResponse(ie.NewBARID(1))}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := c.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	exchange := func(seid uint64, seq uint32) []byte {
		t.Helper()
		req := message.NewSessionReportRequest(0, 0, seid, seq, 0, ie.NewReportType(0, 1, 0, 0))
		b, _ := marshal(req)
		if _, err := upf.WriteToUDPAddrPort(b, client); err != nil {
			t.Fatal(err)
		}
		upf.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 2048)
		n, err := upf.Read(buf)
		if err != nil {
			t.Fatalf("no answer to the report: %v", err)
		}
		return bytes.Clone(buf[:n])
	}
	check := func(b []byte, seq uint32, seid uint64, cause uint8, bar bool) {
		t.Helper()
		m, err := message.ParseSessionReportResponse(b)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := m.Cause.Cause()
		if m.SequenceNumber != seq || m.SEID() != seid || c != cause || (m.UpdateBAR != nil) != bar {
			t.Errorf("answer seq %d SEID 0x%x cause %d Update BAR %v, want %d 0x%x %d %v", m.SequenceNumber, m.SEID(), c,
				m.UpdateBAR != nil, seq, seid, cause, bar)
		}
	}
	first := exchange(0x55, 7)
	check(first, 7, 0x1234, ie.CauseRequestAccepted, true)
	if again := exchange(0x55, 7); !bytes.Equal(again, first) {
		t.Error("a retransmission got another answer")
	}
	check(exchange(0x99, 8), 8, 0, ie.CauseSessionContextNotFound, false)
	if len(got) != 2 {
		t.Errorf("OnReport called %d times, want 2 (once per request)", len(got))
	}
}
