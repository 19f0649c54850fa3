package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/nfwatch"
	"github.com/xupf/xupf/internal/router"
)

// voided is what a change in the kernel may have changed its decision for: every flow (all),
// or the flows of the connections conntrack removed (gone, keyed by either direction's
// tuple) and those sent to a neighbour MAC that is gone (macs).
type voided struct {
	all  bool
	gone map[nfwatch.Tuple]bool
	macs []router.GoneNeighbour
}

// merge adds o to v, so that one scan removes what both select.
func (v *voided) merge(o voided) {
	v.all = v.all || o.all
	if v.all {
		v.gone, v.macs = nil, nil
		return
	}
	for t := range o.gone {
		if v.gone == nil {
			v.gone = make(map[nfwatch.Tuple]bool, len(o.gone))
		}
		v.gone[t] = true
	}
	v.macs = append(v.macs, o.macs...)
}

func (v *voided) empty() bool { return !v.all && len(v.gone) == 0 && len(v.macs) == 0 }

// match selects the entries sent to v's neighbour MACs; nil (every entry) when all. The
// flows of v.gone are found by key (removeConnections), not by a scan.
func (v *voided) match() func(*xupfFlowKey, *xupfFlow) bool {
	if v.all {
		return nil
	}
	return func(k *xupfFlowKey, f *xupfFlow) bool {
		for _, g := range v.macs {
			if int(f.Ifindex) == g.Ifindex && bytes.Equal(f.Dmac[:], g.MAC) {
				return true
			}
		}
		return false
	}
}

// invalidator coalesces invalidation requests: the netlink readers queue them without waiting,
// and one goroutine removes everything queued since its last scan in one scan of the table.
// Scans that fell behind a burst of events thus cost one more scan, not one per event, and a
// reader never waits for a scan (its socket does not overflow while the table is read).
type invalidator struct {
	remove func(voided) // one scan removing what the merged requests void
	mu     sync.Mutex
	queued voided        // merged requests no scan has started on; under mu
	wake   chan struct{} // one token: requests are queued
}

// newInvalidator returns an invalidator whose scans call remove; start runs them.
func newInvalidator(remove func(voided)) *invalidator {
	return &invalidator{remove: remove, wake: make(chan struct{}, 1)}
}

// start runs remove on the merged queued requests, one scan at a time, until the returned
// stop is called; stop waits for the scan under way. Requests queued before start wait for it.
func (iv *invalidator) start() (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-iv.wake:
			}
			iv.mu.Lock()
			v := iv.queued
			iv.queued = voided{}
			iv.mu.Unlock()
			if !v.empty() {
				iv.remove(v)
			}
		}
	}()
	return func() { close(done); <-exited }
}

// queue adds a request for the next scan; it does not wait for it.
func (iv *invalidator) queue(v voided) {
	if v.empty() {
		return
	}
	iv.mu.Lock()
	iv.queued.merge(v)
	iv.mu.Unlock()
	select {
	case iv.wake <- struct{}{}:
	default: // a token is already waiting: the next scan takes this request too
	}
}

// netfilterChanged queues the removal of the flows netfilter events may have voided: every
// flow when the ruleset changed (or events were lost), else the flows of the connections
// conntrack removed, both directions.
func (d *Datapath) netfilterChanged(ev nfwatch.Events) {
	v := voided{all: ev.Ruleset}
	if !ev.Ruleset {
		v.gone = make(map[nfwatch.Tuple]bool, len(ev.Gone))
		for _, t := range ev.Gone {
			v.gone[t] = true
		}
	}
	d.invalidator.queue(v)
}

// invalidateFlows queues the removal of the flows a change of the kernel's forwarding may have
// voided: all of them, at once, when routes or links changed or a neighbour's MAC changed or
// failed (the kernel now sends elsewhere, or drops); else, by a scan, those sent to the MAC
// of a neighbour garbage collection deleted. That is the fate of the entry of a neighbour
// reached only through the cache, unused from the kernel's side: the kernel would resolve it
// again, likely to the same MAC, and voiding every flow each time would send them all back
// through the kernel. A cached flow leaves only by an attached interface (the learner runs
// there), so a neighbour gone elsewhere voids none: such as the return device's, whose
// entries (one per UE the kernel sent to, without ARP) come and go with the UEs' traffic.
func (d *Datapath) invalidateFlows(ch router.Change) {
	v := voided{all: ch.Routes}
	for _, g := range ch.Gone {
		var port uint32
		if d.objs.XupfTxPorts.Lookup(uint32(g.Ifindex), &port) != nil {
			continue
		}
		v.all = v.all || !g.Collected
		v.macs = append(v.macs, g)
	}
	d.invalidator.queue(v)
}

// invalidate removes the flows v voids: all of them at once (voidFlows), else those of the
// connections gone by key and those sent to the neighbour MACs in one scan.
func (d *Datapath) invalidate(v voided) {
	if v.all {
		d.voidFlows()
		return
	}
	n, err := d.removeConnections(v.gone)
	if err == nil && len(v.macs) > 0 {
		var m int
		m, err = d.removeFlows(v.match())
		n += m
	}
	d.flowsInvalidated.Add(uint64(n))
	if err != nil {
		d.log.Warn("flow cache: remove the flows a kernel change voided", "err", err)
	}
}

// removeConnections removes the flows of the connections conntrack removed, by key, under
// each tuple of gone (nfwatch reports both of a connection's): the UE's entry, keyed by the
// original tuple with FLOW_FROM_UE, and the replies' (FLOW_F_TO_UE), keyed by the reply tuple
// and the attached interface they arrive on, each with the other entry of its pair. The
// replies' entry is looked for on its own, although the cache's removals take a pair whole
// (removeFlowPair, removeFlows, and flow_void and the FINs in the datapath): one left without
// its UE's entry would otherwise outlive the connection, and once
// conntrack gave the translated address and port to another UE's connection, deliver that
// connection's replies to this UE. Its cost is the connections' (a lookup per tuple and
// arrival), not the table's: conntrack entries die all the time, and a scan each time would
// keep a CPU reading the table. A transit flow is not cached while conntrack tracks it
// (flow_tracked), so none is keyed by a tracked connection's tuple. Like removeFlows it first
// starts a new generation, so that a note taken before is not learnt after.
func (d *Datapath) removeConnections(gone map[nfwatch.Tuple]bool) (int, error) {
	if len(gone) == 0 {
		return 0, nil
	}
	d.nextGeneration()
	arrivals, err := d.arrivals()
	if err != nil {
		return 0, fmt.Errorf("remove the flows of connections gone: %w", err)
	}
	n := 0
	for t := range gone {
		for _, in := range arrivals {
			key := FlowKey{Src: t.Src, Dst: t.Dst, SrcPort: t.SrcPort, DstPort: t.DstPort, Proto: t.Proto, Ifindex: int(in)}.raw()
			v, ok := d.flows.Lookup(key)
			if !ok {
				continue
			}
			pair, paired := flowPair(key, &v)
			n += d.removeFlowPair(key, pair, paired)
		}
	}
	return n, nil
}

// arrivals lists where a cached flow may arrive: FLOW_FROM_UE and the attached interfaces
// (the keys of xupf_tx_ports, which are their own values: keys alone are read).
func (d *Datapath) arrivals() ([]uint32, error) {
	out := []uint32{flowFromUE}
	var prev any // nil: the first key
	for {
		var port uint32
		err := d.objs.XupfTxPorts.NextKey(prev, &port)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the attached interfaces: %w", err)
		}
		out, prev = append(out, port), port
	}
}
