package pfcp

import (
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/rules"
)

// BufferController keeps the packets of the FARs that buffer (internal/buffer): the node
// tells it, after every change to a session, what each PDR's FAR and BAR say.
type BufferController interface {
	Set(owner uint64, policies map[buffer.Key]buffer.Policy)
	// Drop discards what the session holds (the SMF's DROBU), Remove that and its policies.
	Drop(owner uint64)
	Remove(owner uint64)
	// Dropped is what was discarded for each downlink PDR of the session so far.
	Dropped(owner uint64) map[buffer.Key]rules.Counts
}

// srrspDROBU is the DROBU flag of PFCPSRRsp-Flags (TS 29.244 8.2.60): drop the packets
// buffered for the session.
const srrspDROBU = 0x01

// setBuffering tells the buffer what s's FARs and BARs say now; Node.smu is held.
func (n *Node) setBuffering(s *Session) {
	if n.opts.Buffers != nil {
		n.opts.Buffers.Set(s.SEID, bufferPolicies(s))
	}
}

// bufferModes is what a FAR's action does with the packets it buffered before: a FAR that
// drops discards them (and the one packet a DROP FAR with NOCP hands over to be notified of).
var bufferModes = map[rules.Action]buffer.Mode{rules.Forward: buffer.Flush, rules.Buffer: buffer.Hold,
	rules.Drop: buffer.Discard, rules.DropNotify: buffer.Discard}

// notificationDelayUnit is the unit of the Downlink Data Notification Delay IE (TS 29.244
// 8.2.28).
const notificationDelayUnit = 50 * time.Millisecond

// bufferPolicies is what each PDR of s does with its buffered packets: hold them (BUFF), send
// them on (FORW) or discard them; NOCP on a downlink PDR asks for a Downlink Data Report. The
// FAR's BAR bounds the count (its Suggested Buffering Packets Count, or the DL Buffering
// Suggested Packet Count of the SMF's last Session Report Response), delays the report
// (Downlink Data Notification Delay) and bounds how long packets are held (DL Buffering
// Duration: 0 holds none); while that duration runs, no other report goes.
func bufferPolicies(s *Session) map[buffer.Key]buffer.Policy {
	out := make(map[buffer.Key]buffer.Policy, len(s.PDRs))
	for id, p := range s.PDRs {
		f := s.FARs[p.FAR]
		if f == nil {
			continue // check refuses this; a missing policy discards
		}
		pol := buffer.Policy{Mode: bufferModes[f.action()], Epoch: f.epoch}
		pol.Notify = f.Apply&ApplyNotifyCP != 0 && p.FTEID == nil
		if f.BARID != nil {
			if b := s.BARs[*f.BARID]; b != nil {
				pol.NotifyDelay = time.Duration(b.NotificationDelay) * notificationDelayUnit
				pol.MaxPackets = int(b.SuggestedPackets)
				if b.BufferingPackets != nil {
					pol.MaxPackets = int(*b.BufferingPackets)
					if pol.MaxPackets == 0 {
						pol.Duration = -1
					}
				}
				pol.NotifyAgain = b.BufferingUntil
				if d := b.BufferingDuration; d != nil && *d != InfiniteBuffering {
					pol.Duration = *d
					if *d == 0 {
						pol.Duration = -1
					}
				}
			}
		}
		out[buffer.Key{Owner: s.SEID, Uplink: p.FTEID != nil, PDR: uint32(id)}] = pol
	}
	return out
}

// DownlinkData sends the SMF of the session k names a Session Report Request with a Downlink
// Data Report (TS 29.244 7.5.8.2) for the PDR, with the QFI it marks packets with when it has
// one (Downlink Data Service Information): the buffer calls it for the first packet a NOCP
// FAR buffers or discards.
func (n *Node) DownlinkData(k buffer.Key) {
	n.smu.Lock()
	s := n.ss.byID[k.Owner]
	var p *PDR
	var qfi uint8
	if s != nil {
		if p = s.PDRs[uint16(k.PDR)]; p != nil {
			qfi = s.markingQFI(p)
		}
	}
	n.smu.Unlock()
	if p == nil {
		return // gone meanwhile
	}
	if err := n.Report(k.Owner, ReportDownlinkData, downlinkDataReport(uint16(k.PDR), qfi)); err != nil {
		n.log.Warn("pfcp: downlink data not reported", "seid", k.Owner, "pdr", k.PDR, "err", err)
		return
	}
	n.log.Debug("pfcp: downlink data reported to the SMF", "seid", k.Owner, "pdr", k.PDR, "qfi", qfi)
}

// downlinkDataReport is the Downlink Data Report IE for PDR pdr, with its QFI unless 0.
func downlinkDataReport(pdr uint16, qfi uint8) *ie.IE {
	ies := []*ie.IE{ie.NewPDRID(pdr)}
	if qfi != 0 {
		ies = append(ies, ie.NewDownlinkDataServiceInformation(false, true, 0, qfi))
	}
	return ie.NewDownlinkDataReport(ies...)
}

// newEpochs gives the FARs the changes create or update a new epoch: the buffer notifies
// once per epoch of a FAR. Node.smu is held.
func (n *Node) newEpochs(s *Session, c ruleChanges) {
	for _, l := range [][]*ie.IE{c.createFAR, c.updateFAR} {
		for _, g := range l {
			if id, _, err := ruleID(g, ie.FARID, "FAR", (*ie.IE).FARID); err == nil && s.FARs[id] != nil {
				n.ss.epoch++
				s.FARs[id].epoch = n.ss.epoch
			}
		}
	}
}
