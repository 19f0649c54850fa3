package datapath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// readRing calls fn with each record of the ring buffer m, in order, until ctx is done; what
// names the records in errors.
func readRing(ctx context.Context, m *ebpf.Map, what string, fn func([]byte)) error {
	r, err := ringbuf.NewReader(m)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	defer r.Close()
	for ctx.Err() == nil {
		// A deadline, not a Close from another goroutine, ends the wait: Close would race
		// with the ring's last read.
		r.SetDeadline(time.Now().Add(200 * time.Millisecond))
		rec, err := r.Read()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case err != nil:
			return fmt.Errorf("read %s: %w", what, err)
		}
		fn(rec.RawSample)
	}
	return nil
}
