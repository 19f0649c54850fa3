package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/keytable"
	"github.com/xupf/xupf/internal/rules"
)

// ruleRef returns the rule_ref the datapath finds for k.
func (e *testEnv) ruleRef(t testing.TB, k rules.Key) xupfRuleRef {
	t.Helper()
	table, key := e.dp.keyTableOf(&installedSet{rs: rules.RuleSet{Uplink: k.Uplink, TEID: k.TEID, UE: k.UE}})
	slot, ok := table.Lookup(key)
	if !ok {
		t.Fatalf("%+v is not in its key table", k)
	}
	var ref xupfRuleRef
	if err := e.dp.objs.XupfRefs.Lookup(slot, &ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

// slotOf returns the bucket and slot of the mapped table that hold key, as the program sees
// them, or -1, -1.
func slotOf(table *keyTable, key uint32) (int, int) {
	for i, w := range table.mem.words64() {
		if uint32(w) == key {
			return i / keytable.BucketSlots, i % keytable.BucketSlots
		}
	}
	return -1, -1
}

// n9Set is an uplink rule set on teid whose FAR tunnels toward the other UPF with outer TEID
// out, so that the output packet tells which rule set the lookup found.
func n9Set(teid, out uint32) rules.RuleSet {
	oh := rules.OuterHeader{TEID: out, Peer: addrUPF, Local: addrN3}
	return rules.RuleSet{Uplink: true, TEID: teid, PDRs: []rules.PDR{{ID: 1, FAR: rules.FAR{Action: rules.Forward, OHC: &oh}}}}
}

func ulOn(t testing.TB, teid uint32) []byte {
	return outerGTP(t, gtpHdr(0x30, 255, teid, nil, ulInner(t, 64)), nil)
}

func n9Out(t testing.TB, out uint32) []byte {
	return tunnelled(t, macUPF, rules.OuterHeader{TEID: out, Peer: addrUPF, Local: addrN3}, 0, 0x28, ulInner(t, 63))
}

// TestKeyTableLookups places TEIDs in their first bucket, in their second, in the last slot
// of a bucket, and refuses one whose two buckets are full; every packet finds its own rule
// set (the whole output packet and the counters are compared), and TEIDs not installed, 0
// (which free slots hold) among them, are unknown.
func TestKeyTableLookups(t *testing.T) {
	e := newTestEnv(t, 16)
	table := e.dp.ulKeys
	// TEIDs by their two buckets.
	var a, b uint32 // two buckets
	for teid := uint32(1); ; teid++ {
		if a, b = table.Buckets(be32(teid)); a != b {
			break
		}
	}
	pick := func(n int, b1, b2 uint32) []uint32 {
		var out []uint32
		for teid := uint32(1); len(out) < n; teid++ {
			if h1, h2 := table.Buckets(be32(teid)); h1 == b1 && h2 == b2 {
				out = append(out, teid)
			}
		}
		return out
	}
	ab := pick(3, a, b)                      // first bucket a, second b
	aa := pick(keytable.BucketSlots-1, a, a) // both buckets a: fill it
	bb := pick(keytable.BucketSlots-1, b, b) // both buckets b
	installed := map[uint32]uint32{}         // TEID -> outer TEID of its FAR
	sets := map[uint32]*installedSet{}
	install := func(teids ...uint32) {
		for _, teid := range teids {
			installed[teid] = 0x1000 + uint32(len(installed))
			sets[teid] = e.installSet(t, n9Set(teid, installed[teid]))
		}
	}
	at := func(teid uint32, wantBucket uint32, wantSlot int, what string) {
		t.Helper()
		if bk, s := slotOf(table, be32(teid)); bk != int(wantBucket) || s != wantSlot {
			t.Errorf("%s: TEID %#x in bucket %d slot %d, want %d slot %d", what, teid, bk, s, wantBucket, wantSlot)
		}
	}
	install(ab[0])
	at(ab[0], a, 0, "first bucket")
	install(aa...)
	at(aa[len(aa)-1], a, keytable.BucketSlots-1, "last slot")
	install(ab[1])
	at(ab[1], b, 0, "second bucket (first full)")
	install(bb...)
	at(bb[len(bb)-1], b, keytable.BucketSlots-1, "last slot of the second bucket")

	err := e.dp.Install(1<<32, []rules.RuleSet{n9Set(ab[2], 0x2000)})
	if !errors.Is(err, keytable.ErrFull) || !errors.Is(err, rules.ErrNoResources) ||
		!strings.Contains(err.Error(), "limits.max_sessions") {
		t.Errorf("both buckets full: Install = %v, want ErrFull, ErrNoResources, naming limits.max_sessions", err)
	}
	for _, rs := range []rules.RuleSet{n9Set(0, 0x2000), {UE: netip.IPv4Unspecified(), PDRs: n9Set(1, 1).PDRs}} {
		if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err == nil {
			t.Errorf("%s installed: 0 marks free slots", rs.Key())
		}
	}
	ulOK := map[string]uint64{"ul_rx": 1, "ul_tx": 1}
	unknown := map[string]uint64{"unknown_teid": 1}
	for teid, out := range installed {
		t.Run(fmt.Sprintf("TEID %#x", teid), func(t *testing.T) {
			runCase(t, e, pktCase{in: ulOn(t, teid), ifindex: n3, verdict: xdpRedirect, out: n9Out(t, out),
				fixSport: true, counters: ulOK})
		})
	}
	for _, teid := range []uint32{ab[2], 0} {
		t.Run(fmt.Sprintf("unknown TEID %#x", teid), func(t *testing.T) {
			runCase(t, e, pktCase{in: ulOn(t, teid), ifindex: n3, verdict: xdpDrop,
				counters: map[string]uint64{"ul_rx": 1}, drops: unknown})
		})
	}

	// Deleting a key frees its slot for the refused one.
	e.removeSet(sets[ab[0]])
	runCase(t, e, pktCase{name: "deleted", in: ulOn(t, ab[0]), ifindex: n3, verdict: xdpDrop,
		counters: map[string]uint64{"ul_rx": 1}, drops: unknown})
	if err := e.dp.Install(1<<32, []rules.RuleSet{n9Set(ab[2], 0x2000)}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	at(ab[2], a, 0, "in the freed slot")
	runCase(t, e, pktCase{name: "in the freed slot", in: ulOn(t, ab[2]), ifindex: n3, verdict: xdpRedirect,
		out: n9Out(t, 0x2000), fixSport: true, counters: ulOK})
}

// TestKeyRepublishUnderTraffic runs packets of two TEIDs that share a bucket while another
// goroutine replaces, deletes and re-adds the rules of one of them: every packet must be
// handled by the rules its TEID had at some moment (the old or the new, or none while
// deleted), never by the other TEID's or by half an entry.
func TestKeyRepublishUnderTraffic(t *testing.T) {
	e := newTestEnv(t, 16)
	churn, steady := uint32(1), uint32(2)
	for b, _ := e.dp.ulKeys.Buckets(be32(churn)); ; steady++ {
		if h1, _ := e.dp.ulKeys.Buckets(be32(steady)); h1 == b {
			break
		}
	}
	if err := e.dp.Install(2<<32, []rules.RuleSet{n9Set(steady, 0x3000)}); err != nil {
		t.Fatal(err)
	}
	variants := []rules.RuleSet{n9Set(churn, 0x1000), n9Set(churn, 0x2000)}
	churnOut := [][]byte{n9Out(t, 0x1000), n9Out(t, 0x2000)}
	steadyOut := n9Out(t, 0x3000)

	var seen [3]int // churn: variant 0, variant 1, dropped
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.do(func() error {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return nil
				default:
				}
				teid, isChurn := steady, i%2 == 0
				if isChurn {
					teid = churn
				}
				in := ulOn(t, teid)
				opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+512),
					Context: xdpMD{DataEnd: uint32(len(in)), IngressIfindex: uint32(e.n3)}}
				ret, err := e.dp.Program().Run(opts)
				if err != nil {
					return err
				}
				out := opts.DataOut
				if len(out) >= 36 {
					out = bytes.Clone(out)
					out[34], out[35] = 0, 0 // the outer source port is a hash
				}
				switch {
				case !isChurn && ret == xdpRedirect && bytes.Equal(out, steadyOut):
				case isChurn && ret == xdpRedirect && bytes.Equal(out, churnOut[0]):
					mu.Lock()
					seen[0]++
					mu.Unlock()
				case isChurn && ret == xdpRedirect && bytes.Equal(out, churnOut[1]):
					mu.Lock()
					seen[1]++
					mu.Unlock()
				case isChurn && ret == xdpDrop:
					mu.Lock()
					seen[2]++
					mu.Unlock()
				default:
					return fmt.Errorf("TEID %#x: verdict %s, output\n%s", teid, verdictNames[ret], dump(opts.DataOut))
				}
			}
		})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for round := 0; ; round++ {
		for _, rs := range variants {
			if err := e.dp.Install(1<<32, []rules.RuleSet{rs}); err != nil {
				t.Fatal(err)
			}
		}
		if round%4 == 3 {
			if _, err := e.dp.Uninstall(1 << 32); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		enough := min(seen[0], seen[1], seen[2]) >= 100
		mu.Unlock()
		if enough || time.Now().After(deadline) {
			break
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("churned TEID: %d packets by the first rules, %d by the second, %d dropped", seen[0], seen[1], seen[2])
	if min(seen[0], seen[1], seen[2]) == 0 {
		t.Errorf("the packets met only some of the states (%v): the test did not race the changes", seen)
	}
}
