package meter

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestNewBounds(t *testing.T) {
	for _, tt := range []struct {
		rate, burst uint64
		err         string
	}{
		{0, 1, "rate 0 bytes/s"},
		{MaxRate + 1, 1, "rate 125000000001 bytes/s"},
		{1, 0, "burst 0 bytes"},
		{1, MaxBurst + 1, "burst 4611686019 bytes"},
		{1, 2_000_000, "lasts 555h33m20s"}, // 2e6 s of burst at 1 byte/s: past MaxWindow
		{1, 1, ""},
		{MaxRate, MaxBurst, ""},
	} {
		s, err := New(tt.rate, tt.burst)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("New(%d, %d): %v, want an error with %q", tt.rate, tt.burst, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%d, %d): %v", tt.rate, tt.burst, err)
			continue
		}
		// Fresh: a full bucket, the sliding window a whole window behind, an empty fixed window.
		if s.Tokens != int64(tt.burst*nsPerSec) || s.Start != -int64(s.Window) || s.Count != 0 {
			t.Errorf("New(%d, %d) = %+v: not full", tt.rate, tt.burst, s)
		}
	}
}

// At 1000 bytes/s with a burst of 3000 bytes every algorithm passes three 1000-byte packets
// at once and refuses the fourth; after burst/rate (3 s) the burst is back.
func TestModelBurstAndRate(t *testing.T) {
	for _, algo := range []Algo{TokenBucket, SlidingWindow, FixedWindow} {
		s, err := New(1000, 3000)
		if err != nil {
			t.Fatal(err)
		}
		m := Model{Algo: algo, State: s}
		const t0 = 1_000_000_000_000
		var got []bool
		for _, now := range []uint64{t0, t0, t0, t0, t0 + 3*nsPerSec, t0 + 3*nsPerSec, t0 + 3*nsPerSec, t0 + 3*nsPerSec} {
			got = append(got, m.Pass(1000, now))
		}
		want := []bool{true, true, true, false, true, true, true, false}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("algo %d: verdicts %v, want %v", algo, got, want)
				break
			}
		}
	}
}

// Once the burst is spent the token bucket and the sliding window pass the rate; the fixed
// window passes nothing until its window ends.
func TestModelSteadyRate(t *testing.T) {
	for _, tt := range []struct {
		algo   Algo
		passed int
	}{{TokenBucket, 9}, {SlidingWindow, 9}, {FixedWindow, 0}} {
		s, err := New(1000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		m := Model{Algo: tt.algo, State: s}
		now := uint64(1_000_000_000_000)
		if !m.Pass(1000, now) {
			t.Fatalf("algo %d: the first packet is refused", tt.algo)
		}
		passed := 0
		for range 19 { // offered: 2 × the rate, within the first window: 0.95 s earn 950 bytes
			now += nsPerSec / 20
			if m.Pass(100, now) {
				passed++
			}
		}
		if passed < tt.passed-1 || passed > tt.passed {
			t.Errorf("algo %d: %d of 19 packets at twice the rate passed, want about %d", tt.algo, passed, tt.passed)
		}
	}
}

// A clock that goes back restarts time without credit (token bucket, sliding window) or opens
// a new window (fixed window); nothing overflows at the largest rate and burst.
func TestModelClockBackAndExtremes(t *testing.T) {
	for _, algo := range []Algo{TokenBucket, SlidingWindow, FixedWindow} {
		s, err := New(MaxRate, MaxBurst)
		if err != nil {
			t.Fatal(err)
		}
		m := Model{Algo: algo, State: s}
		if !m.Pass(1500, 1<<54) || !m.Pass(1500, 1<<30) || !m.Pass(1500, 1<<54) {
			t.Errorf("algo %d: a packet far within the burst is refused", algo)
		}
	}
}

// A token bucket refills at most every Refill ns (a 64th of burst / rate, within bounds): a
// packet before the interval is up finds no new tokens, and the refill after it adds the whole
// time since the last one, so nothing is lost.
func TestModelRefillInterval(t *testing.T) {
	for _, tt := range []struct{ rate, burst, refill uint64 }{
		{100_000_000, 6_400_000, 1_000_000}, // 64 ms of burst: 1 ms, the most
		{100_000_000, 640_000, 100_000},     // 6.4 ms: 100 µs
		{1_000_000_000, 1000, MinRefillNS},  // 1 µs of burst: the least
	} {
		s, err := New(tt.rate, tt.burst)
		if err != nil {
			t.Fatal(err)
		}
		if s.Refill != tt.refill {
			t.Errorf("New(%d, %d).Refill = %d, want %d", tt.rate, tt.burst, s.Refill, tt.refill)
		}
	}

	s, err := New(100_000_000, 6_400_000) // 100 bytes/µs, refills every ms
	if err != nil {
		t.Fatal(err)
	}
	m := Model{Algo: TokenBucket, State: s}
	const t0 = 1_000_000_000_000
	count := func(now uint64) int {
		n := 0
		for m.Pass(1000, now) {
			n++
		}
		return n
	}
	m.State.Last = t0
	if n := count(t0); n != 6400 {
		t.Fatalf("a full bucket passed %d packets, want 6400", n)
	}
	if n := count(t0 + 999_999); n != 0 {
		t.Errorf("before the refill interval %d packets passed, want 0", n)
	}
	if n := count(t0 + 1_500_000); n != 150 {
		t.Errorf("after 1.5 ms %d packets passed, want 150 (the whole time since the last refill)", n)
	}
}

// TestModelCreditBound: CPUs that take a token bucket's tokens a chunk at a time pass, over
// any interval, at most burst + rate × time + one chunk per CPU, and under a load above the
// rate no less than burst + rate × time less one chunk per CPU (the credit idle CPUs hold),
// a refill interval's tokens and a packet. Four CPUs, packets on a CPU drawn at random, at
// twice the rate; one CPU falls silent halfway, holding its credit. Then, after an idle that
// fills the bucket, every CPU sends at once: the burst and the credits they hold pass.
func TestModelCreditBound(t *testing.T) {
	const (
		rate, burst = 1_000_000, 64_000 // bytes/s, bytes: a chunk is 1000 bytes, ten packets
		size        = 100
		cpus        = 4
		packets     = 20_000
		gap         = nsPerSec * size / rate / 2 // offered: twice the rate
		t0          = 1_000_000_000_000
	)
	s, err := New(rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	chunk := s.Chunk / nsPerSec
	if chunk != burst/ChunkDiv {
		t.Fatalf("chunk %d bytes, want %d", chunk, burst/ChunkDiv)
	}
	m := Model{Algo: TokenBucket, State: s}
	rng := rand.New(rand.NewPCG(1, 2))
	at := make([]uint64, 0, packets) // when each passed packet passed
	for i := range packets {
		now := t0 + uint64(i)*gap
		cpu := rng.IntN(cpus)
		if i >= packets/2 && cpu == cpus-1 {
			cpu = 0 // the last CPU is silent from halfway
		}
		if m.PassOn(cpu, size, now) {
			at = append(at, now)
		}
	}
	end := t0 + uint64(packets-1)*gap
	least := burst + rate*float64(end-t0)/nsPerSec - float64(cpus*chunk) - float64(s.Refill)*rate/nsPerSec - size
	if got := float64(len(at) * size); got < least {
		t.Errorf("%.0f bytes passed in %v at twice the rate, fewer than %.0f", got, time.Duration(end-t0), least)
	}
	full := end + 2*nsPerSec*burst/rate
	held := m.Credit[0] + m.Credit[1] + m.Credit[2] + m.Credit[3]
	passed := 0
	for i := range 2 * burst / size {
		if m.PassOn(i%cpus, size, full) {
			at = append(at, full)
			passed += size
		}
	}
	t.Logf("all CPUs at once after an idle: %d bytes passed, the CPUs held %d", passed, held/nsPerSec)
	if passed < burst || passed > burst+cpus*int(chunk) {
		t.Errorf("all CPUs at once after an idle: %d bytes passed, want the burst (%d) and at most a chunk per CPU more",
			passed, burst)
	}
	// Over any interval [at[i], at[j]]: the bytes of packets i to j.
	most := func(d uint64) float64 { return burst + rate*float64(d)/nsPerSec + float64(cpus*chunk) }
	for i := 0; i < len(at); i += 89 {
		for j := i; j < len(at); j++ {
			if got := float64((j - i + 1) * size); got > most(at[j]-at[i]) {
				t.Fatalf("%.0f bytes passed in %v, more than burst + rate × time + %d chunks (%.0f)",
					got, time.Duration(at[j]-at[i]), cpus, most(at[j]-at[i]))
			}
		}
	}
}
