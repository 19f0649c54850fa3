package testbed

import (
	"bytes"
	"sync"
)

// tailBuffer keeps the last max bytes written to it: enough of a daemon's log to explain a
// failure without holding all of it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept bytes, starting at a line boundary when one is available.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if len(s) == b.max {
		if i := bytes.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return string(s)
}
