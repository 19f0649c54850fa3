package datapath

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/keytable"
	"github.com/xupf/xupf/internal/rules"
)

// cachedRef waits until the uplink direct cache holds teid (its copies are written once the
// grace is over) and reports whether it does; want false waits out a grace and more.
func (e *testEnv) cachedRef(t testing.TB, teid uint32) bool {
	t.Helper()
	deadline := time.Now().Add(10 * grace)
	for {
		e.dp.mu.Lock()
		hit := e.dp.ulDirect.Lookup(be32(teid)) != nil
		e.dp.mu.Unlock()
		if hit || time.Now().After(deadline) {
			return hit
		}
		time.Sleep(grace / 4)
	}
}

// TestDirectCache runs uplink packets through the direct cache and around it: a TEID's
// packets take its cached copy (shown by pointing the key table elsewhere behind the cache's
// back), a TEID whose slot another holds takes the key table, a modified TEID's packets never
// meet the old copy (the new rules from the moment Install returns), a deleted TEID is
// unknown at once, and TEIDs nobody installed, 0 among them, are unknown whatever their slot
// holds. Whole output packets and counters are compared, and the usage counts every packet
// whichever way it went.
func TestDirectCache(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("no direct cache on this architecture")
	}
	e := newTestEnv(t, 16)
	slots := uint32(e.dp.ulDirect.Slots())
	a, b := uint32(0x1001), 0x1001+slots // one slot
	ulOK := map[string]uint64{"ul_rx": 1, "ul_tx": 1}
	unknown := pktCase{ifindex: n3, verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1},
		drops: map[string]uint64{"unknown_teid": 1}}
	via := func(name string, teid, out uint32) {
		t.Helper()
		runCase(t, e, pktCase{name: name, in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect,
			out: n9Out(t, out), fixSport: true, counters: ulOK})
	}
	// install installs teid's rules for owner, which its packets meet at once, from the key
	// table, and from the cache once the grace is over.
	install := func(what string, owner uint64, teid, out uint32) {
		t.Helper()
		if err := e.dp.Install(owner, []rules.RuleSet{n9Set(teid, out)}); err != nil {
			t.Fatal(err)
		}
		via(what+": at once", teid, out)
		if !e.cachedRef(t, teid) {
			t.Fatalf("%s: TEID %#x is not cached", what, teid)
		}
		via(what+": cached", teid, out)
	}
	unknownTEID := func(name string, teid uint32) {
		t.Helper()
		c := unknown
		c.name, c.in = name, ulOn(t, teid)
		runCase(t, e, c)
	}

	if err := e.dp.Install(1, []rules.RuleSet{n9Set(a, 0xa000)}); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Install(2, []rules.RuleSet{n9Set(b, 0xb000)}); err != nil {
		t.Fatal(err)
	}
	if !e.cachedRef(t, a) {
		t.Fatal("TEID a is not cached")
	}
	if e.cachedRef(t, b) {
		t.Fatal("TEID b, whose slot a holds, is cached")
	}
	via("hit", a, 0xa000)
	via("colliding key: the key table", b, 0xb000)

	// Behind the cache's back, a's key points at b's rules: a's packets keep a's, from the
	// cache.
	e.dp.mu.Lock()
	aRef, bRef := e.dp.owners[1][0].ref, e.dp.owners[2][0].ref
	if err := e.dp.ulKeys.Put(be32(a), bRef); err != nil {
		t.Fatal(err)
	}
	e.dp.mu.Unlock()
	via("hit, not the key table", a, 0xa000)
	e.dp.mu.Lock()
	if err := e.dp.ulKeys.Put(be32(a), aRef); err != nil {
		t.Fatal(err)
	}
	e.dp.mu.Unlock()

	// A modification clears the slot before Install returns: the next packet takes the key
	// table's new rules, and the slot holds them once the grace is over.
	install("modified", 1, a, 0xa001)

	// Packets that the cache holds are counted on the PDR's own counter.
	usage, err := e.dp.Usage(1)
	if err != nil || len(usage) != 1 || usage[0].Packets != 4 {
		t.Errorf("usage of TEID a's PDR %+v (err %v): want the 4 packets", usage, err)
	}

	for name, teid := range map[string]uint32{
		"hostile: a's slot, another TEID":   a + 2*slots,
		"hostile: an empty slot":            0x1002,
		"hostile: TEID 0 (free slots' key)": 0,
		"hostile: all ones":                 0xffffffff,
	} {
		unknownTEID(name, teid)
	}

	// A deletion clears the slot: unknown at once, and b takes the slot after the grace.
	if _, err := e.dp.Uninstall(1); err != nil {
		t.Fatal(err)
	}
	unknownTEID("deleted", a)
	install("the freed slot's new key", 2, b, 0xb001)
	unknownTEID("deleted, its slot reused", a)
}

// TestDirectCacheRestart: a restarted datapath clears the direct cache an earlier run pinned
// (its copies may be stale: the run may have changed rules it could not tell the cache
// about), so an adopted TEID takes the key table until this run installs it again, and is
// cached then.
func TestDirectCacheRestart(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("no direct cache on this architecture")
	}
	e := newTestEnv(t, 16)
	teid := uint32(0x2001)
	if err := e.dp.Install(1, []rules.RuleSet{n9Set(teid, 0xa000)}); err != nil {
		t.Fatal(err)
	}
	if !e.cachedRef(t, teid) {
		t.Fatal("not cached")
	}
	if err := e.dp.Close(false); err != nil { // "crash": pins stay
		t.Fatal(err)
	}
	e.dp = e.load(t, e.dp.opts)
	e.dp.mu.Lock()
	for i, w := range e.dp.ulDirect.mem.words64() {
		if i%keytable.SlotWords == keytable.KeyWord && uint32(w) != 0 {
			t.Errorf("slot %d still holds key %#x after the restart", i/keytable.SlotWords, uint32(w))
		}
	}
	e.dp.mu.Unlock()
	ulOK := map[string]uint64{"ul_rx": 1, "ul_tx": 1}
	runCase(t, e, pktCase{name: "adopted", in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect,
		out: n9Out(t, 0xa000), fixSport: true, counters: ulOK})
	if err := e.dp.Install(1, []rules.RuleSet{n9Set(teid, 0xa001)}); err != nil {
		t.Fatal(err)
	}
	if !e.cachedRef(t, teid) {
		t.Fatal("not cached again once installed by this run")
	}
	runCase(t, e, pktCase{name: "installed again", in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect,
		out: n9Out(t, 0xa001), fixSport: true, counters: ulOK})
}

// TestLoadClearsChangedDirectCache: a load that replaces a pinned direct cache of another
// layout clears the old one's keys, which the earlier program reads until Attach while this
// run changes rules: its packets take the key tables meanwhile.
func TestLoadClearsChangedDirectCache(t *testing.T) {
	e := newTestEnv(t, 16)
	earlier := e.dp.spec.Maps[xupfMapXupfUlDirect].Copy()
	earlier.MaxEntries *= 2
	old, _, _ := e.pinEarlierSpec(t, earlier)
	slot := make([]byte, old.ValueSize())
	binary.LittleEndian.PutUint32(slot[8*keytable.KeyWord:], be32(0x2001))
	if err := old.Put(uint32(1), slot); err != nil {
		t.Fatal(err)
	}
	opts := e.dp.opts
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	next := e.load(t, opts)
	e.dp = next // the environment's cleanup now closes and unpins this one
	if next.objs.XupfUlDirect.MaxEntries() == old.MaxEntries() {
		t.Fatal("the direct cache of another size was not replaced")
	}
	if err := old.Lookup(uint32(1), slot); err != nil {
		t.Fatal(err)
	}
	if key := binary.LittleEndian.Uint32(slot[8*keytable.KeyWord:]); key != 0 {
		t.Errorf("the replaced direct cache still holds key %#x", key)
	}
	e.takeOver(t, next)
}

// TestDirectCacheNotifyingFAR: a FAR that drops with a notification is not cached: the
// program makes it FAR_DROP after the first packet where the key table leads, so the next
// packets are dropped without a notification whichever way they go.
func TestDirectCacheNotifyingFAR(t *testing.T) {
	e := newTestEnv(t, 16)
	readBuffered(t, e)
	teid := uint32(0x3001)
	rs := n9Set(teid, 0)
	rs.PDRs[0].FAR = rules.FAR{Action: rules.DropNotify}
	if err := e.dp.Install(1, []rules.RuleSet{rs}); err != nil {
		t.Fatal(err)
	}
	if e.cachedRef(t, teid) {
		t.Error("a FAR that notifies is cached")
	}
	runCase(t, e, pktCase{name: "notified", in: ulOn(t, teid), ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1, "buffered": 1}})
	if a := e.ruleRef(t, rules.Key{Uplink: true, TEID: teid}).Far.Action; a != uint32(xupfFarActionFAR_DROP) {
		t.Errorf("FAR action %v after the first packet, want FAR_DROP", xupfFarAction(a))
	}
	runCase(t, e, pktCase{name: "dropped", in: ulOn(t, teid), ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1}, drops: map[string]uint64{"far_drop": 1}})
}
