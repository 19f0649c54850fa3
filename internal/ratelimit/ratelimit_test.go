package ratelimit

import (
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	b := Bucket{Rate: 10, Burst: 3}
	now := time.Unix(1000, 0)
	took := 0
	for range 10 {
		if b.Take(now) {
			took++
		}
	}
	if took != 3 {
		t.Errorf("a full bucket let %d through at once, want the burst, 3", took)
	}
	if !b.Take(now.Add(100*time.Millisecond)) || b.Take(now.Add(100*time.Millisecond)) {
		t.Error("after 100 ms at 10/s, want exactly one more")
	}
}
