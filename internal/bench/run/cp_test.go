package run

import (
	"context"
	"testing"
	"time"
)

// TestScheduleMakesUpDroppedTicks: the first event blocks the schedule for a third of the
// run, so the ticker drops the ticks of that time (it keeps one); the events due meanwhile
// must still be sent, and never more than were due.
func TestScheduleMakesUpDroppedTicks(t *testing.T) {
	const rate = 1000.0
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	fired := 0
	schedule(ctx, rate, func() {
		fired++
		if fired == 1 {
			time.Sleep(100 * time.Millisecond)
		}
	})
	elapsed := time.Since(start)
	// Without making up, about 200 fire (the 100 ms blocked lose their ticks); with it,
	// every event due by the last tick, within a few ticks of rate × elapsed.
	if due := int(elapsed.Seconds() * rate); fired > due || fired < due-30 {
		t.Errorf("%d events fired in %v at %v/s; want close to %d", fired, elapsed, rate, due)
	}
}
