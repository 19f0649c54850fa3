// Package ratelimit limits how often something happens: answers to addresses without a PFCP
// association, GTP-U Error Indications to one peer.
package ratelimit

import "time"

// Bucket is a token bucket; its owner's lock guards it.
type Bucket struct {
	Rate, Burst float64 // per second, and at most at once
	tokens      float64
	last        time.Time
}

// Take reports whether an event may happen at now, and counts it if so. A new bucket is full.
func (b *Bucket) Take(now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = b.Burst
	} else {
		b.tokens = min(b.Burst, b.tokens+now.Sub(b.last).Seconds()*b.Rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
