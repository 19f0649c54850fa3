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
	start := time.Now()
	for range sent {
		if ret, _ := e.run(t, pkt, e.n3); ret != xdpDrop {
			t.Fatalf("verdict %s, want drop", verdictNames[ret])
		}
	}
	if time.Since(start) > 900*time.Millisecond {
		t.Skip("the packets took most of a second: the event window may have started again")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got []UnknownTEID
	if err := e.dp.ReadUnknownTEIDs(ctx, func(u UnknownTEID) { got = append(got, u) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != perSecond {
		t.Fatalf("%d events for %d packets, want %d (the per-CPU bound)", len(got), sent, perSecond)
	}
	if want := (UnknownTEID{Peer: addrGNB, Local: addrN3, TEID: 0xdead}); got[0] != want {
		t.Errorf("event %+v, want %+v", got[0], want)
	}
}
