// Package state is xupfd's state file: what a restarted xupfd must find again (PFCP
// associations and sessions, this UPF's Recovery Time Stamp, the SEID counter) in one bbolt
// file under state_dir.
//
// bbolt because it is pure Go (no cgo, no server), one file, and every write transaction is
// ACID and fsynced before Commit returns. Writes are queued and committed by one writer in
// groups: every change queued while the previous commit was being synced goes in the next
// transaction, so one fsync makes many changes durable (group commit), in the order they were
// queued. (bbolt's own db.Batch also groups, but two batches may commit out of order and a
// failing function is retried alone; one writer keeps the order of the changes to a key.)
package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the state file's name in state_dir.
const FileName = "xupfd.db"

// SchemaVersion is the layout of the records this build reads and writes. A file with
// another version is refused rather than misread: a change of layout bumps it and says how
// to move on.
const SchemaVersion = 1

// metaBucket holds the schema version.
var (
	metaBucket = []byte("meta")
	versionKey = []byte("schema_version")
)

// openTimeout is how long Open waits for another process's lock on the file.
const openTimeout = time.Second

// retryDelay is how long the writer waits before trying a failed commit again.
const retryDelay = 200 * time.Millisecond

// Op is one change: Value nil deletes Key from Bucket.
type Op struct {
	Bucket string
	Key    []byte
	Value  []byte
}

// Ticket names the changes queued so far: Wait(t) returns once they are all durable.
type Ticket uint64

// Store is an open state file.
type Store struct {
	db   *bolt.DB
	path string
	log  *slog.Logger

	mu sync.Mutex
	// queuedCond is signalled when queued grows or the store closes (the writer waits on it),
	// durableCond when durable grows or the store closes (Wait waits on it): apart, a Write
	// does not wake the waiters of Wait only to have them sleep again, a thread switch per
	// PFCP request at thousands of requests a second.
	queuedCond  *sync.Cond
	durableCond *sync.Cond
	queue       []Op
	queued      Ticket // of the last Op queued
	durable     Ticket // of the last Op committed
	closed      bool
	writerWG    sync.WaitGroup
	commits     uint64 // transactions committed, for tests and measurements
}

// Open opens (creating dir and the file when they do not exist) the state file in dir and
// checks it: a damaged file, or one of another schema version, is an error naming the file
// and what to do. Every bucket in buckets exists afterwards.
func Open(dir string, log *slog.Logger, buckets ...string) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state_dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	db, err := openChecked(path, buckets)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, log: log}
	s.queuedCond, s.durableCond = sync.NewCond(&s.mu), sync.NewCond(&s.mu)
	s.writerWG.Go(s.writer)
	return s, nil
}

// damaged is the error for a state file that cannot be read.
func damaged(path string, err error) error {
	return fmt.Errorf("state file %s is damaged (%v): restore it from a backup, or move it away to start "+
		"without the saved sessions (the SMFs must then set them up again)", path, err)
}

// openChecked opens the file and checks that it is whole: the size its pages need is there,
// every page reads (a fault or a panic reading a damaged page is turned into an error) and
// the schema version is this build's.
func openChecked(path string, buckets []string) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, fmt.Errorf("%v", r))
		}
		if err != nil && db != nil {
			db.Close()
			db = nil
		}
	}()
	// bbolt panics on some damage, and a truncated file maps pages past its end whose reads
	// fault: make the fault a panic too, which the deferred recover turns into an error.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("state file %s is in use by another process (another xupfd with the same "+
			"state_dir?); stop it first, or give this instance its own state_dir", path)
	case err != nil:
		return nil, damaged(path, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if tx.Size() > info.Size() {
			return damaged(path, fmt.Errorf("truncated: %d bytes of %d", info.Size(), tx.Size()))
		}
		if err := checkVersion(tx, path); err != nil {
			return err
		}
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return damaged(path, err)
			}
		}
		// Read every record once, so that damage shows now rather than later.
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error { return nil })
		})
	})
	return db, err
}

// checkVersion writes the schema version into a new file and refuses a file of another.
func checkVersion(tx *bolt.Tx, path string) error {
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		empty := true
		tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return damaged(path, errors.New("it has records but no schema version"))
		}
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return damaged(path, err)
		}
		return meta.Put(versionKey, binary.BigEndian.AppendUint32(nil, SchemaVersion))
	}
	v := meta.Get(versionKey)
	if len(v) != 4 {
		return damaged(path, errors.New("its schema version record is missing or garbled"))
	}
	if got := binary.BigEndian.Uint32(v); got != SchemaVersion {
		return fmt.Errorf("state file %s has schema version %d, and this xupfd reads version %d: run the "+
			"xupfd that wrote it, or move the file away to start without the saved sessions", path, got, SchemaVersion)
	}
	return nil
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// check says why bbolt would refuse op every time (nil: it would not). The writer retries a
// failing commit until it works, so one such op queued would hold back every change after it.
func (op Op) check() error {
	switch {
	case len(op.Key) == 0:
		return fmt.Errorf("%s: empty key", op.Bucket)
	case len(op.Key) > bolt.MaxKeySize:
		return fmt.Errorf("%s: key of %d bytes, more than the %d bbolt takes", op.Bucket, len(op.Key), bolt.MaxKeySize)
	case len(op.Value) > bolt.MaxValueSize:
		return fmt.Errorf("%s/%x: value of %d bytes, more than the %d bbolt takes", op.Bucket, op.Key, len(op.Value), bolt.MaxValueSize)
	}
	return nil
}

// Write queues ops, to be committed in order in one transaction with any other changes
// queued meanwhile, and returns the Ticket to Wait on for them. An op bbolt would always
// refuse (check) is logged and left out, so that it cannot stop the other changes.
func (s *Store) Write(ops ...Op) Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		if err := op.check(); err != nil {
			s.log.Error("state file: change not saved (a bug in its caller)", "file", s.path, "err", err)
			continue
		}
		s.queue = append(s.queue, op)
		s.queued++
	}
	s.queuedCond.Signal() // only the writer waits on it
	return s.queued
}

// Queued is the Ticket of every change queued so far.
func (s *Store) Queued() Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// Durable is the Ticket of every change durable so far.
func (s *Store) Durable() Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}

// Wait returns once the changes of t are durable (committed and fsynced), or with an error
// when the store closed first.
func (s *Store) Wait(t Ticket) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.durable < t && !s.closed {
		s.durableCond.Wait()
	}
	if s.durable < t {
		return fmt.Errorf("state file %s: closed before the change was saved", s.path)
	}
	return nil
}

// Sync writes ops and waits until they are durable; an op left out (see Write) is an error.
func (s *Store) Sync(ops ...Op) error {
	var bad []error
	for _, op := range ops {
		if err := op.check(); err != nil {
			bad = append(bad, fmt.Errorf("state file %s: change not saved: %w", s.path, err))
		}
	}
	return errors.Join(append(bad, s.Wait(s.Write(ops...)))...)
}

// Commits counts the transactions committed so far.
func (s *Store) Commits() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// writer commits the queued changes until the store closes and its queue is empty. A failed
// commit (a full disk) is logged and tried again, so no change is dropped and nothing that
// waits on it goes ahead meanwhile.
func (s *Store) writer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	failing := false
	for {
		for len(s.queue) == 0 && !s.closed {
			s.queuedCond.Wait()
		}
		if len(s.queue) == 0 {
			return
		}
		ops, upTo := s.queue, s.queued
		s.mu.Unlock()
		err := s.db.Update(func(tx *bolt.Tx) error { return apply(tx, ops) })
		s.mu.Lock()
		if err != nil {
			if !failing {
				s.log.Error("state file: saving changes failed; PFCP answers wait until it works", "file", s.path, "err", err)
			}
			failing = true
			if s.closed {
				return
			}
			s.mu.Unlock()
			time.Sleep(retryDelay)
			s.mu.Lock()
			continue
		}
		if failing {
			s.log.Info("state file: saving changes works again", "file", s.path)
			failing = false
		}
		s.queue = s.queue[len(ops):]
		s.durable = upTo
		s.commits++
		s.durableCond.Broadcast()
	}
}

func apply(tx *bolt.Tx, ops []Op) error {
	for _, op := range ops {
		b := tx.Bucket([]byte(op.Bucket))
		if b == nil {
			return fmt.Errorf("no bucket %q (a bug: Open makes them)", op.Bucket)
		}
		var err error
		if op.Value == nil {
			err = b.Delete(op.Key)
		} else {
			err = b.Put(op.Key, op.Value)
		}
		if err != nil {
			return fmt.Errorf("%s/%x: %w", op.Bucket, op.Key, err)
		}
	}
	return nil
}

// ForEach calls fn with every record of bucket, in key order; fn must not keep k or v.
func (s *Store) ForEach(bucket string, fn func(k, v []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("state file %s: no bucket %q", s.path, bucket)
		}
		return b.ForEach(fn)
	})
}

// Get returns a copy of the value of key in bucket, nil when there is none.
func (s *Store) Get(bucket string, key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("state file %s: no bucket %q", s.path, bucket)
		}
		if v := b.Get(key); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	})
	return out, err
}

// Close commits what is queued and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.queuedCond.Broadcast()
	s.durableCond.Broadcast()
	s.mu.Unlock()
	s.writerWG.Wait()
	return s.db.Close()
}

// Remove deletes the state file in dir, for `xupfd --stop`: the next start has no state.
func Remove(dir string) error {
	err := os.Remove(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
