package pfcp

import (
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
)

// EndMarkerSender sends a GTP-U End Marker (TS 29.281 7.3.2) for tunnel teid toward peer
// from the local GTP-U address.
type EndMarkerSender interface {
	SendEndMarker(local, peer netip.Addr, teid uint32) error
}

// DefaultEndMarkerDelay is how long after the new FAR is installed the End Marker leaves on
// the old tunnel. A CPU that read the old FAR just before the switch finishes that packet
// within microseconds (XDP runs a packet to the end and flushes its redirects before the
// NAPI poll returns), so 10 ms leaves the End Marker behind every packet of the old tunnel
// by three orders of magnitude, and is still well inside a handover's interruption.
const DefaultEndMarkerDelay = 10 * time.Millisecond

// pfcpSMReqSNDEM is the SNDEM flag of PFCPSMReq-Flags (TS 29.244 8.2.59): send End Marker
// packets on the old tunnel.
const pfcpSMReqSNDEM = 0x02

// sendEndMarkers sends, after EndMarkerDelay, an End Marker on the old tunnel of each FAR
// whose Update FAR asked for one (SNDEM in its Update Forwarding Parameters, TS 29.244
// 7.5.4.3) and whose tunnel the modification changed from old to s. It does not wait.
func (n *Node) sendEndMarkers(old, s *Session, updates []*ie.IE) {
	if n.opts.EndMarkers == nil {
		return
	}
	local := n.localAddr(old)
	for _, g := range updates {
		id, c, err := ruleID(g, ie.FARID, "Update FAR", (*ie.IE).FARID)
		if err != nil || !askedForEndMarker(c) {
			continue
		}
		before, after := old.FARs[id], s.FARs[id]
		if before == nil || after == nil {
			continue
		}
		t, ok := before.tunnel()
		if now, _ := after.tunnel(); !ok || now == t {
			continue
		}
		peer, teid := t.peer, t.teid
		n.log.Debug("pfcp: end marker on the old tunnel", "seid", s.SEID, "far", id, "peer", peer, "teid", teid)
		time.AfterFunc(n.opts.EndMarkerDelay, func() {
			if err := n.opts.EndMarkers.SendEndMarker(local, peer, teid); err != nil {
				n.log.Warn("pfcp: send end marker", "seid", s.SEID, "far", id, "peer", peer, "teid", teid, "err", err)
			}
		})
	}
}

// askedForEndMarker reports whether an Update FAR's children carry SNDEM.
func askedForEndMarker(c children) bool {
	fp := c.first(ie.UpdateForwardingParameters)
	if fp == nil {
		return false
	}
	flags := childrenOf(fp).first(ie.PFCPSMReqFlags)
	return flags != nil && len(flags.Payload) > 0 && flags.Payload[0]&pfcpSMReqSNDEM != 0
}
