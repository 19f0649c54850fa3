package datapath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
)

// UnknownTEID is a G-PDU the datapath dropped as unknown_teid, for the Error Indication to
// answer it with (TS 29.281 7.3.1): its sender, the local GTP-U address it was sent to and
// its TEID. The datapath hands at most 1,000 a second per CPU over (errind.h).
type UnknownTEID struct {
	Peer, Local netip.Addr
	TEID        uint32
}

// ReadUnknownTEIDs calls fn with each unknown-TEID event until ctx is done.
func (d *Datapath) ReadUnknownTEIDs(ctx context.Context, fn func(UnknownTEID)) error {
	r, err := ringbuf.NewReader(d.objs.XupfErrindEvents)
	if err != nil {
		return fmt.Errorf("read unknown-TEID events: %w", err)
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
			return fmt.Errorf("read unknown-TEID events: %w", err)
		case len(rec.RawSample) < 12:
			continue // cannot happen: the program writes whole events
		}
		b := rec.RawSample
		fn(UnknownTEID{Peer: netip.AddrFrom4([4]byte(b[0:4])), Local: netip.AddrFrom4([4]byte(b[4:8])),
			TEID: binary.BigEndian.Uint32(b[8:12])})
	}
	return nil
}
