package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
	"github.com/xupf/xupf/internal/pfcpclient"
)

// setupInflight is how many Session Establishment Requests are outstanding at once while a
// point's sessions are installed.
const setupInflight = 16

// maxEventErrors bounds the distinct errors a result keeps.
const maxEventErrors = 5

// control is the SMF side of a run: the sessions it established and the events it injects.
type control struct {
	c  *pfcpclient.Client
	pl plan

	mu       sync.Mutex
	sessions map[int]*pfcpclient.Session // by user
	// gnbs are the base stations each handed-over user has been at, for the check of
	// downlink frames, which may carry any of them while a handover is under way.
	gnbs map[int][]netip.Addr
	// added are the users of sessions added by events, oldest first: deleted first.
	added   []int
	nextAdd int
	// spare are users outside the generated flows, deleted when no added one is left.
	spare []int
	// moved is the next traffic-carrying user to hand over.
	moved   int
	traffic []int
}

// install establishes users' sessions, setupInflight at a time, and returns how it went.
func (k *control) install(ctx context.Context, users int) (result.Setup, error) {
	k.sessions = make(map[int]*pfcpclient.Session, users)
	k.gnbs = map[int][]netip.Addr{}
	lat := make([]time.Duration, users)
	next := make(chan int)
	errc := make(chan error, setupInflight)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for range setupInflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				t0 := time.Now()
				s, err := k.c.Establish(ctx, k.pl.spec(u, gnbAddr(k.pl.gnbOf(u))))
				if err != nil {
					errc <- fmt.Errorf("bench: establish the session of user %d: %w", u, err)
					cancel()
					return
				}
				lat[u] = time.Since(t0)
				k.mu.Lock()
				k.sessions[u] = s
				k.mu.Unlock()
			}
		}()
	}
feed:
	for u := range users {
		select {
		case next <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return result.Setup{}, err
	}
	if err := ctx.Err(); err != nil {
		return result.Setup{}, err
	}
	return result.Setup{Sessions: users, Elapsed: elapsed, Rate: float64(users) / elapsed.Seconds(), Latency: result.Summarise(lat)}, nil
}

// keys are user u's uplink TEID and UE address, as its session has them.
func (k *control) keys(u int) (uint32, netip.Addr) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sessions[u].UplinkTEID, k.sessions[u].UE
}

// setTraffic records which users carry generated traffic: handovers move them, deletions
// spare them.
func (k *control) setTraffic(flows []flowID, users int) {
	in := map[int]bool{}
	for _, f := range flows {
		if !in[f.user] {
			in[f.user] = true
			k.traffic = append(k.traffic, f.user)
		}
	}
	for u := range users {
		if !in[u] {
			k.spare = append(k.spare, u)
		}
	}
}

// gnbsOf returns the base stations user u may be at.
func (k *control) gnbsOf(u int) []netip.Addr {
	k.mu.Lock()
	defer k.mu.Unlock()
	if g, ok := k.gnbs[u]; ok {
		return g
	}
	return []netip.Addr{gnbAddr(k.pl.gnbOf(u))}
}

// eventLog collects the latencies and failures of the events of a point.
type eventLog struct {
	mu                      sync.Mutex
	added, deleted, handovs []time.Duration
	failed, skipped         int
	errs                    []string
}

// errNothing is an event that found nothing to act on: a deletion when every session left
// carries traffic. It is counted as skipped, not as a failure of the UPF.
var errNothing = errors.New("nothing to act on")

func (l *eventLog) record(list *[]time.Duration, d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, errNothing) {
		l.skipped++
		return
	}
	if err != nil {
		l.failed++
		if msg := err.Error(); len(l.errs) < maxEventErrors && !slices.Contains(l.errs, msg) {
			l.errs = append(l.errs, msg)
		}
		return
	}
	*list = append(*list, d)
}

func (l *eventLog) stats() result.EventStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return result.EventStats{Added: result.Summarise(l.added), Deleted: result.Summarise(l.deleted),
		Handovers: result.Summarise(l.handovs), Failed: l.failed, Skipped: l.skipped, Errors: l.errs}
}

// events injects ev's events until ctx ends, each kind at its rate (see schedule), each
// event in a goroutine of its own so that a slow answer does not slow the schedule; it
// returns when every event it started has ended.
func (k *control) events(ctx context.Context, ev scenario.Events, log *eventLog) {
	var wg sync.WaitGroup
	kinds := []struct {
		rate float64
		do   func(context.Context) error
		lat  *[]time.Duration
	}{
		{ev.SessionAdd, k.add, &log.added},
		{ev.SessionDelete, k.delete, &log.deleted},
		{ev.Handover, k.handover, &log.handovs},
	}
	for _, kind := range kinds {
		if kind.rate <= 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			schedule(ctx, kind.rate, func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// The request outlives the trial if it must: its answer still counts.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					defer cancel()
					t0 := time.Now()
					err := kind.do(rctx)
					log.record(kind.lat, time.Since(t0), err)
				}()
			})
		}()
	}
	wg.Wait()
}

// schedule calls fire rate times a second until ctx ends. A ticker drops the ticks its
// reader misses, as it does when traffic keeps the CPUs busy: each tick fires every event
// due by then (rate × time since the start), so that the rate asked is the rate sent.
func schedule(ctx context.Context, rate float64, fire func()) {
	period := time.Duration(math.Max(float64(time.Second)/rate, 1))
	tick := time.NewTicker(period)
	defer tick.Stop()
	start, fired := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for due := int(time.Since(start).Seconds() * rate); fired < due; fired++ {
			fire()
		}
	}
}

// add establishes the session of a new user, outside every scenario's user range.
func (k *control) add(ctx context.Context) error {
	k.mu.Lock()
	u := eventUserBase + k.nextAdd
	k.nextAdd++
	k.mu.Unlock()
	s, err := k.c.Establish(ctx, k.pl.spec(u, gnbAddr(k.pl.gnbOf(u))))
	if err != nil {
		return fmt.Errorf("add user %d: %w", u, err)
	}
	k.mu.Lock()
	k.sessions[u] = s
	k.added = append(k.added, u)
	k.mu.Unlock()
	return nil
}

// delete deletes the oldest added session, else one of a user without traffic.
func (k *control) delete(ctx context.Context) error {
	k.mu.Lock()
	var u int
	switch {
	case len(k.added) > 0:
		u, k.added = k.added[0], k.added[1:]
	case len(k.spare) > 0:
		u, k.spare = k.spare[0], k.spare[1:]
	default:
		k.mu.Unlock()
		return fmt.Errorf("delete: every session left carries traffic: %w", errNothing)
	}
	s := k.sessions[u]
	delete(k.sessions, u)
	k.mu.Unlock()
	if err := k.c.Delete(ctx, s); err != nil {
		return fmt.Errorf("delete user %d: %w", u, err)
	}
	return nil
}

// handover moves the next traffic-carrying user to the next base station: a Session
// Modification updating the downlink FAR's Outer Header Creation, as at an Xn handover.
func (k *control) handover(ctx context.Context) error {
	k.mu.Lock()
	if len(k.traffic) == 0 {
		k.mu.Unlock()
		return errors.New("handover: no user carries traffic")
	}
	u := k.traffic[k.moved%len(k.traffic)]
	k.moved++
	s := k.sessions[u]
	cur := k.gnbs[u]
	if cur == nil {
		cur = []netip.Addr{gnbAddr(k.pl.gnbOf(u))}
	}
	// Count positions from the user's first base station; one user is handed over by one
	// event at a time only when there are fewer users than events in flight, which the
	// check tolerates by accepting every base station the user was sent to.
	to := gnbAddr((k.pl.gnbOf(u) + len(cur)) % k.pl.p.BaseStations)
	k.gnbs[u] = append(cur, to)
	// A copy: SetDownlink writes the session, and another handover of the same user may
	// be under way.
	cp := *s
	k.mu.Unlock()
	if err := k.c.SetDownlink(ctx, &cp, to, cp.GNBTEID); err != nil {
		return fmt.Errorf("handover of user %d to %s: %w", u, to, err)
	}
	return nil
}
