package nlfollow

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeNetlink stands for netlink: each subscription delivers what is sent on in, and its
// channel is closed once its stop is closed or it breaks, as netlink's are.
type fakeNetlink struct {
	mu      sync.Mutex
	refuse  int // so many Subscribe calls fail first
	subs    []*fakeSub
	made    chan *fakeSub
	syncs   chan struct{}
	syncErr []error // what the Sync calls return, in turn; then nil
}

type fakeSub struct {
	in     chan int
	broken chan struct{} // closed: the subscription fails
	closed chan struct{} // closed once its channel is
}

func newFake() *fakeNetlink {
	return &fakeNetlink{made: make(chan *fakeSub, 10), syncs: make(chan struct{}, 100)}
}

func (f *fakeNetlink) subscribe(stop <-chan struct{}) (<-chan int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse > 0 {
		f.refuse--
		return nil, errors.New("refused")
	}
	s := &fakeSub{in: make(chan int), broken: make(chan struct{}), closed: make(chan struct{})}
	ch := make(chan int)
	go func() {
		defer close(s.closed)
		defer close(ch)
		for {
			select {
			case <-stop:
				return
			case <-s.broken:
				return
			case v := <-s.in:
				select {
				case ch <- v:
				case <-stop:
					return
				}
			}
		}
	}()
	f.subs = append(f.subs, s)
	f.made <- s
	return ch, nil
}

func (f *fakeNetlink) sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs <- struct{}{}
	if len(f.syncErr) == 0 {
		return nil
	}
	err := f.syncErr[0]
	f.syncErr = f.syncErr[1:]
	return err
}

func (f *fakeNetlink) events(t *testing.T) Events[int] {
	fail := func(err error) { t.Logf("failed: %v", err) }
	return Events[int]{Subscribe: f.subscribe, Wanted: func(v int) bool { return v >= 0 }, Sync: f.sync,
		Retry: 50 * time.Millisecond, SubscribeFailed: fail, SyncFailed: fail}
}

// wait fails the test unless ch delivers within three times Wait (two attempts to subscribe
// and a margin).
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(3 * Wait):
		t.Fatalf("no %s within %v", what, 3*Wait)
		panic("unreachable")
	}
}

// quiet fails the test if ch delivers within a short while.
func quiet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected %s", what)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestEvents: Start subscribes and syncs; a wanted event syncs, another does not; a
// subscription that breaks is made again (after a refusal, a Wait later) and followed by a
// sync; stop ends the subscription of the moment and nothing runs after it.
func TestEvents(t *testing.T) {
	f := newFake()
	stop, err := f.events(t).Start()
	if err != nil {
		t.Fatal(err)
	}
	first := wait(t, f.made, "subscription")
	wait(t, f.syncs, "sync at start")
	first.in <- 1
	wait(t, f.syncs, "sync at a wanted event")
	first.in <- -1
	quiet(t, f.syncs, "sync at an unwanted event")

	f.mu.Lock()
	f.refuse = 1
	f.mu.Unlock()
	began := time.Now()
	close(first.broken)
	second := wait(t, f.made, "subscription after one broke")
	if d := time.Since(began); d < 2*Wait {
		t.Errorf("subscribed again %v after it broke, with one refusal; want two waits of %v", d, Wait)
	}
	wait(t, f.syncs, "sync after subscribing again")
	second.in <- 2
	wait(t, f.syncs, "sync at an event of the new subscription")

	stop()
	select {
	case <-second.closed:
	default:
		t.Error("the subscription is still open after stop returned")
	}
	stop() // a second call does nothing
	quiet(t, f.syncs, "sync after stop")
}

// TestEventsStopWhileResubscribing: stop, called while waiting to subscribe again, returns
// without a new subscription.
func TestEventsStopWhileResubscribing(t *testing.T) {
	f := newFake()
	stop, err := f.events(t).Start()
	if err != nil {
		t.Fatal(err)
	}
	first := wait(t, f.made, "subscription")
	close(first.broken)
	<-first.closed
	stop()
	quiet(t, f.made, "subscription after stop")
}

// TestEventsRetry: a Sync that fails is called again Retry later, with no event.
func TestEventsRetry(t *testing.T) {
	f := newFake()
	f.syncErr = []error{nil, errors.New("busy")}
	stop, err := f.events(t).Start()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	first := wait(t, f.made, "subscription")
	wait(t, f.syncs, "sync at start")
	first.in <- 1
	wait(t, f.syncs, "sync at an event (fails)")
	wait(t, f.syncs, "sync retried without an event")
	quiet(t, f.syncs, "sync after one worked")
}

// TestEventsStartFails: when the first Sync fails, Start returns its error with the
// subscription ended.
func TestEventsStartFails(t *testing.T) {
	f := newFake()
	f.syncErr = []error{errors.New("no such device")}
	if _, err := f.events(t).Start(); err == nil {
		t.Fatal("Start with a failing Sync: no error")
	}
	s := wait(t, f.made, "subscription")
	select {
	case <-s.closed:
	default:
		t.Error("the subscription is still open after Start failed")
	}
}
