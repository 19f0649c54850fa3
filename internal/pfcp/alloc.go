package pfcp

import (
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/rules"
)

// teidGrace is how long a released TEID is not given again: a gNB may still send a few
// packets on it, which must not reach another session.
const teidGrace = time.Minute

// maxQuarantine bounds the released TEIDs waiting out teidGrace (16 bytes each): at a higher
// release rate than maxQuarantine a minute, the oldest leave quarantine early.
const maxQuarantine = 1 << 20

// allocator hands out the TEIDs and UE addresses this UPF chooses for its sessions (F-TEID
// CHOOSE and UE IP address CHV4). Each is unique: an address or TEID is never given to two
// sessions, nor one a static session or an SMF-chosen F-TEID already uses, and no address is
// one of the UPF's own (local).
type allocator struct {
	inUse func(rules.Key) bool
	local func(netip.Addr) bool
	teids map[uint32]uint64 // allocated TEID -> SEID
	// TEIDs are drawn at random, so that a live one cannot be guessed from another, from
	// 1..maxTEID; a released one waits out teidGrace in quarantine (oldest first in
	// released).
	rand          *rand.Rand
	maxTEID       uint32
	quarantine    map[uint32]bool
	released      []releasedTEID
	quarantineCap int
	// prefer, when set, tells the TEIDs the datapath finds fastest (those with a direct
	// cache slot of their own): teid takes the first of preferTries free TEIDs it accepts.
	prefer func(teid uint32) bool
	now    func() time.Time
	pools  []netip.Prefix
	ues    map[netip.Addr]uint64 // allocated UE address -> SEID
	nextUE []netip.Addr          // per pool: where the next search starts
}

func newAllocator(pools []netip.Prefix, inUse func(rules.Key) bool, local func(netip.Addr) bool) *allocator {
	var seed [32]byte
	crand.Read(seed[:]) // never fails (crypto/rand panics rather than return short)
	a := &allocator{inUse: inUse, local: local, teids: map[uint32]uint64{}, rand: rand.New(rand.NewChaCha8(seed)),
		maxTEID: math.MaxUint32, quarantine: map[uint32]bool{}, quarantineCap: maxQuarantine, now: time.Now, pools: pools,
		ues: map[netip.Addr]uint64{}}
	for _, p := range pools {
		a.nextUE = append(a.nextUE, p.Masked().Addr())
	}
	return a
}

type releasedTEID struct {
	teid uint32
	at   time.Time
}

// preferTries is how many free TEIDs teid considers for one prefer accepts: consecutive
// TEIDs have consecutive direct cache slots, so a few find a free slot unless the cache is
// nearly full.
const preferTries = 8

// teid allocates a TEID for seid: the first free one from a random point of 1..maxTEID on
// (0 is reserved), neither in use nor released less than teidGrace ago, or among the first
// preferTries free ones the first prefer accepts.
func (a *allocator) teid(seid uint64) (uint32, bool) {
	a.endQuarantine()
	space := uint64(a.maxTEID)
	start := a.rand.Uint64N(space)
	var pick uint32 // the pick free TEID prefer accepts, else the pick free one
	tries := 0
	for i := range min(uint64(len(a.teids)+len(a.quarantine)+1024), space) {
		t := uint32(1 + (start+i)%space)
		if _, taken := a.teids[t]; taken || a.quarantine[t] || a.inUse(rules.Key{Uplink: true, TEID: t}) {
			continue
		}
		if a.prefer == nil || a.prefer(t) {
			pick = t
			break
		}
		if pick == 0 {
			pick = t
		}
		if tries++; tries == preferTries {
			break
		}
	}
	if pick == 0 {
		return 0, false
	}
	a.teids[pick] = seid
	return pick, true
}

// endQuarantine frees the TEIDs released teidGrace ago or longer, and the oldest beyond
// quarantineCap.
func (a *allocator) endQuarantine() {
	now, n := a.now(), 0
	for i, r := range a.released {
		if now.Sub(r.at) < teidGrace && len(a.released)-i <= a.quarantineCap {
			break
		}
		delete(a.quarantine, r.teid)
		n++
	}
	a.released = a.released[n:]
}

// ue allocates a UE address for seid from the pools, skipping each pool's network and
// broadcast addresses and the UPF's own: a packet to one of those is the host's, and with
// kernel_n6 the datapath does not even look for a session of it (xupf_own_addrs).
func (a *allocator) ue(seid uint64) (netip.Addr, bool) {
	for i, p := range a.pools {
		first := p.Masked().Addr()
		size := uint64(1) << (32 - p.Bits())
		for range size {
			u := a.nextUE[i]
			next := u.Next()
			if !p.Contains(next) {
				next = first
			}
			a.nextUE[i] = next
			if p.Bits() < 31 && (u == first || !p.Contains(u.Next())) {
				continue
			}
			if _, taken := a.ues[u]; taken || a.inUse(rules.Key{UE: u}) || a.local(u) {
				continue
			}
			a.ues[u] = seid
			return u, true
		}
	}
	return netip.Addr{}, false
}

// allocated lists what the session holds of this allocator's TEIDs and addresses.
func allocated(s *Session) (teids map[uint32]bool, ues map[netip.Addr]bool) {
	teids, ues = map[uint32]bool{}, map[netip.Addr]bool{}
	for _, p := range s.PDRs {
		if p.FTEID != nil && p.FTEID.Chosen && p.FTEID.TEID != 0 {
			teids[p.FTEID.TEID] = true
		}
		if p.UEChosen && p.UE.IsValid() {
			ues[p.UE] = true
		}
	}
	return teids, ues
}

// release frees what old holds and new (the session that replaced it, nil when deleted)
// does not.
func (a *allocator) release(old, new *Session) {
	oldT, oldU := allocated(old)
	newT, newU := map[uint32]bool{}, map[netip.Addr]bool{}
	if new != nil {
		newT, newU = allocated(new)
	}
	now := a.now()
	for t := range oldT {
		if !newT[t] {
			delete(a.teids, t)
			a.quarantine[t] = true
			a.released = append(a.released, releasedTEID{t, now})
		}
	}
	a.endQuarantine()
	for u := range oldU {
		if !newU[u] {
			delete(a.ues, u)
		}
	}
}

// assign gives every PDR of s that asks for it a TEID (PDRs with the same CHOOSE ID share
// one) and the UE address (one per session), with address as the F-TEID's IPv4 address.
func (a *allocator) assign(s *Session, address netip.Addr) error {
	byChooseID := map[uint8]uint32{}
	var ue netip.Addr
	for _, p := range s.PDRs {
		if f := p.FTEID; f != nil && f.Chosen && f.TEID != 0 && f.ChooseID != 0 {
			byChooseID[f.ChooseID] = f.TEID
		}
		if p.UEChosen && p.UE.IsValid() {
			ue = p.UE
		}
	}
	for _, id := range sortedKeys(s.PDRs) {
		p := s.PDRs[id]
		if f := p.FTEID; f != nil && f.Chosen && f.TEID == 0 {
			t, ok := byChooseID[f.ChooseID]
			if !ok || f.ChooseID == 0 {
				if t, ok = a.teid(s.SEID); !ok {
					return &requestError{cause: ie.CauseNoResourcesAvailable, msg: "no free TEID"}
				}
				if f.ChooseID != 0 {
					byChooseID[f.ChooseID] = t
				}
			}
			f.TEID, f.Addr = t, address
		}
		if p.UEChosen && !p.UE.IsValid() {
			if !ue.IsValid() {
				var ok bool
				if ue, ok = a.ue(s.SEID); !ok {
					return &requestError{cause: ie.CauseNoResourcesAvailable,
						msg: fmt.Sprintf("PDR %d: no free UE address in the pools %v (ue_pools)", id, a.pools)}
				}
			}
			p.UE = ue
		}
	}
	return nil
}
