// Package pfcp is xupfd's N4 endpoint (TS 29.244): it answers and keeps PFCP associations
// with SMFs, exchanges heartbeats and detects lost peers. Session management builds on it.
package pfcp

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	_ "github.com/xupf/xupf/internal/pfcpgrouped" // go-pfcp's grouped-IE test, as a table
	"github.com/xupf/xupf/internal/ratelimit"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/state"
	"github.com/xupf/xupf/internal/usage"
)

// Options configure a Node.
type Options struct {
	// NodeID is this UPF's Node ID: an IPv4 address or an FQDN.
	NodeID string
	// AllowedPeers are the networks SMFs may associate from, besides SMFPeers and the
	// PeerAddresses of the Node ID they name; empty allows none of the others.
	AllowedPeers []netip.Prefix
	// PeerAddresses are, per SMF Node ID, the networks that SMF may use: for its association
	// and its session requests, and no other. A Node ID not listed is bound to the address
	// its association was set up from.
	PeerAddresses map[string][]netip.Prefix
	// MaxAssociations, MaxSessions and MaxSessionsPerAssociation bound the associations, the
	// PFCP sessions and the sessions of one association; 0 is no bound, and a negative
	// MaxSessions allows none (the static sessions fill the datapath).
	MaxAssociations, MaxSessions, MaxSessionsPerAssociation int
	// HeartbeatInterval is how often each associated peer is sent a Heartbeat Request, and
	// how long an answer may take.
	HeartbeatInterval time.Duration
	// HeartbeatRetries is how many unanswered heartbeats in a row declare a peer lost.
	HeartbeatRetries int
	// SMFPeers are SMFs this UPF associates with on its own initiative: Serve sends each an
	// Association Setup Request every HeartbeatInterval until one is accepted, and again
	// whenever the association is lost.
	SMFPeers []netip.AddrPort
	// DeleteSessionsOfLostPeers deletes a lost peer's sessions; by default they keep
	// forwarding, as the SMF may come back and carry on with them.
	DeleteSessionsOfLostPeers bool
	// ReportTimeout (T1) is how long a Session Report Request waits for its answer before it
	// is sent again, ReportRetries (N1) how many times it is sent again before it is given
	// up, and MaxReportsPerSMF how many may wait for an answer from one SMF; 0 takes
	// DefaultReportTimeout, DefaultReportRetries, DefaultMaxReportsPerSMF.
	ReportTimeout    time.Duration
	ReportRetries    int
	MaxReportsPerSMF int
	// UsagePollInterval is how often Serve samples the counters of sessions whose URRs
	// report on triggers; 0 takes DefaultUsagePollInterval.
	UsagePollInterval time.Duration

	// Datapath is where sessions are installed.
	Datapath Datapath
	// Store keeps the associations, sessions and Recovery Time Stamp across restarts
	// (Restore reads them back); Serve sends each response once the change it reports is in
	// it. nil keeps nothing.
	Store *state.Store
	// Buffers keeps the packets of FARs that buffer and notifies of them (NOCP) through
	// DownlinkData; nil buffers none.
	Buffers BufferController
	// EndMarkers sends the End Markers an Update FAR with SNDEM asks for, EndMarkerDelay
	// (default DefaultEndMarkerDelay) after the new FAR is installed; nil sends none.
	EndMarkers     EndMarkerSender
	EndMarkerDelay time.Duration
	// Address is this UPF's N4 IPv4 address, sent in the UP F-SEID of each session.
	Address netip.Addr
	// GTPUAddrs are the local N3/N9 addresses. F-TEIDs this UPF chooses, and the source of
	// its tunnels, use the session's first SMF-given F-TEID address, else the first of these.
	GTPUAddrs []netip.Addr
	// UEPools are the networks UE addresses are chosen from when an SMF asks (CHV4).
	UEPools []netip.Prefix
	// UEPoolsOnly refuses a UE address an SMF gives outside UEPools.
	UEPoolsOnly bool
	// NetworkInstances maps each accepted network instance to its interface; empty accepts
	// every network instance.
	NetworkInstances map[string]string
	// AllowAnySource turns anti-spoofing off for every PFCP session: uplink packets may then
	// have any inner source address, not only the session's UE address.
	AllowAnySource bool
	Logger         *slog.Logger
}

// Association is an established PFCP association with a peer.
type Association struct {
	NodeID      string         `json:"node_id" yaml:"node_id"`
	Address     netip.AddrPort `json:"address" yaml:"address"`
	Recovery    time.Time      `json:"recovery_time_stamp" yaml:"recovery_time_stamp"`
	Established time.Time      `json:"established" yaml:"established"`
	// Missed is the count of heartbeats in a row the peer has not answered.
	Missed int `json:"missed_heartbeats" yaml:"missed_heartbeats"`
}

// Node is the association and heartbeat state of this UPF. Handle is its message entry
// point; Server runs it over UDP.
type Node struct {
	opts     Options
	log      *slog.Logger
	recovery time.Time // Recovery Time Stamp: when this process started, for its life

	mu      sync.Mutex
	assocs  map[string]*Association // by Node ID
	pending map[string]uint32       // Node ID -> sequence number of the unanswered heartbeat
	// recoveries are the Recovery Time Stamps and addresses peers last set an association
	// up with, kept after the association is lost while the peer has sessions, so that a
	// restarted SMF's old sessions can be told apart and no other address takes them over.
	recoveries map[string]peerRecord
	setups     map[uint32]netip.AddrPort // sequence number -> SMF of an unanswered setup request
	logged     map[loggedKey]struct{}    // what each address was logged for, above debug
	strangers  ratelimit.Bucket          // answers to addresses without an association
	drops      [numDropReasons]atomic.Uint64
	seq        uint32 // of the last request this node sent
	reports    reportState
	// conn is the PFCP socket while Serve runs: the requests this node initiates go from it.
	conn atomic.Pointer[net.UDPConn]

	smu sync.Mutex // guards ss; taken before mu when both are needed
	ss  sessionState
	// answered holds recent responses to session requests, so that a retransmitted request
	// is answered again rather than applied twice. mu guards it.
	answered *responseCache
}

// upFeatures are the UP Function Features this UPF implements (TS 29.244 8.2.25), and no
// more: FTUP (it allocates F-TEIDs on CHOOSE), QUOAC (a URR's FAR for quota action), MNOP
// (it counts packets in usage reports), VTIME (a URR's Quota Validity Time, QUVTI); with a buffer, DDND and DLBD (it honours the BAR's
// Downlink Data Notification Delay and the DL Buffering Duration of Session Report Responses;
// it buffers itself, so not BUCP, which offers buffering in the CP function); EMPU (it sends
// End Markers on SNDEM) when it has an EndMarkers sender and, with UE pools configured, UEIP
// (it allocates UE addresses on CHV4). Other features are to be added here with the code that
// implements them, not before: an SMF relies on what is advertised.
func (n *Node) upFeatures() *ie.IE {
	octet5 := uint8(featureFTUP)
	octet6, octet7, octet8 := uint8(featureQUOAC), uint8(featureMNOP), uint8(featureVTIME)
	if n.opts.Buffers != nil {
		octet5 |= featureDDND | featureDLBD
	}
	if n.opts.EndMarkers != nil {
		octet6 |= featureEMPU
	}
	if len(n.opts.UEPools) > 0 {
		octet7 |= featureUEIP
	}
	return ie.NewUPFunctionFeatures(octet5, octet6, octet7, octet8)
}

// UP Function Features bits (TS 29.244 8.2.25), each in its octet: 5 to 8.
const (
	featureDDND  = 0x02 // octet 5 bit 2
	featureDLBD  = 0x04 // octet 5 bit 3
	featureFTUP  = 0x10 // octet 5 bit 5
	featureEMPU  = 0x01 // octet 6 bit 1
	featureQUOAC = 0x08 // octet 6 bit 4
	featureMNOP  = 0x10 // octet 7 bit 5
	featureUEIP  = 0x04 // octet 7 bit 3
	featureVTIME = 0x04 // octet 8 bit 3
)

// NewNode returns a Node whose Recovery Time Stamp is now.
func NewNode(opts Options) *Node {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.ReportTimeout = cmp.Or(opts.ReportTimeout, DefaultReportTimeout)
	opts.ReportRetries = cmp.Or(opts.ReportRetries, DefaultReportRetries)
	opts.MaxReportsPerSMF = cmp.Or(opts.MaxReportsPerSMF, DefaultMaxReportsPerSMF)
	opts.EndMarkerDelay = cmp.Or(opts.EndMarkerDelay, DefaultEndMarkerDelay)
	opts.UsagePollInterval = cmp.Or(opts.UsagePollInterval, DefaultUsagePollInterval)
	for _, p := range opts.AllowedPeers {
		if p.Bits() == 0 {
			opts.Logger.Warn("pfcp: any address may associate as an SMF (pfcp_allowed_peers has " + p.String() +
				"); list the SMFs' networks instead")
		}
	}
	if len(opts.AllowedPeers) == 0 && len(opts.SMFPeers) == 0 && len(opts.PeerAddresses) == 0 {
		opts.Logger.Info("pfcp: no SMF may associate: pfcp_allowed_peers, pfcp_smf_peers and pfcp_peer_addresses are empty")
	}
	n := &Node{opts: opts, log: opts.Logger, recovery: time.Now().Truncate(time.Second),
		assocs: map[string]*Association{}, pending: map[string]uint32{}, setups: map[uint32]netip.AddrPort{},
		recoveries: map[string]peerRecord{}, logged: map[loggedKey]struct{}{},
		strangers: ratelimit.Bucket{Rate: strangerAnswers, Burst: strangerAnswers},
		// Sequence numbers start at random, so that answers to this UPF's requests are not
		// easy to forge.
		seq:      rand.Uint32() & 0xffffff,
		answered: newResponseCache(responseLifetime),
		reports:  reportState{bySeq: map[uint32]*pendingReport{}, perPeer: map[string]int{}}}
	n.ss = sessionState{byID: map[uint64]*Session{}, bySMF: map[smfSEID]uint64{}, perPeer: map[string]int{},
		byTunnel: map[tunnel]uint64{}, usage: map[uint64]*usage.Session{},
		watched: map[uint64]*usage.Session{}, nextSEID: FirstSEID,
		alloc: newAllocator(opts.UEPools, func(k rules.Key) bool {
			if opts.Datapath == nil {
				return false
			}
			_, used := opts.Datapath.KeyOwner(k)
			return used
		}, func(a netip.Addr) bool { return opts.Datapath != nil && opts.Datapath.IsLocal(a) })}
	if opts.Datapath != nil {
		n.ss.alloc.prefer = opts.Datapath.TEIDCacheable
	}
	return n
}

// Associations returns the established associations, sorted by Node ID.
func (n *Node) Associations() []Association {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Association, 0, len(n.assocs))
	for _, a := range n.assocs {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Association) int { return strings.Compare(a.NodeID, b.NodeID) })
	return out
}

// Handle processes one message from peer and returns the response to send, or nil. A panic
// while handling it (a decoder bug a crafted message reaches) is answered as a malformed
// message and logged, and the node keeps serving. An address without an association, which
// may be spoofed, gets answers longer than its messages at strangerAnswers a second at most,
// in all: the UPF cannot be used to amplify a flood toward a victim.
func (n *Node) Handle(peer netip.AddrPort, b []byte) []byte {
	associated := n.speaksForAny(peer.Addr())
	resp := n.handleSafely(peer, b)
	if resp == nil || associated || len(resp) <= len(b) || n.speaksForAny(peer.Addr()) || n.takeStrangerToken() {
		return resp
	}
	n.drops[DropAmplification].Add(1)
	n.log.Debug("pfcp: no answer to an address without an association (amplification limit)",
		"peer", peer, "request_bytes", len(b), "response_bytes", len(resp))
	return nil
}

// strangerAnswers is how many answers a second, in all, go to addresses without an
// association.
const strangerAnswers = 100

// DropReason is why a datagram was left unanswered (a request refused is answered with its
// cause instead).
type DropReason int

const (
	DropUndecodable   DropReason = iota // its header does not decode
	DropAmplification                   // the answer to an address without an association was over the limits
	DropUnhandled                       // a message type this UPF does not handle
	DropMalformed                       // a message other than a request whose IEs do not decode
	DropUnrequested                     // a response to no request of this node's
	numDropReasons
)

var dropNames = [numDropReasons]string{"undecodable_header", "amplification_limit", "unhandled_type", "malformed",
	"unrequested_response"}

func (r DropReason) String() string { return dropNames[r] }

// Drops counts the datagrams left unanswered, by reason.
func (n *Node) Drops() map[string]uint64 {
	out := make(map[string]uint64, numDropReasons)
	for r := range numDropReasons {
		out[r.String()] = n.drops[r].Load()
	}
	return out
}

// speaksForAny reports whether addr speaks for an association (mayActFor).
func (n *Node) speaksForAny(addr netip.Addr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, a := range n.assocs {
		if n.mayActFor(id, a, addr) {
			return true
		}
	}
	return false
}

func (n *Node) takeStrangerToken() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.strangers.Take(time.Now())
}

func (n *Node) handleSafely(peer netip.AddrPort, b []byte) (resp []byte) {
	h, err := message.ParseHeader(b)
	if err != nil {
		// Counted, not logged above debug: anyone can send datagrams.
		n.drops[DropUndecodable].Add(1)
		n.log.Debug("pfcp: undecodable header dropped", "peer", peer, "err", err)
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			n.panicked(peer, h, r)
			resp = n.malformed(peer, h, fmt.Errorf("handling failed: %v", r))
		}
	}()
	return n.handle(peer, h, b)
}

// maxLogged bounds the record of what each address was logged for.
const maxLogged = 4096

type loggedKey struct {
	what string
	addr netip.Addr
}

// levelFor is level the first time addr is logged for what, and debug after that: whatever
// anyone sends, the log grows by one line per address and kind of trouble (the record starts
// over past maxLogged).
func (n *Node) levelFor(what string, addr netip.Addr, level slog.Level) slog.Level {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := loggedKey{what, addr.Unmap()}
	if _, seen := n.logged[k]; seen {
		return slog.LevelDebug
	}
	if len(n.logged) >= maxLogged {
		clear(n.logged)
	}
	n.logged[k] = struct{}{}
	return level
}

// panicked logs a panic: with its stack the first time a peer causes one (it names the bug
// to fix), in one line at debug level after that.
func (n *Node) panicked(peer netip.AddrPort, h *message.Header, r any) {
	if n.levelFor("panic", peer.Addr(), slog.LevelError) != slog.LevelError {
		n.log.Debug("pfcp: message handling panicked again", "peer", peer, "type", h.Type, "panic", r)
		return
	}
	n.log.Error("pfcp: message handling panicked; answered as malformed (bug: please report)",
		"peer", peer, "type", h.Type, "panic", r, "stack", string(debug.Stack()))
}

func (n *Node) handle(peer netip.AddrPort, h *message.Header, b []byte) []byte {
	if h.Flags>>5 != 1 { // the version is the top three bits (Header.Version always says 1)
		return marshal(message.NewVersionNotSupportedResponse(h.SequenceNumber))
	}
	msg, err := message.Parse(b)
	if err != nil {
		return n.malformed(peer, h, err)
	}
	switch m := msg.(type) {
	case *message.HeartbeatRequest:
		n.heardFrom(peer.Addr())
		return marshal(message.NewHeartbeatResponse(m.SequenceNumber, ie.NewRecoveryTimeStamp(n.recovery)))
	case *message.HeartbeatResponse:
		n.heartbeatAnswered(peer, m)
		return nil
	case *message.AssociationSetupRequest:
		return n.associationSetup(peer, m)
	case *message.AssociationSetupResponse:
		n.setupAnswered(peer, m)
		return nil
	case *message.AssociationUpdateRequest:
		return n.associationUpdate(peer, m)
	case *message.AssociationReleaseRequest:
		return n.associationRelease(peer, m)
	case *message.SessionEstablishmentRequest:
		return n.answerOnce(peer, m.SequenceNumber, b, func() []byte { return n.sessionEstablishment(peer, m, b) })
	case *message.SessionModificationRequest:
		return n.answerOnce(peer, m.SequenceNumber, b, func() []byte { return n.sessionModification(peer, m) })
	case *message.SessionDeletionRequest:
		return n.answerOnce(peer, m.SequenceNumber, b, func() []byte { return n.sessionDeletion(peer, m) })
	case *message.SessionReportResponse:
		n.handleReportResponse(peer, m)
		return nil
	}
	n.drops[DropUnhandled].Add(1)
	n.log.Debug("pfcp: message type not handled", "peer", peer, "type", msg.MessageTypeName())
	return nil
}

// malformed answers a request whose IEs do not decode: the responses that carry a cause say
// so; anything else is dropped with a log line.
func (n *Node) malformed(peer netip.AddrPort, h *message.Header, err error) []byte {
	n.log.Log(context.Background(), n.levelFor("malformed", peer.Addr(), slog.LevelWarn),
		"pfcp: malformed message", "peer", peer, "type", h.Type, "err", err)
	cause := ie.NewCause(ie.CauseMandatoryIEIncorrect)
	switch h.Type {
	case message.MsgTypeAssociationSetupRequest:
		return marshal(message.NewAssociationSetupResponse(h.SequenceNumber, n.nodeIDIE(), cause,
			ie.NewRecoveryTimeStamp(n.recovery)))
	case message.MsgTypeAssociationUpdateRequest:
		return marshal(message.NewAssociationUpdateResponse(h.SequenceNumber, n.nodeIDIE(), cause))
	case message.MsgTypeAssociationReleaseRequest:
		return marshal(message.NewAssociationReleaseResponse(h.SequenceNumber, n.nodeIDIE(), cause))
	case message.MsgTypeSessionEstablishmentRequest:
		return marshal(message.NewSessionEstablishmentResponse(0, 0, 0, h.SequenceNumber, 0, n.nodeIDIE(), cause))
	case message.MsgTypeSessionModificationRequest:
		return marshal(message.NewSessionModificationResponse(0, 0, 0, h.SequenceNumber, 0, cause))
	case message.MsgTypeSessionDeletionRequest:
		return marshal(message.NewSessionDeletionResponse(0, 0, 0, h.SequenceNumber, 0, cause))
	}
	n.drops[DropMalformed].Add(1) // not a request: there is no answer to give
	return nil
}

func (n *Node) nodeIDIE() *ie.IE { return ie.NewNodeIDHeuristic(n.opts.NodeID) }

// missing is the response cause and Offending IE for a mandatory IE that is absent. The
// association responses have no Offending IE (TS 29.244 7.4.4): they carry the cause alone.
func missing(itype uint16) []*ie.IE {
	return []*ie.IE{ie.NewCause(ie.CauseMandatoryIEMissing), ie.NewOffendingIE(itype)}
}

var causeMissing = ie.NewCause(ie.CauseMandatoryIEMissing)

// allowed reports whether addr may set up an association naming nodeID: it is in
// AllowedPeers, an SMF this UPF associates with, or listed for nodeID in PeerAddresses.
func (n *Node) allowed(nodeID string, addr netip.Addr) bool {
	addr = addr.Unmap()
	if containsAddr(n.opts.AllowedPeers, addr) || containsAddr(n.opts.PeerAddresses[nodeID], addr) {
		return true
	}
	return n.isSMFPeer(addr)
}

// isSMFPeer reports whether addr is one of the SMFs this UPF associates with (SMFPeers).
func (n *Node) isSMFPeer(addr netip.Addr) bool {
	return slices.ContainsFunc(n.opts.SMFPeers, func(p netip.AddrPort) bool { return p.Addr().Unmap() == addr.Unmap() })
}

func containsAddr(l []netip.Prefix, addr netip.Addr) bool {
	return slices.ContainsFunc(l, func(p netip.Prefix) bool { return p.Contains(addr) })
}

// peerRecord is what is kept of a peer's last association.
type peerRecord struct {
	recovery time.Time
	addr     netip.Addr
}

// mayActFor reports whether addr speaks for nodeID, whose association is a (nil for none):
// it is listed for nodeID in PeerAddresses or, for a Node ID not listed, it is the
// association's address. n.mu is held.
func (n *Node) mayActFor(nodeID string, a *Association, addr netip.Addr) bool {
	if l, listed := n.opts.PeerAddresses[nodeID]; listed {
		return containsAddr(l, addr.Unmap())
	}
	return a != nil && a.Address.Addr().Unmap() == addr.Unmap()
}

// admit says why addr may not set up an association naming nodeID, or "": another address
// holds the Node ID (its association, or the sessions of its lost association), or the
// associations are at their limit. The SMFs of the configuration (pfcp_peer_addresses,
// pfcp_smf_peers) do not count against the limit, so strangers cannot lock them out.
func (n *Node) admit(nodeID string, addr netip.Addr) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.assocs[nodeID]
	_, listed := n.opts.PeerAddresses[nodeID]
	configured := listed || n.isSMFPeer(addr)
	last, known := n.recoveries[nodeID]
	switch {
	case listed && !n.mayActFor(nodeID, a, addr):
		return "the address is not one of the Node ID's pfcp_peer_addresses"
	case !listed && a != nil && !n.mayActFor(nodeID, a, addr):
		return fmt.Sprintf("the Node ID is associated from %s; list this address under pfcp_peer_addresses if the SMF moved", a.Address.Addr())
	case !listed && a == nil && known && last.addr != addr.Unmap():
		return fmt.Sprintf("the Node ID's sessions belong to %s; list this address under pfcp_peer_addresses if the SMF moved", last.addr)
	case a == nil && !configured && n.opts.MaxAssociations > 0 && len(n.assocs) >= n.opts.MaxAssociations:
		return fmt.Sprintf("%d associations already (limits.max_associations)", len(n.assocs))
	}
	return ""
}

func (n *Node) associationSetup(peer netip.AddrPort, m *message.AssociationSetupRequest) []byte {
	respond := func(ies ...*ie.IE) []byte {
		ies = append([]*ie.IE{n.nodeIDIE(), ie.NewRecoveryTimeStamp(n.recovery)}, ies...)
		return marshal(message.NewAssociationSetupResponse(m.SequenceNumber, ies...))
	}
	if m.NodeID == nil || m.RecoveryTimeStamp == nil {
		n.log.Log(context.Background(), n.levelFor("setup", peer.Addr(), slog.LevelWarn),
			"pfcp: association setup without node id or recovery time stamp", "peer", peer)
		return respond(causeMissing)
	}
	nodeID, err1 := peerNodeID(m.NodeID)
	recovery, err2 := m.RecoveryTimeStamp.RecoveryTimeStamp()
	if err1 != nil || err2 != nil {
		return respond(ie.NewCause(ie.CauseMandatoryIEIncorrect))
	}
	if !n.allowed(nodeID, peer.Addr()) {
		n.log.Log(context.Background(), n.levelFor("setup", peer.Addr(), slog.LevelWarn),
			"pfcp: association refused: peer not in the allowed networks (pfcp_allowed_peers)",
			"peer", peer, "node_id", nodeID)
		return respond(ie.NewCause(ie.CauseRequestRejected))
	}
	if why := n.admit(nodeID, peer.Addr()); why != "" {
		n.log.Log(context.Background(), n.levelFor("setup", peer.Addr(), slog.LevelWarn),
			"pfcp: association refused", "peer", peer, "node_id", nodeID, "why", why)
		return respond(ie.NewCause(ie.CauseRequestRejected))
	}
	retain := m.PFCPSessionRetentionInformation != nil
	n.associated(nodeID, peer, recovery, retain)
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), n.upFeatures()}
	if retain {
		ies = append(ies, ie.NewPFCPASRspFlags(0x01)) // PSREI: the sessions were retained
	}
	return respond(ies...)
}

func (n *Node) associationUpdate(peer netip.AddrPort, m *message.AssociationUpdateRequest) []byte {
	respond := func(ies ...*ie.IE) []byte {
		return marshal(message.NewAssociationUpdateResponse(m.SequenceNumber, append([]*ie.IE{n.nodeIDIE()}, ies...)...))
	}
	if m.NodeID == nil {
		return respond(causeMissing)
	}
	if _, ok := n.association(m.NodeID, peer); !ok {
		return respond(ie.NewCause(ie.CauseNoEstablishedPFCPAssociation))
	}
	return respond(ie.NewCause(ie.CauseRequestAccepted), n.upFeatures())
}

func (n *Node) associationRelease(peer netip.AddrPort, m *message.AssociationReleaseRequest) []byte {
	if m.NodeID == nil {
		return marshal(message.NewAssociationReleaseResponse(m.SequenceNumber, n.nodeIDIE(), causeMissing))
	}
	// Only the SMF itself may end its association (and with it its sessions).
	nodeID, ok := n.association(m.NodeID, peer)
	if !ok {
		n.log.Log(context.Background(), n.levelFor("release", peer.Addr(), slog.LevelWarn),
			"pfcp: association release refused: no association of this Node ID from this address",
			"peer", peer, "node_id", nodeID)
		return marshal(message.NewAssociationReleaseResponse(m.SequenceNumber, n.nodeIDIE(),
			ie.NewCause(ie.CauseNoEstablishedPFCPAssociation)))
	}
	n.mu.Lock()
	delete(n.assocs, nodeID)
	delete(n.pending, nodeID)
	n.saveAssociation(nodeID, nil)
	n.mu.Unlock()
	n.log.Info("pfcp: association released", "node_id", nodeID)
	n.deletePeerSessions(nodeID, "association released", false)
	n.forgetIdlePeer(nodeID)
	return marshal(message.NewAssociationReleaseResponse(m.SequenceNumber, n.nodeIDIE(),
		ie.NewCause(ie.CauseRequestAccepted)))
}

// associated records an association with nodeID at addr and applies TS 29.244 6.2.6.2.2 to
// the peer's sessions: a new association replacing an existing one of the same Node ID ends
// them unless the SMF asks to retain them; so does a restart of the SMF (a new Recovery Time
// Stamp) after its association was lost. Both ends' setups come through here.
func (n *Node) associated(nodeID string, addr netip.AddrPort, recovery time.Time, retain bool) {
	n.mu.Lock()
	_, existed := n.assocs[nodeID]
	last, known := n.recoveries[nodeID]
	n.assocs[nodeID] = &Association{NodeID: nodeID, Address: addr, Recovery: recovery, Established: time.Now()}
	n.recoveries[nodeID] = peerRecord{recovery, addr.Addr().Unmap()}
	n.saveAssociation(nodeID, n.assocs[nodeID])
	n.savePeer(nodeID, n.recoveries[nodeID], true)
	delete(n.pending, nodeID)
	n.answered.forget(addr.Addr())
	n.mu.Unlock()
	switch {
	case existed && !retain:
		n.log.Info("pfcp: association set up again without session retention", "peer", addr, "node_id", nodeID)
		n.deletePeerSessions(nodeID, "association set up again", false)
	case !existed && known && !last.recovery.Equal(recovery) && !retain:
		n.log.Info("pfcp: peer restarted; association established", "peer", addr, "node_id", nodeID)
		n.deletePeerSessions(nodeID, "the peer restarted", false)
	case existed:
		n.log.Info("pfcp: association set up again; sessions retained", "peer", addr, "node_id", nodeID)
	default:
		n.log.Info("pfcp: association established", "peer", addr, "node_id", nodeID)
	}
}

// forgetIdlePeer drops what is kept of a Node ID that has neither an association nor
// sessions any more, so that peers that come and go leave nothing behind.
func (n *Node) forgetIdlePeer(nodeID string) {
	n.smu.Lock()
	defer n.smu.Unlock()
	if n.ss.perPeer[nodeID] > 0 {
		return
	}
	n.mu.Lock() // smu before mu
	defer n.mu.Unlock()
	if _, ok := n.assocs[nodeID]; !ok {
		delete(n.recoveries, nodeID)
		n.savePeer(nodeID, peerRecord{}, false)
	}
}

// association returns the Node ID of an established association named by id, if peer
// speaks for it (mayActFor): a request naming another SMF's Node ID gets "no association".
func (n *Node) association(id *ie.IE, peer netip.AddrPort) (string, bool) {
	nodeID, err := id.NodeID()
	if err != nil {
		return "", false
	}
	n.mu.Lock()
	a, ok := n.assocs[nodeID]
	speaks := n.mayActFor(nodeID, a, peer.Addr())
	n.mu.Unlock()
	if ok && !speaks {
		n.log.Log(context.Background(), n.levelFor("node id", peer.Addr(), slog.LevelWarn),
			"pfcp: request naming another peer's Node ID refused", "peer", peer, "node_id", nodeID)
		return nodeID, false
	}
	return nodeID, ok
}

// maxNodeIDLen bounds a peer's Node ID: an FQDN is at most 255 bytes (RFC 1035), and the
// Node ID is the key of the association's record in the state file.
const maxNodeIDLen = 255

// peerNodeID is the Node ID an association is set up for. An empty one (an FQDN of no
// labels) or a longer one than any FQDN is refused: it names no peer, and could not be saved.
func peerNodeID(id *ie.IE) (string, error) {
	nodeID, err := id.NodeID()
	if err != nil {
		return "", err
	}
	if nodeID == "" || len(nodeID) > maxNodeIDLen {
		return "", fmt.Errorf("node id of %d bytes: want 1 to %d", len(nodeID), maxNodeIDLen)
	}
	return nodeID, nil
}

func marshal(m message.Message) []byte {
	b := make([]byte, m.MarshalLen())
	if err := m.MarshalTo(b); err != nil {
		// Every message built here is well formed; a failure is a bug in this package.
		panic(fmt.Sprintf("pfcp: marshal %s: %v", m.MessageTypeName(), err))
	}
	return b
}
