package state

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func open(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, nil, "things")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWriteSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Sync(Op{"things", []byte("a"), []byte("1")}, Op{"things", []byte("b"), []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(Op{Bucket: "things", Key: []byte("a")}); err != nil { // delete
		t.Fatal(err)
	}
	s.Write(Op{"things", []byte("c"), []byte("3")}) // Close commits what is queued
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	var got []string
	if err := s.ForEach("things", func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[b=2 c=3]" {
		t.Errorf("records after reopening = %v, want [b=2 c=3]", got)
	}
	if v, err := s.Get("things", []byte("b")); err != nil || string(v) != "2" {
		t.Errorf("Get(b) = %q, %v; want 2", v, err)
	}
}

// TestGroupCommit: changes queued by many writers at once are committed in far fewer
// transactions than changes, and each writer's own changes keep their order.
func TestGroupCommit(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	const writers, each = 50, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := []byte(fmt.Sprintf("w%d", w))
				if err := s.Sync(Op{"things", key, []byte(fmt.Sprint(i))}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if c := s.Commits(); c >= writers*each {
		t.Errorf("%d commits for %d changes: no grouping", c, writers*each)
	}
	for w := range writers {
		if v, _ := s.Get("things", []byte(fmt.Sprintf("w%d", w))); string(v) != fmt.Sprint(each-1) {
			t.Errorf("writer %d's key = %q, want its last value %d", w, v, each-1)
		}
	}
}

// TestDamagedFile: a truncated, garbled or foreign file is an error that names the file and
// says what to do, never a panic.
func TestDamagedFile(t *testing.T) {
	// A file with enough records to span many pages.
	whole := t.TempDir()
	s := open(t, whole)
	for i := range 2000 {
		s.Write(Op{"things", binary.BigEndian.AppendUint32(nil, uint32(i)), []byte(strings.Repeat("x", 100))})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(whole, FileName))
	if err != nil {
		t.Fatal(err)
	}
	garbled := append([]byte{}, good...)
	for i := 4096 * 2; i < len(garbled); i += 7 { // past the meta pages: the data pages
		garbled[i] ^= 0x5a
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "damaged"},
		{"truncated to a page", good[:4096], "damaged"},
		{"garbled", garbled, "damaged"},
		{"not bbolt", []byte(strings.Repeat("hello ", 2000)), "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, nil, "things")
			if err == nil {
				s.Close()
				t.Fatal("Open accepted a damaged file")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "move it away") {
				t.Errorf("error %q does not name %s, say %q and what to do", err, path, tc.want)
			}
		})
	}
}

func TestOtherSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		return b.Put(versionKey, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", SchemaVersion+1)) {
		t.Errorf("Open of a file of another schema version: %v, want an error naming the version", err)
	}
}

func TestInUse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Open: %v, want an in-use error", err)
	}
}

// BenchmarkSync: changes of about the size of a PFCP session's record, from writers that
// each wait for their change to be durable before making the next, as Serve's answers do.
func BenchmarkSync(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := open(b, b.TempDir())
			defer s.Close()
			value := []byte(strings.Repeat("x", 1500))
			var next sync.Mutex
			i := 0
			b.SetParallelism(writers)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/writers + 1
			for range writers {
				wg.Go(func() {
					for range per {
						next.Lock()
						i++
						key := binary.BigEndian.AppendUint64(nil, uint64(i))
						next.Unlock()
						if err := s.Sync(Op{"things", key, value}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(per*writers)/b.Elapsed().Seconds(), "changes/s")
			b.ReportMetric(float64(per*writers)/float64(s.Commits()), "changes/commit")
		})
	}
}

// TestUnsavableOpLeftOut: an op bbolt refuses every time (an empty or too long key) is an
// error for its caller and does not hold back the changes queued with it or after it.
func TestUnsavableOpLeftOut(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	long := make([]byte, bolt.MaxKeySize+1)
	for _, bad := range []Op{{Bucket: "things", Value: []byte("x")}, {"things", long, []byte("x")}} {
		if err := s.Sync(bad, Op{"things", []byte("a"), []byte("1")}); err == nil {
			t.Errorf("Sync of a key of %d bytes: no error", len(bad.Key))
		}
	}
	s.Write(Op{Bucket: "things", Key: []byte{}}) // a delete of no key
	if err := s.Sync(Op{"things", []byte("b"), []byte("2")}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if v, err := s.Get("things", []byte(k)); err != nil || v == nil {
			t.Errorf("%s not saved: %v", k, err)
		}
	}
}
