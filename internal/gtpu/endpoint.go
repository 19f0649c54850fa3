package gtpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/ratelimit"
)

// Endpoint is xupfd's GTP-U signalling socket on each GTP-U address (UDP port 2152). The
// datapath hands the kernel the Error Indications that reach a GTP-U address: they are read
// here. End Markers, and the Error Indications that answer G-PDUs to unknown TEIDs, leave from
// here.
type Endpoint struct {
	log    *slog.Logger
	conns  map[netip.Addr]*net.UDPConn
	counts [numCounters]atomic.Uint64
	rate   float64 // Error Indications a second to one peer; 0: none

	mu    sync.Mutex
	peers map[netip.Addr]*ratelimit.Bucket // each peer's Error Indications
}

// maxPeers bounds the peers whose Error Indication rate is tracked: past it the record starts
// over, which at worst lets a peer have one more burst.
const maxPeers = 65536

// counter is what the endpoint counts.
type counter int

const (
	errorIndicationReported  counter = iota // received for one of the sessions' tunnels: reported to its SMF
	errorIndicationUnknown                  // received for no tunnel of a session: dropped
	errorIndicationMalformed                // received and undecodable: dropped
	otherDropped                            // any other datagram to the socket: dropped
	endMarkerSent                           // End Markers sent
	errorIndicationSent                     // sent to answer a G-PDU to an unknown TEID
	errorIndicationLimited                  // not sent: over the peer's rate
	numCounters
)

var counterNames = [numCounters]string{"error_indication_reported", "error_indication_unknown",
	"error_indication_malformed", "other_dropped", "end_marker_sent", "error_indication_sent",
	"error_indication_rate_limited"}

// Listen binds a socket on port 2152 of each address. The addresses need not be up yet
// (IP_FREEBIND): an address added to its interface later works from then on. errorIndications
// is how many Error Indications a second one peer may be sent (0: none).
func Listen(addrs []netip.Addr, errorIndications int, log *slog.Logger) (*Endpoint, error) {
	e := &Endpoint{log: log, conns: map[netip.Addr]*net.UDPConn{}, rate: float64(errorIndications),
		peers: map[netip.Addr]*ratelimit.Bucket{}}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
		})
		return errors.Join(err, serr)
	}}
	for _, a := range addrs {
		pc, err := lc.ListenPacket(context.Background(), "udp4", netip.AddrPortFrom(a, Port).String())
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("gtp-u signalling socket on %s:%d: %w; free the port (another GTP-U endpoint?)",
				a, Port, err)
		}
		e.conns[a] = pc.(*net.UDPConn)
	}
	return e, nil
}

// Close closes the sockets.
func (e *Endpoint) Close() {
	for _, c := range e.conns {
		c.Close()
	}
}

// Counters are the counts of what the endpoint received and sent, by name.
func (e *Endpoint) Counters() map[string]uint64 {
	out := make(map[string]uint64, numCounters)
	for c := range numCounters {
		out[counterNames[c]] = e.counts[c].Load()
	}
	return out
}

// Serve reads every socket until ctx is done, then closes them. Each Error Indication
// received goes to report, which says whether it named one of the sessions' tunnels.
func (e *Endpoint) Serve(ctx context.Context, report func(from netip.AddrPort, ei ErrorIndication) bool) {
	stop := context.AfterFunc(ctx, e.Close)
	defer stop()
	var wg sync.WaitGroup
	for _, c := range e.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.read(c, report)
		}()
	}
	wg.Wait()
}

func (e *Endpoint) read(c *net.UDPConn, report func(netip.AddrPort, ErrorIndication) bool) {
	buf := make([]byte, 65535)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an ICMP error of an earlier send
		}
		if n < 2 || buf[1] != TypeErrorIndication {
			e.counts[otherDropped].Add(1)
			continue
		}
		ei, err := ParseErrorIndication(buf[:n])
		switch {
		case err != nil:
			e.counts[errorIndicationMalformed].Add(1)
			e.log.Debug("gtp-u: undecodable error indication", "from", from, "err", err)
		case report(from, ei):
			e.counts[errorIndicationReported].Add(1)
		default:
			e.counts[errorIndicationUnknown].Add(1)
			e.log.Debug("gtp-u: error indication for no tunnel of a session", "from", from, "teid", ei.TEID, "peer", ei.Peer)
		}
	}
}

// SendEndMarker sends an End Marker for the tunnel teid toward peer from the GTP-U address
// local.
func (e *Endpoint) SendEndMarker(local, peer netip.Addr, teid uint32) error {
	c := e.conns[local]
	if c == nil {
		return fmt.Errorf("end marker: %s is not a GTP-U address of this UPF", local)
	}
	if _, err := c.WriteToUDPAddrPort(EndMarker(teid), netip.AddrPortFrom(peer, Port)); err != nil {
		return fmt.Errorf("end marker to %s: %w", peer, err)
	}
	e.counts[endMarkerSent].Add(1)
	return nil
}

// AnswerUnknownTEID sends peer an Error Indication about teid (TS 29.281 7.3.1) from the
// GTP-U address local, the one its G-PDU was sent to, unless peer has had its rate of them.
// It goes to the GTP-U port 2152 of peer.
func (e *Endpoint) AnswerUnknownTEID(local, peer netip.Addr, teid uint32) {
	c := e.conns[local]
	if c == nil || e.rate == 0 {
		return
	}
	e.mu.Lock()
	b := e.peers[peer]
	if b == nil {
		if len(e.peers) >= maxPeers {
			clear(e.peers)
		}
		b = &ratelimit.Bucket{Rate: e.rate, Burst: e.rate}
		e.peers[peer] = b
	}
	ok := b.Take(time.Now())
	e.mu.Unlock()
	if !ok {
		e.counts[errorIndicationLimited].Add(1)
		return
	}
	msg := ErrorIndication{TEID: teid, Peer: local}.Marshal()
	if _, err := c.WriteToUDPAddrPort(msg, netip.AddrPortFrom(peer, Port)); err != nil {
		e.log.Debug("gtp-u: send error indication", "peer", peer, "teid", teid, "err", err)
		return
	}
	e.counts[errorIndicationSent].Add(1)
}
