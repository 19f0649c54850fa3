package datapath

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/rules"
)

// Buffering (bpf/lib/buffer.h): a FAR that buffers hands each frame to xupfd over the ring
// xupf_buffered; xupfd keeps them (internal/buffer) and, once the FAR forwards again, runs them
// through the program again with Replay. The datapath counts per PDR the frames handed over
// (xupf_buffer_in) and those xupfd is done with (xupf_buffer_out, Release); while they differ
// a forwarding FAR that buffered before is FAR_DRAIN and buffers new packets behind the held
// ones. finishDrains makes it FAR_FORWARD once nothing is held.

// counterRef names the PDR a counter slot belongs to.
type counterRef struct {
	owner  uint64
	uplink bool
	pdr    uint32
}

// bufferHdrLen is the size of struct buffered_hdr, before each frame in the ring.
const bufferHdrLen = 16

// ReadBuffered calls fn with each buffered frame, in the order the datapath handed them over,
// until ctx is done.
func (d *Datapath) ReadBuffered(ctx context.Context, fn func(buffer.Packet)) error {
	return readRing(ctx, d.objs.XupfBuffered, "buffered packets", func(b []byte) {
		if len(b) < bufferHdrLen {
			return // cannot happen: the program writes a header with every frame
		}
		counter := binary.NativeEndian.Uint32(b[0:4])
		n := min(int(binary.NativeEndian.Uint32(b[8:12])), len(b)-bufferHdrLen)
		d.mu.Lock()
		ref := d.byCounter[counter]
		d.mu.Unlock()
		fn(buffer.Packet{Owner: ref.owner, Uplink: ref.uplink, PDR: ref.pdr, Counter: counter,
			Ifindex: binary.NativeEndian.Uint32(b[4:8]), Frame: b[bufferHdrLen : bufferHdrLen+n]})
	})
}

// xdpMD is struct xdp_md, the context BPF_PROG_TEST_RUN takes for XDP.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// testXDPLiveFrames is BPF_F_TEST_XDP_LIVE_FRAMES: the kernel acts on the program's verdict
// (redirects, transmits, passes to the stack) as for a received frame.
const testXDPLiveFrames = 1 << 1

// Replay runs a buffered frame through the program again, as arriving on its interface, for
// its FAR to forward it now: the kernel then redirects or passes it as the verdict says. It
// must run in the network namespace Load ran in (the interfaces are looked up there). The
// frame is marked (BUFFER_REPLAY_MARK in its metadata) so that a draining FAR forwards it.
func (d *Datapath) Replay(p buffer.Packet) error {
	data := make([]byte, 4+len(p.Frame))
	binary.NativeEndian.PutUint32(data, uint32(xupfBufferMarkBUFFER_REPLAY_MARK))
	copy(data[4:], p.Frame)
	_, err := d.Program().Run(&ebpf.RunOptions{
		Data:      data,
		Context:   xdpMD{Data: 4, DataEnd: uint32(len(data)), IngressIfindex: p.Ifindex},
		Flags:     testXDPLiveFrames,
		Repeat:    1,
		BatchSize: 1, // one frame: the kernel then sets up one page per run, not 64
	})
	if err != nil {
		return fmt.Errorf("replay a buffered packet: %w", err)
	}
	return nil
}

// Release tells the datapath that n frames of the PDR with counter slot counter have been
// forwarded again or discarded: xupfd holds them no more. Call it only once they have left
// (after Replay returned), or a draining FAR would forward later packets before them.
func (d *Datapath) Release(counter uint32, n uint64) error {
	d.bufMu.Lock()
	defer d.bufMu.Unlock()
	var out uint64
	if err := d.objs.XupfBufferOut.Lookup(counter, &out); err != nil {
		return fmt.Errorf("release buffered packets: %w", err)
	}
	if err := d.objs.XupfBufferOut.Put(counter, out+n); err != nil {
		return fmt.Errorf("release buffered packets: %w", err)
	}
	return nil
}

// held is how many frames of counter slot counter are handed over and not released.
func (d *Datapath) held(counter uint32) (uint64, error) {
	var in, out uint64
	if err := d.objs.XupfBufferIn.Lookup(counter, &in); err != nil {
		return 0, err
	}
	if err := d.objs.XupfBufferOut.Lookup(counter, &out); err != nil {
		return 0, err
	}
	return in - out, nil
}

// resetHeld makes a counter slot hold nothing, for a PDR that takes it over: frames handed
// over under its earlier owner are not this one's to wait for.
func (d *Datapath) resetHeld(counter uint32) error {
	d.bufMu.Lock()
	defer d.bufMu.Unlock()
	var in uint64
	if err := d.objs.XupfBufferIn.Lookup(counter, &in); err != nil {
		return err
	}
	return d.objs.XupfBufferOut.Put(counter, in)
}

// finishDrains turns each draining FAR (FAR_DRAIN) into FAR_FORWARD once its PDR holds
// nothing: when two looks grace apart both find nothing held. A packet that read "held" just
// before the first look has been handed over by the second (an XDP program runs to its end in
// microseconds), so it is then either still held, or forwarded again already; after the first
// look no packet finds anything held unless such a one is. So no packet overtakes a held one.
func (d *Datapath) finishDrains(done <-chan struct{}) {
	zero := map[uint32]bool{} // counters found holding nothing at the last look
	t := time.NewTicker(grace)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-d.drainKick:
		case <-t.C:
		}
		d.mu.Lock()
		for c := range d.draining {
			n, err := d.held(c)
			switch {
			case err != nil:
				d.log.Warn("read buffered packet counts", "counter", c, "err", err)
			case n != 0:
				delete(zero, c)
			case zero[c]:
				delete(zero, c)
				d.endDrain(c)
			default:
				zero[c] = true
			}
		}
		for c := range zero {
			if !d.draining[c] {
				delete(zero, c)
			}
		}
		d.mu.Unlock()
	}
}

// endDrain rewrites the draining FAR of counter slot c as FAR_FORWARD, where the packets read
// it: the FAR slot of a classified set, or the rule_ref of a set with one PDR. d.mu is held.
func (d *Datapath) endDrain(c uint32) {
	delete(d.draining, c)
	ref := d.byCounter[c]
	for _, set := range d.owners[ref.owner] {
		if set.rs.Uplink != ref.uplink {
			continue
		}
		for i, p := range set.rs.PDRs {
			if p.ID != ref.pdr {
				continue
			}
			var err error
			if set.tables == nil {
				err = undrain(d.objs.XupfRefs, set.ref, func(v *xupfRuleRef) *xupfFar { return &v.Far })
				if err == nil && set.value.Far.Action == uint32(xupfFarActionFAR_DRAIN) {
					// The direct cache's copy drains still: replace it.
					set.value.Far.Action = uint32(xupfFarActionFAR_FORWARD)
					d.cacheSet(set)
				}
			} else {
				err = undrain(d.objs.XupfFars, set.slots[i], func(v *xupfFar) *xupfFar { return v })
			}
			if err != nil {
				d.log.Warn("end a FAR's draining", "counter", c, "err", err)
			}
			return
		}
	}
}

// undrain makes the FAR in slot of m, found in its value by far, FAR_FORWARD if it drains still.
// The packets see the action change and nothing else: the rest of the value is written back
// as it was.
func undrain[V any](m *ebpf.Map, slot uint32, far func(*V) *xupfFar) error {
	var v V
	if err := m.Lookup(slot, &v); err != nil {
		return err
	}
	f := far(&v)
	if f.Action != uint32(xupfFarActionFAR_DRAIN) {
		return nil
	}
	f.Action = uint32(xupfFarActionFAR_FORWARD)
	return m.Put(slot, &v)
}

// drainingPDRs are the ids of the PDRs of sets in one direction whose FAR is to drain if it
// forwards now: those that buffered, drain still, or hold packets. d.mu is held.
func (d *Datapath) drainingPDRs(sets []*installedSet, uplink bool) map[uint32]bool {
	out := map[uint32]bool{}
	for _, s := range sets {
		if s.rs.Uplink != uplink {
			continue
		}
		for _, p := range s.rs.PDRs {
			c := s.counters[p.ID].after
			n, err := d.held(c)
			if p.FAR.Action == rules.Buffer || d.draining[c] || err != nil || n != 0 {
				out[p.ID] = true
			}
		}
	}
	return out
}

// trackCounters records whose the counter slots of written are, in place of those of prev,
// and which of them drain. d.mu is held.
func (d *Datapath) trackCounters(owner uint64, prev, written []*installedSet) {
	for _, s := range prev {
		for _, c := range s.counters {
			delete(d.byCounter, c.after)
			delete(d.draining, c.after)
		}
	}
	for _, s := range written {
		for id, c := range s.counters {
			d.byCounter[c.after] = counterRef{owner: owner, uplink: s.rs.Uplink, pdr: id}
			if s.draining[id] {
				d.draining[c.after] = true
			}
		}
	}
	select {
	case d.drainKick <- struct{}{}:
	default:
	}
}

// drainState is what the datapath keeps for buffering: which counter slots drain, and whose
// each counter slot is.
type drainState struct {
	bufMu     sync.Mutex            // serialises writes of xupf_buffer_out
	draining  map[uint32]bool       // counter slots whose PDR's FAR is FAR_DRAIN; d.mu guards it
	byCounter map[uint32]counterRef // d.mu guards it
	drainKick chan struct{}
}
