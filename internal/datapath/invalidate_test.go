package datapath

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/xupf/xupf/internal/nfwatch"
	"github.com/xupf/xupf/internal/router"
)

// TestFlowInvalidationCoalesced: conntrack-destroy requests queued while a scan runs are merged
// into one more scan, which removes exactly the flows of the connections gone (either
// direction) and no other. A fake table stands in for xupf_flows, so no BPF is needed.
func TestFlowInvalidationCoalesced(t *testing.T) {
	const n = 200
	key := func(i int, reply bool) FlowKey {
		k := FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Dst: netip.MustParseAddr("192.0.2.1"),
			SrcPort: 40000, DstPort: 53, Proto: 17}
		if reply {
			k.Src, k.Dst, k.SrcPort, k.DstPort = k.Dst, k.Src, k.DstPort, k.SrcPort
		}
		return k
	}
	tuple := func(k FlowKey) nfwatch.Tuple {
		return nfwatch.Tuple{Src: k.Src, Dst: k.Dst, SrcPort: k.SrcPort, DstPort: k.DstPort, Proto: k.Proto}
	}
	// Flows 0..2n-1, both directions; the connections of the even ones go.
	var table, want []xupfFlowKey
	for i := range 2 * n {
		for _, reply := range []bool{false, true} {
			k := key(i, reply).raw()
			table = append(table, k)
			if i%2 == 1 {
				want = append(want, k)
			}
		}
	}
	scans := make(chan int) // each scan reports how many flows it removed
	release := make(chan struct{})
	iv := newInvalidator(func(v voided) {
		match := v.match()
		if match == nil {
			t.Error("a conntrack-destroy request flushed the whole table")
			return
		}
		before := len(table)
		table = slices.DeleteFunc(table, func(k xupfFlowKey) bool { return match(&k, &xupfFlow{}) })
		scans <- before - len(table)
		<-release
	})
	stop := iv.start()
	defer stop()

	// Each datagram brings both tuples of one connection, as nfwatch reports them.
	destroy := func(i int) {
		iv.queue(voided{gone: map[nfwatch.Tuple]bool{tuple(key(i, false)): true, tuple(key(i, true)): true}})
	}
	destroy(0)
	removed, count := <-scans, 1 // the first scan is under way, blocked: the rest pile up
	for i := 2; i < 2*n; i += 2 {
		destroy(i)
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
		t.Errorf("%d flows left, want the %d of the connections not gone", len(table), len(want))
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
