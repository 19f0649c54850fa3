package run

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/xupf/xupf/internal/bench/gen"
	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/rfc2544"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// measure runs the point's trials after its mode and fills in the summary.
func (pt *point) measure(ctx context.Context) error {
	te := pt.p.Tester
	switch te.Mode {
	case scenario.ModeMaxRate, scenario.ModeFixedRate:
		trials, err := pt.trial(ctx, te.Rate)
		if err != nil {
			return err
		}
		pt.summarise(trials)
		return nil
	case scenario.ModeRFC2544:
		return pt.search(ctx)
	}
	return fmt.Errorf("unknown mode %q", te.Mode)
}

// search runs the RFC 2544 throughput search; a trial offers the rate in every direction and
// passes when the loss over all of them is within the tolerance.
func (pt *point) search(ctx context.Context) error {
	rf := pt.p.Tester.RFC2544
	maxRate := rf.MaxRate
	if maxRate == 0 {
		for _, r := range pt.res.GeneratorMax {
			if maxRate == 0 || r < maxRate {
				maxRate = r
			}
		}
	}
	byRate := map[float64][]result.Trial{}
	cfg := rfc2544.Config{LossTolerance: rf.LossTolerance, MinRate: rf.MinRate, MaxRate: maxRate,
		Resolution: rf.Resolution, MaxIterations: rf.MaxIterations, Retries: rf.Retries, Confirm: rf.Confirm}
	res, err := rfc2544.Search(ctx, cfg, func(ctx context.Context, rate float64) (sent, received uint64, err error) {
		trials, err := pt.trial(ctx, rate)
		for _, t := range trials {
			sent += t.Sent
			received += t.Received
		}
		// The summary is a passing trial at the found rate: the last one, as the search's.
		if rfc2544.Loss(sent, received) <= rf.LossTolerance {
			byRate[rate] = trials
		}
		return sent, received, err
	})
	if err != nil {
		return err
	}
	pt.res.Search = &res
	if res.Found {
		pt.summarise(byRate[res.Rate])
	} else {
		for _, d := range directions(pt.p.Traffic.Direction) {
			pt.res.Summary.Directions[d] = result.DirectionSummary{}
		}
	}
	return nil
}

// summarise makes the trials of one offered rate the point's answer.
func (pt *point) summarise(trials []result.Trial) {
	for _, t := range trials {
		var soft float64
		for _, s := range t.Softirq {
			soft += s
		}
		pt.res.Summary.Directions[t.Direction] = result.DirectionSummary{Rate: t.Rate, Bits: t.Bits, Loss: t.Loss, Softirq: soft}
	}
}

// trial runs a warmup, then every lane's generator for the trial's duration at rate (0: as
// fast as it can) with the events running, and returns a trial per lane. The samples are
// checked as they are read.
func (pt *point) trial(ctx context.Context, rate float64) ([]result.Trial, error) {
	te := pt.p.Tester
	if te.Warmup > 0 {
		if _, err := pt.runLanes(ctx, gen.RunOptions{Duration: te.Warmup.D(), Rate: rate}); err != nil {
			return nil, fmt.Errorf("bench: warmup: %w", err)
		}
	}
	time.Sleep(drainWait)
	for _, l := range pt.lanes {
		if err := l.sink.Reset(); err != nil {
			return nil, err
		}
		if _, err := l.sink.Samples(); err != nil { // the warmup's
			return nil, err
		}
	}
	before, err := readCPUTimes()
	if err != nil {
		return nil, err
	}
	evCtx, stopEvents := context.WithCancel(ctx)
	var evWG sync.WaitGroup
	if pt.ctl != nil {
		evWG.Add(1)
		go func() {
			defer evWG.Done()
			pt.ctl.events(evCtx, pt.p.Events, &pt.log)
		}()
	}
	cost, err := startCost(pt.lanes, pt.floor)
	if err != nil {
		stopEvents()
		evWG.Wait()
		return nil, err
	}
	middle := make(chan []result.Window, 1)
	go func() { middle <- pt.middle(te.Duration.D()) }()
	stats, err := pt.runLanes(ctx, gen.RunOptions{Duration: te.Duration.D(), Rate: rate})
	stopEvents()
	evWG.Wait()
	windows := <-middle
	time.Sleep(drainWait)
	costs, costErr := cost.stop(pt.lanes)
	if err = errors.Join(err, costErr); err != nil {
		return nil, err
	}
	after, err := readCPUTimes()
	if err != nil {
		return nil, err
	}
	soft := softirqShare(before, after)
	out := make([]result.Trial, len(pt.lanes))
	for i, l := range pt.lanes {
		c, err := l.sink.Counters()
		if err != nil {
			return nil, err
		}
		samples, err := l.sink.Samples()
		if err != nil {
			return nil, err
		}
		pt.check(l, samples)
		st := stats[i]
		recv := c.Packets
		t := result.Trial{Direction: l.dir, Offered: rate, Sent: st.Sent, Received: recv,
			Loss: rfc2544.Loss(st.Sent, recv), Generator: st, Sink: c, Softirq: soft, Middle: windows[i], Cost: costs[i]}
		if secs := st.Elapsed.Seconds(); secs > 0 {
			t.Rate = float64(recv) / secs
			t.Bits = 8 * float64(c.Bytes) / secs
		}
		out[i] = t
	}
	pt.res.Trials = append(pt.res.Trials, out...)
	return out, nil
}

// middle reads every lane's sink a quarter and three quarters into a trial of duration d
// that starts now; a lane whose sink cannot be read gets an empty window.
func (pt *point) middle(d time.Duration) []result.Window {
	out := make([]result.Window, len(pt.lanes))
	read := func() ([]gen.SinkCounters, time.Time) {
		cs := make([]gen.SinkCounters, len(pt.lanes))
		for i, l := range pt.lanes {
			cs[i], _ = l.sink.Counters()
		}
		return cs, time.Now()
	}
	time.Sleep(d / 4)
	a, ta := read()
	time.Sleep(d / 2)
	b, tb := read()
	for i := range out {
		out[i] = result.Window{Packets: b[i].Packets - a[i].Packets, Bytes: b[i].Bytes - a[i].Bytes, Elapsed: tb.Sub(ta)}
	}
	return out
}

// runLanes runs every lane's generator at once with opts (CPUs per lane) and returns their
// stats in lane order.
func (pt *point) runLanes(ctx context.Context, opts gen.RunOptions) ([]gen.Stats, error) {
	stats := make([]gen.Stats, len(pt.lanes))
	errs := make([]error, len(pt.lanes))
	var wg sync.WaitGroup
	for i, l := range pt.lanes {
		o := opts
		o.CPUs = l.cpus
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i], errs[i] = l.gen.Run(ctx, o)
		}()
	}
	wg.Wait()
	return stats, errors.Join(errs...)
}

// check decodes each sample and compares it with the frame its flow should have become.
// Downlink frames of a handed-over user may carry any base station it was sent to.
func (pt *point) check(l *lane, samples []gen.Sample) {
	c := &pt.res.Correctness
	for _, s := range samples {
		c.Checked++
		err := pt.checkOne(l, s.Data)
		if err != nil {
			c.Wrong++
			if len(c.Examples) < maxExamples {
				c.Examples = append(c.Examples, fmt.Sprintf("%s frame of %d bytes: %v", l.dir, s.Len, err))
			}
		}
	}
}

func (pt *point) checkOne(l *lane, data []byte) error {
	d, err := pkt.Decode(data)
	if err != nil {
		return err
	}
	if int(d.FlowID) >= len(l.want) {
		return fmt.Errorf("flow id %d was never sent", d.FlowID)
	}
	want := l.want[d.FlowID]
	if want.Tunnel != nil && pt.ctl != nil && l.dir == scenario.Downlink && d.Tunnel != nil {
		gnbs := pt.ctl.gnbsOf(l.users[d.FlowID])
		if slices.Contains(gnbs, d.Tunnel.Dst) {
			t := *want.Tunnel
			t.Dst = d.Tunnel.Dst
			want.Tunnel = &t
		} else {
			return fmt.Errorf("outer destination %v, want one of %v", d.Tunnel.Dst, addrList(gnbs))
		}
	}
	return pkt.Check(want, d)
}

func addrList(as []netip.Addr) string {
	return fmt.Sprint(as)
}
