// Package nlfollow keeps a state in step with netlink events. A subscription can end by
// itself (a full socket buffer loses events and ends it): then it is made again and the state
// brought up to date anew, since changes may have been missed.
package nlfollow

import (
	"sync"
	"time"
)

// Wait is how long after a subscription ended it is made again, and between two attempts
// that fail: long enough not to spin on a kernel that keeps refusing.
const Wait = time.Second

// Again subscribes anew after a subscription ended: it waits Wait and calls subscribe, again
// every Wait until that works, handing each failure to failed. ok is false when done was
// closed first.
func Again[S any](done <-chan struct{}, subscribe func() (S, error), failed func(error)) (s S, ok bool) {
	for {
		select {
		case <-done:
			return s, false
		case <-time.After(Wait):
		}
		var err error
		if s, err = subscribe(); err == nil {
			return s, true
		}
		failed(err)
	}
}

// Events follows one kind of netlink event: it brings a state up to date (Sync) at each
// event that may change it.
type Events[U any] struct {
	// Subscribe subscribes until stop is closed; netlink closes the channel then, or when
	// the subscription fails.
	Subscribe func(stop <-chan struct{}) (<-chan U, error)
	// Wanted reports whether an event may change the state; nil: every one may.
	Wanted func(U) bool
	// Sync brings the state up to date.
	Sync func() error
	// Retry is how long after a failed Sync it is called again, without waiting for an
	// event: a quiet host may send none for long.
	Retry time.Duration
	// SubscribeFailed and SyncFailed are told what failed; it is tried again.
	SubscribeFailed, SyncFailed func(error)
}

// Start subscribes, then syncs (after subscribing: no change falls in between), and follows
// the events in a goroutine until stop is called; stop waits for it, and a second call does
// nothing. When Start fails, nothing is left running.
func (e Events[U]) Start() (stop func(), err error) {
	sub, err := e.subscribe()
	if err != nil {
		return nil, err
	}
	if err := e.Sync(); err != nil {
		sub.end()
		return nil, err
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		e.Follow(done, sub.updates, sub.stop)
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-exited }) }, nil
}

// Follow syncs at each wanted event of updates (the subscription subStop ends), and every
// Retry while the last Sync failed; when updates is closed, the subscription having ended,
// it subscribes again (see Again) and syncs. It returns once done is closed, with the
// subscription ended.
func (e Events[U]) Follow(done <-chan struct{}, updates <-chan U, subStop chan struct{}) {
	sub := subscription[U]{updates, subStop}
	var retry <-chan time.Time // nil while the last Sync worked
	for {
		select {
		case <-done:
			sub.end()
			return
		case u, ok := <-sub.updates:
			if ok && e.Wanted != nil && !e.Wanted(u) {
				continue
			}
			if !ok {
				close(sub.stop) // netlink's socket goes with it
				var again bool
				if sub, again = Again(done, e.subscribe, e.SubscribeFailed); !again {
					return
				}
			}
		case <-retry:
		}
		retry = nil
		if err := e.Sync(); err != nil {
			e.SyncFailed(err)
			retry = time.After(e.Retry)
		}
	}
}

// subscription is one subscription: closing stop ends it, and netlink then closes updates.
type subscription[U any] struct {
	updates <-chan U
	stop    chan struct{}
}

func (e Events[U]) subscribe() (subscription[U], error) {
	stop := make(chan struct{})
	updates, err := e.Subscribe(stop)
	if err != nil {
		close(stop) // for what netlink may have started before it failed
		return subscription[U]{}, err
	}
	return subscription[U]{updates, stop}, nil
}

// end ends the subscription and waits until netlink has closed its channel: netlink's
// receiving goroutine may be blocked sending an event no one reads any more.
func (s subscription[U]) end() {
	close(s.stop)
	for range s.updates {
	}
}
