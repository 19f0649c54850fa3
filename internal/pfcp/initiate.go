package pfcp

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// initiate keeps this UPF associated with the SMF at smf: while there is no association
// with that address, it sends an Association Setup Request every HeartbeatInterval.
func (n *Node) initiate(ctx context.Context, conn *net.UDPConn, smf netip.AddrPort) {
	tick := time.NewTicker(n.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		if req := n.setupRequest(smf); req != nil {
			if _, err := conn.WriteToUDPAddrPort(req, smf); err != nil {
				n.log.Warn("pfcp: send association setup request", "smf", smf, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// setupRequest returns an Association Setup Request for smf, or nil when it is associated.
func (n *Node) setupRequest(smf netip.AddrPort) []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range n.assocs {
		if a.Address == smf {
			return nil
		}
	}
	for seq, to := range n.setups { // the earlier try went unanswered
		if to == smf {
			delete(n.setups, seq)
		}
	}
	n.seq = (n.seq + 1) & 0xffffff
	n.setups[n.seq] = smf
	return marshal(message.NewAssociationSetupRequest(n.seq, n.nodeIDIE(), ie.NewRecoveryTimeStamp(n.recovery),
		n.upFeatures()))
}

// setupAnswered records the association an SMF accepted in answer to our request.
func (n *Node) setupAnswered(peer netip.AddrPort, m *message.AssociationSetupResponse) {
	n.mu.Lock()
	smf, ok := n.setups[m.SequenceNumber]
	if ok && smf == peer {
		delete(n.setups, m.SequenceNumber)
	}
	n.mu.Unlock()
	if !ok || smf != peer {
		n.log.Debug("pfcp: association setup response to no request of ours", "peer", peer)
		return
	}
	if m.Cause == nil || m.NodeID == nil || m.RecoveryTimeStamp == nil {
		n.log.Warn("pfcp: association setup response without cause, node id or recovery time stamp", "smf", peer)
		return
	}
	cause, err := m.Cause.Cause()
	if err != nil || cause != ie.CauseRequestAccepted {
		n.log.Warn("pfcp: SMF refused the association; retrying", "smf", peer, "cause", cause)
		return
	}
	nodeID, err1 := peerNodeID(m.NodeID)
	recovery, err2 := m.RecoveryTimeStamp.RecoveryTimeStamp()
	if err1 != nil || err2 != nil {
		n.log.Warn("pfcp: association setup response with a bad node id or recovery time stamp", "smf", peer)
		return
	}
	// The answer may name any Node ID: it must not take another SMF's association.
	if why := n.admit(nodeID, peer.Addr()); why != "" {
		n.log.Warn("pfcp: association setup response refused", "smf", peer, "node_id", nodeID, "why", why)
		return
	}
	n.log.Info("pfcp: SMF accepted the association this UPF asked for", "smf", peer, "node_id", nodeID)
	n.associated(nodeID, peer, recovery, false)
}
