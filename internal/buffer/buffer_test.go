package buffer

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeDatapath records what is sent on and released.
type fakeDatapath struct {
	mu       sync.Mutex
	replayed []string
	released uint64
}

func (f *fakeDatapath) Replay(p Packet) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replayed = append(f.replayed, string(p.Frame))
	return nil
}

func (f *fakeDatapath) Release(_ uint32, n uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released += n
	return nil
}

func (f *fakeDatapath) state() ([]string, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.replayed), f.released
}

var k = Key{Owner: 1 << 32, PDR: 2}

func pkt(i int) Packet {
	return Packet{Owner: k.Owner, PDR: k.PDR, Counter: 9, Frame: fmt.Appendf(nil, "p%04d", i)}
}

func newTest(lim Limits) (*Buffer, *fakeDatapath, chan Key) {
	dp := &fakeDatapath{}
	notes := make(chan Key, 16)
	return New(dp, lim, func(k Key) { notes <- k }, nil), dp, notes
}

var roomy = Limits{MaxPacketsPerSession: 100, MaxBytesPerSession: 1 << 20, MaxBytes: 1 << 20, MaxDuration: time.Minute}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHoldThenFlush: held packets leave in order when the FAR forwards, and later ones go
// behind them; each is released once sent.
func TestHoldThenFlush(t *testing.T) {
	b, dp, _ := newTest(roomy)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold}})
	var want []string
	for i := range 50 {
		b.Add(pkt(i))
		want = append(want, string(pkt(i).Frame))
	}
	if got, rel := dp.state(); len(got) != 0 || rel != 0 {
		t.Fatalf("sent %d, released %d while holding", len(got), rel)
	}
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Flush}})
	for i := 50; i < 80; i++ {
		b.Add(pkt(i))
		want = append(want, string(pkt(i).Frame))
	}
	waitFor(t, "the flush", func() bool { _, rel := dp.state(); return rel == 80 })
	if got, _ := dp.state(); !slices.Equal(got, want) {
		t.Errorf("sent on %v, want %v", got, want)
	}
	if c := b.Counts(); c["buffered"] != 80 || c["flushed"] != 80 {
		t.Errorf("counts %v", c)
	}
}

// TestBounds: the session's packet bound, the BAR's smaller one, and the byte bounds
// discard as overflow, released.
func TestBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		lim  Limits
		pol  Policy
		kept int
	}{
		{"session packets", Limits{MaxPacketsPerSession: 3, MaxBytesPerSession: 1 << 20, MaxBytes: 1 << 20, MaxDuration: time.Minute}, Policy{Mode: Hold}, 3},
		{"BAR's suggested count", roomy, Policy{Mode: Hold, MaxPackets: 2}, 2},
		{"session bytes", Limits{MaxPacketsPerSession: 100, MaxBytesPerSession: 20, MaxBytes: 1 << 20, MaxDuration: time.Minute}, Policy{Mode: Hold}, 4},
		{"all bytes", Limits{MaxPacketsPerSession: 100, MaxBytesPerSession: 1 << 20, MaxBytes: 10, MaxDuration: time.Minute}, Policy{Mode: Hold}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, dp, _ := newTest(c.lim)
			b.Set(k.Owner, map[Key]Policy{k: c.pol})
			for i := range 10 {
				b.Add(pkt(i))
			}
			if got := b.Counts(); got["buffered"] != uint64(c.kept) || got["discarded_overflow"] != uint64(10-c.kept) {
				t.Errorf("counts %v, want %d kept", got, c.kept)
			}
			if _, rel := dp.state(); rel != uint64(10-c.kept) {
				t.Errorf("released %d, want the %d discarded", rel, 10-c.kept)
			}
		})
	}
}

// TestDiscards: a FAR that drops discards what is held and what comes; so do the SMF's
// DROBU, the session's removal and expiry; a duration below 0 holds nothing. What is
// discarded for the PDR, but for the removal, is counted as dropped downlink traffic.
func TestDiscards(t *testing.T) {
	b, dp, _ := newTest(roomy)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold}})
	b.Add(pkt(0))
	b.Add(pkt(1))
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Discard}})
	b.Add(pkt(2))
	if c := b.Counts(); c["discarded_dropped"] != 3 {
		t.Errorf("counts %v, want 3 dropped", c)
	}
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Duration: -1}})
	b.Add(pkt(3))
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Duration: time.Second}})
	b.Add(pkt(4))
	b.Add(pkt(5))
	b.expire(time.Now().Add(500 * time.Millisecond))
	if c := b.Counts(); c["discarded_expired"] != 1 {
		t.Errorf("counts %v, want 1 expired (duration 0)", c)
	}
	b.expire(time.Now().Add(time.Second))
	if c := b.Counts(); c["discarded_expired"] != 3 {
		t.Errorf("counts %v, want 3 expired", c)
	}
	b.Add(pkt(6))
	b.Drop(k.Owner)
	if c := b.Counts(); c["discarded_dropped"] != 4 {
		t.Errorf("counts %v, want 4 dropped", c)
	}
	if d := b.Dropped(k.Owner); d[k].Packets != 7 {
		t.Errorf("dropped for the PDR %+v, want the 7 discarded (4 dropped, 3 expired)", d)
	}
	b.Add(pkt(6))
	b.Remove(k.Owner)
	b.Add(pkt(7))
	if c := b.Counts(); c["discarded_deleted"] != 2 {
		t.Errorf("counts %v, want 2 deleted", c)
	}
	if got, rel := dp.state(); len(got) != 0 || rel != 8 {
		t.Errorf("sent %v, released %d: want nothing sent, all but the removed one released", got, rel)
	}
}

// TestIPLength: dropped bytes are the IPv4 packet's length, as usage counts them.
func TestIPLength(t *testing.T) {
	frame := make([]byte, 14+100)
	frame[12], frame[13], frame[16], frame[17] = 0x08, 0x00, 0, 100
	if n := ipLength(frame); n != 100 {
		t.Errorf("IPv4 frame: %d bytes, want 100", n)
	}
	if n := ipLength(frame[:10]); n != 0 {
		t.Errorf("a runt: %d bytes, want 0", n)
	}
}

// TestNotifyOncePerEpoch: NOCP notifies for the first packet only, until the FAR changes;
// a delayed notification is dropped when the FAR forwards before it is due; a FAR that
// drops notifies as one that buffers.
func TestNotifyOncePerEpoch(t *testing.T) {
	b, _, notes := newTest(roomy)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 1}})
	for i := range 5 {
		b.Add(pkt(i))
	}
	expectNotes(t, notes, 1)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 1, Duration: time.Hour}}) // a BAR update
	b.Add(pkt(5))
	expectNotes(t, notes, 0)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 2}}) // the FAR updated
	b.Add(pkt(6))
	expectNotes(t, notes, 1)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 3, NotifyDelay: 100 * time.Millisecond}})
	start := time.Now()
	b.Add(pkt(7))
	expectNotes(t, notes, 1)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("notified after %s, before the delay", d)
	}
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 4, NotifyDelay: 100 * time.Millisecond}})
	b.Add(pkt(8))
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Flush, Epoch: 5}})
	expectNotes(t, notes, 0)
	// DROP with NOCP: the packet the datapath hands over is discarded, and notified once.
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Discard, Notify: true, Epoch: 6}})
	b.Add(pkt(9))
	b.Add(pkt(10))
	expectNotes(t, notes, 1)
}

// expectNotes waits for n notifications of k, and then for none more.
func expectNotes(t *testing.T, notes chan Key, n int) {
	t.Helper()
	for range n {
		select {
		case got := <-notes:
			if got != k {
				t.Errorf("notified %+v, want %+v", got, k)
			}
		case <-time.After(time.Second):
			t.Fatal("no notification")
		}
	}
	select {
	case got := <-notes:
		t.Fatalf("one more notification: %+v", got)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestNotifyAgainAfterBufferingDuration: while the DL Buffering Duration the SMF gave in its
// answer runs, packets bring no notification; the first after it brings one, and only one.
func TestNotifyAgainAfterBufferingDuration(t *testing.T) {
	b, _, notes := newTest(roomy)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 1}})
	b.Add(pkt(0))
	expectNotes(t, notes, 1)
	until := time.Now().Add(200 * time.Millisecond)
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold, Notify: true, Epoch: 1, NotifyAgain: until}}) // the SMF's answer
	b.Add(pkt(1))
	expectNotes(t, notes, 0)
	time.Sleep(time.Until(until))
	b.Add(pkt(2))
	b.Add(pkt(3))
	expectNotes(t, notes, 1)
}

// TestExpireLooksAtHoldingSessionsOnly: expire, which runs every expiryPeriod with the lock
// every Session Establishment needs (Set), looks at the sessions holding packets, not at
// every session: a session is among them from its first held packet until it holds none,
// whether they were sent on, discarded, expired or removed.
func TestExpireLooksAtHoldingSessionsOnly(t *testing.T) {
	b, _, _ := newTest(roomy)
	for owner := range uint64(1000) {
		b.Set(k.Owner+owner, map[Key]Policy{{Owner: k.Owner + owner, PDR: k.PDR}: {Mode: Hold, Duration: time.Second}})
	}
	holding := func() []uint64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		return slices.Sorted(maps.Keys(b.holding))
	}
	if h := holding(); len(h) != 0 {
		t.Fatalf("holding %v before any packet", h)
	}
	b.Add(pkt(0))
	b.Add(pkt(1))
	if h := holding(); !slices.Equal(h, []uint64{k.Owner}) {
		t.Fatalf("holding %v, want only the owner of the packets", h)
	}
	b.expire(time.Now().Add(2 * time.Second))
	if h, c := holding(), b.Counts(); len(h) != 0 || c["discarded_expired"] != 2 {
		t.Fatalf("after expiry: holding %v, counts %v; want none holding, 2 expired", h, c)
	}
	b.Add(pkt(2))
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Flush}})
	waitFor(t, "the flush", func() bool { return len(holding()) == 0 })
	b.Set(k.Owner, map[Key]Policy{k: {Mode: Hold}})
	b.Add(pkt(3))
	b.Drop(k.Owner)
	if h := holding(); len(h) != 0 {
		t.Fatalf("holding %v after DROBU", h)
	}
	b.Add(pkt(4))
	b.Remove(k.Owner)
	if h := holding(); len(h) != 0 {
		t.Fatalf("holding %v after the session's removal", h)
	}
}
