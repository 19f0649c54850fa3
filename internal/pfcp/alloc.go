package pfcp

import (
	"fmt"
	"net/netip"

	"github.com/wmnsk/go-pfcp/ie"

	"github.com/xupf/xupf/internal/rules"
)

// allocator hands out the TEIDs and UE addresses this UPF chooses for its sessions (F-TEID
// CHOOSE and UE IP address CHV4). Each is unique: an address or TEID is never given to two
// sessions, nor one a static session or an SMF-chosen F-TEID already uses.
type allocator struct {
	inUse    func(rules.Key) bool
	teids    map[uint32]uint64 // allocated TEID -> SEID
	nextTEID uint32
	pools    []netip.Prefix
	ues      map[netip.Addr]uint64 // allocated UE address -> SEID
	nextUE   []netip.Addr          // per pool: where the next search starts
}

func newAllocator(pools []netip.Prefix, inUse func(rules.Key) bool) *allocator {
	a := &allocator{inUse: inUse, teids: map[uint32]uint64{}, nextTEID: 1, pools: pools,
		ues: map[netip.Addr]uint64{}}
	for _, p := range pools {
		a.nextUE = append(a.nextUE, p.Masked().Addr())
	}
	return a
}

// teid allocates a TEID for seid: the next free one after the last given (wrapping past
// 2^32-1 to 1; 0 is reserved), so a released TEID is not reused soon.
func (a *allocator) teid(seid uint64) (uint32, bool) {
	for range len(a.teids) + 1024 {
		t := a.nextTEID
		a.nextTEID++
		if a.nextTEID == 0 {
			a.nextTEID = 1
		}
		if _, taken := a.teids[t]; taken || a.inUse(rules.Key{Uplink: true, TEID: t}) {
			continue
		}
		a.teids[t] = seid
		return t, true
	}
	return 0, false
}

// ue allocates a UE address for seid from the pools, skipping each pool's network and
// broadcast addresses.
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
			if _, taken := a.ues[u]; taken || a.inUse(rules.Key{UE: u}) {
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
	for t := range oldT {
		if !newT[t] {
			delete(a.teids, t)
		}
	}
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
