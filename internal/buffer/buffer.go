// Package buffer keeps the packets of FARs that buffer (BUFF), per session and PDR, in the
// order the datapath handed them over, within bounds; it sends them on through the datapath
// when the FAR forwards, discards them when it drops, the session goes or they expire, and
// asks for the SMF to be notified (NOCP) of the first one.
package buffer

import (
	"context"
	"encoding/binary"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xupf/xupf/internal/rules"
)

// Packet is a frame a buffering FAR handed over (internal/datapath reads them).
type Packet struct {
	// Owner, Uplink and PDR name the PDR whose FAR buffered it; Owner is 0 when no installed
	// rule has its counter any more (the session is gone).
	Owner  uint64
	Uplink bool
	PDR    uint32
	// Counter is the PDR's counter slot in the datapath, which Release takes.
	Counter uint32
	// Ifindex is the interface it arrived on: Replay runs it as arriving there.
	Ifindex uint32
	Frame   []byte
}

// Datapath is what the buffer needs from the datapath: to send a held packet on through the
// program, and to hear that packets are held no more.
type Datapath interface {
	Replay(Packet) error
	Release(counter uint32, n uint64) error
}

// Key names the PDR whose FAR buffered a packet: its session (datapath owner) and its id in
// one direction.
type Key struct {
	Owner  uint64
	Uplink bool
	PDR    uint32
}

// Mode is what a PDR's FAR does with held packets now.
type Mode int

const (
	Discard Mode = iota // DROP, or no FAR: held and arriving packets are discarded
	Hold                // BUFF: keep them
	Flush               // FORW: send them on, in order
)

// Policy is what a session's FAR and BAR say about one PDR's buffered packets.
type Policy struct {
	Mode Mode
	// MaxPackets bounds the packets held for the PDR (the BAR's suggested count, or the SMF's
	// DL Buffering Suggested Packet Count); 0 leaves the session's limit alone.
	MaxPackets int
	// Duration is how long a packet may be held (the SMF's DL Buffering Duration); 0 takes
	// Limits.MaxDuration, and a negative one holds none.
	Duration time.Duration
	// Notify (NOCP) asks for one notification when the first packet is buffered or
	// discarded, NotifyDelay after it (the BAR's Downlink Data Notification Delay).
	Notify      bool
	NotifyDelay time.Duration
	// NotifyAgain, when set, is the end of the DL Buffering Duration the SMF gave in its
	// answer to a notification: until then it wants no other (TS 23.401 5.3.4.3), after it
	// the next packet notifies again, once, in the same epoch.
	NotifyAgain time.Time
	// Epoch changes whenever the SMF creates or updates the FAR: one notification per epoch.
	Epoch uint64
}

// Limits bound what is held: per session and in all.
type Limits struct {
	MaxPacketsPerSession int
	MaxBytesPerSession   int
	MaxBytes             int
	MaxDuration          time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxPacketsPerSession = 10000
	DefaultMaxBytesPerSession   = 10 << 20
	DefaultMaxBytes             = 256 << 20
	DefaultMaxDuration          = 30 * time.Second
)

// outcome is what became of a packet handed over, counted for the metrics.
type outcome int

const (
	outBuffered     outcome = iota // kept
	outFlushed                     // sent on through the datapath
	outOverflow                    // discarded: over a bound
	outExpired                     // discarded: held too long, or the SMF allows no buffering
	outDropped                     // discarded: the FAR drops, or the SMF said DROBU
	outDeleted                     // discarded: the session is gone
	outReplayFailed                // discarded: the datapath would not take it back
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"buffered", "flushed", "discarded_overflow", "discarded_expired",
	"discarded_dropped", "discarded_deleted", "discarded_replay_failed"}

// Buffer holds the buffered packets of every session.
type Buffer struct {
	dp     Datapath
	lim    Limits
	log    *slog.Logger
	notify func(Key)

	mu       sync.Mutex
	sessions map[uint64]*session
	// holding are the sessions that hold packets: expire looks at these only. Every Session
	// Establishment waits for mu (Set), and a scan of every session each expiryPeriod held
	// it for hundreds of milliseconds at 100,000 sessions.
	holding map[uint64]*session
	bytes   int // held, all sessions
	counts  [numOutcomes]atomic.Uint64
}

// session is one owner's policies and queues. Every PFCP session has one, and most never
// hold a packet: the policies are a slice (a session has a few PDRs, and a map of them kept
// four times the heap, which the garbage collector marks while SMFs establish sessions), and
// queues and dropped are made with their first entry.
type session struct {
	owner    uint64
	policies []keyedPolicy
	queues   map[Key]*queue
	packets  int
	bytes    int
	// dropped counts, per downlink PDR, the packets discarded for it and their IP bytes: what
	// a URR's Dropped DL Traffic Threshold measures.
	dropped map[Key]rules.Counts
}

// keyedPolicy is one PDR's policy.
type keyedPolicy struct {
	key Key
	Policy
}

// policy is k's policy; a PDR without one discards.
func (s *session) policy(k Key) Policy {
	for i := range s.policies {
		if s.policies[i].key == k {
			return s.policies[i].Policy
		}
	}
	return Policy{}
}

// queue is one PDR's held packets, oldest first.
type queue struct {
	items      []item
	flushing   bool      // a flush goroutine runs for it
	epoch      uint64    // of the FAR when it last notified
	notified   bool      // a notification went (or waits its delay) in this epoch
	notifiedAt time.Time // when it last did
	timer      *time.Timer
}

type item struct {
	p  Packet
	at time.Time
}

// New returns an empty buffer that sends packets on through dp and calls notify (from a
// goroutine of its own, never with a lock held) for the notifications policies ask for.
func New(dp Datapath, lim Limits, notify func(Key), log *slog.Logger) *Buffer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Buffer{dp: dp, lim: lim, log: log, notify: notify, sessions: map[uint64]*session{},
		holding: map[uint64]*session{}}
}

// Counts returns how many packets were buffered, flushed and discarded, by reason.
func (b *Buffer) Counts() map[string]uint64 {
	out := make(map[string]uint64, numOutcomes)
	for o := range numOutcomes {
		out[outcomeNames[o]] = b.counts[o].Load()
	}
	return out
}

// Set gives an owner's PDRs their policies (every PDR of the session: one missing is
// discarded). Held packets of a PDR that now forwards are sent on; those of one that drops
// are discarded.
func (b *Buffer) Set(owner uint64, policies map[Key]Policy) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[owner]
	if s == nil {
		s = &session{owner: owner}
		b.sessions[owner] = s
	}
	s.policies = s.policies[:0]
	for k, pol := range policies {
		s.policies = append(s.policies, keyedPolicy{k, pol})
	}
	for k, q := range s.queues {
		pol := policies[k]
		if pol.Epoch != q.epoch && q.timer != nil {
			q.timer.Stop() // the SMF changed the FAR before it was notified: no more to say
		}
		switch pol.Mode {
		case Flush:
			b.startFlush(s, k, q)
		case Discard:
			b.discard(s, k, q, len(q.items), outDropped)
		}
	}
}

// Drop discards what an owner holds now, counted as dropped; its policies stay.
func (b *Buffer) Drop(owner uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.sessions[owner]; s != nil {
		for k, q := range s.queues {
			b.discard(s, k, q, len(q.items), outDropped)
		}
	}
}

// Remove discards what an owner holds and forgets it.
func (b *Buffer) Remove(owner uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[owner]
	if s == nil {
		return
	}
	for _, q := range s.queues {
		if q.timer != nil {
			q.timer.Stop()
		}
		// Not released: the datapath resets the counts of a counter slot when it hands it
		// out again, and this one may be handed out already.
		b.count(outDeleted, len(q.items))
		b.take(s, q, len(q.items))
	}
	delete(b.sessions, owner)
}

// Add takes a packet the datapath handed over.
func (b *Buffer) Add(p Packet) {
	var notify *Key
	b.mu.Lock()
	s := b.sessions[p.Owner]
	if p.Owner == 0 || s == nil {
		b.mu.Unlock()
		b.count(outDeleted, 1)
		if p.Owner != 0 { // owned in the datapath, not known here yet or any more
			b.release(p.Counter, 1)
		}
		return
	}
	k := Key{Owner: p.Owner, Uplink: p.Uplink, PDR: p.PDR}
	pol := s.policy(k)
	q := s.queues[k]
	if q == nil {
		q = &queue{epoch: pol.Epoch}
		if s.queues == nil {
			s.queues = map[Key]*queue{}
		}
		s.queues[k] = q
	}
	if now := time.Now(); pol.Notify && q.notifyDue(pol, now) {
		q.notified, q.epoch, q.notifiedAt = true, pol.Epoch, now
		if pol.NotifyDelay <= 0 {
			notify = &k
		} else {
			epoch := pol.Epoch
			q.timer = time.AfterFunc(pol.NotifyDelay, func() { b.delayedNotify(k, epoch) })
		}
	}
	reason := outcome(-1)
	switch {
	case pol.Mode == Discard:
		reason = outDropped
	case pol.Mode == Hold && pol.Duration < 0:
		reason = outExpired
	case s.packets >= b.maxPackets(pol) || s.bytes+len(p.Frame) > b.lim.MaxBytesPerSession ||
		b.bytes+len(p.Frame) > b.lim.MaxBytes:
		reason = outOverflow
	}
	if reason >= 0 {
		s.countDropped(k, p.Frame)
		b.mu.Unlock()
		b.count(reason, 1)
		b.release(p.Counter, 1)
	} else {
		q.items = append(q.items, item{p, time.Now()})
		s.packets++
		b.holding[p.Owner] = s
		s.bytes += len(p.Frame)
		b.bytes += len(p.Frame)
		b.count(outBuffered, 1)
		if pol.Mode == Flush {
			b.startFlush(s, k, q)
		}
		b.mu.Unlock()
	}
	if notify != nil {
		go b.notify(*notify) // the reader must not wait for the SMF's session lock
	}
}

// notifyDue reports whether a packet of q arriving at now is to be notified under pol: the
// first of the FAR's epoch, or the first after the SMF's DL Buffering Duration ran out.
func (q *queue) notifyDue(pol Policy, now time.Time) bool {
	if !q.notified || q.epoch != pol.Epoch {
		return true
	}
	return !pol.NotifyAgain.IsZero() && q.notifiedAt.Before(pol.NotifyAgain) && !now.Before(pol.NotifyAgain)
}

// maxPackets is the most packets a session may hold under pol.
func (b *Buffer) maxPackets(pol Policy) int {
	if pol.MaxPackets > 0 {
		return min(pol.MaxPackets, b.lim.MaxPacketsPerSession)
	}
	return b.lim.MaxPacketsPerSession
}

// delayedNotify notifies for k after its delay, unless the FAR changed meanwhile or forwards.
func (b *Buffer) delayedNotify(k Key, epoch uint64) {
	b.mu.Lock()
	s := b.sessions[k.Owner]
	ok := s != nil && s.policy(k).Epoch == epoch && s.policy(k).Mode != Flush
	b.mu.Unlock()
	if ok {
		b.notify(k)
	}
}

// startFlush starts sending q on, unless that runs already; b.mu is held.
func (b *Buffer) startFlush(s *session, k Key, q *queue) {
	if q.flushing || len(q.items) == 0 {
		return
	}
	q.flushing = true
	go b.flush(s, k, q)
}

// flushBatch is how many packets a flush takes out of a queue at a time.
const flushBatch = 64

// flush sends q's packets on through the datapath, oldest first, while the PDR forwards. A
// batch is released only once it has been sent: until then the datapath buffers the PDR's
// new packets behind it.
func (b *Buffer) flush(s *session, k Key, q *queue) {
	for {
		b.mu.Lock()
		if s.policy(k).Mode != Flush || len(q.items) == 0 || b.sessions[k.Owner] != s {
			q.flushing = false
			b.mu.Unlock()
			return
		}
		n := min(len(q.items), flushBatch)
		batch := append([]item(nil), q.items[:n]...)
		b.take(s, q, n)
		b.mu.Unlock()
		for _, it := range batch {
			if err := b.dp.Replay(it.p); err != nil {
				b.count(outReplayFailed, 1)
				b.log.Warn("buffer: a held packet could not be sent on; discarded", "owner", k.Owner, "pdr", k.PDR, "err", err)
				continue
			}
			b.count(outFlushed, 1)
		}
		b.release(batch[0].p.Counter, uint64(n))
	}
}

// take removes the n oldest packets of q from the books; b.mu is held.
func (b *Buffer) take(s *session, q *queue, n int) {
	for _, it := range q.items[:n] {
		s.packets--
		s.bytes -= len(it.p.Frame)
		b.bytes -= len(it.p.Frame)
	}
	q.items = q.items[n:]
	if s.packets == 0 && b.holding[s.owner] == s {
		delete(b.holding, s.owner)
	}
}

// discard drops the n oldest packets of k's queue q, counted under why; b.mu is held.
func (b *Buffer) discard(s *session, k Key, q *queue, n int, why outcome) {
	if n == 0 {
		return
	}
	for _, it := range q.items[:n] {
		s.countDropped(k, it.p.Frame)
	}
	counter := q.items[0].p.Counter
	b.take(s, q, n)
	b.count(why, n)
	b.release(counter, uint64(n))
}

func (b *Buffer) count(o outcome, n int) { b.counts[o].Add(uint64(n)) }

// countDropped counts a downlink frame of k discarded; s's lock (b.mu) is held.
func (s *session) countDropped(k Key, frame []byte) {
	if k.Uplink {
		return
	}
	c := s.dropped[k]
	c.Packets++
	c.Bytes += ipLength(frame)
	if s.dropped == nil {
		s.dropped = map[Key]rules.Counts{}
	}
	s.dropped[k] = c
}

// ipLength is the length of the IPv4 packet in a downlink Ethernet frame (what usage counts),
// or what follows the Ethernet header when the frame holds no IPv4 header.
func ipLength(frame []byte) uint64 {
	const eth = 14
	if len(frame) >= eth+4 && binary.BigEndian.Uint16(frame[12:14]) == 0x0800 {
		return uint64(binary.BigEndian.Uint16(frame[eth+2 : eth+4]))
	}
	return uint64(max(len(frame)-eth, 0))
}

// Dropped is what was discarded for each downlink PDR of owner so far: packets and IP bytes,
// counts that only grow while the owner has policies.
func (b *Buffer) Dropped(owner uint64) map[Key]rules.Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.sessions[owner]; s != nil {
		return maps.Clone(s.dropped)
	}
	return nil
}

func (b *Buffer) release(counter uint32, n uint64) {
	if err := b.dp.Release(counter, n); err != nil {
		b.log.Warn("buffer: release held packets", "counter", counter, "err", err)
	}
}

// expiryPeriod is how often held packets are checked for age: a packet lives at most this
// much beyond its duration.
const expiryPeriod = 100 * time.Millisecond

// Run discards packets held longer than their duration until ctx is done.
func (b *Buffer) Run(ctx context.Context) {
	t := time.NewTicker(expiryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.expire(now)
		}
	}
}

// expire discards the packets held longer than their policy's duration at now.
func (b *Buffer) expire(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.holding { // discard may delete s from it, which a range allows
		for k, q := range s.queues {
			pol := s.policy(k)
			if pol.Mode != Hold {
				continue
			}
			d := b.lim.MaxDuration
			if pol.Duration != 0 {
				d = min(pol.Duration, d)
			}
			n := 0
			for n < len(q.items) && now.Sub(q.items[n].at) >= d {
				n++
			}
			b.discard(s, k, q, n, outExpired)
		}
	}
}
