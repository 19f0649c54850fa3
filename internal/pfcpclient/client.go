// Package pfcpclient is a minimal SMF side of N4: it associates with a UPF, answers the
// UPF's heartbeats and sends its own requests, retransmitting each until answered. xupfctl,
// the demo, the end-to-end tests and the benchmarks use it to drive xupfd.
package pfcpclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	_ "github.com/xupf/xupf/internal/pfcpgrouped" // go-pfcp's grouped-IE test, as a table
	"github.com/xupf/xupf/internal/sockbuf"
)

// Options configure a Client.
type Options struct {
	// NodeID is the SMF's Node ID (an IPv4 address or FQDN); default: the local address.
	NodeID string
	// Local is the address to send from; zero: any.
	Local netip.AddrPort
	// Timeout is how long one try of a request waits for its answer (T1); default 1s.
	Timeout time.Duration
	// Tries is how many times a request is sent before giving up (N1 + 1); default 3.
	Tries int
	// RetainSessions makes Associate ask the UPF to keep the PFCP sessions of an earlier
	// association with the same Node ID (PFCP Session Retention Information, TS 29.244
	// 6.2.6.2.2): for a process that takes over sessions another one established, as every
	// "xupfctl pfcp session" command does. Without it a UPF that follows the specification
	// deletes them when the Node ID associates again.
	RetainSessions bool
	// OnReport answers the UPF's Session Report Requests; nil answers each with Request
	// accepted. A retransmission of a request gets the answer the request got, without
	// another call. It runs on the goroutine that reads the socket: it must not wait for
	// the answer to a request of this client.
	OnReport func(*message.SessionReportRequest) ReportAnswer
	Logger   *slog.Logger
}

// ReportAnswer is the Session Report Response to send.
type ReportAnswer struct {
	// SEID is the UPF's SEID of the session (the response's header); 0 when the request
	// names no session this SMF knows.
	SEID uint64
	// Cause is the response's cause; 0 is Request accepted.
	Cause uint8
	// IEs follow the cause, e.g. an Update BAR.
	IEs []*ie.IE
}

// Client talks to one UPF.
type Client struct {
	opts     Options
	log      *slog.Logger
	conn     *net.UDPConn
	upf      netip.AddrPort
	local    netip.Addr // the address requests are sent from: the CP F-SEID's
	recovery time.Time
	seid     atomic.Uint64 // the last CP SEID allocated

	mu      sync.Mutex
	seq     uint32
	waiting map[uint32]chan message.Message
	done    chan struct{}
	// reports are the answers to the last UPF requests, for their retransmissions; only the
	// reading goroutine uses it.
	reports answerCache
}

// Dial opens a socket toward the UPF at upf and starts answering it.
func Dial(upf netip.AddrPort, opts Options) (*Client, error) {
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if opts.Tries == 0 {
		opts.Tries = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var laddr *net.UDPAddr
	if opts.Local.IsValid() {
		laddr = net.UDPAddrFromAddrPort(opts.Local)
	}
	conn, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(upf))
	if err != nil {
		return nil, fmt.Errorf("pfcp client: dial %s: %w", upf, err)
	}
	// A UPF answers a commit's worth of requests at once: room for a few thousand answers.
	if _, err := sockbuf.Receive(conn, 4<<20); err != nil {
		conn.Close()
		return nil, fmt.Errorf("pfcp client: %w", err)
	}
	local := conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	if opts.NodeID == "" {
		opts.NodeID = local.String()
	}
	c := &Client{opts: opts, log: opts.Logger, conn: conn, upf: upf, local: local, recovery: time.Now().Truncate(time.Second),
		waiting: map[uint32]chan message.Message{}, done: make(chan struct{})}
	// CP SEIDs count up from the Recovery Time Stamp and a random offset, so that two
	// processes with the same Node ID, e.g. two xupfctl runs, do not hand the UPF the same
	// CP F-SEID.
	c.seid.Store(uint64(c.recovery.Unix())<<32 | uint64(rand.Uint32N(1<<31)))
	go c.read()
	return c, nil
}

// Close stops the client.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// read answers the UPF's heartbeats and hands responses to the requests waiting for them.
func (c *Client) read() {
	defer close(c.done)
	buf := make([]byte, 65535)
	for {
		n, err := c.conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP port unreachable while the UPF is not up yet
		}
		// Parsed from a copy: the message is handed to the goroutine waiting for it while
		// this one reads the next into buf.
		m, err := message.Parse(slices.Clone(buf[:n]))
		if err != nil {
			c.log.Warn("pfcp client: undecodable message", "err", err)
			continue
		}
		switch m := m.(type) {
		case *message.HeartbeatRequest:
			resp := message.NewHeartbeatResponse(m.SequenceNumber, ie.NewRecoveryTimeStamp(c.recovery))
			if b, err := marshal(resp); err == nil {
				c.conn.Write(b)
			}
			continue
		case *message.SessionReportRequest:
			c.answerReport(m, buf[:n])
			continue
		}
		c.mu.Lock()
		ch := c.waiting[m.Sequence()]
		delete(c.waiting, m.Sequence())
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// request sends the message build makes with a fresh sequence number and waits for the
// answer, sending it again after each Timeout, Tries times in all.
func (c *Client) request(ctx context.Context, build func(seq uint32) message.Message) (message.Message, error) {
	c.mu.Lock()
	c.seq = (c.seq + 1) & 0xffffff
	seq := c.seq
	ch := make(chan message.Message, 1)
	c.waiting[seq] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, seq)
		c.mu.Unlock()
	}()
	m := build(seq)
	b, err := marshal(m)
	if err != nil {
		return nil, err
	}
	for try := 1; try <= c.opts.Tries; try++ {
		if _, err := c.conn.Write(b); err != nil {
			return nil, fmt.Errorf("pfcp client: send %s: %w", m.MessageTypeName(), err)
		}
		t := time.NewTimer(c.opts.Timeout)
		select {
		case resp := <-ch:
			t.Stop()
			return resp, nil
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("pfcp client: %s to %s: no answer after %d tries of %s", m.MessageTypeName(), c.upf,
		c.opts.Tries, c.opts.Timeout)
}

// Association is what the UPF said when it accepted the association.
type Association struct {
	NodeID   string
	Recovery time.Time
	Features []byte // UP Function Features octets
	// SessionsRetained is the UPF's PSREI flag: an association with the same Node ID existed
	// and, as Options.RetainSessions asked, its sessions were kept.
	SessionsRetained bool
}

// CauseError is a request the UPF answered with a cause other than Request accepted.
type CauseError struct {
	Message string // what was asked, e.g. "session deletion"
	Cause   uint8
}

func (e *CauseError) Error() string {
	return fmt.Sprintf("pfcp client: %s: UPF answered cause %d (%s)", e.Message, e.Cause, CauseName(e.Cause))
}

// CauseName is the name TS 29.244 8.2.1 gives a cause value, e.g. "Session context not
// found" for 65.
func CauseName(cause uint8) string {
	switch cause {
	case ie.CauseRequestAccepted:
		return "Request accepted"
	case ie.CauseRequestRejected:
		return "Request rejected"
	case ie.CauseSessionContextNotFound:
		return "Session context not found"
	case ie.CauseMandatoryIEMissing:
		return "Mandatory IE missing"
	case ie.CauseConditionalIEMissing:
		return "Conditional IE missing"
	case ie.CauseInvalidLength:
		return "Invalid length"
	case ie.CauseMandatoryIEIncorrect:
		return "Mandatory IE incorrect"
	case ie.CauseInvalidForwardingPolicy:
		return "Invalid Forwarding Policy"
	case ie.CauseInvalidFTEIDAllocationOption:
		return "Invalid F-TEID allocation option"
	case ie.CauseNoEstablishedPFCPAssociation:
		return "No established PFCP Association"
	case ie.CauseRuleCreationModificationFailure:
		return "Rule creation/modification Failure"
	case ie.CausePFCPEntityInCongestion:
		return "PFCP entity in congestion"
	case ie.CauseNoResourcesAvailable:
		return "No resources available"
	case ie.CauseServiceNotSupported:
		return "Service not supported"
	case ie.CauseSystemFailure:
		return "System failure"
	case ie.CauseRedirectionRequested:
		return "Redirection Requested"
	default:
		return "unknown cause"
	}
}

func checkCause(what string, c *ie.IE) error {
	if c == nil {
		return fmt.Errorf("pfcp client: %s: response without a cause", what)
	}
	v, err := c.Cause()
	if err != nil {
		return fmt.Errorf("pfcp client: %s: %w", what, err)
	}
	if v != ie.CauseRequestAccepted {
		return &CauseError{Message: what, Cause: v}
	}
	return nil
}

// Associate sets up the PFCP association.
func (c *Client) Associate(ctx context.Context) (Association, error) {
	ies := []*ie.IE{ie.NewNodeIDHeuristic(c.opts.NodeID), ie.NewRecoveryTimeStamp(c.recovery)}
	if c.opts.RetainSessions {
		ies = append(ies, ie.NewPFCPSessionRetentionInformation(c.cpEntityAddress()))
	}
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewAssociationSetupRequest(seq, ies...)
	})
	if err != nil {
		return Association{}, err
	}
	r, ok := resp.(*message.AssociationSetupResponse)
	if !ok {
		return Association{}, fmt.Errorf("pfcp client: association setup answered with %s", resp.MessageTypeName())
	}
	if err := checkCause("association setup", r.Cause); err != nil {
		return Association{}, err
	}
	var a Association
	if r.NodeID != nil {
		a.NodeID, _ = r.NodeID.NodeID()
	}
	if r.RecoveryTimeStamp != nil {
		a.Recovery, _ = r.RecoveryTimeStamp.RecoveryTimeStamp()
	}
	if r.UPFunctionFeatures != nil {
		a.Features, _ = r.UPFunctionFeatures.UPFunctionFeatures()
	}
	a.SessionsRetained = r.PFCPASRspFlags != nil && r.PFCPASRspFlags.HasPSREI()
	return a, nil
}

// cpEntityAddress is the CP PFCP Entity IP Address IE naming the address this client sends
// from, the one in its CP F-SEIDs.
func (c *Client) cpEntityAddress() *ie.IE {
	v4, v6 := c.localIPs()
	return ie.NewCPPFCPEntityIPAddress(v4, v6)
}

// localIPs is the address this client sends from as the IPv4 and IPv6 arguments go-pfcp's
// IE constructors take, one of them nil.
func (c *Client) localIPs() (v4, v6 net.IP) {
	if c.local.Is4() {
		return c.local.AsSlice(), nil
	}
	return nil, c.local.AsSlice()
}

// Release releases the PFCP association.
func (c *Client) Release(ctx context.Context) error {
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewAssociationReleaseRequest(seq, ie.NewNodeIDHeuristic(c.opts.NodeID))
	})
	if err != nil {
		return err
	}
	r, ok := resp.(*message.AssociationReleaseResponse)
	if !ok {
		return fmt.Errorf("pfcp client: association release answered with %s", resp.MessageTypeName())
	}
	return checkCause("association release", r.Cause)
}

// Heartbeat sends a Heartbeat Request and returns the UPF's Recovery Time Stamp.
func (c *Client) Heartbeat(ctx context.Context) (time.Time, error) {
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewHeartbeatRequest(seq, ie.NewRecoveryTimeStamp(c.recovery), nil)
	})
	if err != nil {
		return time.Time{}, err
	}
	r, ok := resp.(*message.HeartbeatResponse)
	if !ok || r.RecoveryTimeStamp == nil {
		return time.Time{}, fmt.Errorf("pfcp client: heartbeat answered with %s", resp.MessageTypeName())
	}
	return r.RecoveryTimeStamp.RecoveryTimeStamp()
}

func marshal(m message.Message) ([]byte, error) {
	b := make([]byte, m.MarshalLen())
	if err := m.MarshalTo(b); err != nil {
		return nil, fmt.Errorf("pfcp client: marshal %s: %w", m.MessageTypeName(), err)
	}
	return b, nil
}
