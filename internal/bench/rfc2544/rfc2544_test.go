package rfc2544

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// threshold is a device that loses nothing up to capacity and everything above it is lost
// in proportion: received = min(sent, capacity × duration).
func threshold(capacity float64) Trial {
	return func(_ context.Context, rate float64) (uint64, uint64, error) {
		sent := uint64(rate) // a one-second trial
		recv := min(sent, uint64(capacity))
		return sent, recv, nil
	}
}

func TestExactThreshold(t *testing.T) {
	for _, capacity := range []float64{1, 1234, 7_300_000, 9_999_999} {
		cfg := Config{MaxRate: 10_000_000, Resolution: 10_000}
		res, err := Search(context.Background(), cfg, threshold(capacity))
		if err != nil {
			t.Fatal(err)
		}
		if capacity < cfg.Resolution {
			// Nothing above the resolution passes: the search ends at the floor.
			if res.Found && res.Rate > capacity {
				t.Errorf("capacity %v: found %v above it", capacity, res.Rate)
			}
			continue
		}
		if !res.Found || !res.Converged {
			t.Fatalf("capacity %v: found=%v converged=%v", capacity, res.Found, res.Converged)
		}
		if res.Rate > capacity || capacity-res.Rate > cfg.Resolution {
			t.Errorf("capacity %v: rate %v, want within %v below", capacity, res.Rate, cfg.Resolution)
		}
		if res.FailRate <= capacity || res.FailRate-res.Rate > cfg.Resolution {
			t.Errorf("capacity %v: fail rate %v, rate %v", capacity, res.FailRate, res.Rate)
		}
		// log2(10M/10k) ≈ 10 halvings plus the first trial.
		if res.Iterations > 12 || len(res.Trials) != res.Iterations {
			t.Errorf("capacity %v: %d iterations, %d trials", capacity, res.Iterations, len(res.Trials))
		}
		if res.Best.Rate != res.Rate || !res.Best.Pass || res.Best.Loss != 0 {
			t.Errorf("capacity %v: best %+v", capacity, res.Best)
		}
	}
}

func TestMaxRatePasses(t *testing.T) {
	res, err := Search(context.Background(), Config{MaxRate: 1e6}, threshold(2e6))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || res.Rate != 1e6 || res.FailRate != 0 || !res.Converged || len(res.Trials) != 1 {
		t.Fatalf("%+v", res)
	}
}

func TestMinRateFails(t *testing.T) {
	res, err := Search(context.Background(), Config{MinRate: 1000, MaxRate: 1e6}, threshold(500))
	if err != nil {
		t.Fatal(err)
	}
	if res.Found || res.Rate != 0 || res.FailRate != 1000 || !res.Converged || len(res.Trials) != 2 {
		t.Fatalf("%+v", res)
	}
}

func TestLossTolerance(t *testing.T) {
	// A device that loses 0.5 % of everything and everything above 4M/s: zero-loss
	// throughput does not exist, 1 % tolerance finds the 4M/s knee.
	dev := func(_ context.Context, rate float64) (uint64, uint64, error) {
		sent := uint64(rate)
		recv := min(sent, uint64(4e6)) * 995 / 1000
		return sent, recv, nil
	}
	res, err := Search(context.Background(), Config{MaxRate: 1e7, Resolution: 1000}, dev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Found {
		t.Errorf("zero loss: found %v", res.Rate)
	}
	res, err = Search(context.Background(), Config{MaxRate: 1e7, Resolution: 1000, LossTolerance: 0.01}, dev)
	if err != nil {
		t.Fatal(err)
	}
	// Above 4M/s the loss is 1-(4M×0.995)/rate, which stays ≤ 1 % up to ≈ 4.0202M/s.
	knee := 4e6 * 0.995 / 0.99
	if !res.Found || res.Rate > knee || knee-res.Rate > 1000 {
		t.Errorf("1%% tolerance: rate %v, want within 1000 below %v", res.Rate, knee)
	}
}

func TestMaxIterations(t *testing.T) {
	res, err := Search(context.Background(), Config{MaxRate: 1e7, Resolution: 1, MaxIterations: 5}, threshold(3e6))
	if err != nil {
		t.Fatal(err)
	}
	if res.Iterations != 5 || len(res.Trials) != 5 || res.Converged {
		t.Fatalf("iterations %d trials %d converged %v", res.Iterations, len(res.Trials), res.Converged)
	}
	// 1e7 fails, 5e6 fails, 2.5e6 passes, 3.75e6 fails, 3.125e6 fails.
	if !res.Found || res.Rate != 2.5e6 || res.FailRate != 3.125e6 {
		t.Fatalf("rate %v fail %v", res.Rate, res.FailRate)
	}
}

// TestNoisy: a device with capacity 5M/s whose trials fail at random with probability p below
// it (a noisy neighbour). The search never ends above the capacity; retries pull it close.
func TestNoisy(t *testing.T) {
	const capacity = 5e6
	noisy := func(seed uint64, p float64) Trial {
		rng := rand.New(rand.NewPCG(seed, 1))
		return func(_ context.Context, rate float64) (uint64, uint64, error) {
			sent := uint64(rate)
			recv := min(sent, uint64(capacity))
			if rng.Float64() < p {
				recv = recv * 98 / 100
			}
			return sent, recv, nil
		}
	}
	var sumNoRetry, sumRetry float64
	const runs = 200
	for seed := range uint64(runs) {
		cfg := Config{MaxRate: 1e7, Resolution: 1e4, LossTolerance: 0.001}
		r1, err := Search(context.Background(), cfg, noisy(seed, 0.2))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Retries = 2
		r2, err := Search(context.Background(), cfg, noisy(seed, 0.2))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []Result{r1, r2} {
			if r.Rate > capacity {
				t.Fatalf("seed %d: rate %v above capacity", seed, r.Rate)
			}
		}
		sumNoRetry += r1.Rate
		sumRetry += r2.Rate
	}
	meanNoRetry, meanRetry := sumNoRetry/runs, sumRetry/runs
	// With 2 retries a rate below capacity fails with probability 0.008 per step.
	if meanRetry < 0.97*capacity {
		t.Errorf("mean with retries %v, want ≥ 97 %% of %v", meanRetry, capacity)
	}
	if meanRetry <= meanNoRetry {
		t.Errorf("retries did not help: %v ≤ %v", meanRetry, meanNoRetry)
	}
}

// TestConfirm: a device whose first trial between its capacity and 4M/s passes by luck;
// confirmation catches it.
func TestConfirm(t *testing.T) {
	const capacity = 3e6
	lucky := false
	dev := func(_ context.Context, rate float64) (uint64, uint64, error) {
		sent := uint64(rate)
		recv := min(sent, uint64(capacity))
		if rate > capacity && rate < 4e6 && !lucky {
			lucky = true
			recv = sent
		}
		return sent, recv, nil
	}
	res, err := Search(context.Background(), Config{MaxRate: 1e7, Resolution: 1e4}, dev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rate <= capacity {
		t.Fatalf("without confirmation the lucky trial should win, got %v", res.Rate)
	}
	lucky = false
	res, err = Search(context.Background(), Config{MaxRate: 1e7, Resolution: 1e4, Confirm: 1, MaxIterations: 100}, dev)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || res.Rate > capacity || capacity-res.Rate > 1e4 {
		t.Fatalf("with confirmation: rate %v, want within 1e4 below %v (%d trials)", res.Rate, capacity, len(res.Trials))
	}
	if !res.Converged || res.Best.Rate != res.Rate || !res.Best.Pass {
		t.Fatalf("with confirmation: %+v", res)
	}
}

func TestLoss(t *testing.T) {
	for _, c := range []struct {
		sent, recv uint64
		want       float64
	}{{0, 0, 0}, {100, 100, 0}, {100, 150, 0}, {100, 99, 0.01}, {100, 0, 1}} {
		if got := Loss(c.sent, c.recv); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Loss(%d, %d) = %v, want %v", c.sent, c.recv, got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	ok := threshold(1e6)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "max rate 0 is invalid"},
		{Config{MinRate: 5, MaxRate: 5}, "not above min rate"},
		{Config{MaxRate: 10, LossTolerance: 1}, "outside [0, 1)"},
		{Config{MaxRate: 10, Resolution: -1}, "resolution -1"},
		{Config{MaxRate: 10, MaxIterations: -1}, "max iterations -1"},
		{Config{MaxRate: math.NaN()}, "max rate NaN"},
	} {
		_, err := Search(context.Background(), c.cfg, ok)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}

	boom := errors.New("boom")
	_, err := Search(context.Background(), Config{MaxRate: 10}, func(context.Context, float64) (uint64, uint64, error) { return 0, 0, boom })
	if !errors.Is(err, boom) {
		t.Errorf("trial error: %v", err)
	}
	_, err = Search(context.Background(), Config{MaxRate: 10}, func(context.Context, float64) (uint64, uint64, error) { return 0, 0, nil })
	if err == nil || !strings.Contains(err.Error(), "sent nothing") {
		t.Errorf("nothing sent: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := Search(ctx, Config{MaxRate: 1e7, Resolution: 1}, func(ctx context.Context, rate float64) (uint64, uint64, error) {
		n++
		if n == 3 {
			cancel()
		}
		return threshold(1e6)(ctx, rate)
	})
	if !errors.Is(err, context.Canceled) || len(res.Trials) != 3 {
		t.Errorf("cancel: %v after %d trials", err, len(res.Trials))
	}
}

func TestDefaults(t *testing.T) {
	c, err := Config{MaxRate: 2e6}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.Resolution != 2e4 || c.MaxIterations != DefaultMaxIterations {
		t.Fatalf("%+v", c)
	}
}
