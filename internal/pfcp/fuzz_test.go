package pfcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/pfcpclient"
)

// FuzzHandle drives the whole request path, bytes → decode → node → sessions → fake
// datapath, with an associated SMF's datagrams. An input is one or more PFCP messages back
// to back (each one's header says its length), handled in order by a fresh node the SMF
// is associated with. The seeds
// are the conversations of an Open5GS- and a free5GC-style SMF (every message type they
// send), whole and message by message; crashers found are kept in testdata/fuzz/FuzzHandle.
//
// It fails on a panic, even one Handle or decode recovered from (a go-pfcp accessor that
// panics needs a length check in lengthChecks), on a response that does not parse, and when
// the sessions the node holds differ from what the datapath holds.
func FuzzHandle(f *testing.F) {
	for _, style := range []pfcpclient.Style{pfcpclient.Open5GS, pfcpclient.Free5GC} {
		conversation, _ := recordConversation(f, style)
		f.Add(bytes.Join(conversation, nil))
		for _, m := range conversation {
			f.Add(m)
		}
	}
	// The message types the conversations lack: an association update, the answers to
	// the UPF's own heartbeat and setup requests, a report response, a pfcpsim-style
	// buffering FAR with placeholder forwarding parameters; and a URR with every usage
	// reporting IE, then a modification that updates, queries and removes URRs.
	placeholder := basicSession(ue1)
	placeholder[3] = ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(0x04), ie.NewForwardingParameters(
		ie.NewDestinationInterface(ie.DstInterfaceAccess), ie.NewOuterHeaderCreation(0x0100, 0, "0.0.0.0", "", 0, 0, 0)))
	for _, m := range []message.Message{
		message.NewAssociationUpdateRequest(2, ie.NewNodeID(smfNode, "", ""), ie.NewCPFunctionFeatures(0)),
		message.NewHeartbeatResponse(1, ie.NewRecoveryTimeStamp(peerTS)),
		message.NewAssociationSetupResponse(1, ie.NewNodeID(smfNode, "", ""), ie.NewCause(ie.CauseRequestAccepted),
			ie.NewRecoveryTimeStamp(peerTS)),
		message.NewSessionReportResponse(0, 0, FirstSEID, 3, 0, ie.NewCause(ie.CauseRequestAccepted)),
		establishment(4, 0x33, placeholder...),
		establishment(5, 0x34, fullURRSession()...),
		message.NewSessionModificationRequest(0, 0, FirstSEID, 6, 0,
			ie.NewUpdateURR(ie.NewURRID(1), ie.NewVolumeQuota(0x07, 5000, 2000, 3000), ie.NewTimeQuota(time.Minute)),
			ie.NewQueryURR(ie.NewURRID(1)), ie.NewPFCPSMReqFlags(pfcpSMReqQAURR), ie.NewRemoveURR(ie.NewURRID(2))),
		// Event measurement, which is refused, for the fuzzer to vary.
		message.NewSessionModificationRequest(0, 0, FirstSEID, 7, 0,
			ie.NewUpdateURR(ie.NewURRID(1), ie.NewMeasurementMethod(1, 1, 0), ie.NewEventThreshold(5), ie.NewEventQuota(9),
				ie.NewAdditionalMonitoringTime(ie.NewMonitoringTime(monitoring[1].Time), ie.NewSubsequentEventThreshold(6),
					ie.NewSubsequentEventQuota(10)))),
	} {
		f.Add(bytesOf(f, m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		panics := &panicCounter{}
		dp := newFakeDatapath()
		n := newSessionNode(dp, func(o *Options) {
			o.Logger = slog.New(panics)
			o.NetworkInstances = map[string]string{"internet": "n6"}
		})
		n.Handle(smf, bytesOf(t, smfSetup(1))) // so that session requests reach the sessions
		accessors := accessorPanics.Load()
		for _, m := range splitMessages(b) {
			if resp := n.Handle(smf, m); resp != nil {
				if _, err := message.Parse(resp); err != nil {
					t.Fatalf("response %x does not parse: %v", resp, err)
				}
			}
		}
		if c := panics.n.Load(); c > 0 {
			t.Fatalf("%d panics while handling the input", c)
		}
		if c := accessorPanics.Load() - accessors; c > 0 {
			t.Fatalf("%d go-pfcp accessor panics while handling the input: add a length check", c)
		}
		checkNodeMatchesDatapath(t, n, dp)
	})
}

// splitMessages cuts b into messages by their headers' length fields; the last one takes
// the rest.
func splitMessages(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		size := len(b)
		if len(b) >= 4 {
			if l := 4 + int(binary.BigEndian.Uint16(b[2:4])); l < len(b) {
				size = l
			}
		}
		out = append(out, b[:size])
		b = b[size:]
	}
	return out
}

// checkNodeMatchesDatapath fails unless every session of n is installed under its SEID and
// the datapath holds nothing else, and the allocator holds only what the sessions use.
func checkNodeMatchesDatapath(t *testing.T, n *Node, dp *fakeDatapath) {
	t.Helper()
	n.smu.Lock()
	defer n.smu.Unlock()
	if len(n.ss.byID) != len(dp.sets) || len(n.ss.bySMF) != len(n.ss.byID) {
		t.Fatalf("%d sessions (%d by SMF SEID), %d in the datapath", len(n.ss.byID), len(n.ss.bySMF), len(dp.sets))
	}
	teids, ues := 0, 0
	for id, s := range n.ss.byID {
		if _, ok := dp.sets[id]; !ok {
			t.Fatalf("session 0x%x is not in the datapath", id)
		}
		st, su := allocated(s)
		teids, ues = teids+len(st), ues+len(su)
	}
	for tn, id := range n.ss.byTunnel {
		if s := n.ss.byID[id]; s == nil || !slices.Contains(s.tunnels(), tn) {
			t.Fatalf("tunnel %v indexed for session 0x%x, which does not have it", tn, id)
		}
	}
	if len(n.ss.alloc.teids) != teids || len(n.ss.alloc.ues) != ues {
		t.Fatalf("allocator holds %d TEIDs and %d UE addresses, sessions use %d and %d",
			len(n.ss.alloc.teids), len(n.ss.alloc.ues), teids, ues)
	}
}

// panicCounter is a log handler that counts the panics Handle recovered from.
type panicCounter struct{ n atomic.Int64 }

func (p *panicCounter) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && bytes.Contains([]byte(r.Message), []byte("panicked")) {
		p.n.Add(1)
	}
	return nil
}
func (p *panicCounter) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicCounter) WithGroup(string) slog.Handler      { return p }

// recordConversation runs the PFCP client, as an SMF of the given style, against a node on
// loopback and returns every datagram it sent (association, heartbeat, establishment with a
// flow, handover, buffering, drop, deletion and release) and every answer of the node.
func recordConversation(tb testing.TB, style pfcpclient.Style) (sent, answers [][]byte) {
	tb.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		tb.Fatal(err)
	}
	n := newSessionNode(newFakeDatapath(), func(o *Options) { o.NetworkInstances = map[string]string{"internet": "n6"} })
	var mu sync.Mutex
	go func() {
		buf := make([]byte, maxMessage)
		for {
			size, peer, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			m := bytes.Clone(buf[:size])
			resp := n.Handle(peer, m)
			mu.Lock()
			sent = append(sent, m)
			if resp != nil {
				answers = append(answers, resp)
			}
			mu.Unlock()
			if resp != nil {
				conn.WriteToUDPAddrPort(resp, peer)
			}
		}
	}()
	defer conn.Close()
	n.conn.Store(conn) // the node's own requests go from the socket read here

	var upSEID atomic.Uint64
	answer := func(*message.SessionReportRequest) pfcpclient.ReportAnswer {
		return pfcpclient.ReportAnswer{SEID: upSEID.Load(), IEs: []*ie.IE{ie.NewUpdateBARWithinSessionReportResponse(
			ie.NewBARID(pfcpclient.BARID), ie.NewDLBufferingDuration(20*time.Second), ie.NewDLBufferingSuggestedPacketCount(300))}}
	}
	c, err := pfcpclient.Dial(conn.LocalAddr().(*net.UDPAddr).AddrPort(), pfcpclient.Options{NodeID: smfNode, OnReport: answer})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spec := pfcpclient.SessionSpec{Style: style, UE: ue1, QFI: 9, NetworkInstance: "internet",
		GNB: gnb, GNBTEID: 0x500, MBRUplink: 1000, MBRDownlink: 2000, VolumeThreshold: 100 << 20, DroppedPackets: 1000,
		QuotaValidityTime: time.Hour, Monitoring: monitoring,
		Flows: []pfcpclient.Flow{{Filter: "permit out 17 from 198.51.100.0/24 to assigned 5060", Precedence: 100, QFI: 5}}}
	if style == pfcpclient.Free5GC {
		spec.UplinkTEID, spec.N3 = 0x77, n3
	}
	steps := []func() error{
		func() error { _, err := c.Associate(ctx); return err },
		func() error { _, err := c.Heartbeat(ctx); return err },
		func() error {
			s, err := c.Establish(ctx, spec)
			if err != nil {
				return err
			}
			upSEID.Store(s.UPSEID)
			return errorsOf(c.SetDownlink(ctx, s, gnb2, 0x600), reportAnswered(ctx, n, s.UPSEID),
				c.SetMonitoring(ctx, s, pfcpclient.SessionURRID, pfcpclient.Monitoring{Time: monitoring[0].Time.Add(time.Hour)},
					pfcpclient.Monitoring{Time: monitoring[0].Time.Add(2 * time.Hour), VolumeQuota: 1 << 20}),
				c.SetDownlinkBuffering(ctx, s), c.DropDownlink(ctx, s), c.DropDownlinkNotify(ctx, s), c.Delete(ctx, s))
		},
		func() error { return c.Release(ctx) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			tb.Fatalf("%s SMF conversation: %v", style, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return sent, answers
}

// monitoring are the Monitoring Times and subsequent values of the conversations' URR (the
// second as an Additional Monitoring Time): fixed times to come, so that the seeds stay the
// same.
var monitoring = []pfcpclient.Monitoring{
	{Time: time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), VolumeThreshold: 50 << 20, VolumeQuota: 1 << 30},
	{Time: time.Date(2040, 1, 1, 6, 0, 0, 0, time.UTC), VolumeThreshold: 20 << 20},
}

// reportAnswered has n send a Session Report Request (an Error Indication Report) for
// session seid and waits for the SMF's answer.
func reportAnswered(ctx context.Context, n *Node, seid uint64) error {
	accepted := n.Reports()["accepted"]
	eir := ie.NewErrorIndicationReport(ie.NewFTEID(0x01, 0x600, gnb2.AsSlice(), nil, 0))
	if err := n.Report(seid, ReportErrorIndication, eir); err != nil {
		return err
	}
	for n.Reports()["accepted"] == accepted {
		select {
		case <-ctx.Done():
			return fmt.Errorf("session report unanswered: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fullURRSession is basicSession with URR 1 carrying every usage reporting IE this UPF
// reads, and URR 2, linked to it, measuring before QoS with a FAR for quota action.
func fullURRSession() []*ie.IE {
	ies := basicSession(ue1)
	ies[0] = chosenULPDR(1, 1, 9, 1, ie.NewQERID(1), ie.NewURRID(1), ie.NewURRID(2))
	ies[5] = ie.NewCreateURR(ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 1), ie.NewReportingTriggers(0x7f, 0x02),
		ie.NewMeasurementPeriod(10*time.Second), ie.NewVolumeThreshold(0x07, 3000, 1000, 2000),
		ie.NewTimeThreshold(30*time.Second), ie.NewQuotaHoldingTime(20*time.Second),
		ie.NewInactivityDetectionTime(5), ie.NewMonitoringTime(monitoring[0].Time),
		ie.NewSubsequentVolumeThreshold(0x07, 6000, 2000, 4000), ie.NewSubsequentTimeThreshold(time.Minute),
		ie.NewSubsequentVolumeQuota(0x02, 0, 9000, 0), ie.NewSubsequentTimeQuota(time.Hour),
		ie.NewAdditionalMonitoringTime(ie.NewMonitoringTime(monitoring[1].Time),
			ie.NewSubsequentVolumeThreshold(0x01, 7000, 0, 0), ie.NewSubsequentTimeThreshold(2*time.Minute),
			ie.NewSubsequentVolumeQuota(0x04, 0, 0, 8000), ie.NewSubsequentTimeQuota(2*time.Hour)))
	return append(ies,
		ie.NewCreateURR(ie.NewURRID(2), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0x80, 0x01),
			ie.NewMeasurementInformation(0x01), ie.NewVolumeQuota(0x01, 10000, 0, 0), ie.NewFARID(3),
			ie.NewLinkedURRID(1)),
		ie.NewCreateFAR(ie.NewFARID(3), ie.NewApplyAction(ApplyDrop)))
}
