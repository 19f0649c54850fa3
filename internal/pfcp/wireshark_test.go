package pfcp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/tshark"
	"github.com/xupf/xupf/internal/usage"
)

// TestWiresharkDecodesEverythingWeSend writes every kind of message this node sends (each
// response, its own heartbeat, association setup and session report requests, and our SMF
// client's session requests and answer to a report) into a capture and has Wireshark's PFCP dissector
// read it: no packet may be malformed or carry an error-level expert note.
func TestWiresharkDecodesEverythingWeSend(t *testing.T) {
	dp := newFakeDatapath()
	n := newSessionNode(dp)
	chv4 := ie.NewCreatePDR(ie.NewPDRID(3), ie.NewPrecedence(1), ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCore),
		ie.NewUEIPAddress(0x10|0x04, "", "", 0, 0)), ie.NewFARID(2))
	dp.usage[FirstSEID] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 1, Bytes: 100}, {PDR: 2, Packets: 2, Bytes: 300}}
	// Event measurement, refused (Failed Rule ID, Offending IE): the request is decoded too.
	events := message.NewSessionModificationRequest(0, 0, FirstSEID+2, 27, 0, ie.NewUpdateURR(ie.NewURRID(1),
		ie.NewEventThreshold(5), ie.NewEventQuota(9), ie.NewAdditionalMonitoringTime(
			ie.NewMonitoringTime(time.Unix(2_000_000_000, 0)), ie.NewSubsequentEventThreshold(6), ie.NewSubsequentEventQuota(10))))
	requests := []message.Message{
		smfSetup(1),
		setupRequest(2, ie.NewRecoveryTimeStamp(peerTS)), // cause: mandatory IE missing
		message.NewAssociationUpdateRequest(3, ie.NewNodeID(smfNode, "", "")),
		message.NewSessionEstablishmentRequest(0, 0, 0, 4, 0, ie.NewNodeID(smfNode, "", "")),
		message.NewSessionEstablishmentRequest(0, 0, 0, 5, 0), // offending IE
		message.NewSessionModificationRequest(0, 0, 1, 6, 0),
		message.NewSessionDeletionRequest(0, 0, 1, 7, 0),
		// Sessions: Created PDRs (F-TEID, UE address), Failed Rule ID, usage reports.
		establishment(20, 0x51, basicSession(ue1)...),
		establishment(21, 0x52, append(basicSession(ue1)[1:], chosenULPDR(9, 1, 9, 99))...),
		message.NewSessionModificationRequest(0, 0, FirstSEID, 22, 0, chv4),
		message.NewSessionModificationRequest(0, 0, FirstSEID, 23, 0, ie.NewRemoveFAR(ie.NewFARID(77))),
		message.NewSessionDeletionRequest(0, 0, FirstSEID, 24, 0),
		// Usage reports in a Modification Response: Query URR, QAURR, Remove URR.
		establishment(25, 0x54, fullURRSession()...),
		message.NewSessionModificationRequest(0, 0, FirstSEID+2, 26, 0, ie.NewQueryURR(ie.NewURRID(1)),
			ie.NewPFCPSMReqFlags(pfcpSMReqQAURR), ie.NewRemoveURR(ie.NewURRID(2)),
			ie.NewUpdatePDR(ie.NewPDRID(1), ie.NewURRID(1))),
		events,
		message.NewHeartbeatRequest(8, ie.NewRecoveryTimeStamp(peerTS), nil),
		message.NewAssociationReleaseRequest(9, ie.NewNodeID(smfNode, "", "")),
		message.NewAssociationReleaseRequest(10, ie.NewNodeID(smfNode, "", "")), // no association any more
		setupRequest(11, ie.NewNodeID(smfNode, "", ""), ie.NewRecoveryTimeStamp(peerTS)),
	}
	var sent [][]byte
	for _, r := range requests {
		resp := n.Handle(smf, bytesOf(t, r))
		if resp == nil {
			t.Fatalf("no response to %s", r.MessageTypeName())
		}
		sent = append(sent, resp)
	}
	sent = append(sent, bytesOf(t, events))
	v2 := bytesOf(t, message.NewHeartbeatRequest(12, ie.NewRecoveryTimeStamp(peerTS), nil))
	v2[0] = 2<<5 | v2[0]&0x1f
	sent = append(sent, n.Handle(smf, v2))
	hbs, _ := n.beat()
	for _, hb := range hbs {
		sent = append(sent, hb.msg)
	}
	sent = append(sent, n.setupRequest(netip.MustParseAddrPort("192.0.2.20:8805")))
	sent = append(sent, reportRequests(t, n)...)
	// What our SMF client answers a report with (an Update BAR), and the session it asks for
	// (a URR with a Dropped DL Traffic Threshold, a FAR that drops and notifies).
	clientSent, _ := recordConversation(t, pfcpclient.Open5GS)
	for _, b := range clientSent {
		switch b[1] {
		case message.MsgTypeSessionReportResponse, message.MsgTypeSessionEstablishmentRequest,
			message.MsgTypeSessionModificationRequest:
			sent = append(sent, b)
		}
	}

	text := tshark.Decode(t, 8805, sent)
	if c := strings.Count(text, "Packet Forwarding Control Protocol"); c != len(sent) {
		t.Errorf("Wireshark saw %d PFCP messages, want %d", c, len(sent))
	}
	for _, ieName := range []string{"Created PDR", "UE IP Address", "Failed Rule ID", "Usage Report", "Volume Measurement", "Offending IE",
		"Report Type", "Error Indication Report", "Downlink Data Report", "Downlink Data Service Information", "Update BAR", "DL Buffering Duration",
		"Usage Report (Session Modification Response)", "Usage Report (Session Report Request)", "UR-SEQN",
		"Usage Report Trigger", "Start Time", "End Time", "Duration Measurement", "Time of First Packet",
		"Time of Last Packet", "Dropped DL Traffic Threshold", "Quota Validity Time", "Usage Information",
		"Monitoring Time", "Subsequent Volume Threshold", "Subsequent Volume Quota", "Additional Monitoring Time",
		"Event Threshold", "Event Quota", "Subsequent Event Threshold", "Subsequent Event Quota"} {
		if !strings.Contains(text, ieName) {
			t.Errorf("no %s IE in what was sent: the capture does not cover it", ieName)
		}
	}
}

// reportRequests are the Session Report Requests the node sends, of each type, for a session
// it establishes.
func reportRequests(t *testing.T, n *Node) [][]byte {
	m, c, _ := cause(t, n.Handle(smf, bytesOf(t, establishment(30, 0x53, basicSession(ue1)...))))
	if c != ie.CauseRequestAccepted {
		t.Fatalf("establishment: cause %d", c)
	}
	f, _ := m.(*message.SessionEstablishmentResponse).UPFSEID.FSEID()
	var out [][]byte
	for _, r := range []struct {
		t   ReportType
		ies []*ie.IE
	}{
		{ReportErrorIndication, []*ie.IE{ie.NewErrorIndicationReport(ie.NewFTEID(0x01, 0x500, gnb.AsSlice(), nil, 0))}},
		{ReportDownlinkData, []*ie.IE{downlinkDataReport(2, 9)}},
		{ReportUsage, usageReports([]usage.Report{{URR: 1, Seq: 3, Trigger: usage.VolumeThreshold | usage.Periodic | usage.DroppedThreshold | usage.QuotaValidity,
			Start: time.Unix(1_700_000_000, 0), End: time.Unix(1_700_000_010, 0), Duration: 7 * time.Second,
			FirstPacket: time.Unix(1_700_000_001, 0), LastPacket: time.Unix(1_700_000_009, 0),
			Volume: usage.Counts{Uplink: rules.Counts{Packets: 2, Bytes: 300}, Downlink: rules.Counts{Packets: 5, Bytes: 4000}}}},
			map[uint32]*URR{1: {ID: 1, Method: methodVolume | methodDuration}}, ie.NewUsageReportWithinSessionReportRequest)},
		// The two parts of a monitoring time's split, with their Usage Information.
		{ReportUsage, usageReports([]usage.Report{
			{URR: 1, Seq: 4, Trigger: usage.MonitoringTime, Part: usage.Before, Start: time.Unix(1_700_000_010, 0),
				End: time.Unix(1_700_000_015, 0), Volume: usage.Counts{Uplink: rules.Counts{Packets: 1, Bytes: 100}}},
			{URR: 1, Seq: 5, Trigger: usage.Periodic, Part: usage.After, Start: time.Unix(1_700_000_015, 0),
				End: time.Unix(1_700_000_020, 0), Volume: usage.Counts{Downlink: rules.Counts{Packets: 1, Bytes: 200}}}},
			nil, ie.NewUsageReportWithinSessionReportRequest)},
	} {
		n.mu.Lock()
		p, err := n.newReport(f.SEID, 0x53, smfNode, r.t, r.ies)
		if err == nil {
			n.forgetReport(n.seq, p)
		}
		n.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.msg)
	}
	return out
}
