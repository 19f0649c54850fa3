package pfcp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/rules"
)

func noKeysInUse(rules.Key) bool { return false }

func noneLocal(netip.Addr) bool { return false }

// TestTEIDsUnpredictable: the TEIDs xupfd chooses do not follow each other, so one session's
// TEID tells nothing of another's.
func TestTEIDsUnpredictable(t *testing.T) {
	a := newAllocator(nil, noKeysInUse, noneLocal)
	seen := map[uint32]bool{}
	var last uint32
	next := 0
	for i := range 10000 {
		teid, ok := a.teid(uint64(i))
		if !ok || teid == 0 || seen[teid] {
			t.Fatalf("allocation %d: TEID 0x%x (ok %v), seen before %v", i, teid, ok, seen[teid])
		}
		seen[teid] = true
		if teid == last+1 {
			next++
		}
		last = teid
	}
	if next > 10 {
		t.Errorf("%d of 10000 TEIDs followed the one before", next)
	}
}

// TestTEIDsPreferCacheable: the allocator gives a TEID its prefer accepts when one of the
// first few free ones is, and a TEID all the same when none is.
func TestTEIDsPreferCacheable(t *testing.T) {
	a := newAllocator(nil, noKeysInUse, noneLocal)
	a.prefer = func(teid uint32) bool { return teid%4 == 0 }
	for i := range 1000 {
		if teid, ok := a.teid(uint64(i)); !ok || teid%4 != 0 {
			t.Fatalf("allocation %d: TEID %#x (ok %v), want a multiple of 4", i, teid, ok)
		}
	}
	a.prefer = func(uint32) bool { return false }
	if teid, ok := a.teid(1000); !ok || teid == 0 {
		t.Errorf("with no TEID preferred: TEID %#x, ok %v", teid, ok)
	}
}

// TestReleasedTEIDsQuarantined: a released TEID is not given again within teidGrace.
func TestReleasedTEIDsQuarantined(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newAllocator(nil, noKeysInUse, noneLocal)
	a.maxTEID, a.now = 8, func() time.Time { return now }
	s := &Session{PDRs: map[uint16]*PDR{}}
	for i := range 8 {
		teid, ok := a.teid(1)
		if !ok {
			t.Fatalf("TEID %d of 8: none free", i)
		}
		s.PDRs[uint16(i)] = &PDR{FTEID: &FTEID{TEID: teid, Chosen: true}}
	}
	if teid, ok := a.teid(2); ok {
		t.Fatalf("a ninth TEID 0x%x out of 8", teid)
	}
	a.release(s, nil)
	now = now.Add(teidGrace - time.Second)
	if teid, ok := a.teid(2); ok {
		t.Errorf("TEID 0x%x given again %s after its release", teid, teidGrace-time.Second)
	}
	now = now.Add(time.Second)
	if _, ok := a.teid(2); !ok {
		t.Errorf("no TEID free %s after the release", teidGrace)
	}
	if len(a.quarantine) != 0 || len(a.released) != 0 {
		t.Errorf("quarantine of %d (%d in order) after the grace period", len(a.quarantine), len(a.released))
	}
}

// TestQuarantineBounded: beyond quarantineCap released TEIDs, the oldest leave quarantine
// before their grace period ends.
func TestQuarantineBounded(t *testing.T) {
	a := newAllocator(nil, noKeysInUse, noneLocal)
	a.quarantineCap = 100
	for i := range 1000 {
		teid, ok := a.teid(uint64(i))
		if !ok {
			t.Fatal("no TEID")
		}
		a.release(&Session{PDRs: map[uint16]*PDR{1: {FTEID: &FTEID{TEID: teid, Chosen: true}}}}, nil)
	}
	if len(a.quarantine) != 100 || len(a.released) != 100 {
		t.Errorf("quarantine of %d (%d in order), want the cap, 100", len(a.quarantine), len(a.released))
	}
}
