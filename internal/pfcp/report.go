package pfcp

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// ReportType is the Report Type IE of a Session Report Request (TS 29.244 8.2.21): what
// the report carries. One request may carry several.
type ReportType uint8

const (
	ReportDownlinkData    ReportType = 0x01 // DLDR: a Downlink Data Report
	ReportUsage           ReportType = 0x02 // USAR: Usage Reports
	ReportErrorIndication ReportType = 0x04 // ERIR: an Error Indication Report
)

// Report timing defaults: T1 and N1 as Open5GS's SMF uses them (3 s, 3 retransmissions),
// and enough outstanding reports per SMF for a burst of paging without letting an SMF that
// does not answer make memory grow.
const (
	DefaultReportTimeout    = 3 * time.Second
	DefaultReportRetries    = 3
	DefaultMaxReportsPerSMF = 4096
)

// ErrReportNotSent is wrapped by the errors of Report when the request could not be sent:
// the session, its SMF's association or room among the outstanding reports is missing.
var ErrReportNotSent = errors.New("session report not sent")

// reportOutcome is what became of the Session Report Requests, counted for the metrics.
type reportOutcome int

const (
	reportSent          reportOutcome = iota // sent a first time
	reportRetransmitted                      // sent again after T1 without an answer
	reportAccepted                           // answered with Request accepted
	reportRejected                           // answered with another cause
	reportTimedOut                           // unanswered after N1 retransmissions
	reportNotSent                            // not sent (ErrReportNotSent)
	numReportOutcomes
)

var reportOutcomeNames = [numReportOutcomes]string{"sent", "retransmitted", "accepted", "rejected", "timed_out", "not_sent"}

// reportState is the Session Report Requests waiting for an answer; Node.mu guards it.
type reportState struct {
	bySeq   map[uint32]*pendingReport
	perPeer map[string]int // outstanding reports per SMF Node ID
	counts  [numReportOutcomes]atomic.Uint64
}

// pendingReport is one Session Report Request sent and not answered yet.
type pendingReport struct {
	seid  uint64 // this UPF's SEID of the session
	peer  string // the SMF's Node ID
	to    netip.AddrPort
	msg   []byte
	tries int // transmissions so far
	timer *time.Timer
}

// Reports counts the Session Report Requests by outcome: sent, retransmitted, accepted,
// rejected (another cause), timed_out and not_sent.
func (n *Node) Reports() map[string]uint64 {
	out := make(map[string]uint64, numReportOutcomes)
	for o := range numReportOutcomes {
		out[reportOutcomeNames[o]] = n.reports.counts[o].Load()
	}
	return out
}

// Report sends the SMF of session seid a Session Report Request of type t carrying ies (a
// Downlink Data Report, Usage Reports, an Error Indication Report), and retransmits it every
// ReportTimeout until answered, ReportRetries times at most. It returns once the request is
// on the wire; the answer is handled when it comes (handleReportResponse). Every kind of
// report goes through here. A send that fails once the request is recorded is tried again
// as a retransmission.
func (n *Node) Report(seid uint64, t ReportType, ies ...*ie.IE) error {
	if n.conn.Load() == nil {
		n.reports.counts[reportNotSent].Add(1)
		return fmt.Errorf("%w: the PFCP socket is not serving", ErrReportNotSent)
	}
	n.smu.Lock()
	s, ok := n.ss.byID[seid]
	var cpSEID uint64
	var peer string
	if ok {
		cpSEID, peer = s.CPSEID, s.Peer
	}
	n.smu.Unlock()
	if !ok {
		n.reports.counts[reportNotSent].Add(1)
		return fmt.Errorf("%w: session 0x%x does not exist", ErrReportNotSent, seid)
	}
	n.mu.Lock()
	r, err := n.newReport(seid, cpSEID, peer, t, ies)
	n.mu.Unlock()
	if err != nil {
		n.reports.counts[reportNotSent].Add(1)
		return err
	}
	n.reports.counts[reportSent].Add(1)
	return n.transmit(r.to, r.msg)
}

// newReport records a Session Report Request to peer and starts its retransmission timer;
// n.mu is held.
func (n *Node) newReport(seid, cpSEID uint64, peer string, t ReportType, ies []*ie.IE) (*pendingReport, error) {
	a := n.assocs[peer]
	if a == nil {
		return nil, fmt.Errorf("%w: session 0x%x: its SMF %s has no association", ErrReportNotSent, seid, peer)
	}
	if n.reports.perPeer[peer] >= n.opts.MaxReportsPerSMF {
		return nil, fmt.Errorf("%w: session 0x%x: %d reports to SMF %s unanswered already",
			ErrReportNotSent, seid, n.reports.perPeer[peer], peer)
	}
	n.seq = (n.seq + 1) & 0xffffff
	seq := n.seq
	ies = append([]*ie.IE{ie.New(ie.ReportType, []byte{uint8(t)})}, ies...)
	r := &pendingReport{seid: seid, peer: peer, to: a.Address, tries: 1,
		msg: marshal(message.NewSessionReportRequest(0, 0, cpSEID, seq, 0, ies...))}
	r.timer = time.AfterFunc(n.opts.ReportTimeout, func() { n.reportTimeout(seq) })
	n.reports.bySeq[seq] = r
	n.reports.perPeer[peer]++
	return r, nil
}

// reportTimeout sends an unanswered report again, or gives it up after ReportRetries
// retransmissions.
func (n *Node) reportTimeout(seq uint32) {
	n.mu.Lock()
	r := n.reports.bySeq[seq]
	if r == nil { // answered meanwhile
		n.mu.Unlock()
		return
	}
	if r.tries > n.opts.ReportRetries {
		n.forgetReport(seq, r)
		n.mu.Unlock()
		n.reports.counts[reportTimedOut].Add(1)
		n.log.Warn("pfcp: session report unanswered; given up", "seid", r.seid, "smf", r.peer, "to", r.to,
			"tries", r.tries)
		return
	}
	r.tries++
	r.timer.Reset(n.opts.ReportTimeout)
	n.mu.Unlock()
	n.reports.counts[reportRetransmitted].Add(1)
	if err := n.transmit(r.to, r.msg); err != nil {
		n.log.Warn("pfcp: retransmit session report", "seid", r.seid, "to", r.to, "err", err)
	}
}

// forgetReport drops an outstanding report; n.mu is held.
func (n *Node) forgetReport(seq uint32, r *pendingReport) {
	r.timer.Stop()
	delete(n.reports.bySeq, seq)
	if n.reports.perPeer[r.peer]--; n.reports.perPeer[r.peer] <= 0 {
		delete(n.reports.perPeer, r.peer)
	}
}

// transmit sends a request this node initiates from its PFCP socket.
func (n *Node) transmit(to netip.AddrPort, msg []byte) error {
	conn := n.conn.Load()
	if conn == nil {
		return errors.New("the PFCP socket is closed")
	}
	if _, err := conn.WriteToUDPAddrPort(msg, to); err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	return nil
}

// handleReportResponse takes the SMF's answer to a Session Report Request: "Session context
// not found" (the SMF has no such session) deletes the session, DROBU discards its buffered
// packets, and an Update BAR changes the session's BAR. An answer to no report of ours, or from another address than the one
// the report went to, is ignored.
func (n *Node) handleReportResponse(peer netip.AddrPort, m *message.SessionReportResponse) {
	n.mu.Lock()
	r := n.reports.bySeq[m.SequenceNumber]
	if r == nil || r.to.Addr().Unmap() != peer.Addr().Unmap() {
		n.mu.Unlock()
		n.drops[DropUnrequested].Add(1)
		n.log.Debug("pfcp: session report response to no report of ours", "peer", peer, "seq", m.SequenceNumber)
		return
	}
	n.forgetReport(m.SequenceNumber, r)
	n.mu.Unlock()

	cause := uint8(0)
	if m.Cause != nil {
		cause, _ = m.Cause.Cause()
	}
	switch cause {
	case ie.CauseRequestAccepted:
		n.reports.counts[reportAccepted].Add(1)
	case ie.CauseSessionContextNotFound:
		n.reports.counts[reportRejected].Add(1)
		n.smu.Lock()
		if s := n.ss.byID[r.seid]; s != nil && s.Peer == r.peer {
			n.log.Warn("pfcp: the SMF does not know the session it was sent a report of; deleting it",
				"seid", r.seid, "cp_seid", s.CPSEID, "smf", r.peer)
			if _, err := n.deleteSession(s); err != nil {
				n.log.Warn("pfcp: read counters of a deleted session", "seid", r.seid, "err", err)
			}
		}
		n.smu.Unlock()
		return
	default:
		n.reports.counts[reportRejected].Add(1)
		n.log.Warn("pfcp: the SMF refused a session report", "seid", r.seid, "smf", r.peer, "cause", cause)
	}
	if f := m.PFCPSRRspFlags; f != nil && len(f.Payload) > 0 && f.Payload[0]&srrspDROBU != 0 && n.opts.Buffers != nil {
		n.opts.Buffers.Drop(r.seid)
	}
	if m.UpdateBAR != nil {
		if err := n.updateReportBAR(r.seid, m.UpdateBAR); err != nil {
			n.log.Warn("pfcp: Update BAR of a session report response not applied", "seid", r.seid, "err", err)
		}
	}
}

// updateReportBAR applies the Update BAR of a Session Report Response (TS 29.244 7.5.9.2)
// to the session's BAR.
func (n *Node) updateReportBAR(seid uint64, g *ie.IE) error {
	n.smu.Lock()
	defer n.smu.Unlock()
	s := n.ss.byID[seid]
	if s == nil {
		return fmt.Errorf("session 0x%x is gone", seid)
	}
	if err := upsert([]*ie.IE{g}, false, ie.BARID, "Update BAR", (*ie.IE).BARID, s.BARs, ie.RuleIDTypeBAR,
		nil, barDecoder); err != nil {
		return err
	}
	n.setBuffering(s)
	n.saveSession(s)
	return nil
}
