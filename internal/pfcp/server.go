package pfcp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
	"golang.org/x/net/ipv4"

	"github.com/xupf/xupf/internal/state"
)

// maxMessage is the largest PFCP message read: a UDP datagram.
const maxMessage = 65535

// maxUnsent bounds the responses waiting for the state file: past it, Serve reads no more
// requests until a commit lets some go.
const maxUnsent = 8192

// Serve answers PFCP messages arriving on conn and sends heartbeats to the associated peers,
// until ctx is done; then it closes conn. With a state file (Options.Store), a response
// leaves only once the changes made so far are durable: while one commit is synced, Serve
// goes on handling requests, whose changes the next commit takes together.
func (n *Node) Serve(ctx context.Context, conn *net.UDPConn) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	n.conn.Store(conn)
	defer n.conn.Store(nil)
	go n.heartbeats(ctx, conn)
	go n.pollUsage(ctx)
	for _, smf := range n.opts.SMFPeers {
		go n.initiate(ctx, conn, smf)
	}
	write := func(r response) {
		if _, err := conn.WriteToUDPAddrPort(r.msg, r.peer); err != nil {
			n.log.Warn("pfcp: send response", "peer", r.peer, "err", err)
		}
	}
	send := write
	if st := n.opts.Store; st != nil {
		unsent := make(chan response, maxUnsent)
		defer close(unsent)
		go n.respond(conn, st, unsent)
		send = func(r response) {
			r.after = st.Queued()
			unsent <- r
		}
	}
	buf := make([]byte, maxMessage)
	for {
		size, peer, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if resp := n.Handle(peer, buf[:size]); resp != nil {
			send(response{peer: peer, msg: resp})
		}
	}
}

// response is an answer to send once the state file holds every change up to after.
type response struct {
	peer  netip.AddrPort
	msg   []byte
	after state.Ticket
}

// maxBatch bounds the responses sent in one system call.
const maxBatch = 64

// respond sends the responses of unsent, in order, each once the state file holds its change,
// until unsent is closed. The responses a commit lets go leave together, up to maxBatch in
// one sendmmsg: a commit lets tens go at once, and a system call each was 7 % of xupfd's CPU.
func (n *Node) respond(conn *net.UDPConn, st *state.Store, unsent <-chan response) {
	out := newBatchWriter(conn, n.log)
	var next []response // at most one, received but not yet durable
	for {
		var r response
		if len(next) > 0 {
			r, next = next[0], next[:0]
		} else {
			var ok bool
			if r, ok = <-unsent; !ok {
				return
			}
		}
		if err := st.Wait(r.after); err != nil {
			n.log.Warn("pfcp: response not sent: its change is not saved", "peer", r.peer, "err", err)
			continue
		}
		out.add(r)
		durable := st.Durable()
	more:
		for out.len() < maxBatch {
			select {
			case r, ok := <-unsent:
				if !ok {
					break more // the next receive returns too
				}
				if r.after > durable {
					next = append(next, r)
					break more
				}
				out.add(r)
			default:
				break more
			}
		}
		out.flush()
	}
}

// batchWriter sends datagrams several to a system call (sendmmsg).
type batchWriter struct {
	conn  *ipv4.PacketConn // IPv4 peers go through an IPv6 socket too (Linux's udpv6_sendmsg)
	log   *slog.Logger
	msgs  []ipv4.Message
	peers []netip.AddrPort
}

func newBatchWriter(conn *net.UDPConn, log *slog.Logger) *batchWriter {
	return &batchWriter{conn: ipv4.NewPacketConn(conn), log: log}
}

func (w *batchWriter) len() int { return len(w.msgs) }

func (w *batchWriter) add(r response) {
	w.msgs = append(w.msgs, ipv4.Message{Buffers: [][]byte{r.msg}, Addr: net.UDPAddrFromAddrPort(r.peer)})
	w.peers = append(w.peers, r.peer)
}

// flush sends what was added, in order. A datagram the kernel refuses is logged and skipped:
// the others still go.
func (w *batchWriter) flush() {
	for sent := 0; sent < len(w.msgs); {
		k, err := w.conn.WriteBatch(w.msgs[sent:], 0)
		if err != nil {
			w.log.Warn("pfcp: send response", "peer", w.peers[sent], "err", err)
			k = 1
		}
		sent += k
	}
	clear(w.msgs)
	w.msgs, w.peers = w.msgs[:0], w.peers[:0]
}

// heartbeats sends every associated peer a Heartbeat Request each interval. A peer that has
// not answered the previous one misses a beat; after HeartbeatRetries misses in a row it is
// declared lost and its association removed.
func (n *Node) heartbeats(ctx context.Context, conn *net.UDPConn) {
	tick := time.NewTicker(n.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		heartbeats, lost := n.beat()
		n.peerLost(lost)
		for _, hb := range heartbeats {
			if _, err := conn.WriteToUDPAddrPort(hb.msg, hb.peer); err != nil {
				n.log.Warn("pfcp: send heartbeat", "peer", hb.peer, "err", err)
			}
		}
	}
}

type heartbeat struct {
	peer netip.AddrPort
	msg  []byte
}

// beat counts the missed heartbeats, drops the lost peers and returns the heartbeats to send
// now and the Node IDs of the peers lost.
func (n *Node) beat() (out []heartbeat, lost []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, a := range n.assocs {
		if _, waiting := n.pending[id]; waiting {
			a.Missed++
			if a.Missed >= n.opts.HeartbeatRetries {
				n.log.Warn("pfcp: peer lost: heartbeats unanswered; association removed",
					"node_id", id, "peer", a.Address, "missed", a.Missed)
				delete(n.assocs, id)
				delete(n.pending, id)
				n.saveAssociation(id, nil)
				lost = append(lost, id)
				continue
			}
		}
		n.seq = (n.seq + 1) & 0xffffff // 24-bit sequence numbers
		n.pending[id] = n.seq
		out = append(out, heartbeat{a.Address, marshal(message.NewHeartbeatRequest(n.seq,
			ie.NewRecoveryTimeStamp(n.recovery), nil))})
	}
	return out, lost
}

// heardFrom counts a Heartbeat Request from addr as a sign of life of the associations addr
// speaks for, as an answer to ours would be: a peer that sends heartbeats but does not answer
// ours (pfcpsim, for one) is alive all the same.
func (n *Node) heardFrom(addr netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, a := range n.assocs {
		if n.mayActFor(id, a, addr) {
			a.Missed = 0
			delete(n.pending, id)
		}
	}
}

// heartbeatAnswered clears the missed beats of the peer whose heartbeat m answers, and notes
// a restart of the peer.
func (n *Node) heartbeatAnswered(peer netip.AddrPort, m *message.HeartbeatResponse) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, seq := range n.pending {
		a := n.assocs[id]
		if seq != m.SequenceNumber || a == nil || a.Address != peer {
			continue
		}
		delete(n.pending, id)
		a.Missed = 0
		if m.RecoveryTimeStamp != nil {
			if ts, err := m.RecoveryTimeStamp.RecoveryTimeStamp(); err == nil && !ts.Equal(a.Recovery) {
				n.log.Warn("pfcp: peer restarted (new Recovery Time Stamp in a heartbeat)", "node_id", id, "peer", peer)
				a.Recovery = ts
				n.saveAssociation(id, a)
			}
		}
		return
	}
}

// peerLost applies the lost-peer policy to the sessions of the peers lost, and forgets the
// peers left without sessions.
func (n *Node) peerLost(nodeIDs []string) {
	for _, id := range nodeIDs {
		if n.opts.DeleteSessionsOfLostPeers {
			n.deletePeerSessions(id, "peer lost (pfcp_lost_peer_sessions: delete)", true)
		}
		n.forgetIdlePeer(id)
	}
}
