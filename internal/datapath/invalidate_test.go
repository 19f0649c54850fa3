package datapath

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/xupf/xupf/internal/nfwatch"
	"github.com/xupf/xupf/internal/router"
)

// TestFlowInvalidationCoalesced: requests queued while a scan runs (neighbours collected) are
// merged into one more scan, which removes exactly the flows sent to those neighbours' MACs
// and no other. A fake table stands in for xupf_flows, so no BPF is needed.
func TestFlowInvalidationCoalesced(t *testing.T) {
	const n = 200
	type entry struct {
		k xupfFlowKey
		v xupfFlow
	}
	mac := func(i int) [6]byte { return [6]byte{2, 0, 0, 0, byte(i >> 8), byte(i)} }
	// Two flows to each of the neighbours 0..2n-1; the even ones are collected.
	var table, want []entry
	for i := range 2 * n {
		for port := range uint16(2) {
			k := FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Dst: netip.MustParseAddr("192.0.2.1"),
				SrcPort: 40000 + port, DstPort: 53, Proto: 17, Ifindex: 2}
			en := entry{k.raw(), xupfFlow{Ifindex: 3, Dmac: mac(i)}}
			table = append(table, en)
			if i%2 == 1 {
				want = append(want, en)
			}
		}
	}
	scans := make(chan int) // each scan reports how many flows it removed
	release := make(chan struct{})
	iv := newInvalidator(func(v voided) {
		match := v.match()
		if match == nil {
			t.Error("a neighbour collected flushed the whole table")
			return
		}
		before := len(table)
		table = slices.DeleteFunc(table, func(en entry) bool { return match(&en.k, &en.v) })
		scans <- before - len(table)
		<-release
	})
	stop := iv.start()
	defer stop()

	collect := func(i int) {
		m := mac(i)
		iv.queue(voided{macs: []router.GoneNeighbour{{Ifindex: 3, MAC: m[:], Collected: true}}})
	}
	collect(0)
	removed, count := <-scans, 1 // the first scan is under way, blocked: the rest pile up
	for i := 2; i < 2*n; i += 2 {
		collect(i)
	}
	close(release)
	for removed < 2*n {
		removed += <-scans
		count++
	}
	if count > 2 {
		t.Errorf("%d scans for %d requests, want at most 2", count, n)
	}
	if !slices.Equal(table, want) {
		t.Errorf("%d flows left, want the %d sent to the neighbours not collected", len(table), len(want))
	}
}

// TestFlowInvalidationMerge: a request to remove every flow absorbs the others; neighbour
// requests add up.
func TestFlowInvalidationMerge(t *testing.T) {
	mac := func(b byte) router.GoneNeighbour {
		return router.GoneNeighbour{Ifindex: 3, MAC: []byte{2, 0, 0, 0, 0, b}}
	}
	var v voided
	v.merge(voided{macs: []router.GoneNeighbour{mac(1)}})
	v.merge(voided{macs: []router.GoneNeighbour{mac(2)}})
	if !v.match()(&xupfFlowKey{}, &xupfFlow{Ifindex: 3, Dmac: [6]byte{2, 0, 0, 0, 0, 2}}) ||
		v.match()(&xupfFlowKey{}, &xupfFlow{Ifindex: 3, Dmac: [6]byte{2, 0, 0, 0, 0, 3}}) {
		t.Error("merged neighbour requests select the wrong flows")
	}
	v.merge(voided{all: true})
	v.merge(voided{macs: []router.GoneNeighbour{mac(3)}})
	if v.match() != nil {
		t.Error("a merge with a flush is not a flush")
	}
}

// TestInvalidateNeighboursOfAttachedOnly: a neighbour gone on an interface the datapath is not
// attached to (the return device's, whose entries come and go with the UEs' traffic) voids
// nothing, so even an entry naming that interface stays; one garbage-collected on an attached
// interface removes the flows sent to it.
func TestInvalidateNeighboursOfAttachedOnly(t *testing.T) {
	e := newFlowEnv(t, 4)
	e.putFlow(t, 0, xupfFlow{}) // out of n3 to the gNB's MAC
	elsewhere := e.n6 + 100
	k := transitKey
	k.VLAN, k.Ifindex = 5, e.n6
	if err := e.putRaw(k.raw(), xupfFlow{Ifindex: uint32(elsewhere), Dmac: [6]byte(macGNB), Mtu: 1500}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		flows, err := e.dp.Flows()
		if err != nil {
			t.Fatal(err)
		}
		return len(flows)
	}
	e.dp.invalidateFlows(router.Change{Gone: []router.GoneNeighbour{{Ifindex: elsewhere, MAC: macGNB}}})
	time.Sleep(100 * time.Millisecond)
	if n := count(); n != 2 {
		t.Fatalf("%d flows after a neighbour went on an interface the datapath is not on, want both", n)
	}
	e.dp.invalidateFlows(router.Change{Gone: []router.GoneNeighbour{{Ifindex: e.n3, MAC: macGNB, Collected: true}}})
	for deadline := time.Now().Add(3 * time.Second); count() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d flows 3s after the gNB's neighbour on n3 went, want the one sent there removed", count())
		}
	}
}

// TestFlowGenerationNoCarry: a narrower change (here conntrack removing a connection the cache
// never held) starts a new generation without carrying into the epoch, even from the low
// half's last value: the cached flow stays and its next packet is a hit. Only voiding every
// flow starts a new epoch.
func TestFlowGenerationNoCarry(t *testing.T) {
	e := newFlowEnv(t, 16)
	e.putFlow(t, 0, xupfFlow{Flags: uint8(xupfFlowFlagFLOW_F_TTL)})
	w := e.dp.flowGenWord()
	atomic.StoreUint32(w, atomic.LoadUint32(w)|0xffff)
	before := atomic.LoadUint32(w)
	gone := map[nfwatch.Tuple]bool{{Src: netip.MustParseAddr("10.9.9.9"), Dst: netip.MustParseAddr("192.0.2.9"),
		SrcPort: 1, DstPort: 2, Proto: 17}: true}
	if _, err := e.dp.removeConnections(gone); err != nil {
		t.Fatal(err)
	}
	if gen := atomic.LoadUint32(w); gen != before&^0xffff {
		t.Fatalf("generation %#x after %#x, want %#x: the low half wrapped, the epoch kept", gen, before, before&^0xffff)
	}
	ack := layers.TCP{ACK: true}
	in := frame(macDN, macN6, 0, transitTCP(t, 0, 64, ack))
	runCase(t, e, pktCase{name: "hit after the change", in: in, ifindex: n6, verdict: xdpRedirect,
		out: frame(macN3, macGNB, 0, transitTCP(t, 0, 63, ack)), counters: map[string]uint64{"flow_hit": 1}})
	e.dp.voidFlows()
	runCase(t, e, pktCase{name: "void after voidFlows", in: in, ifindex: n6, verdict: xdpPass,
		counters: map[string]uint64{"pass": 1, "flow_miss": 1, "flow_voided": 1}})
}
