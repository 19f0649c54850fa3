package pfcp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/usage"
)

// Datapath is what session management needs from the datapath: every session's rule sets
// installed all or nothing under its SEID, and its counters; and which addresses are the
// UPF's own (on any interface), which no session may claim as a UE's.
type Datapath interface {
	Install(owner uint64, sets []rules.RuleSet) error
	Uninstall(owner uint64) ([]rules.Usage, error)
	Usage(owner uint64) ([]rules.Usage, error)
	QuotaUsed(owner uint64) ([]rules.QuotaUse, error)
	KeyOwner(k rules.Key) (uint64, bool)
	// TEIDCacheable reports whether teid would find itself in the datapath's direct cache
	// (a slot no other TEID holds): the TEIDs this UPF chooses prefer it.
	TEIDCacheable(teid uint32) bool
	IsLocal(netip.Addr) bool
}

// FirstSEID is the first SEID this UPF gives a PFCP session. The datapath names static
// sessions (configuration) by their ids, which stay below it.
const FirstSEID = 1 << 32

// sessionState is the sessions of this node; Node.smu guards it.
type sessionState struct {
	byID    map[uint64]*Session
	bySMF   map[smfSEID]uint64
	perPeer map[string]int // sessions per peer Node ID
	// byTunnel names the session of each tunnel its FARs send into, for the Error
	// Indications peers send about them.
	byTunnel map[tunnel]uint64
	// usage is each session's usage reporting state (its URRs' measurements); watched holds
	// at least those of them Watching, the only ones the usage poll samples: a scan of every
	// session each tick held smu, which each request needs, for hundreds of milliseconds at
	// 100,000 sessions.
	usage    map[uint64]*usage.Session
	watched  map[uint64]*usage.Session
	nextSEID uint64
	epoch    uint64 // of the last FAR created or updated (newEpochs)
	alloc    *allocator
}

// setUsage gives us, the usage state of s, the URRs of s and keeps watched up to date: only
// a change of URRs makes a session Watching.
func (ss *sessionState) setUsage(s *Session, us *usage.Session, now time.Time) {
	urrs, pdrs := usageRules(s)
	us.Set(urrs, pdrs, now)
	if us.Watching() {
		ss.watched[s.SEID] = us
	} else {
		delete(ss.watched, s.SEID)
	}
}

// smfSEID names a session from the SMF's side.
type smfSEID struct {
	peer string
	seid uint64
}

// Sessions returns copies of every PFCP session, sorted by SEID.
func (n *Node) Sessions() []Session {
	n.smu.Lock()
	defer n.smu.Unlock()
	out := make([]Session, 0, len(n.ss.byID))
	for _, id := range sortedKeys(n.ss.byID) {
		out = append(out, *n.ss.byID[id].clone())
	}
	return out
}

// SessionCount is how many PFCP sessions there are.
func (n *Node) SessionCount() int {
	n.smu.Lock()
	defer n.smu.Unlock()
	return len(n.ss.byID)
}

// Session returns a copy of one PFCP session.
func (n *Node) Session(seid uint64) (Session, bool) {
	n.smu.Lock()
	defer n.smu.Unlock()
	s, ok := n.ss.byID[seid]
	if !ok {
		return Session{}, false
	}
	return *s.clone(), true
}

// Usage returns what a session's PDRs have counted.
func (n *Node) Usage(seid uint64) ([]rules.Usage, error) {
	return n.opts.Datapath.Usage(seid)
}

// sessionEstablishment creates a session (TS 29.244 7.5.2): everything in the request is
// applied, or nothing is. req is the request as received.
func (n *Node) sessionEstablishment(from netip.AddrPort, m *message.SessionEstablishmentRequest, req []byte) []byte {
	var cpSEID uint64
	respond := func(ies ...*ie.IE) []byte {
		return marshal(message.NewSessionEstablishmentResponse(0, 0, cpSEID, m.SequenceNumber, 0,
			append([]*ie.IE{n.nodeIDIE()}, ies...)...))
	}
	refuse := func(err error) []byte {
		re := asRequestError(err)
		n.log.Warn("pfcp: session establishment refused", "cp_seid", cpSEID, "cause", re.cause, "err", re.msg)
		return respond(re.ies()...)
	}
	if m.NodeID == nil {
		return respond(missing(ie.NodeID)...)
	}
	peer, ok := n.association(m.NodeID, from)
	if !ok {
		return respond(ie.NewCause(ie.CauseNoEstablishedPFCPAssociation))
	}
	if m.CPFSEID == nil {
		return respond(missing(ie.FSEID)...)
	}
	fseid, err := m.CPFSEID.FSEID()
	if err != nil {
		return refuse(incorrectIE(ie.FSEID, "establishment", err))
	}
	cpSEID = fseid.SEID
	if len(m.CreatePDR) == 0 {
		return respond(missing(ie.CreatePDR)...)
	}
	if len(m.CreateFAR) == 0 {
		return respond(missing(ie.CreateFAR)...)
	}
	cpAddr, _ := netip.AddrFromSlice(fseid.IPv4Address.To4())

	n.smu.Lock()
	defer n.smu.Unlock()
	digest := establishmentDigest(req)
	if seid, dup := n.ss.bySMF[smfSEID{peer, cpSEID}]; dup {
		if s := n.ss.byID[seid]; s.request == digest {
			n.log.Info("pfcp: establishment retransmitted across a restart answered again", "seid", seid, "cp_seid", cpSEID)
			return respond(established(s, n.opts.Address)...)
		}
		return refuse(&requestError{cause: ie.CauseRequestRejected,
			msg: fmt.Sprintf("the SMF's SEID 0x%x already names session 0x%x", cpSEID, seid)})
	}
	if err := n.sessionRoom(peer); err != nil {
		return refuse(err)
	}
	s := &Session{SEID: n.newSEID(), CPSEID: cpSEID, CPAddress: cpAddr, Peer: peer, Established: time.Now(),
		PDRs: map[uint16]*PDR{}, FARs: map[uint32]*FAR{}, QERs: map[uint32]*QER{}, URRs: map[uint32]*URR{},
		BARs: map[uint8]*BAR{}, request: digest}
	changes := ruleChanges{createPDR: m.CreatePDR, createFAR: m.CreateFAR, createQER: m.CreateQER,
		createURR: m.CreateURR}
	if m.CreateBAR != nil {
		changes.createBAR = []*ie.IE{m.CreateBAR}
	}
	if err := n.apply(nil, s, changes); err != nil {
		return refuse(err)
	}
	n.add(s, nil)
	n.saveSession(s)
	n.log.Info("pfcp: session established", "seid", s.SEID, "cp_seid", cpSEID, "peer", peer, "pdrs", len(s.PDRs))
	return respond(established(s, n.opts.Address)...)
}

// established are the IEs of the answer that accepts s's establishment: the UP F-SEID at
// address and what this UPF chose.
func established(s *Session, address netip.Addr) []*ie.IE {
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), ie.NewFSEID(s.SEID, address.AsSlice(), nil)}
	return append(ies, createdPDRs(nil, s)...)
}

// establishmentDigest is a digest of an establishment request as received, the same in
// every run (a retransmission is the same bytes, sequence number included).
func establishmentDigest(req []byte) uint64 {
	h := fnv.New64a()
	h.Write(req)
	return h.Sum64()
}

// add indexes a new session s, installed already, and starts its usage reporting from the
// counters in counted (what its PDRs counted before: a restored session's; nil for none),
// which are not reported again; n.smu is held.
func (n *Node) add(s *Session, counted []rules.Usage) {
	n.ss.byID[s.SEID] = s
	n.ss.setTunnels(nil, s)
	us, now := usage.NewSession(), time.Now()
	us.Observe(counted, now) // before any URR is set: the baseline, counted toward none
	n.ss.setUsage(s, us, now)
	n.ss.usage[s.SEID] = us
	n.setBuffering(s)
	n.ss.bySMF[smfSEID{s.Peer, s.CPSEID}] = s.SEID
	n.ss.perPeer[s.Peer]++
}

// sessionRoom refuses a new session of peer with "No resources available" (TS 29.244 7.5.3)
// when the sessions, or the peer's, are at their limit. n.smu is held.
func (n *Node) sessionRoom(peer string) error {
	switch {
	case n.opts.MaxSessions != 0 && len(n.ss.byID) >= max(n.opts.MaxSessions, 0):
		return &requestError{cause: ie.CauseNoResourcesAvailable,
			msg: fmt.Sprintf("%d PFCP sessions already: the datapath is full (limits.max_sessions)", len(n.ss.byID))}
	case n.opts.MaxSessionsPerAssociation > 0 && n.ss.perPeer[peer] >= n.opts.MaxSessionsPerAssociation:
		return &requestError{cause: ie.CauseNoResourcesAvailable,
			msg: fmt.Sprintf("the SMF has %d sessions already (limits.max_sessions_per_association)", n.ss.perPeer[peer])}
	}
	return nil
}

// ruleChanges are the rule IEs of one request.
type ruleChanges struct {
	removePDR, removeFAR, removeQER, removeURR, removeBAR []*ie.IE
	createPDR, createFAR, createQER, createURR, createBAR []*ie.IE
	updatePDR, updateFAR, updateQER, updateURR, updateBAR []*ie.IE
}

// apply turns old (nil for a new session) into s by the changes, allocates what s asks this
// UPF to choose, and installs s in the datapath. On error, s is to be thrown away and
// everything else is as before.
func (n *Node) apply(old, s *Session, c ruleChanges) error {
	if err := applyRules(s, c); err != nil {
		return err
	}
	n.newEpochs(s, c)
	// Checked before anything is allocated: a refused request takes no TEID or address.
	if err := n.check(s); err != nil {
		return err
	}
	// Released on every way out but success, a panic that Handle recovers from included.
	installed := false
	defer func() {
		if !installed {
			n.ss.alloc.release(s, old)
		}
	}()
	if err := n.ss.alloc.assign(s, n.localAddr(s)); err != nil {
		return err
	}
	if err := n.opts.Datapath.Install(s.SEID, n.ruleSets(s)); err != nil {
		cause := uint8(ie.CauseRuleCreationModificationFailure)
		if errors.Is(err, rules.ErrNoResources) {
			cause = ie.CauseNoResourcesAvailable
		}
		return &requestError{cause: cause, msg: fmt.Sprintf("datapath: %v", err)}
	}
	installed = true
	if old != nil {
		n.ss.alloc.release(old, s)
	}
	return nil
}

// applyRules applies the removals, then the creations, then the updates, so that a request
// may replace a rule and may reference rules it creates.
func applyRules(s *Session, c ruleChanges) error {
	steps := []func() error{
		func() error {
			return remove(c.removePDR, ie.PDRID, "Remove PDR", (*ie.IE).PDRID, s.PDRs, ie.RuleIDTypePDR)
		},
		func() error {
			return remove(c.removeFAR, ie.FARID, "Remove FAR", (*ie.IE).FARID, s.FARs, ie.RuleIDTypeFAR)
		},
		func() error {
			return remove(c.removeQER, ie.QERID, "Remove QER", (*ie.IE).QERID, s.QERs, ie.RuleIDTypeQER)
		},
		func() error {
			return remove(c.removeURR, ie.URRID, "Remove URR", (*ie.IE).URRID, s.URRs, ie.RuleIDTypeURR)
		},
		func() error {
			return remove(c.removeBAR, ie.BARID, "Remove BAR", (*ie.IE).BARID, s.BARs, ie.RuleIDTypeBAR)
		},
		func() error {
			return upsert(c.createFAR, true, ie.FARID, "Create FAR", (*ie.IE).FARID, s.FARs, ie.RuleIDTypeFAR,
				func(id uint32) *FAR { return &FAR{ID: id} }, decodeFAR)
		},
		func() error {
			return upsert(c.createQER, true, ie.QERID, "Create QER", (*ie.IE).QERID, s.QERs, ie.RuleIDTypeQER,
				func(id uint32) *QER { return &QER{ID: id} }, decodeQER)
		},
		func() error {
			return upsert(c.createURR, true, ie.URRID, "Create URR", (*ie.IE).URRID, s.URRs, ie.RuleIDTypeURR,
				func(id uint32) *URR { return &URR{ID: id} }, decodeURR)
		},
		func() error {
			return upsert(c.createBAR, true, ie.BARID, "Create BAR", (*ie.IE).BARID, s.BARs, ie.RuleIDTypeBAR,
				func(id uint8) *BAR { return &BAR{ID: id} }, barDecoder)
		},
		func() error {
			return upsert(c.createPDR, true, ie.PDRID, "Create PDR", (*ie.IE).PDRID, s.PDRs, ie.RuleIDTypePDR,
				func(id uint16) *PDR { return &PDR{ID: id} }, decodePDR)
		},
		func() error {
			return upsert(c.updatePDR, false, ie.PDRID, "Update PDR", (*ie.IE).PDRID, s.PDRs, ie.RuleIDTypePDR,
				nil, decodePDR)
		},
		func() error {
			return upsert(c.updateFAR, false, ie.FARID, "Update FAR", (*ie.IE).FARID, s.FARs, ie.RuleIDTypeFAR,
				nil, decodeFAR)
		},
		func() error {
			return upsert(c.updateQER, false, ie.QERID, "Update QER", (*ie.IE).QERID, s.QERs, ie.RuleIDTypeQER,
				nil, decodeQER)
		},
		func() error {
			return upsert(c.updateURR, false, ie.URRID, "Update URR", (*ie.IE).URRID, s.URRs, ie.RuleIDTypeURR,
				nil, decodeURR)
		},
		func() error {
			return upsert(c.updateBAR, false, ie.BARID, "Update BAR", (*ie.IE).BARID, s.BARs, ie.RuleIDTypeBAR,
				nil, barDecoder)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func barDecoder(c children, b *BAR, _ bool) error { return decodeBAR(c, b) }

type ruleIDType interface{ ~uint8 | ~uint16 | ~uint32 }

// remove deletes the rules the Remove IEs name; an unknown id fails the request.
func remove[K ruleIDType, V any](l []*ie.IE, idType uint16, what string, idOf func(*ie.IE) (K, error),
	m map[K]*V, ruleType uint8) error {
	for _, g := range l {
		id, _, err := ruleID(g, idType, what, idOf)
		if err != nil {
			return err
		}
		if _, ok := m[id]; !ok {
			return ruleFailure(ruleType, uint32(id), "%s: rule %d does not exist", what, id)
		}
		delete(m, id)
	}
	return nil
}

// upsert applies Create IEs (create: the id must be new; fresh makes the rule) or Update IEs
// (the id must exist; the rule is copied, then changed).
func upsert[K ruleIDType, V any](l []*ie.IE, create bool, idType uint16, what string,
	idOf func(*ie.IE) (K, error), m map[K]*V, ruleType uint8, fresh func(K) *V,
	dec func(children, *V, bool) error) error {
	for _, g := range l {
		id, c, err := ruleID(g, idType, what, idOf)
		if err != nil {
			return err
		}
		var r *V
		if old, ok := m[id]; create {
			if ok {
				return ruleFailure(ruleType, uint32(id), "%s: rule %d already exists", what, id)
			}
			r = fresh(id)
		} else {
			if !ok {
				return ruleFailure(ruleType, uint32(id), "%s: rule %d does not exist", what, id)
			}
			cp := *old
			r = &cp
		}
		if err := dec(c, r, create); err != nil {
			return err
		}
		m[id] = r
	}
	return nil
}

// createdPDRs are the Created PDR IEs for what this UPF chose in s and not already in old:
// the F-TEID of each PDR that asked for one and the UE address of each that asked for it.
func createdPDRs(old, s *Session) []*ie.IE {
	var out []*ie.IE
	for _, id := range sortedKeys(s.PDRs) {
		p := s.PDRs[id]
		if old != nil {
			if o, ok := old.PDRs[id]; ok && o.FTEID == p.FTEID && o.UE == p.UE {
				continue // reported when it was chosen
			}
		}
		var ies []*ie.IE
		if f := p.FTEID; f != nil && f.Chosen {
			ies = append(ies, ie.NewFTEID(0x01, f.TEID, f.Addr.AsSlice(), nil, 0))
		}
		if p.UEChosen {
			ies = append(ies, ie.NewUEIPAddress(0x02, p.UE.String(), "", 0, 0)) // V4 (S/D is 0 outside a PDI)
		}
		if len(ies) > 0 {
			out = append(out, ie.NewCreatedPDR(append([]*ie.IE{ie.NewPDRID(id)}, ies...)...))
		}
	}
	return out
}

// sessionModification changes a session (TS 29.244 7.5.4), all or nothing.
func (n *Node) sessionModification(peer netip.AddrPort, m *message.SessionModificationRequest) []byte {
	n.smu.Lock()
	defer n.smu.Unlock()
	old, ok := n.ss.byID[m.SEID()]
	if cause := n.sessionCheck(old, ok, peer); cause != 0 {
		return marshal(message.NewSessionModificationResponse(0, 0, 0, m.SequenceNumber, 0, ie.NewCause(cause)))
	}
	respond := func(ies ...*ie.IE) []byte {
		return marshal(message.NewSessionModificationResponse(0, 0, old.CPSEID, m.SequenceNumber, 0, ies...))
	}
	c := ruleChanges{
		removePDR: m.RemovePDR, removeFAR: m.RemoveFAR, removeQER: m.RemoveQER, removeURR: m.RemoveURR,
		createPDR: m.CreatePDR, createFAR: m.CreateFAR, createQER: m.CreateQER, createURR: m.CreateURR,
		updatePDR: m.UpdatePDR, updateFAR: m.UpdateFAR, updateQER: m.UpdateQER, updateURR: m.UpdateURR,
	}
	for _, x := range []struct {
		ie  *ie.IE
		dst *[]*ie.IE
	}{{m.RemoveBAR, &c.removeBAR}, {m.CreateBAR, &c.createBAR}, {m.UpdateBAR, &c.updateBAR}} {
		if x.ie != nil {
			*x.dst = []*ie.IE{x.ie}
		}
	}
	queried, err := queriedURRs(m)
	if err != nil {
		return respond(asRequestError(err).ies()...)
	}
	// What the PDRs counted so far goes to the URRs they counted toward before the change;
	// reports it makes due go out as Session Report Requests.
	us, now := n.ss.usage[old.SEID], time.Now()
	if due, _ := n.sample(old, us, now); len(due) > 0 {
		ies := usageReports(due, old.URRs, ie.NewUsageReportWithinSessionReportRequest)
		go n.sendUsageReports(map[uint64][]*ie.IE{old.SEID: ies})
	}
	// After the sample, which may have passed a URR's monitoring time: the modification
	// applies to the URR as it is after it.
	s := old.clone()
	if err := n.apply(old, s, c); err != nil {
		re := asRequestError(err)
		n.log.Warn("pfcp: session modification refused; session unchanged", "seid", old.SEID,
			"cause", re.cause, "err", re.msg)
		return respond(re.ies()...)
	}
	n.ss.byID[s.SEID] = s
	n.ss.setTunnels(old, s)
	n.setBuffering(s)
	n.saveSession(s)
	n.sendEndMarkers(old, s, m.UpdateFAR)
	var removed []uint32
	for _, id := range sortedKeys(old.URRs) {
		if _, ok := s.URRs[id]; !ok {
			removed = append(removed, id)
		}
	}
	if queried == nil && m.PFCPSMReqFlags != nil && len(m.PFCPSMReqFlags.Payload) > 0 &&
		m.PFCPSMReqFlags.Payload[0]&pfcpSMReqQAURR != 0 {
		queried = sortedKeys(s.URRs)
	}
	reports := append(us.Query(removed, usage.Termination, now), us.Query(queried, usage.Immediate, now)...)
	n.ss.setUsage(s, us, now)
	n.log.Debug("pfcp: session modified", "seid", s.SEID)
	ies := append([]*ie.IE{ie.NewCause(ie.CauseRequestAccepted)}, createdPDRs(old, s)...)
	all := maps.Clone(old.URRs)
	maps.Copy(all, s.URRs)
	ies = append(ies, usageReports(reports, all, ie.NewUsageReportWithinSessionModificationResponse)...)
	return respond(ies...)
}

// pfcpSMReqQAURR is the QAURR flag of PFCPSMReq-Flags (TS 29.244 8.2.59): report every URR.
const pfcpSMReqQAURR = 0x04

// queriedURRs are the URR ids of a modification's Query URR IEs.
func queriedURRs(m *message.SessionModificationRequest) ([]uint32, error) {
	var ids []uint32
	for _, g := range m.QueryURR {
		x, err := childrenOf(g).required(ie.URRID, "Query URR")
		if err != nil {
			return nil, err
		}
		id, err := decode(x, "Query URR", (*ie.IE).URRID)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sessionDeletion removes a session (TS 29.244 7.5.6) and reports what its URRs counted.
func (n *Node) sessionDeletion(peer netip.AddrPort, m *message.SessionDeletionRequest) []byte {
	n.smu.Lock()
	defer n.smu.Unlock()
	s, ok := n.ss.byID[m.SEID()]
	if cause := n.sessionCheck(s, ok, peer); cause != 0 {
		return marshal(message.NewSessionDeletionResponse(0, 0, 0, m.SequenceNumber, 0, ie.NewCause(cause)))
	}
	reports, err := n.deleteSession(s)
	if err != nil {
		n.log.Warn("pfcp: session deleted but its counters could not be read", "seid", s.SEID, "err", err)
	}
	ies := append([]*ie.IE{ie.NewCause(ie.CauseRequestAccepted)},
		usageReports(reports, s.URRs, ie.NewUsageReportWithinSessionDeletionResponse)...)
	return marshal(message.NewSessionDeletionResponse(0, 0, s.CPSEID, m.SequenceNumber, 0, ies...))
}

// sessionCheck is the cause to refuse a request about session s (found says it exists) from
// peer with, or 0. Only the session's SMF may change it (mayActFor; the address of its lost
// association while it has none): to anyone else the session does not exist, and the SMF
// itself without an association is told so. n.smu is held.
func (n *Node) sessionCheck(s *Session, found bool, peer netip.AddrPort) uint8 {
	if !found {
		return ie.CauseSessionContextNotFound
	}
	n.mu.Lock() // smu before mu
	a, associated := n.assocs[s.Peer]
	from := peer.Addr().Unmap()
	speaks := n.mayActFor(s.Peer, a, from) || (!associated && n.recoveries[s.Peer].addr == from)
	n.mu.Unlock()
	switch {
	case !speaks:
		// Debug only: anyone can send these.
		n.log.Debug("pfcp: request about a session from another peer than its SMF refused",
			"seid", s.SEID, "peer", peer, "smf", s.Peer)
		return ie.CauseSessionContextNotFound
	case !associated:
		n.log.Log(context.Background(), n.levelFor("no association", from, slog.LevelWarn),
			"pfcp: request about a session of an SMF without an association refused", "seid", s.SEID,
			"peer", peer, "smf", s.Peer)
		return ie.CauseNoEstablishedPFCPAssociation
	}
	return 0
}

// deleteSession removes s from the datapath and the node and returns its URRs' last reports
// (the session's end, and any other due); n.smu is held.
func (n *Node) deleteSession(s *Session) ([]usage.Report, error) {
	counts, err := n.opts.Datapath.Uninstall(s.SEID)
	var reports []usage.Report
	if us := n.ss.usage[s.SEID]; us != nil {
		now := time.Now()
		if err == nil {
			reports = us.Observe(counts, now)
		}
		reports = append(reports, us.Query(us.IDs(), usage.Termination, now)...)
		delete(n.ss.usage, s.SEID)
		delete(n.ss.watched, s.SEID)
	}
	if n.opts.Buffers != nil {
		n.opts.Buffers.Remove(s.SEID)
	}
	n.ss.alloc.release(s, nil)
	delete(n.ss.byID, s.SEID)
	n.forgetSession(s.SEID)
	n.ss.setTunnels(s, nil)
	delete(n.ss.bySMF, smfSEID{s.Peer, s.CPSEID})
	if n.ss.perPeer[s.Peer]--; n.ss.perPeer[s.Peer] <= 0 {
		delete(n.ss.perPeer, s.Peer)
	}
	n.log.Info("pfcp: session deleted", "seid", s.SEID, "cp_seid", s.CPSEID, "peer", s.Peer)
	return reports, err
}

// deletePeerSessions removes every session of an association's peer; with unlessAssociated,
// none if the peer has an association again (it came back meanwhile: its new sessions stay).
func (n *Node) deletePeerSessions(peer, why string, unlessAssociated bool) {
	n.smu.Lock()
	defer n.smu.Unlock()
	if unlessAssociated {
		n.mu.Lock() // smu before mu
		_, back := n.assocs[peer]
		n.mu.Unlock()
		if back {
			return
		}
	}
	count := 0
	for _, id := range sortedKeys(n.ss.byID) {
		if s := n.ss.byID[id]; s.Peer == peer {
			if _, err := n.deleteSession(s); err != nil {
				n.log.Warn("pfcp: read counters of a deleted session", "seid", id, "err", err)
			}
			count++
		}
	}
	if count > 0 {
		n.log.Info("pfcp: sessions of the peer deleted", "node_id", peer, "sessions", count, "why", why)
	}
}

func (n *Node) newSEID() uint64 {
	for {
		id := n.ss.nextSEID
		n.ss.nextSEID++
		if _, taken := n.ss.byID[id]; !taken {
			return id
		}
	}
}

func asRequestError(err error) *requestError {
	var re *requestError
	if errors.As(err, &re) {
		return re
	}
	return &requestError{cause: ie.CauseSystemFailure, msg: err.Error()}
}
