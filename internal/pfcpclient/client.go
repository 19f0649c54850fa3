// Package pfcpclient is a minimal SMF side of N4: it associates with a UPF, answers the
// UPF's heartbeats and sends its own requests, retransmitting each until answered. xupfctl,
// the demo, the end-to-end tests and the benchmarks use it to drive xupfd.
package pfcpclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
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
	Tries  int
	Logger *slog.Logger
}

// Client talks to one UPF.
type Client struct {
	opts     Options
	log      *slog.Logger
	conn     *net.UDPConn
	upf      netip.AddrPort
	recovery time.Time

	mu      sync.Mutex
	seq     uint32
	waiting map[uint32]chan message.Message
	done    chan struct{}
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
	if opts.NodeID == "" {
		opts.NodeID = conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap().String()
	}
	c := &Client{opts: opts, log: opts.Logger, conn: conn, upf: upf, recovery: time.Now().Truncate(time.Second),
		waiting: map[uint32]chan message.Message{}, done: make(chan struct{})}
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
		m, err := message.Parse(buf[:n])
		if err != nil {
			c.log.Warn("pfcp client: undecodable message", "err", err)
			continue
		}
		if hb, ok := m.(*message.HeartbeatRequest); ok {
			resp := message.NewHeartbeatResponse(hb.SequenceNumber, ie.NewRecoveryTimeStamp(c.recovery))
			if b, err := marshal(resp); err == nil {
				c.conn.Write(b)
			}
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
}

// CauseError is a request the UPF answered with a cause other than Request accepted.
type CauseError struct {
	Message string
	Cause   uint8
}

func (e *CauseError) Error() string {
	return fmt.Sprintf("pfcp client: %s: UPF answered cause %d", e.Message, e.Cause)
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
	resp, err := c.request(ctx, func(seq uint32) message.Message {
		return message.NewAssociationSetupRequest(seq, ie.NewNodeIDHeuristic(c.opts.NodeID),
			ie.NewRecoveryTimeStamp(c.recovery))
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
	return a, nil
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
