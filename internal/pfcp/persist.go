package pfcp

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/xupf/xupf/internal/sdf"
	"github.com/xupf/xupf/internal/state"
)

// The state file's buckets of the node (Options.Store). Keys: a session's SEID (8 bytes, big
// endian), a peer's Node ID, the names below.
const (
	bucketNode         = "pfcp_node"
	bucketAssociations = "pfcp_associations"
	bucketPeers        = "pfcp_peers"
	bucketSessions     = "pfcp_sessions"
)

// StoreBuckets are the buckets the node keeps in the state file; state.Open makes them.
var StoreBuckets = []string{bucketNode, bucketAssociations, bucketPeers, bucketSessions}

var (
	keyRecovery = []byte("recovery_time_stamp")
	keyNextSEID = []byte("next_seid")
)

// storedSession is a session as earlier versions kept it in the state file, in JSON: the
// model, and what the model keeps out of its JSON (the API's) form. Records are now written
// in a binary form (encodeSession); these are still read.
type storedSession struct {
	Session
	// Filters are each PDR's parsed SDF filters, by PDR id, in the order of its SDF list.
	Filters map[uint16][]sdf.Filter `json:"sdf"`
	// Destinations are the FARs that were given a Destination Interface.
	Destinations []uint32 `json:"far_destinations,omitempty"`
	// Request is the digest of the establishment request (Session.request).
	Request uint64 `json:"establishment_digest"`
}

// storedPeer is a peerRecord as the state file keeps it.
type storedPeer struct {
	Recovery time.Time  `json:"recovery_time_stamp"`
	Addr     netip.Addr `json:"address"`
}

func seidKey(seid uint64) []byte { return binary.BigEndian.AppendUint64(nil, seid) }

// mustJSON encodes v, a type of this file whose every field encodes.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("pfcp: encode %T for the state file: %v", v, err))
	}
	return b
}

// save queues ops for the state file, if there is one. It is called with the lock that
// guards what ops record held (smu for sessions, mu for peers), so the changes to one record
// are queued in the order they were made.
func (n *Node) save(ops ...state.Op) {
	if n.opts.Store != nil {
		n.opts.Store.Write(ops...)
	}
}

// saveSession records s and the SEID counter; n.smu is held.
func (n *Node) saveSession(s *Session) {
	if n.opts.Store == nil {
		return
	}
	n.save(state.Op{Bucket: bucketSessions, Key: seidKey(s.SEID), Value: encodeSession(s)},
		state.Op{Bucket: bucketNode, Key: keyNextSEID, Value: binary.BigEndian.AppendUint64(nil, n.ss.nextSEID)})
}

// forgetSession removes a session's record; n.smu is held.
func (n *Node) forgetSession(seid uint64) {
	n.save(state.Op{Bucket: bucketSessions, Key: seidKey(seid)})
}

// saveAssociation records a (nil: removes the record of nodeID); n.mu is held.
func (n *Node) saveAssociation(nodeID string, a *Association) {
	op := state.Op{Bucket: bucketAssociations, Key: []byte(nodeID)}
	if a != nil {
		op.Value = mustJSON(a)
	}
	n.save(op)
}

// savePeer records what is kept of nodeID's last association (ok false: nothing); n.mu is
// held.
func (n *Node) savePeer(nodeID string, r peerRecord, ok bool) {
	op := state.Op{Bucket: bucketPeers, Key: []byte(nodeID)}
	if ok {
		op.Value = mustJSON(storedPeer{r.recovery, r.addr})
	}
	n.save(op)
}

// RestoreResult says what Restore found.
type RestoreResult struct {
	// Restored says the state file had the node's state (its Recovery Time Stamp): SMFs see
	// no restart. False on a first start.
	Restored                    bool
	Associations, Peers         int
	Sessions                    int
	RecoveryTimeStamp           time.Time
	NextSEID                    uint64
	InstalledIn, ReadIn         time.Duration
	AllocatedTEIDs, AllocatedUE int
}

// maxRestoreErrors bounds the sessions Restore names when they no longer fit.
const maxRestoreErrors = 10

// Restore loads the node's state from the state file (Options.Store) before Serve: the
// Recovery Time Stamp (kept, so SMFs see no restart), the associations and what is kept of
// lost ones, the SEID counter and every session, which it installs in the datapath again and
// whose TEIDs and UE addresses it takes back from the allocator. Installing replaces each
// TEID and UE entry in place, so traffic keeps flowing meanwhile.
//
// A session the configuration no longer allows (a network instance, GTP-U address or UE pool
// gone, limits made smaller) fails Restore with every such session named, and nothing is
// served: dropping sessions an SMF believes in is left to the operator (restore the
// configuration, or `xupfd --stop` to start from nothing). On a first start (no Recovery Time
// Stamp in the file) it records the node's.
func (n *Node) Restore() (RestoreResult, error) {
	var res RestoreResult
	st := n.opts.Store
	if st == nil {
		return res, nil
	}
	start := time.Now()
	path := st.Path()
	rec, err := st.Get(bucketNode, keyRecovery)
	if err != nil {
		return res, err
	}
	if rec == nil {
		res.RecoveryTimeStamp = n.recovery
		return res, st.Sync(state.Op{Bucket: bucketNode, Key: keyRecovery, Value: mustJSON(n.recovery)})
	}
	if err := json.Unmarshal(rec, &n.recovery); err != nil {
		return res, fmt.Errorf("state file %s: recovery time stamp: %w", path, err)
	}
	res.Restored, res.RecoveryTimeStamp = true, n.recovery
	if b, err := st.Get(bucketNode, keyNextSEID); err != nil {
		return res, err
	} else if len(b) == 8 {
		n.ss.nextSEID = max(binary.BigEndian.Uint64(b), FirstSEID)
	}
	n.mu.Lock()
	err = errors.Join(
		st.ForEach(bucketAssociations, func(k, v []byte) error {
			var a Association
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("association %q: %w", k, err)
			}
			n.assocs[a.NodeID] = &a
			return nil
		}),
		st.ForEach(bucketPeers, func(k, v []byte) error {
			var p storedPeer
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("peer %q: %w", k, err)
			}
			n.recoveries[string(k)] = peerRecord{p.Recovery, p.Addr}
			return nil
		}))
	res.Associations, res.Peers = len(n.assocs), len(n.recoveries)
	n.mu.Unlock()
	if err != nil {
		return res, fmt.Errorf("state file %s: %w", path, err)
	}
	var sessions []*Session
	err = st.ForEach(bucketSessions, func(k, v []byte) error {
		s, err := decodeStored(v)
		if err != nil {
			return fmt.Errorf("session %x: %w", k, err)
		}
		sessions = append(sessions, s)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("state file %s: %w", path, err)
	}
	res.ReadIn = time.Since(start)
	n.smu.Lock()
	defer n.smu.Unlock()
	var refused []string
	for _, s := range sessions {
		if err := n.restoreSession(s); err != nil {
			refused = append(refused, fmt.Sprintf("session 0x%x of %s: %s", s.SEID, s.Peer, asRequestError(err).msg))
		}
	}
	if total := len(refused); total > 0 {
		more := ""
		if total > maxRestoreErrors {
			more = fmt.Sprintf(" (and %d more)", len(refused)-maxRestoreErrors)
			refused = refused[:maxRestoreErrors]
		}
		return res, fmt.Errorf("%d of the %d saved PFCP sessions do not fit this configuration: %s%s; put back the "+
			"configuration they were made with, or run `xupfd --stop` to remove them all (the SMFs must then set "+
			"them up again)", total, len(sessions), strings.Join(refused, "; "), more)
	}
	res.Sessions = len(n.ss.byID)
	res.NextSEID = n.ss.nextSEID
	res.AllocatedTEIDs, res.AllocatedUE = len(n.ss.alloc.teids), len(n.ss.alloc.ues)
	res.InstalledIn = time.Since(start) - res.ReadIn
	return res, nil
}

// decodeStored is the session of a record, in the binary form (encodeSession) or, from an
// earlier version, JSON (storedSession).
func decodeStored(v []byte) (*Session, error) {
	var s *Session
	var err error
	switch {
	case len(v) > 0 && v[0] == recordBinary:
		s, err = decodeSession(v[1:])
	case len(v) > 0 && v[0] == '{':
		s, err = decodeJSONSession(v)
	default:
		return nil, errors.New("not a session record (neither the binary form nor JSON)")
	}
	if err != nil {
		return nil, err
	}
	if s.SEID < FirstSEID || s.PDRs == nil || s.FARs == nil {
		return nil, errors.New("not a session record")
	}
	return s, nil
}

// decodeJSONSession is the session of a JSON record (storedSession).
func decodeJSONSession(v []byte) (*Session, error) {
	var st storedSession
	if err := json.Unmarshal(v, &st); err != nil {
		return nil, err
	}
	s := &st.Session
	s.request = st.Request
	if s.PDRs == nil || s.FARs == nil {
		return nil, errors.New("not a session record")
	}
	s.QERs, s.URRs, s.BARs = orEmpty(s.QERs), orEmpty(s.URRs), orEmpty(s.BARs)
	// A null rule ("qers": {"1": null}) would be taken for a rule and crash what reads it.
	if err := errors.Join(noNull("PDR", s.PDRs), noNull("FAR", s.FARs), noNull("QER", s.QERs),
		noNull("URR", s.URRs), noNull("BAR", s.BARs)); err != nil {
		return nil, err
	}
	for id, p := range s.PDRs {
		if len(st.Filters[id]) != len(p.SDF) {
			return nil, fmt.Errorf("PDR %d: its SDF filters do not match their descriptions", id)
		}
		for i := range p.SDF {
			p.SDF[i].Filter = st.Filters[id][i]
		}
	}
	for id, f := range s.FARs {
		f.hasDestination = slices.Contains(st.Destinations, id)
	}
	return s, nil
}

// noNull is an error naming the first (lowest) id of rules whose rule is null.
func noNull[K cmp.Ordered, V any](kind string, rules map[K]*V) error {
	for _, id := range sortedKeys(rules) {
		if rules[id] == nil {
			return fmt.Errorf("%s %v: empty", kind, id)
		}
	}
	return nil
}

func orEmpty[K comparable, V any](m map[K]*V) map[K]*V {
	if m == nil {
		return map[K]*V{}
	}
	return m
}

// restoreSession checks s against this configuration, takes back what it was allocated,
// installs it and indexes it, as an establishment does; n.smu is held. A record that got
// past decodeStored but still makes building its rules panic stops the start with an
// error naming the session, not a crash.
func (n *Node) restoreSession(s *Session) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("not a session record (%v)", p)
		}
	}()
	if _, dup := n.ss.byID[s.SEID]; dup {
		return errors.New("its SEID is saved twice")
	}
	if err := n.sessionRoom(s.Peer); err != nil {
		return err
	}
	if err := n.check(s); err != nil {
		return err
	}
	for _, id := range sortedKeys(s.PDRs) {
		p := s.PDRs[id]
		if f := p.FTEID; f != nil && f.Chosen && !slices.Contains(n.opts.GTPUAddrs, f.Addr) {
			return fmt.Errorf("PDR %d: F-TEID address %s is no longer a GTP-U address (gtpu_addresses)", id, f.Addr)
		}
		if p.UEChosen && !containsAddr(n.opts.UEPools, p.UE) {
			return fmt.Errorf("PDR %d: UE address %s is no longer in the UE pools (ue_pools)", id, p.UE)
		}
	}
	if err := n.opts.Datapath.Install(s.SEID, n.ruleSets(s)); err != nil {
		return fmt.Errorf("datapath: %w", err)
	}
	teids, ues := allocated(s)
	for t := range teids {
		n.ss.alloc.teids[t] = s.SEID
	}
	for u := range ues {
		n.ss.alloc.ues[u] = s.SEID
	}
	for _, id := range sortedKeys(s.FARs) {
		n.ss.epoch++
		s.FARs[id].epoch = n.ss.epoch
	}
	// The datapath carried the counters of the earlier run on: only what comes after counts.
	counted, err := n.opts.Datapath.Usage(s.SEID)
	if err != nil {
		return fmt.Errorf("datapath: read the counters: %w", err)
	}
	// Its quotas too: what was used of a grant before the restart counts toward its report.
	used, err := n.opts.Datapath.QuotaUsed(s.SEID)
	if err != nil {
		return fmt.Errorf("datapath: read the quotas: %w", err)
	}
	n.add(s, counted)
	for _, q := range used {
		n.ss.usage[s.SEID].QuotaUsedBefore(q)
	}
	n.ss.nextSEID = max(n.ss.nextSEID, s.SEID+1)
	return nil
}
