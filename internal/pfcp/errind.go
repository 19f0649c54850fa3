package pfcp

import (
	"net/netip"

	"github.com/wmnsk/go-pfcp/ie"
)

// tunnel is a GTP-U tunnel a FAR sends into: the peer's address and TEID.
type tunnel struct {
	peer netip.Addr
	teid uint32
}

// tunnel is the tunnel f forwards into, if it does: a FAR that buffers or drops sends
// nothing, and its outer header may be a placeholder (TEID 0, no address).
func (f *FAR) tunnel() (tunnel, bool) {
	if o := f.OHC; f.Apply&ApplyForward != 0 && o != nil && o.TEID != 0 && o.Peer.IsValid() && !o.Peer.IsUnspecified() {
		return tunnel{o.Peer, o.TEID}, true
	}
	return tunnel{}, false
}

// tunnels are the tunnels s's FARs forward into.
func (s *Session) tunnels() []tunnel {
	var out []tunnel
	for _, f := range s.FARs {
		if t, ok := f.tunnel(); ok {
			out = append(out, t)
		}
	}
	return out
}

// setTunnels indexes the tunnels of s (nil: none) in place of those of old (nil: none), the
// same session before; Node.smu is held.
func (ss *sessionState) setTunnels(old, s *Session) {
	if old != nil {
		for _, t := range old.tunnels() {
			if ss.byTunnel[t] == old.SEID {
				delete(ss.byTunnel, t)
			}
		}
	}
	if s != nil {
		for _, t := range s.tunnels() {
			ss.byTunnel[t] = s.SEID
		}
	}
}

// ErrorIndication reports a GTP-U Error Indication (TS 29.281 7.3.1) to the SMF of the
// session whose FAR sends into the tunnel it names, TEID teid at peer, as a Session Report
// Request with an Error Indication Report (TS 29.244 5.10). It returns false when no
// session has that tunnel: the Error Indication is then not ours to report.
func (n *Node) ErrorIndication(teid uint32, peer netip.Addr) bool {
	n.smu.Lock()
	seid, ok := n.ss.byTunnel[tunnel{peer.Unmap(), teid}]
	n.smu.Unlock()
	if !ok {
		return false
	}
	remote := ie.NewFTEID(0x01, teid, peer.Unmap().AsSlice(), nil, 0) // V4: the datapath's tunnels are IPv4
	if err := n.Report(seid, ReportErrorIndication, ie.NewErrorIndicationReport(remote)); err != nil {
		n.log.Warn("pfcp: error indication not reported", "seid", seid, "teid", teid, "peer", peer, "err", err)
	} else {
		n.log.Info("pfcp: error indication reported to the SMF", "seid", seid, "teid", teid, "peer", peer)
	}
	return true
}
