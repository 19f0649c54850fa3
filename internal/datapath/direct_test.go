package datapath

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/keytable"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/sdf"
)

// directWay is one direction's key, as a number in host order (a TEID, a UE address), the
// rule set of a key whose FAR tunnels with outer TEID out (so that the output packet tells
// which rules a packet met), and its packets.
type directWay struct {
	name    string
	cache   func(*Datapath) *directCache
	keys    func(*Datapath) *keyTable
	set     func(key, out uint32) rules.RuleSet
	in      func(t testing.TB, key uint32) []byte
	out     func(t testing.TB, key, out uint32) []byte
	ifindex func(*testEnv) int
	ok      map[string]uint64
	unknown pktCase // verdict and counts of a packet of a key nobody installed
	first   uint32  // a key to start from
}

var directWays = []directWay{{
	name: "uplink", cache: func(d *Datapath) *directCache { return d.ulDirect },
	keys: func(d *Datapath) *keyTable { return d.ulKeys },
	set:  n9Set, in: ulOn, out: func(t testing.TB, _, out uint32) []byte { return n9Out(t, out) },
	ifindex: n3, ok: map[string]uint64{"ul_rx": 1, "ul_tx": 1},
	unknown: pktCase{verdict: xdpDrop, counters: map[string]uint64{"ul_rx": 1},
		drops: map[string]uint64{"unknown_teid": 1}},
	first: 0x1001,
}, {
	name: "downlink", cache: func(d *Datapath) *directCache { return d.dlDirect },
	keys: func(d *Datapath) *keyTable { return d.dlKeys },
	set: func(ue, out uint32) rules.RuleSet {
		oh := rules.OuterHeader{TEID: out, Peer: addrGNB, Local: addrN3}
		return rules.RuleSet{UE: hostAddr(ue), PDRs: []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.Forward, OHC: &oh}}}}
	},
	in: func(t testing.TB, ue uint32) []byte {
		return concat(ethBytes(macDN, macN6), innerUDP(t, addrDN, hostAddr(ue), 5000, 6000, 64, payload))
	},
	out: func(t testing.TB, ue, out uint32) []byte {
		oh := rules.OuterHeader{TEID: out, Peer: addrGNB, Local: addrN3}
		return tunnelled(t, macGNB, oh, 0, 0x28, innerUDP(t, addrDN, hostAddr(ue), 5000, 6000, 63, payload))
	},
	ifindex: n6, ok: map[string]uint64{"dl_rx": 1, "dl_tx": 1},
	unknown: pktCase{verdict: xdpPass, counters: map[string]uint64{"pass": 1}}, // no UE's: the kernel's
	first:   0x0a2e1001,                                                        // 10.46.16.1
}}

// hostAddr is the IPv4 address a (host order).
func hostAddr(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// slots is the number of slots of c.
func (c *directCache) slots() int { return len(c.mem.words64()) / keytable.SlotWords }

// cachedCopy returns the copy of key's rule_ref that w's direct cache holds, nil for none:
// what the program finds, reading key's slot (its low bits) as direct_ref does.
func (e *testEnv) cachedCopy(w directWay, key uint32) *xupfRuleRef {
	e.dp.mu.Lock()
	defer e.dp.mu.Unlock()
	c := w.cache(e.dp)
	i := int(key) & (c.slots() - 1)
	s := c.mem.words64()[i*keytable.SlotWords : (i+1)*keytable.SlotWords]
	if key == 0 || uint32(s[keytable.KeyWord]) != be32(key) {
		return nil
	}
	var words [keytable.SlotWords]uint64
	copy(words[:], s)
	return (*xupfRuleRef)(unsafe.Pointer(&words))
}

// cached waits until w's direct cache holds key (its copies are written once the grace is
// over) and reports whether it does; false only after a grace and more.
func (e *testEnv) cached(t testing.TB, w directWay, key uint32) bool {
	t.Helper()
	return e.cachedSuch(w, key, func(*xupfRuleRef) bool { return true })
}

// cachedSuch waits until w's direct cache holds a copy for key that ok accepts, and reports
// whether it does.
func (e *testEnv) cachedSuch(w directWay, key uint32, ok func(*xupfRuleRef) bool) bool {
	deadline := time.Now().Add(10 * grace)
	for {
		if c := e.cachedCopy(w, key); c != nil && ok(c) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(grace / 4)
	}
}

// TestDirectCache runs packets of both directions through the direct caches and around
// them: a key's packets take its cached copy (shown by pointing the key table elsewhere
// behind the cache's back), a key whose slot another holds takes the key table, a modified
// key's packets never meet the old copy (the new rules from the moment Install returns), a
// deleted key is unknown at once, and keys nobody installed, 0 among them, are unknown
// whatever their slot holds. Whole output packets and counters are compared, and the usage
// counts every packet whichever way it went.
func TestDirectCache(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("no direct cache on this architecture")
	}
	for _, w := range directWays {
		t.Run(w.name, func(t *testing.T) { testDirectCache(t, w) })
	}
}

func testDirectCache(t *testing.T, w directWay) {
	e := newTestEnv(t, 16)
	slots := uint32(w.cache(e.dp).slots())
	a, b := w.first, w.first+slots // one slot
	via := func(name string, key, out uint32) {
		t.Helper()
		runCase(t, e, pktCase{name: name, in: w.in(t, key), ifindex: w.ifindex, verdict: xdpRedirect,
			out: w.out(t, key, out), fixSport: true, counters: w.ok})
	}
	// install installs key's rules for owner, which its packets meet at once, from the key
	// table, and from the cache once the grace is over.
	install := func(what string, owner uint64, key, out uint32) {
		t.Helper()
		if err := e.dp.Install(owner, []rules.RuleSet{w.set(key, out)}); err != nil {
			t.Fatal(err)
		}
		via(what+": at once", key, out)
		if !e.cached(t, w, key) {
			t.Fatalf("%s: key %#x is not cached", what, key)
		}
		via(what+": cached", key, out)
	}
	unknownKey := func(name string, key uint32) {
		t.Helper()
		c := w.unknown
		c.name, c.in, c.ifindex = name, w.in(t, key), w.ifindex
		runCase(t, e, c)
	}

	if err := e.dp.Install(1, []rules.RuleSet{w.set(a, 0xa000)}); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Install(2, []rules.RuleSet{w.set(b, 0xb000)}); err != nil {
		t.Fatal(err)
	}
	if !e.cached(t, w, a) {
		t.Fatal("key a is not cached")
	}
	if e.cached(t, w, b) {
		t.Fatal("key b, whose slot a holds, is cached")
	}
	via("hit", a, 0xa000)
	via("colliding key: the key table", b, 0xb000)
	if w.name == "uplink" && (!e.dp.TEIDCacheable(a) || e.dp.TEIDCacheable(b) || !e.dp.TEIDCacheable(a+1)) {
		t.Errorf("TEIDCacheable: a %v (cached), b %v (a's slot), a+1 %v (a free slot)",
			e.dp.TEIDCacheable(a), e.dp.TEIDCacheable(b), e.dp.TEIDCacheable(a+1))
	}

	// Behind the cache's back, a's key points at b's rules: a's packets keep a's, from the
	// cache.
	repoint := func(owner uint64) {
		e.dp.mu.Lock()
		defer e.dp.mu.Unlock()
		if err := w.keys(e.dp).Put(be32(a), e.dp.owners[owner][0].ref); err != nil {
			t.Fatal(err)
		}
	}
	repoint(2)
	via("hit, not the key table", a, 0xa000)
	repoint(1)

	// A modification clears the slot before Install returns: the next packet takes the key
	// table's new rules, and the slot holds them once the grace is over.
	install("modified", 1, a, 0xa001)

	// Packets that the cache holds are counted on the PDR's own counter.
	usage, err := e.dp.Usage(1)
	if err != nil || len(usage) != 1 || usage[0].Packets != 4 {
		t.Errorf("usage of key a's PDR %+v (err %v): want the 4 packets", usage, err)
	}

	hostile := map[string]uint32{
		"hostile: a's slot, another key": a + 2*slots,
		"hostile: an empty slot":         a + 1,
		"hostile: all ones":              0xffffffff,
	}
	if w.name == "uplink" {
		hostile["hostile: TEID 0 (free slots' key)"] = 0
	}
	for name, key := range hostile {
		unknownKey(name, key)
	}

	// A deletion clears the slot: unknown at once, and b takes the slot after the grace.
	if _, err := e.dp.Uninstall(1); err != nil {
		t.Fatal(err)
	}
	unknownKey("deleted", a)
	install("the freed slot's new key", 2, b, 0xb001)
	unknownKey("deleted, its slot reused", a)
}

// restartedAfterCaching returns an environment whose session 1 had its TEID, returned,
// cached (rules tunnelling with outer TEID 0xa000) before the datapath "crashed" (its pins
// stay) and was loaded again.
func restartedAfterCaching(t *testing.T) (*testEnv, uint32) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("no direct cache on this architecture")
	}
	e := newTestEnv(t, 16)
	teid := uint32(0x2001)
	if err := e.dp.Install(1, []rules.RuleSet{n9Set(teid, 0xa000)}); err != nil {
		t.Fatal(err)
	}
	if !e.cached(t, directWays[0], teid) {
		t.Fatal("not cached")
	}
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	e.dp = e.load(t, e.dp.opts)
	return e, teid
}

// TestDirectCacheRestart: a restarted datapath clears the direct cache an earlier run pinned
// (its copies may be stale: the run may have changed rules it could not tell the cache
// about), so an adopted TEID takes the key table until this run installs it again, and is
// cached then.
func TestDirectCacheRestart(t *testing.T) {
	e, teid := restartedAfterCaching(t)
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
	if !e.cached(t, directWays[0], teid) {
		t.Fatal("not cached again once installed by this run")
	}
	runCase(t, e, pktCase{name: "installed again", in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect,
		out: n9Out(t, 0xa001), fixSport: true, counters: ulOK})
}

// TestDirectCacheClassified: a cached key whose rules come to need the classification step
// (a filter on its one PDR) is no longer cached, so its packets take the new rules at once
// and after the grace alike; back to one PDR without filters, it is cached again.
func TestDirectCacheClassified(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("no direct cache on this architecture")
	}
	e := newTestEnv(t, 16)
	w, teid := directWays[0], uint32(0x4001)
	via := func(name string, out uint32) {
		t.Helper()
		runCase(t, e, pktCase{name: name, in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect,
			out: n9Out(t, out), fixSport: true, counters: w.ok})
	}
	install := func(rs rules.RuleSet) {
		t.Helper()
		if err := e.dp.Install(1, []rules.RuleSet{rs}); err != nil {
			t.Fatal(err)
		}
	}
	install(n9Set(teid, 0xa000))
	if !e.cached(t, w, teid) {
		t.Fatal("not cached")
	}
	classified := n9Set(teid, 0xa001)
	classified.PDRs[0].Filters = []sdf.Filter{{Protocol: 17}}
	install(classified)
	via("classified: at once", 0xa001)
	if e.cached(t, w, teid) {
		t.Error("a key that needs the classification step is cached")
	}
	via("classified: after the grace", 0xa001)
	install(n9Set(teid, 0xa002))
	if !e.cached(t, w, teid) {
		t.Fatal("not cached again once back to rule set 0")
	}
	via("rule set 0 again", 0xa002)
}

// TestDirectCacheFailedInstallAfterRestart: an install that fails after publishing an
// adopted TEID's new rules puts back the earlier run's entry, whose rule_ref this run never
// wrote: the TEID takes the key table to the earlier rules, and no copy of them is cached
// (a copy of nothing would drop every packet).
func TestDirectCacheFailedInstallAfterRestart(t *testing.T) {
	e, teid := restartedAfterCaching(t)

	// A UE address whose two key table buckets are full: its publish fails.
	dl := directWays[1]
	buckets := func(ue uint32) (uint32, uint32) { return e.dp.dlKeys.Buckets(be32(ue)) }
	full := dl.first
	for a, b := buckets(full); a == b; a, b = buckets(full) {
		full++
	}
	a, b := buckets(full)
	for _, bucket := range []uint32{a, b} {
		n := 0
		for ue := dl.first; n < keytable.BucketSlots; ue++ {
			if h1, h2 := buckets(ue); h1 == bucket && h2 == bucket {
				e.installSet(t, dl.set(ue, 0xc000))
				n++
			}
		}
	}
	err := e.dp.Install(1, []rules.RuleSet{n9Set(teid, 0xa001), dl.set(full, 0xb000)})
	if !errors.Is(err, keytable.ErrFull) {
		t.Fatalf("Install with a UE address whose buckets are full = %v, want ErrFull", err)
	}
	time.Sleep(3 * grace) // past the restart's grace: a copy would be written by now
	if c := e.cachedCopy(directWays[0], teid); c != nil {
		t.Errorf("the earlier run's entry is cached: %+v", *c)
	}
	runCase(t, e, pktCase{name: "earlier rules", in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect,
		out: n9Out(t, 0xa000), fixSport: true, counters: map[string]uint64{"ul_rx": 1, "ul_tx": 1}})
}

// TestLoadClearsChangedDirectCache: a load that replaces a pinned direct cache of another
// layout clears the old one's keys, which the earlier program reads until Attach while this
// run changes rules: its packets take the key tables meanwhile.
func TestLoadClearsChangedDirectCache(t *testing.T) {
	e := newTestEnv(t, 16)
	olds := map[string]*ebpf.Map{}
	for _, name := range []string{xupfMapXupfUlDirect, xupfMapXupfDlDirect} {
		earlier := e.dp.spec.Maps[name].Copy()
		earlier.MaxEntries *= 2
		old, _, _ := e.pinEarlierSpec(t, earlier)
		slot := make([]byte, old.ValueSize())
		binary.LittleEndian.PutUint32(slot[8*keytable.KeyWord:], be32(0x2001))
		if err := old.Put(uint32(1), slot); err != nil {
			t.Fatal(err)
		}
		olds[name] = old
	}
	opts := e.dp.opts
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	next := e.load(t, opts)
	e.dp = next // the environment's cleanup now closes and unpins this one
	for name, old := range olds {
		if next.spec.Maps[name].MaxEntries == old.MaxEntries() {
			t.Fatalf("%s of another size was not replaced", name)
		}
		slot := make([]byte, old.ValueSize())
		if err := old.Lookup(uint32(1), slot); err != nil {
			t.Fatal(err)
		}
		if key := binary.LittleEndian.Uint32(slot[8*keytable.KeyWord:]); key != 0 {
			t.Errorf("the replaced %s still holds key %#x", name, key)
		}
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
	if e.cached(t, directWays[0], teid) {
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

// TestDirectSlotsConfigured: Options.DirectSlots sizes both caches, rounded up to a power of
// two, the programs' masks with them.
func TestDirectSlotsConfigured(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("one slot on this architecture (TestDirectSlotsByArch)")
	}
	e := newTestEnvOpts(t, Options{MaxSessions: 16, DirectSlots: 3})
	for _, w := range directWays {
		if n := w.cache(e.dp).slots(); n != 4 {
			t.Errorf("%s: %d slots, want 4", w.name, n)
		}
	}
	if m := e.dp.objs.XupfUlDirect.MaxEntries(); m != 4 {
		t.Errorf("%s holds %d slots, want 4", xupfMapXupfUlDirect, m)
	}
	var mask uint32
	if err := e.dp.spec.Variables[xupfVarCfgDlDirectMask].Get(&mask); err != nil || mask != 3 {
		t.Errorf("%s = %d (%v), want 3", xupfVarCfgDlDirectMask, mask, err)
	}
}

// TestDirectSlotsByArch: off x86-64, where no slot is ever written, each direct cache has one
// slot, not the key tables' size.
func TestDirectSlotsByArch(t *testing.T) {
	opts := Options{MaxSessions: 100000}
	for arch, want := range map[string][2]uint32{"amd64": {262144, 131072}, "arm64": {1, 1}} {
		if ul, dl := directSlots(arch, opts); ul != want[0] || dl != want[1] {
			t.Errorf("%s: %d and %d slots, want %d and %d", arch, ul, dl, want[0], want[1])
		}
	}
}
