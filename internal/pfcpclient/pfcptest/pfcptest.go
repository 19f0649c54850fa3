// Package pfcptest holds a fake UPF for the tests of the PFCP client and of xupfctl: it
// answers associations, heartbeats and session establishment, modification and deletion on a
// loopback socket as a UPF would, choosing F-TEIDs and UE addresses when asked to, and keeps
// every session request it accepted for the tests to decode.
package pfcptest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"
)

// Options configure a fake UPF. The zero value is usable.
type Options struct {
	// NodeID is the UPF's Node ID; default "upf.test".
	NodeID string
	// N3 is the address in the F-TEIDs the UPF chooses; default 192.0.2.1.
	N3 netip.Addr
	// UEPool is where the UPF chooses UE addresses from, counting up from the first address
	// after the prefix's own; default 10.60.0.0/16.
	UEPool netip.Prefix
	// FirstTEID is the first TEID the UPF chooses; default 0x100.
	FirstTEID uint32
	// EstablishCause, when set, is the cause every Session Establishment Request from an
	// associated peer is answered with.
	EstablishCause uint8
	// IgnoreEstablishments is how many Session Establishment Requests the UPF leaves
	// unanswered before it answers one, to make the client retransmit.
	IgnoreEstablishments int
}

// Session is a PFCP session the fake UPF holds.
type Session struct {
	NodeID         string
	CPSEID, UPSEID uint64
	UE             netip.Addr // the UE address the UPF chose, if it was asked to
	TEIDs          []uint32   // the TEIDs the UPF chose, in order
	// Establishment is the request that created the session; Modifications the accepted
	// modification requests, in order.
	Establishment *message.SessionEstablishmentRequest
	Modifications []*message.SessionModificationRequest
}

// Association is a PFCP association the fake UPF holds.
type Association struct {
	NodeID   string
	Address  netip.AddrPort
	Recovery time.Time
}

// UPF is the fake UPF.
type UPF struct {
	opts     Options
	conn     *net.UDPConn
	recovery time.Time

	mu        sync.Mutex
	assocs    map[string]Association
	sessions  map[uint64]*Session // by UP SEID
	nextSEID  uint64
	nextTEID  uint32
	nextUE    netip.Addr
	ignore    int
	seq       uint32
	heartbeat map[uint32]chan struct{} // answers awaited by Heartbeat, by sequence number
}

// Start runs a fake UPF on a loopback socket until the test ends.
func Start(t testing.TB, opts Options) *UPF {
	t.Helper()
	if opts.NodeID == "" {
		opts.NodeID = "upf.test"
	}
	if !opts.N3.IsValid() {
		opts.N3 = netip.MustParseAddr("192.0.2.1")
	}
	if !opts.UEPool.IsValid() {
		opts.UEPool = netip.MustParsePrefix("10.60.0.0/16")
	}
	if opts.FirstTEID == 0 {
		opts.FirstTEID = 0x100
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	u := &UPF{opts: opts, conn: conn, recovery: time.Now().Truncate(time.Second),
		assocs: map[string]Association{}, sessions: map[uint64]*Session{}, nextSEID: 0x5000,
		nextTEID: opts.FirstTEID, nextUE: opts.UEPool.Masked().Addr().Next(), ignore: opts.IgnoreEstablishments,
		heartbeat: map[uint32]chan struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		u.serve()
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return u
}

// Addr is the address the UPF answers PFCP on.
func (u *UPF) Addr() netip.AddrPort {
	return u.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Sessions returns copies of the sessions the UPF holds, by UP SEID.
func (u *UPF) Sessions() []Session {
	u.mu.Lock()
	defer u.mu.Unlock()
	list := make([]Session, 0, len(u.sessions))
	for _, s := range u.sessions {
		list = append(list, *s)
	}
	slices.SortFunc(list, func(a, b Session) int { return cmp.Compare(a.UPSEID, b.UPSEID) })
	return list
}

// Session returns a copy of the session with the given UP SEID.
func (u *UPF) Session(upSEID uint64) (Session, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.sessions[upSEID]
	if !ok {
		return Session{}, false
	}
	return *s, true
}

// Associations returns the associations the UPF holds, by Node ID.
func (u *UPF) Associations() []Association {
	u.mu.Lock()
	defer u.mu.Unlock()
	list := make([]Association, 0, len(u.assocs))
	for _, a := range u.assocs {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b Association) int { return strings.Compare(a.NodeID, b.NodeID) })
	return list
}

// Heartbeat sends a Heartbeat Request to the peer associated as nodeID and waits up to a
// second for its answer.
func (u *UPF) Heartbeat(nodeID string) error {
	u.mu.Lock()
	a, ok := u.assocs[nodeID]
	u.seq++
	seq := u.seq | 0x800000 // apart from the client's sequence numbers, for reading the traces
	ch := make(chan struct{}, 1)
	u.heartbeat[seq] = ch
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		delete(u.heartbeat, seq)
		u.mu.Unlock()
	}()
	if !ok {
		return fmt.Errorf("pfcptest: no association with %q", nodeID)
	}
	if _, err := u.conn.WriteToUDPAddrPort(marshal(message.NewHeartbeatRequest(seq, ie.NewRecoveryTimeStamp(u.recovery), nil)), a.Address); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pfcptest: %q did not answer a heartbeat", nodeID)
	}
}

func (u *UPF) serve() {
	buf := make([]byte, 65535)
	for {
		n, peer, err := u.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		// Copied: the requests kept in Sessions must not share the read buffer.
		m, err := message.Parse(slices.Clone(buf[:n]))
		if err != nil {
			continue
		}
		if resp := u.handle(peer, m); resp != nil {
			u.conn.WriteToUDPAddrPort(marshal(resp), peer)
		}
	}
}

// handle answers one message; nil: no answer.
func (u *UPF) handle(peer netip.AddrPort, m message.Message) message.Message {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := m.(*message.HeartbeatResponse); ok {
		if ch := u.heartbeat[m.Sequence()]; ch != nil {
			ch <- struct{}{}
		}
		return nil
	}
	switch m := m.(type) {
	case *message.HeartbeatRequest:
		return message.NewHeartbeatResponse(m.SequenceNumber, ie.NewRecoveryTimeStamp(u.recovery))
	case *message.AssociationSetupRequest:
		return u.associationSetup(peer, m)
	case *message.AssociationReleaseRequest:
		cause := ie.CauseNoEstablishedPFCPAssociation
		if nodeID, ok := u.association(m.NodeID); ok {
			delete(u.assocs, nodeID)
			u.deleteSessions(nodeID) // as a UPF does when the association goes
			cause = ie.CauseRequestAccepted
		}
		return message.NewAssociationReleaseResponse(m.SequenceNumber, u.nodeID(), ie.NewCause(cause))
	case *message.SessionEstablishmentRequest:
		if u.ignore > 0 {
			u.ignore--
			return nil
		}
		return u.establish(m)
	case *message.SessionModificationRequest:
		s, ok := u.sessions[m.SEID()]
		if !ok {
			return message.NewSessionModificationResponse(0, 0, 0, m.SequenceNumber, 0,
				ie.NewCause(ie.CauseSessionContextNotFound))
		}
		s.Modifications = append(s.Modifications, m)
		return message.NewSessionModificationResponse(0, 0, s.CPSEID, m.SequenceNumber, 0,
			ie.NewCause(ie.CauseRequestAccepted))
	case *message.SessionDeletionRequest:
		s, ok := u.sessions[m.SEID()]
		if !ok {
			return message.NewSessionDeletionResponse(0, 0, 0, m.SequenceNumber, 0,
				ie.NewCause(ie.CauseSessionContextNotFound))
		}
		delete(u.sessions, s.UPSEID)
		return message.NewSessionDeletionResponse(0, 0, s.CPSEID, m.SequenceNumber, 0,
			ie.NewCause(ie.CauseRequestAccepted))
	}
	return nil
}

// associationSetup accepts every peer. A Node ID that associates again loses its sessions
// unless it asks for them to be retained (TS 29.244 6.2.6.2.2).
func (u *UPF) associationSetup(peer netip.AddrPort, m *message.AssociationSetupRequest) message.Message {
	respond := func(ies ...*ie.IE) message.Message {
		return message.NewAssociationSetupResponse(m.SequenceNumber,
			append([]*ie.IE{u.nodeID(), ie.NewRecoveryTimeStamp(u.recovery)}, ies...)...)
	}
	if m.NodeID == nil || m.RecoveryTimeStamp == nil {
		return respond(ie.NewCause(ie.CauseMandatoryIEMissing))
	}
	nodeID, err1 := m.NodeID.NodeID()
	recovery, err2 := m.RecoveryTimeStamp.RecoveryTimeStamp()
	if err1 != nil || err2 != nil {
		return respond(ie.NewCause(ie.CauseMandatoryIEIncorrect))
	}
	_, existed := u.assocs[nodeID]
	u.assocs[nodeID] = Association{NodeID: nodeID, Address: peer, Recovery: recovery}
	// UP Function Features: FTUP (octet 5 bit 5), the UPF allocates F-TEIDs.
	ies := []*ie.IE{ie.NewCause(ie.CauseRequestAccepted), ie.NewUPFunctionFeatures(0x10, 0x00)}
	switch {
	case existed && m.PFCPSessionRetentionInformation != nil:
		ies = append(ies, ie.NewPFCPASRspFlags(0x01)) // PSREI
	case existed:
		u.deleteSessions(nodeID)
	}
	return respond(ies...)
}

func (u *UPF) deleteSessions(nodeID string) {
	for seid, s := range u.sessions {
		if s.NodeID == nodeID {
			delete(u.sessions, seid)
		}
	}
}

// establish creates a session, choosing the F-TEIDs asked for with CHOOSE (one per CHOOSE
// ID) and a UE address for the PDRs that ask with CHV4 (one per session).
func (u *UPF) establish(m *message.SessionEstablishmentRequest) message.Message {
	respond := func(cpSEID uint64, ies ...*ie.IE) message.Message {
		return message.NewSessionEstablishmentResponse(0, 0, cpSEID, m.SequenceNumber, 0,
			append([]*ie.IE{u.nodeID()}, ies...)...)
	}
	if m.NodeID == nil || m.CPFSEID == nil {
		return respond(0, ie.NewCause(ie.CauseMandatoryIEMissing))
	}
	nodeID, ok := u.association(m.NodeID)
	if !ok {
		return respond(0, ie.NewCause(ie.CauseNoEstablishedPFCPAssociation))
	}
	cp, err := m.CPFSEID.FSEID()
	if err != nil {
		return respond(0, ie.NewCause(ie.CauseMandatoryIEIncorrect))
	}
	if u.opts.EstablishCause != 0 {
		return respond(cp.SEID, ie.NewCause(u.opts.EstablishCause))
	}
	s := &Session{NodeID: nodeID, CPSEID: cp.SEID, UPSEID: u.nextSEID, Establishment: m}
	u.nextSEID++
	chosen := map[uint8]uint32{} // TEID by CHOOSE ID
	var created []*ie.IE
	for _, pdr := range m.CreatePDR {
		id, err := pdr.PDRID()
		if err != nil {
			return respond(cp.SEID, ie.NewCause(ie.CauseMandatoryIEMissing))
		}
		report := []*ie.IE{ie.NewPDRID(id)}
		if f, err := fteid(pdr); err == nil && f.HasCh() {
			teid, ok := chosen[f.ChooseID]
			if !ok || !f.HasChID() {
				teid = u.nextTEID
				u.nextTEID++
				s.TEIDs = append(s.TEIDs, teid)
				if f.HasChID() {
					chosen[f.ChooseID] = teid
				}
			}
			report = append(report, ie.NewFTEID(0x01, teid, u.opts.N3.AsSlice(), nil, 0))
		}
		if ue, err := pdr.UEIPAddress(); err == nil && ue.Flags&0x10 != 0 { // CHV4
			if !s.UE.IsValid() {
				s.UE = u.nextUE
				u.nextUE = u.nextUE.Next()
			}
			report = append(report, ie.NewUEIPAddress(0x02|ue.Flags&0x04, s.UE.String(), "", 0, 0))
		}
		if len(report) > 1 {
			created = append(created, ie.NewCreatedPDR(report...))
		}
	}
	u.sessions[s.UPSEID] = s
	up := u.Addr().Addr()
	return respond(cp.SEID, append([]*ie.IE{ie.NewCause(ie.CauseRequestAccepted),
		ie.NewFSEID(s.UPSEID, up.AsSlice(), nil)}, created...)...)
}

func fteid(pdr *ie.IE) (*ie.FTEIDFields, error) {
	f := One(pdr, ie.PDI, ie.FTEID)
	if f == nil {
		return nil, ie.ErrIENotFound
	}
	return f.FTEID()
}

// Find returns the IEs of the type last in path inside the grouped IE g, descending through
// the grouped IEs of the types before it: Find(pdr, ie.PDI, ie.FTEID) is the F-TEIDs in the
// PDI of a Create PDR. An IE that does not parse is left out.
func Find(g *ie.IE, path ...uint16) []*ie.IE {
	if g == nil || len(path) == 0 {
		return nil
	}
	children, err := ie.ParseMultiIEs(g.Payload)
	if err != nil {
		return nil
	}
	var found []*ie.IE
	for _, c := range children {
		if c.Type != path[0] {
			continue
		}
		if len(path) == 1 {
			found = append(found, c)
		} else {
			found = append(found, Find(c, path[1:]...)...)
		}
	}
	return found
}

// One returns the first IE Find finds, or nil.
func One(g *ie.IE, path ...uint16) *ie.IE {
	if found := Find(g, path...); len(found) > 0 {
		return found[0]
	}
	return nil
}

func (u *UPF) nodeID() *ie.IE { return ie.NewNodeIDHeuristic(u.opts.NodeID) }

// association returns the Node ID id names, if it is associated.
func (u *UPF) association(id *ie.IE) (string, bool) {
	if id == nil {
		return "", false
	}
	nodeID, err := id.NodeID()
	if err != nil {
		return "", false
	}
	_, ok := u.assocs[nodeID]
	return nodeID, ok
}

func marshal(m message.Message) []byte {
	b := make([]byte, m.MarshalLen())
	if err := m.MarshalTo(b); err != nil {
		panic(fmt.Sprintf("pfcptest: marshal %s: %v", m.MessageTypeName(), err))
	}
	return b
}
