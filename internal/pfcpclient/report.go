package pfcpclient

import (
	"bytes"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// answerReport answers a Session Report Request of the UPF with what Options.OnReport says,
// or with the answer an identical request got before (a retransmission, TS 29.244 6.4).
func (c *Client) answerReport(m *message.SessionReportRequest, req []byte) {
	resp, seen := c.reports.get(m.SequenceNumber, req)
	if !seen {
		a := ReportAnswer{}
		if c.opts.OnReport != nil {
			a = c.opts.OnReport(m)
		}
		if a.Cause == 0 {
			a.Cause = ie.CauseRequestAccepted
		}
		b, err := marshal(message.NewSessionReportResponse(0, 0, a.SEID, m.SequenceNumber, 0,
			append([]*ie.IE{ie.NewCause(a.Cause)}, a.IEs...)...))
		if err != nil {
			c.log.Warn("pfcp client: session report response", "err", err)
			return
		}
		resp = b
		c.reports.put(m.SequenceNumber, req, resp)
	}
	if _, err := c.conn.Write(resp); err != nil {
		c.log.Warn("pfcp client: send session report response", "err", err)
	}
}

// maxAnswers bounds the answers kept for retransmitted requests: far more than a UPF sends
// within its retransmission time in the tests and benchmarks.
const maxAnswers = 4096

// answerCache keeps the answers to the last maxAnswers requests by sequence number.
type answerCache struct {
	byKey map[uint32]answered
	order []uint32 // oldest first
}

type answered struct{ req, resp []byte }

func (a *answerCache) get(seq uint32, req []byte) ([]byte, bool) {
	e, ok := a.byKey[seq]
	return e.resp, ok && bytes.Equal(e.req, req)
}

func (a *answerCache) put(seq uint32, req, resp []byte) {
	if a.byKey == nil {
		a.byKey = map[uint32]answered{}
	}
	if _, ok := a.byKey[seq]; !ok {
		if len(a.order) >= maxAnswers {
			delete(a.byKey, a.order[0])
			a.order = a.order[1:]
		}
		a.order = append(a.order, seq)
	}
	a.byKey[seq] = answered{bytes.Clone(req), resp}
}
