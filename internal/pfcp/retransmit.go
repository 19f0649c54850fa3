package pfcp

import (
	"hash/maphash"
	"net/netip"
	"time"
)

// responseLifetime is how long a response is kept for a retransmitted request: longer than
// an SMF retransmits (N1 x T1, 3 x 3 s with Open5GS's defaults).
const responseLifetime = 30 * time.Second

// maxResponses bounds the cache: at thousands of requests per second the oldest responses go
// before their lifetime ends, long after any retransmission of them.
const maxResponses = 100_000

// responseCache remembers responses by peer and sequence number, with a digest of the
// request: TS 29.244 6.4 makes a retransmission the same message again, which gets the same
// response and is not applied again. A different request that reuses a sequence number (an
// SMF restarts its numbering) is a new request.
type responseCache struct {
	lifetime time.Duration
	seed     maphash.Seed // random per cache, so that a peer cannot aim at a collision
	byKey    map[requestKey]cached
	order    []cachedAt // oldest first
}

type requestKey struct {
	peer netip.AddrPort
	seq  uint32
}

type cached struct {
	digest uint64 // of the request
	resp   []byte
	at     time.Time
}

type cachedAt struct {
	key requestKey
	at  time.Time
}

func newResponseCache(lifetime time.Duration) *responseCache {
	return &responseCache{lifetime: lifetime, seed: maphash.MakeSeed(), byKey: map[requestKey]cached{}}
}

// answerOnce returns the response kept for this very request (a retransmission), or handles
// the request and keeps its response. Only the responses to an address that speaks for an
// association are kept: a flood from any other address (they are all refused) would push the
// SMFs' responses out of the bounded cache.
func (n *Node) answerOnce(peer netip.AddrPort, seq uint32, req []byte, handle func() []byte) []byte {
	if !n.speaksForAny(peer.Addr()) {
		return handle()
	}
	key := requestKey{peer, seq}
	digest := maphash.Bytes(n.answered.seed, req)
	n.mu.Lock()
	resp, seen := n.answered.get(key, digest, time.Now())
	n.mu.Unlock()
	if seen {
		n.log.Debug("pfcp: retransmitted request answered again", "peer", peer, "seq", seq)
		return resp
	}
	resp = handle()
	n.mu.Lock()
	n.answered.put(key, digest, resp, time.Now())
	n.mu.Unlock()
	return resp
}

func (c *responseCache) get(k requestKey, digest uint64, now time.Time) ([]byte, bool) {
	c.expire(now)
	e, ok := c.byKey[k]
	return e.resp, ok && e.digest == digest
}

func (c *responseCache) put(k requestKey, digest uint64, resp []byte, now time.Time) {
	c.expire(now)
	c.byKey[k] = cached{digest, resp, now}
	c.order = append(c.order, cachedAt{k, now})
}

// forget drops the responses to a peer address (any port): its new association starts a
// new numbering.
func (c *responseCache) forget(addr netip.Addr) {
	for k := range c.byKey {
		if k.peer.Addr().Unmap() == addr.Unmap() {
			delete(c.byKey, k)
		}
	}
}

func (c *responseCache) expire(now time.Time) {
	n := 0
	for i, e := range c.order {
		if now.Sub(e.at) < c.lifetime && len(c.order)-i < maxResponses {
			break
		}
		// A key answered again later (a new request with its sequence number, or after
		// forget) has an entry of its own further on.
		if kept, ok := c.byKey[e.key]; ok && kept.at.Equal(e.at) {
			delete(c.byKey, e.key)
		}
		n++
	}
	c.order = c.order[n:]
}
