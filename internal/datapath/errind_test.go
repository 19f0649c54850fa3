package datapath

import (
	"context"
	"testing"
	"time"
)

// TestUnknownTEIDEvents: a G-PDU to an unknown TEID, dropped as unknown_teid as before, hands
// the daemon its sender, the GTP-U address it was sent to and the TEID; past
// XUPF_ERRIND_EVENTS_PER_SEC in a second a CPU hands over no more.
func TestUnknownTEIDEvents(t *testing.T) {
	e := newTestEnv(t, 16)
	pkt := outerGTP(t, gtpHdr(0x30, 255, 0xdead, nil, ulInner(t, 64)), nil)
	const sent, perSecond = 1010, 1000
	// Every packet on one CPU: the bound is per CPU, and a test moved between CPUs meets
	// two windows.
	start := time.Now()
	for range sent {
		if ret, _ := e.runOn(t, 0, pkt, e.n3); ret != xdpDrop {
			t.Fatalf("verdict %s, want drop", verdictNames[ret])
		}
	}
	took := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got []UnknownTEID
	if err := e.dp.ReadUnknownTEIDs(ctx, func(u UnknownTEID) { got = append(got, u) }); err != nil {
		t.Fatal(err)
	}
	// Within one second of the first packet the window holds exactly perSecond; a slower
	// machine may see the window start again once, never more than a packet each.
	switch {
	case took < 900*time.Millisecond && len(got) != perSecond:
		t.Fatalf("%d events for %d packets in %v, want %d (the per-CPU bound)", len(got), sent, took, perSecond)
	case len(got) < perSecond || len(got) > sent:
		t.Fatalf("%d events for %d packets in %v, want %d to %d", len(got), sent, took, perSecond, sent)
	}
	if want := (UnknownTEID{Peer: addrGNB, Local: addrN3, TEID: 0xdead}); got[0] != want {
		t.Errorf("event %+v, want %+v", got[0], want)
	}
}
