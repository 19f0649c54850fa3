package pfcp

import (
	"net/netip"
	"time"
)

// responseLifetime is how long a response is kept for a retransmitted request: longer than
// an SMF retransmits (N1 x T1, 3 x 3 s with Open5GS's defaults).
const responseLifetime = 30 * time.Second

// maxResponses bounds the cache: at thousands of requests per second the oldest responses go
// before their lifetime ends, long after any retransmission of them.
const maxResponses = 100_000

// responseCache remembers responses by peer and sequence number (TS 29.244 6.4: a
// retransmitted request gets the same response and is not applied again).
type responseCache struct {
	lifetime time.Duration
	byKey    map[requestKey][]byte
	order    []cachedAt // oldest first
}

type requestKey struct {
	peer netip.AddrPort
	seq  uint32
}

type cachedAt struct {
	key requestKey
	at  time.Time
}

func newResponseCache(lifetime time.Duration) *responseCache {
	return &responseCache{lifetime: lifetime, byKey: map[requestKey][]byte{}}
}

// answerOnce returns the response kept for this peer and sequence number, or handles the
// request and keeps its response.
func (n *Node) answerOnce(peer netip.AddrPort, seq uint32, handle func() []byte) []byte {
	n.mu.Lock()
	resp, seen := n.answered.get(requestKey{peer, seq}, time.Now())
	n.mu.Unlock()
	if seen {
		n.log.Debug("pfcp: retransmitted request answered again", "peer", peer, "seq", seq)
		return resp
	}
	resp = handle()
	n.mu.Lock()
	n.answered.put(requestKey{peer, seq}, resp, time.Now())
	n.mu.Unlock()
	return resp
}

func (c *responseCache) get(k requestKey, now time.Time) ([]byte, bool) {
	c.expire(now)
	b, ok := c.byKey[k]
	return b, ok
}

func (c *responseCache) put(k requestKey, resp []byte, now time.Time) {
	c.expire(now)
	if _, ok := c.byKey[k]; !ok {
		c.order = append(c.order, cachedAt{k, now})
	}
	c.byKey[k] = resp
}

func (c *responseCache) expire(now time.Time) {
	n := 0
	for i, e := range c.order {
		if now.Sub(e.at) < c.lifetime && len(c.order)-i < maxResponses {
			break
		}
		delete(c.byKey, e.key)
		n++
	}
	c.order = c.order[n:]
}
