package datapath

import (
	"context"
	"encoding/binary"
	"net/netip"
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
	return readRing(ctx, d.objs.XupfErrindEvents, "unknown-TEID events", func(b []byte) {
		if len(b) < 12 {
			return // cannot happen: the program writes whole events
		}
		fn(UnknownTEID{Peer: netip.AddrFrom4([4]byte(b[0:4])), Local: netip.AddrFrom4([4]byte(b[4:8])),
			TEID: binary.BigEndian.Uint32(b[8:12])})
	})
}
