// Package rfc2544 searches for the throughput of a device in the sense of RFC 2544 §26.1:
// the highest offered rate at which the device loses no more than a tolerated fraction of the
// frames it is sent (RFC 2544 itself tolerates none; LossTolerance relaxes that for devices
// measured on shared machines).
//
// Search is a binary search between Config.MinRate and Config.MaxRate driven by a caller's
// Trial function, which offers a rate for one trial and reports how many frames were sent
// and received.
//
// # Assumptions
//
// The search assumes loss is monotonic in the offered rate: if a trial at rate r passes, every
// trial at a lower rate passes, and if it fails every higher rate fails. Real devices are
// close to that but not exactly:
//
//   - Noise (another process, an interrupt storm, a timer) can make a single trial fail below
//     the true throughput. The search then settles below it, never above: a failing trial only
//     ever lowers the upper bound. Config.Retries re-runs a failing trial up to that many times
//     and lets any passing re-run count, which trades time for robustness against such
//     one-off failures (and makes a truly failing rate cost Retries+1 trials).
//   - A trial that passes by luck above the true throughput raises the lower bound wrongly.
//     Config.Confirm re-runs the final rate that many times; if any re-run fails, the search
//     resumes below it, so the result is a rate that passed 1+Confirm trials in a row.
//   - The generator must be able to offer the rate. A trial whose sender could not reach the
//     offered rate is still judged on loss only; the caller compares Result.Rate with what its
//     generator can reach.
//
// The result is the highest rate that passed, within Config.Resolution of the lowest rate
// that failed, unless Config.MaxIterations stops the search first (Result.Converged is false
// then and Result.Rate is still a rate that passed).
package rfc2544

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Trial offers rate (frames per second) to the device under test for one trial and returns
// how many frames were sent and how many arrived. sent must be positive.
type Trial func(ctx context.Context, rate float64) (sent, received uint64, err error)

// Defaults.
const (
	DefaultMaxIterations = 20
	// DefaultResolutionFraction is the resolution used when Config.Resolution is 0: this
	// fraction of MaxRate.
	DefaultResolutionFraction = 0.01
)

// Config bounds the search.
type Config struct {
	// MinRate is the lowest rate searched (frames/s, ≥ 0). When positive it is tried first
	// after MaxRate fails: if it fails too, there is no throughput above it and the search
	// stops with Result.Found false. At 0 it is assumed to pass and is not tried.
	MinRate float64
	// MaxRate is the highest rate searched (frames/s, > MinRate). It is tried first: if it
	// passes, it is the result.
	MaxRate float64
	// LossTolerance is the largest fraction of lost frames (0 ≤ x < 1) a passing trial may
	// have: 0 is RFC 2544's zero-loss throughput.
	LossTolerance float64
	// Resolution stops the search once the highest passing and the lowest failing rate are
	// at most this far apart (frames/s). 0 means DefaultResolutionFraction × MaxRate.
	Resolution float64
	// MaxIterations caps the number of trials of the binary search itself (MaxRate and
	// MinRate included; retries and confirmations not counted). 0 means
	// DefaultMaxIterations.
	MaxIterations int
	// Retries re-runs a failing trial up to this many times; any passing re-run makes the
	// rate pass.
	Retries int
	// Confirm re-runs the final rate this many times; a failure resumes the search below it.
	Confirm int
}

// TrialResult is one trial.
type TrialResult struct {
	Rate     float64 `json:"rate"`
	Sent     uint64  `json:"sent"`
	Received uint64  `json:"received"`
	// Loss is the fraction of frames lost, (sent-received)/sent, 0 when received ≥ sent.
	Loss float64 `json:"loss"`
	Pass bool    `json:"pass"`
}

// Result is the outcome of a search.
type Result struct {
	// Found reports whether any rate passed. When false, Rate is 0.
	Found bool `json:"found"`
	// Rate is the highest rate that passed (frames/s).
	Rate float64 `json:"rate"`
	// Best is the passing trial at Rate (the last one, when it was re-run).
	Best TrialResult `json:"best"`
	// FailRate is the lowest rate that failed, 0 when none did (MaxRate passed).
	FailRate float64 `json:"fail_rate"`
	// Converged reports whether the search ended because FailRate-Rate ≤ Resolution (or
	// MaxRate passed, or MinRate failed) rather than on MaxIterations.
	Converged bool `json:"converged"`
	// Iterations counts the search's trials, without retries and confirmations.
	Iterations int `json:"iterations"`
	// Trials lists every trial run, in order, retries and confirmations included.
	Trials []TrialResult `json:"trials"`
}

// Loss returns the fraction of frames lost: (sent-received)/sent, or 0 when received ≥ sent
// (duplicates are not negative loss) or sent is 0.
func Loss(sent, received uint64) float64 {
	if sent == 0 || received >= sent {
		return 0
	}
	return float64(sent-received) / float64(sent)
}

// Validate checks c and returns it with its defaults filled in.
func (c Config) Validate() (Config, error) {
	var errs []error
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	if bad(c.MinRate) || c.MinRate < 0 {
		errs = append(errs, fmt.Errorf("rfc2544: min rate %v is invalid; use 0 or a positive rate", c.MinRate))
	}
	if bad(c.MaxRate) || c.MaxRate <= 0 {
		errs = append(errs, fmt.Errorf("rfc2544: max rate %v is invalid; use a positive rate", c.MaxRate))
	} else if c.MaxRate <= c.MinRate {
		errs = append(errs, fmt.Errorf("rfc2544: max rate %v is not above min rate %v; raise the max or lower the min", c.MaxRate, c.MinRate))
	}
	if bad(c.LossTolerance) || c.LossTolerance < 0 || c.LossTolerance >= 1 {
		errs = append(errs, fmt.Errorf("rfc2544: loss tolerance %v is outside [0, 1); use a fraction such as 0.001 for 0.1 %%", c.LossTolerance))
	}
	if bad(c.Resolution) || c.Resolution < 0 {
		errs = append(errs, fmt.Errorf("rfc2544: resolution %v is invalid; use 0 (1 %% of max rate) or a positive rate", c.Resolution))
	}
	if c.MaxIterations < 0 {
		errs = append(errs, fmt.Errorf("rfc2544: max iterations %d is negative; use 0 (default %d) or more", c.MaxIterations, DefaultMaxIterations))
	}
	if c.Retries < 0 || c.Confirm < 0 {
		errs = append(errs, fmt.Errorf("rfc2544: retries %d and confirm %d must not be negative", c.Retries, c.Confirm))
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	if c.Resolution == 0 {
		c.Resolution = DefaultResolutionFraction * c.MaxRate
	}
	if c.MaxIterations == 0 {
		c.MaxIterations = DefaultMaxIterations
	}
	return c, nil
}

// Search runs the binary search. It returns an error when cfg is invalid, when trial fails or
// reports nothing sent, or when ctx ends; the Result then holds the trials run so far.
func Search(ctx context.Context, cfg Config, trial Trial) (Result, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return Result{}, err
	}
	s := searcher{cfg: cfg, trial: trial}
	err = s.run(ctx)
	return s.res, err
}

type searcher struct {
	cfg   Config
	trial Trial
	res   Result
	// passed holds the passing trials believed, in increasing rate order: a confirmation
	// failure pops the last one.
	passed []TrialResult
}

// once runs one trial and records it.
func (s *searcher) once(ctx context.Context, rate float64) (TrialResult, error) {
	if err := ctx.Err(); err != nil {
		return TrialResult{}, err
	}
	sent, recv, err := s.trial(ctx, rate)
	if err != nil {
		return TrialResult{}, fmt.Errorf("rfc2544: trial at %.0f/s: %w", rate, err)
	}
	if sent == 0 {
		return TrialResult{}, fmt.Errorf("rfc2544: trial at %.0f/s sent nothing; check the generator", rate)
	}
	t := TrialResult{Rate: rate, Sent: sent, Received: recv, Loss: Loss(sent, recv)}
	t.Pass = t.Loss <= s.cfg.LossTolerance
	s.res.Trials = append(s.res.Trials, t)
	return t, nil
}

// judge runs a trial at rate, with retries when it fails.
func (s *searcher) judge(ctx context.Context, rate float64) (TrialResult, error) {
	t, err := s.once(ctx, rate)
	for i := 0; err == nil && !t.Pass && i < s.cfg.Retries; i++ {
		t, err = s.once(ctx, rate)
	}
	return t, err
}

// confirm re-runs a passing rate cfg.Confirm times; it reports false at the first failure.
func (s *searcher) confirm(ctx context.Context, rate float64) (TrialResult, bool, error) {
	var last TrialResult
	for range s.cfg.Confirm {
		t, err := s.judge(ctx, rate)
		if err != nil {
			return t, false, err
		}
		if !t.Pass {
			return t, false, nil
		}
		last = t
	}
	return last, true, nil
}

// pass records t, a passing trial at a rate above every earlier passing one.
func (s *searcher) pass(t TrialResult) {
	s.passed = append(s.passed, t)
	s.setBest()
}

// setBest points the result at the highest passing trial still believed.
func (s *searcher) setBest() {
	if len(s.passed) == 0 {
		s.res.Found, s.res.Rate, s.res.Best = false, 0, TrialResult{}
		return
	}
	t := s.passed[len(s.passed)-1]
	s.res.Found, s.res.Rate, s.res.Best = true, t.Rate, t
}

// lo is the highest passing rate still believed, or MinRate (assumed to pass) when none.
func (s *searcher) lo() float64 {
	if len(s.passed) == 0 {
		return s.cfg.MinRate
	}
	return s.passed[len(s.passed)-1].Rate
}

func (s *searcher) run(ctx context.Context) error {
	cfg := s.cfg
	hi := cfg.MaxRate // the lowest failing rate, once MaxRate has failed
	s.res.Iterations = 1
	t, err := s.judge(ctx, cfg.MaxRate)
	if err != nil {
		return err
	}
	if t.Pass {
		s.pass(t)
	} else if cfg.MinRate > 0 && s.res.Iterations < cfg.MaxIterations {
		s.res.Iterations++
		t, err := s.judge(ctx, cfg.MinRate)
		if err != nil {
			return err
		}
		if !t.Pass {
			s.res.FailRate = cfg.MinRate
			s.res.Converged = true
			return nil
		}
		s.pass(t)
	}
	for {
		for !s.passedMax() && hi-s.lo() > cfg.Resolution && s.res.Iterations < cfg.MaxIterations {
			mid := s.lo() + (hi-s.lo())/2
			s.res.Iterations++
			t, err := s.judge(ctx, mid)
			if err != nil {
				s.res.FailRate = hi
				return err
			}
			if t.Pass {
				s.pass(t)
			} else {
				hi = mid
			}
		}
		if s.passedMax() {
			s.res.FailRate = 0
			s.res.Converged = true
		} else {
			s.res.FailRate = hi
			s.res.Converged = hi-s.lo() <= cfg.Resolution
		}
		if len(s.passed) == 0 || cfg.Confirm == 0 {
			return nil
		}
		best := s.passed[len(s.passed)-1]
		c, ok, err := s.confirm(ctx, best.Rate)
		if err != nil {
			return err
		}
		if ok {
			s.res.Best = c
			return nil
		}
		// best passed by luck: it becomes the lowest failing rate and the search goes on
		// between the passing rate below it and it.
		hi = best.Rate
		s.passed = s.passed[:len(s.passed)-1]
		s.setBest()
		if s.res.Iterations >= cfg.MaxIterations {
			s.res.FailRate = hi
			s.res.Converged = hi-s.lo() <= cfg.Resolution && len(s.passed) > 0
			return nil
		}
	}
}

// passedMax reports whether MaxRate is the highest passing rate believed.
func (s *searcher) passedMax() bool {
	return len(s.passed) > 0 && s.passed[len(s.passed)-1].Rate == s.cfg.MaxRate
}
