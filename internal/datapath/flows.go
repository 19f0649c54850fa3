package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/conntrack"
	"github.com/xupf/xupf/internal/flowtable"
	"github.com/xupf/xupf/internal/kerneln6"
	"github.com/xupf/xupf/internal/nfwatch"
)

// FlowCacheOptions configure the flow cache (bpf/lib/flowcache.h): the kernel forwards a
// transit flow's first packet, a TC-egress program learns what it did, and the XDP program
// does the same to the flow's later packets.
type FlowCacheOptions struct {
	// MaxFlows sizes the flow table; 0 turns the cache off (its code is then not loaded).
	// When the table is full, new flows stay with the kernel (counted as flow_full): it
	// holds MaxFlows flows (in 2 to 4 times as many slots: internal/flowtable Bits), but for
	// a rare new flow that finds both its buckets full (none to one in a few million
	// replacements at the highest load), which stays with the kernel too.
	MaxFlows int
	// IdleTimeout is how long a flow may go without a packet before aging removes it;
	// default DefaultFlowIdleTimeout.
	IdleTimeout time.Duration
	// ScanBatch bounds aging's work: each ScanInterval it looks at this many of the table's
	// slots, resuming where it stopped, so a full sweep takes slots/ScanBatch intervals; defaults
	// DefaultFlowScanBatch and DefaultFlowScanInterval.
	ScanBatch    int
	ScanInterval time.Duration
	// KernelN6 chooses, by network instance (the one an uplink FAR forwards to,
	// rules.FAR.NetworkInstance), which UE traffic without a tunnel goes to the kernel once
	// decapsulated (and charged), for its N6 treatment: conntrack, nftables NAT and
	// filtering, routing. The cache learns each flow's translation and does it for the
	// flow's later packets, both ways. Elsewhere the datapath routes UE traffic itself and
	// the kernel never sees it. The program has the kernel's N6 code only when some network
	// instance is the kernel's (KernelN6.Any); the default is then a load-time constant
	// (cfg_n6_default), and the forwarding uplink FARs of a network instance that differs
	// from it carry the override (FAR_F_KERNEL_N6, FAR_F_ROUTED_N6).
	KernelN6 kerneln6.Choice
}

// n6Override is the far_flag bit a forwarding uplink FAR of network instance ni carries: none
// where ni follows the default, so that a FAR an earlier build wrote without these bits keeps
// the treatment it had.
func (o FlowCacheOptions) n6Override(ni string) uint8 {
	switch {
	case !o.KernelN6.Overrides(ni):
		return 0
	case o.KernelN6.Kernel(ni):
		return uint8(xupfFarFlagFAR_F_KERNEL_N6)
	default:
		return uint8(xupfFarFlagFAR_F_ROUTED_N6)
	}
}

// Defaults of the flow cache's aging.
const (
	DefaultFlowIdleTimeout  = 30 * time.Second
	DefaultFlowScanBatch    = 65536
	DefaultFlowScanInterval = time.Second
)

func (o *FlowCacheOptions) setDefaults() {
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultFlowIdleTimeout)
	o.ScanBatch = cmp.Or(o.ScanBatch, DefaultFlowScanBatch)
	o.ScanInterval = cmp.Or(o.ScanInterval, DefaultFlowScanInterval)
}

func (o FlowCacheOptions) on() bool { return o.MaxFlows > 0 }

// loadsInOrder tells whether goarch keeps a BPF program's plain loads in order (x86-64
// only): the flow table's and the direct caches' readers rely on it, as BPF has no read
// barrier, so their writers refuse or stay off elsewhere.
func loadsInOrder(goarch string) bool { return goarch == "amd64" }

// flowCacheArch refuses the flow cache on an architecture other than x86-64: the datapath
// reads a flow table slot's state word, key and action and the state word again with plain
// loads, which only x86-64 keeps in order (BPF has no read barrier; bpf/lib/flowtable.h).
// Elsewhere a reader could use an action half written, or another flow's.
func flowCacheArch(goarch string) error {
	if !loadsInOrder(goarch) {
		return fmt.Errorf("flow_cache.max_flows: the flow cache runs on x86-64 only (its readers "+
			"rely on x86-64 keeping loads in order), not %s; set flow_cache.max_flows to 0", goarch)
	}
	return nil
}

// setFlowCache sizes the flow table and sets cfg_flowcache in spec.
func setFlowCache(spec *ebpf.CollectionSpec, o FlowCacheOptions) error {
	if o.MaxFlows < 0 {
		return fmt.Errorf("flow_cache.max_flows must be 0 (off) or positive, got %d", o.MaxFlows)
	}
	if o.KernelN6.Any() && !o.on() {
		return errors.New("flow_cache.kernel_n6 needs the flow cache: set flow_cache.max_flows")
	}
	if o.on() {
		if err := flowCacheArch(runtime.GOARCH); err != nil {
			return err
		}
	}
	mode := xupfFlowcacheModeFLOWCACHE_OFF
	switch {
	case o.KernelN6.Any():
		mode = xupfFlowcacheModeFLOWCACHE_KERNEL_N6
	case o.on():
		mode = xupfFlowcacheModeFLOWCACHE_LEARN
	}
	if o.on() {
		bits, err := flowtable.Bits(o.MaxFlows)
		if err != nil {
			return err
		}
		spec.Maps[xupfMapXupfFlows].MaxEntries = uint32(flowtable.Elements(bits))
		if err := spec.Variables[xupfVarCfgFlowBits].Set(uint32(bits)); err != nil {
			return err
		}
		if err := spec.Variables[xupfVarCfgMaxFlows].Set(uint64(o.MaxFlows)); err != nil {
			return err
		}
	}
	n6 := xupfN6DefaultROUTED_N6
	if o.KernelN6.Default {
		n6 = xupfN6DefaultKERNEL_N6
	}
	if err := spec.Variables[xupfVarCfgN6Default].Set(uint32(n6)); err != nil {
		return err
	}
	return spec.Variables[xupfVarCfgFlowcache].Set(uint32(mode))
}

// FlowKey identifies a cached flow: its 5-tuple and where its packets arrive.
type FlowKey struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8  // 6 TCP, 17 UDP
	VLAN             uint16 // the VLAN ID it arrives with, 0 untagged
	Ifindex          int    // the interface it arrives on; 0 for a UE's packets out of their tunnel
}

// VLANAction is what the cache does to a flow's VLAN tag.
type VLANAction string

// The values of VLANAction, one per enum flow_vlan_action.
const (
	VLANNone    VLANAction = "none"
	VLANPush    VLANAction = "push"
	VLANPop     VLANAction = "pop"
	VLANRewrite VLANAction = "rewrite"
)

var vlanActions = map[xupfFlowVlanAction]VLANAction{
	xupfFlowVlanActionFLOW_VLAN_NONE: VLANNone, xupfFlowVlanActionFLOW_VLAN_PUSH: VLANPush,
	xupfFlowVlanActionFLOW_VLAN_POP: VLANPop, xupfFlowVlanActionFLOW_VLAN_REWRITE: VLANRewrite,
}

// Flow is a cached flow: what the kernel did to its first packet, and its statistics.
type Flow struct {
	Key        FlowKey
	OutIfindex int
	MTU        int
	DstMAC     net.HardwareAddr
	SrcMAC     net.HardwareAddr
	VLAN       VLANAction
	VLANProto  uint16 // push, rewrite: 0x8100 or 0x88a8
	VLANTCI    uint16 // push, rewrite: priority and VLAN ID
	DecTTL     bool   // the TTL is decremented (routed)
	DSCP       int    // the DSCP written, -1 when left as it came
	// SNAT is the source address and port a UE's flow is given (the kernel's translation);
	// ToUE the destination the replies to it are given back, after which the UE session's
	// downlink rules take them (OutIfindex, MACs and MTU then mean nothing). Both invalid
	// when the flow is not translated.
	SNAT, ToUE netip.AddrPort
	Packets    uint64
	Bytes      uint64 // of the IP packets
	FirstSeen  time.Time
	LastSeen   time.Time
}

// monoNow is the clock the datapath stamps flows with (bpf_ktime_get_coarse_ns: CLOCK_MONOTONIC,
// to a tick).
func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

func flowKeyOf(k xupfFlowKey) FlowKey {
	return FlowKey{Src: addrFromBE(k.Saddr), Dst: addrFromBE(k.Daddr), SrcPort: be16(k.Sport), DstPort: be16(k.Dport),
		Proto: k.Proto, VLAN: k.VlanId, Ifindex: int(k.Ifindex)}
}

func (k FlowKey) raw() xupfFlowKey {
	return xupfFlowKey{Saddr: addrBE(k.Src), Daddr: addrBE(k.Dst), Sport: be16(k.SrcPort), Dport: be16(k.DstPort),
		Proto: k.Proto, VlanId: k.VLAN, Ifindex: uint32(k.Ifindex)}
}

func flowOf(k xupfFlowKey, v xupfFlow, mono uint64, wall time.Time) Flow {
	at := func(ns uint64) time.Time { return wall.Add(-time.Duration(mono - ns)) }
	f := Flow{Key: flowKeyOf(k), OutIfindex: int(v.Ifindex), MTU: int(v.Mtu),
		DstMAC: net.HardwareAddr(v.Dmac[:]), SrcMAC: net.HardwareAddr(v.Smac[:]),
		VLAN: vlanActions[xupfFlowVlanAction(v.VlanAction)], VLANProto: be16(v.VlanProto), VLANTCI: be16(v.VlanTci),
		DecTTL: v.Flags&uint8(xupfFlowFlagFLOW_F_TTL) != 0, DSCP: -1,
		Packets: v.Packets, Bytes: v.Bytes, FirstSeen: at(v.FirstSeen), LastSeen: at(v.LastSeen)}
	if v.Flags&uint8(xupfFlowFlagFLOW_F_DSCP) != 0 {
		f.DSCP = int(v.Tos >> 2)
	}
	nat := netip.AddrPortFrom(addrFromBE(v.NatAddr), be16(v.NatPort))
	switch {
	case v.Flags&uint8(xupfFlowFlagFLOW_F_SNAT) != 0:
		f.SNAT = nat
	case v.Flags&uint8(xupfFlowFlagFLOW_F_TO_UE) != 0:
		f.ToUE = nat
	}
	return f
}

// ErrFlowCacheOff is returned by the flow operations when the flow cache is off.
var ErrFlowCacheOff = errors.New("the flow cache is off (flow_cache.max_flows is 0)")

// errFlowsGone is returned by the flow operations once Close released the flow table.
var errFlowsGone = errors.New("the flow cache is closed (the datapath is shutting down)")

// usingFlows runs fn with the flow table's mappings kept mapped, or returns errFlowsGone once
// Close unmapped them: a listing still running when the daemon closes the datapath would
// otherwise read unmapped memory and crash it.
func (d *Datapath) usingFlows(fn func() error) error {
	d.flowUse.RLock()
	defer d.flowUse.RUnlock()
	if d.flowsGone {
		return errFlowsGone
	}
	return fn()
}

// flowTable is the flow table (bpf/lib/flowtable.h) as the daemon sees it, through a mapping
// of xupf_flows: the per-slot compare-and-swaps its writers share with the datapath's cannot
// be done through map system calls, which copy values with memcpy, and a scan of the mapping
// costs no system call.
type flowTable = flowtable.Table[xupfFlowKey, xupfFlow]

// flowSeedPin is the pinned one-entry array that keeps the flow table's hash seed beside it, as
// keySeedPin does the key tables'.
const flowSeedPin = "xupf_flow_seed"

// mapFlowTable maps xupf_flows for the daemon, a table of the size setFlowCache gave it
// hashed with seed.
func (d *Datapath) mapFlowTable(seed flowtable.Seed) error {
	bits, err := flowtable.Bits(d.opts.FlowCache.MaxFlows)
	if err != nil {
		return err
	}
	if d.flowMem, err = mapArray(d.objs.XupfFlows); err != nil {
		return err
	}
	if d.flows, err = flowtable.New[xupfFlowKey, xupfFlow](d.flowMem.mem, bits, seed, d.opts.FlowCache.MaxFlows); err != nil {
		return fmt.Errorf("%s: %w", d.objs.XupfFlows, err)
	}
	return nil
}

// scanFlows calls fn with every entry of the flow table.
func (d *Datapath) scanFlows(fn func(k *xupfFlowKey, v *xupfFlow)) error {
	if !d.opts.FlowCache.on() {
		return ErrFlowCacheOff
	}
	for k, v := range d.flows.All() {
		fn(&k, &v)
	}
	return nil
}

// Flows lists the cached flows.
func (d *Datapath) Flows() ([]Flow, error) {
	mono, wall := monoNow(), time.Now()
	var out []Flow
	if !d.opts.FlowCache.on() {
		return nil, ErrFlowCacheOff
	}
	err := d.usingFlows(func() error {
		epoch := d.flowEpoch()
		return d.scanFlows(func(k *xupfFlowKey, v *xupfFlow) {
			// A void entry (an earlier epoch) is no longer a cached flow: its next packet
			// or aging removes it.
			if !flowVoid(v.Epoch, epoch) {
				out = append(out, flowOf(*k, *v, mono, wall))
			}
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FlushFlows removes the cached flows match selects (every one when match is nil) and returns
// how many it removed: their next packets go to the kernel, which decides afresh.
func (d *Datapath) FlushFlows(match func(Flow) bool) (int, error) {
	var raw func(*xupfFlowKey, *xupfFlow) bool
	if match != nil {
		mono, wall := monoNow(), time.Now()
		raw = func(k *xupfFlowKey, v *xupfFlow) bool { return match(flowOf(*k, *v, mono, wall)) }
	}
	var n int
	err := d.usingFlows(func() (err error) {
		n, err = d.removeFlows(raw)
		return err
	})
	d.flowsFlushed.Add(uint64(n))
	return n, err
}

// removeFlows removes the entries match selects (every one when match is nil), each with the
// other entry of its translated UE flow (flowPair), and returns how many it removed. It works
// on the table's own keys and values: with millions of entries an invalidation must not build
// a Flow of each. A pair goes whole, the UE's entry first, even when match selects only one
// of its entries (a neighbour scan selects the UE's, sent to the N6 gateway, not the replies'
// to the UE): a replies' entry left alone would keep its flow's replies fresh while the UE's
// flow could not be learnt again (the learner inserts the replies' entry first, and only
// when it is not there).
//
// It first starts a new generation (bpf/lib/flowcache.h): a packet the kernel decided on
// before this call, whose flow the scan could miss because it is learnt after, is then not
// learnt at all. The epoch stays, so the flows the scan keeps stay valid.
func (d *Datapath) removeFlows(match func(*xupfFlowKey, *xupfFlow) bool) (int, error) {
	if !d.opts.FlowCache.on() {
		return 0, ErrFlowCacheOff
	}
	d.nextGeneration()
	var doomed []xupfFlowKey
	taken := map[xupfFlowKey]bool{} // the pairs' entries in doomed, each to be there once
	err := d.scanFlows(func(k *xupfFlowKey, v *xupfFlow) {
		switch {
		case match == nil:
			doomed = append(doomed, *k) // every entry, the pairs' both
		case !match(k, v):
		default:
			pair, paired := flowPair(*k, v)
			if !paired {
				doomed = append(doomed, *k)
				return
			}
			for _, g := range ueEntryFirst(*k, pair) {
				if !taken[g] {
					taken[g] = true
					doomed = append(doomed, g)
				}
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return d.deleteFlows(doomed), nil
}

// deleteFlows removes the entries of doomed and returns how many it removed (not those
// already gone: aged, or a FIN's packet removed them).
func (d *Datapath) deleteFlows(doomed []xupfFlowKey) int {
	n := 0
	for _, k := range doomed {
		if d.flows.Delete(k) {
			n++
		}
	}
	return n
}

// flowEpochShift is where the epoch starts in xupf_flow_gen (FLOW_EPOCH_SHIFT): its high
// half. A cached flow stores the epoch it was learnt in and is void in any other.
const flowEpochShift = 16

// flowEpochsApart is how many epochs the entries of the table may span: a flow's epoch is
// 16 bits, so one 65,536 epochs old would look current again. voidFlows makes sure no void
// entry gets that old, with room to spare.
const flowEpochsApart = 1 << 15

// flowVoid tells whether a flow of epoch e is void in epoch now: learnt in another, as the
// datapath judges it (flow_current). One learnt after now was read is void too: removing it
// costs its flow one more trip through the kernel.
func flowVoid(e, now uint16) bool { return e != now }

func (d *Datapath) flowGenWord() *uint32 { return &d.flowGen.words32()[0] }

// nextGeneration starts a new generation in the current epoch: it adds one to the
// generation's low half without carrying into the epoch, so that only voidFlows voids every
// flow, however many narrow changes (conntrack deaths, neighbours) come before. After 65,536
// of them the low half is back where it was: a note that old (one no packet took to the
// learner, kept by flow_note for its flow's next packet) would pass for current, but no
// packet the kernel decided on that many changes ago is still on its way there.
func (d *Datapath) nextGeneration() {
	w := d.flowGenWord()
	for {
		gen := atomic.LoadUint32(w)
		const low = 1<<flowEpochShift - 1
		if atomic.CompareAndSwapUint32(w, gen, gen&^low|(gen+1)&low) {
			return
		}
	}
}

// flowEpoch is the current epoch.
func (d *Datapath) flowEpoch() uint16 {
	return uint16(atomic.LoadUint32(d.flowGenWord()) >> flowEpochShift)
}

// voidFlows voids every cached flow at once by starting a new epoch (and so a new
// generation): the datapath treats a flow of an earlier epoch as a miss from its next packet
// on, and removes it then (flow_voided); aging removes those no packet comes for. Its cost
// does not depend on the table's size. When void entries could otherwise outlive
// flowEpochsApart epochs (they are removed within two aging sweeps, so only after that many
// changes within two sweeps), it first removes them with a scan.
func (d *Datapath) voidFlows() {
	if !d.opts.FlowCache.on() {
		return
	}
	if d.flowEpoch()-uint16(d.flowsClean.Load()) >= flowEpochsApart-1 {
		if err := d.removeVoidFlows(); err != nil {
			d.log.Warn("flow cache: remove the void flows", "err", err)
		}
	}
	atomic.AddUint32(d.flowGenWord(), 1<<flowEpochShift)
}

// removeVoidFlows removes the entries of an earlier epoch than the current one, with one
// scan; no entry is then older than the current epoch.
func (d *Datapath) removeVoidFlows() error {
	epoch := d.flowEpoch()
	n, err := d.removeFlows(func(_ *xupfFlowKey, v *xupfFlow) bool { return flowVoid(v.Epoch, epoch) })
	d.flowsInvalidated.Add(uint64(n))
	if err == nil {
		d.flowsClean.Store(uint32(epoch))
	}
	return err
}

// FlowCacheStats are the flow cache's own counters (the datapath's are in Stats).
type FlowCacheStats struct {
	Entries     int    // flows cached now
	Aged        uint64 // flows aging removed
	Flushed     uint64 // flows FlushFlows removed
	Invalidated uint64 // flows removed because the kernel's decision may have changed
}

// flowAger removes idle flows a bounded number of slots at a time.
type flowAger struct {
	next   int    // the slot the next pass starts at
	sweeps uint64 // full passes over the table so far
	// sweepEpoch is the epoch when the sweep under way started: once it ends, every entry
	// of an earlier epoch present then has been seen, and removed.
	sweepEpoch uint16
	// ct keeps alive the conntrack entries of the UE flows the cache forwards (KernelN6;
	// nil without), setting their timeout to ctKeep's for the protocol.
	ct     *conntrack.Conn
	ctKeep map[uint8]ctKeep
}

// ctKeep is how the ager keeps a protocol's conntrack entries: it sets their timeout to
// timeout, on the first visit after a flow is learnt and then every every-th sweep while the
// flow is active.
type ctKeep struct {
	timeout time.Duration
	every   uint64
}

// flowFromUE is flow_key.ifindex of a UE's flow (FLOW_FROM_UE).
const flowFromUE = 0

// sweep is how long aging takes to come back to an entry: a full pass over the table.
func (o FlowCacheOptions) sweep() time.Duration {
	return time.Duration((o.slots()+o.ScanBatch-1)/o.ScanBatch) * o.ScanInterval
}

// slots is the flow table's number of slots (0 with the cache off, or sized beyond bounds,
// which setFlowCache refuses).
func (o FlowCacheOptions) slots() int {
	bits, err := flowtable.Bits(o.MaxFlows)
	if !o.on() || err != nil {
		return 0
	}
	return flowtable.Slots(bits)
}

// Where the kernel keeps the timeouts conntrack gives a UDP flow that has seen replies and an
// established TCP connection.
var conntrackSysctls = map[uint8]string{
	unix.IPPROTO_UDP: "/proc/sys/net/netfilter/nf_conntrack_udp_timeout_stream",
	unix.IPPROTO_TCP: "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established",
}

// conntrackKeeps are how the ager keeps the conntrack entries of the UE flows, by protocol.
// An entry is visited at least every revisit (a sweep and an interval). Its timeout outlives
// the cache's own entry, which aging removes at most IdleTimeout and a revisit after the
// flow's last packet, and is never shorter than what the kernel would set for the flow's
// next packet (the sysctls, read in the calling thread's namespace). A longer timeout spaces
// the updates out: every-th sweep, so that two updates of an active flow are less than a
// timeout apart, with a revisit to spare.
func (o FlowCacheOptions) conntrackKeeps() map[uint8]ctKeep {
	revisit := o.sweep() + o.ScanInterval
	least := o.IdleTimeout + 2*revisit
	out := make(map[uint8]ctKeep, len(conntrackSysctls))
	for proto, path := range conntrackSysctls {
		k := ctKeep{timeout: least}
		if b, err := os.ReadFile(path); err == nil {
			if secs, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				k.timeout = max(least, time.Duration(secs)*time.Second)
			}
		}
		k.every = max(1, uint64(k.timeout/revisit)-2)
		out[proto] = k
	}
	return out
}

// ageFlows looks at the entries of the ScanBatch slots after where the previous call stopped
// and removes those idle for IdleTimeout as of now (monotonic ns), and those void (an earlier
// epoch than the current one: voidFlows). The two entries of a translated UE flow (flowPair)
// age as one: the pair is idle only when both are, either's packets keep conntrack's entry
// alive, and both go together. It returns how many entries it looked at and how many idle
// ones it removed.
func (d *Datapath) ageFlows(now uint64) (scanned, aged int, err error) {
	o := d.opts.FlowCache
	a := &d.ager
	if a.next == 0 && a.sweeps == 0 {
		a.sweepEpoch = d.flowEpoch()
	}
	epoch := d.flowEpoch()
	from := a.next
	a.next = min(from+o.ScanBatch, d.flows.Slots())
	swept := a.next == d.flows.Slots()
	if swept {
		a.next = 0 // the end of the table: start over next time
		a.sweeps++
	}
	idle := uint64(o.IdleTimeout)
	revisit := uint64(o.sweep() + o.ScanInterval)
	var ctErr error
	voided := 0
	defer func() { d.flowsAged.Add(uint64(aged)); d.flowsInvalidated.Add(uint64(voided)) }()
	for key, v := range d.flows.Range(from, from+o.ScanBatch) {
		scanned++
		if flowVoid(v.Epoch, epoch) {
			pair, paired := flowPair(key, &v)
			voided += d.removeFlowPair(key, pair, paired)
			continue
		}
		// A packet forwarded since the read restamps the entry; removing it then costs only
		// that flow's next packet a trip through the kernel.
		last := v.LastSeen
		pair, paired := flowPair(key, &v)
		// The UE's entry keeps conntrack's entry, and so does a replies' entry (learnt from
		// the replies alone, flow_learn_reply) while it has no UE's entry beside it.
		ueFlow := a.ct != nil && (key.Ifindex == flowFromUE || paired)
		k := a.ctKeep[key.Proto]
		keepDue := ueFlow && a.sweeps%k.every == 0
		// The other entry's time is read only when this one's would end the pair or let
		// conntrack's entry go: one lookup, for a flow forwarded one way only, whose answer
		// serves below too.
		looked, otherThere := false, false
		if paired && (now > last && now-last >= idle || keepDue && now >= last+k.every*revisit) {
			var other xupfFlow
			other, otherThere = d.flows.Lookup(pair)
			looked = true
			if otherThere {
				last = max(last, other.LastSeen)
			}
		}
		switch {
		case now > last && now-last >= idle:
			aged += d.removeFlowPair(key, pair, paired)
		case ueFlow:
			// Conntrack no longer sees the flow's packets: without this its entry would
			// expire under the live flow and take the translation with it.
			learnt := now < v.FirstSeen+revisit
			active := now < last+k.every*revisit
			if !learnt && !(keepDue && active) {
				break
			}
			ct := key
			if key.Ifindex != flowFromUE {
				if !looked {
					_, otherThere = d.flows.Lookup(pair)
				}
				if otherThere {
					break // the UE's entry keeps it
				}
				ct = pair // conntrack's original tuple, the UE's
			}
			ctErr = cmp.Or(ctErr, a.keepConntrack(ct, k.timeout))
		}
	}
	if swept {
		// Every entry older than the sweep's start has been seen, and the void ones removed;
		// entries learnt since are of its epoch or later.
		d.flowsClean.Store(uint32(a.sweepEpoch))
		a.sweepEpoch = epoch
	}
	return scanned, aged, ctErr
}

// removeFlowPair removes the entry of key and, when paired, the other entry of its
// translated UE flow, pair; the UE's entry first: a UE's entry is never cached without its
// replies'. It returns how many it removed: only those are counted, as the entry count
// subtracts removals.
func (d *Datapath) removeFlowPair(key, pair xupfFlowKey, paired bool) int {
	gone := []xupfFlowKey{key}
	if paired {
		gone = ueEntryFirst(key, pair)
	}
	return d.deleteFlows(gone)
}

// ueEntryFirst orders the two entries of a translated UE flow, key and its pair, for removal:
// the UE's entry first, so that a UE's entry is never cached without its replies'.
func ueEntryFirst(key, pair xupfFlowKey) []xupfFlowKey {
	if key.Ifindex != flowFromUE {
		return []xupfFlowKey{pair, key}
	}
	return []xupfFlowKey{key, pair}
}

// flowPair is the key of the other entry of a translated UE flow, which flow_learn_ue caches
// as a pair: for the UE's entry (k, v; FLOW_F_SNAT) the replies' to the translated address
// and port, arriving where the UE's packets leave; for the replies' entry (FLOW_F_TO_UE) the
// UE's, its tuple reversed and untranslated. ok is false for an entry of no pair.
func flowPair(k xupfFlowKey, v *xupfFlow) (pair xupfFlowKey, ok bool) {
	switch {
	case k.Ifindex == flowFromUE && v.Flags&uint8(xupfFlowFlagFLOW_F_SNAT) != 0:
		return xupfFlowKey{Saddr: k.Daddr, Daddr: v.NatAddr, Sport: k.Dport, Dport: v.NatPort,
			Proto: k.Proto, Ifindex: v.Ifindex}, true
	case v.Flags&uint8(xupfFlowFlagFLOW_F_TO_UE) != 0:
		return xupfFlowKey{Saddr: v.NatAddr, Daddr: k.Saddr, Sport: v.NatPort, Dport: k.Sport,
			Proto: k.Proto, Ifindex: flowFromUE}, true
	}
	return xupfFlowKey{}, false
}

// keepConntrack sets the timeout of the conntrack entry of the UE flow k. An entry already
// gone is no error: its destroy event removes the flow.
func (a *flowAger) keepConntrack(k xupfFlowKey, timeout time.Duration) error {
	fk := flowKeyOf(k)
	t := conntrack.Tuple{Src: netip.AddrPortFrom(fk.Src, fk.SrcPort), Dst: netip.AddrPortFrom(fk.Dst, fk.DstPort), Proto: fk.Proto}
	if err := a.ct.Update(t, conntrack.Change{Timeout: timeout}); err != nil && !errors.Is(err, conntrack.ErrNotExist) {
		return fmt.Errorf("age flows: keep a UE flow's conntrack entry: %w", err)
	}
	return nil
}

// FlowCacheStats reads the flow cache's counters. It does not read the table: the entries
// are counted from the datapath's per-CPU counters (flows learnt, flows a FIN or RST ended,
// void flows a packet removed) and the daemon's removals, from the base countFlows set.
// Void entries no packet has removed yet count until aging removes them: they hold their
// place in the table meanwhile.
func (d *Datapath) FlowCacheStats() (FlowCacheStats, error) {
	if !d.opts.FlowCache.on() {
		return FlowCacheStats{}, ErrFlowCacheOff
	}
	st := FlowCacheStats{Aged: d.flowsAged.Load(), Flushed: d.flowsFlushed.Load(), Invalidated: d.flowsInvalidated.Load()}
	added, voided, err := d.flowsAdded()
	if err != nil {
		return FlowCacheStats{}, err
	}
	st.Invalidated += voided
	// Read while flows come and go, the counters may be a packet apart: keep to what can be.
	n := d.flowsBase.Load() + added - int64(st.Aged+st.Flushed+st.Invalidated)
	st.Entries = int(min(max(n, 0), int64(d.opts.FlowCache.MaxFlows)))
	return st, nil
}

// flowsAdded is what the datapath's counters say it added to the table: flows learnt less
// flows a FIN or RST ended; voided, the void flows its packets removed, are counted apart.
func (d *Datapath) flowsAdded() (added int64, voided uint64, err error) {
	perCPU, err := d.statsPerCPU()
	if err != nil {
		return 0, 0, err
	}
	for _, cpu := range perCPU {
		added += int64(cpu.N[xupfStatSTAT_FLOW_LEARNED]) - int64(cpu.N[xupfStatSTAT_FLOW_ENDED])
		voided += cpu.N[xupfStatSTAT_FLOW_VOIDED]
	}
	return added, voided, nil
}

// countFlows counts the table's entries, with one scan, and makes that count the base of
// FlowCacheStats' entries. It runs at start, when the table and the datapath's counters may
// be an earlier run's and this run's removals start from 0, and again after Attach takes over
// an earlier run's link, whose programs learn and end flows until then. Flows learnt or
// removed during the scan may be off by one each in the count from then on.
//
// It counts only the current epoch's entries and removes the void ones it finds (an earlier
// run's may be of any epoch), as invalidated: then no entry is older than the current epoch.
func (d *Datapath) countFlows() error {
	entries := 0
	epoch := d.flowEpoch()
	var void []xupfFlowKey
	err := d.scanFlows(func(k *xupfFlowKey, v *xupfFlow) {
		if flowVoid(v.Epoch, epoch) {
			void = append(void, *k)
		} else {
			entries++
		}
	})
	if err != nil {
		return err
	}
	d.flowsInvalidated.Add(uint64(d.deleteFlows(void)))
	d.flowsClean.Store(uint32(epoch))
	added, voided, err := d.flowsAdded()
	if err != nil {
		return err
	}
	removed := d.flowsAged.Load() + d.flowsFlushed.Load() + d.flowsInvalidated.Load() + voided
	d.flowsBase.Store(int64(entries) - added + int64(removed))
	return nil
}

// startFlowUpkeep starts what keeps the flow cache true to the kernel, in the namespace of the
// calling thread: aging, the removal of flows queued by netfilter and route events, and the
// following of netfilter. The returned stop stops all three.
func (d *Datapath) startFlowUpkeep() (stop func(), err error) {
	if !d.opts.FlowCache.on() {
		return func() {}, nil
	}
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("flow cache: %w", err)
	}
	defer ns.Close()
	if err := d.countFlows(); err != nil {
		return nil, fmt.Errorf("flow cache: count the flows: %w", err)
	}
	if d.opts.FlowCache.KernelN6.Any() {
		if d.ager.ct, err = conntrack.Open(ns); err != nil {
			return nil, fmt.Errorf("flow cache: %w", err)
		}
		d.ager.ctKeep = d.opts.FlowCache.conntrackKeeps()
		warnNoConntrackEvents(d.log)
	}
	closeCT := func() {
		if d.ager.ct != nil {
			d.ager.ct.Close()
		}
	}
	stopInvalidator := d.invalidator.start()
	stopNF, err := nfwatch.Watch(ns, d.log, d.netfilterChanged)
	if err != nil {
		stopInvalidator()
		closeCT()
		return nil, fmt.Errorf("flow cache: %w", err)
	}
	stopAging := d.startAging()
	return func() { stopAging(); stopNF(); stopInvalidator(); closeCT() }, nil
}

// conntrackEventsSysctl says whether conntrack sends events: 0 never, 1 always, 2 (the default
// of recent kernels) when someone listens, as the flow cache does (nfwatch).
const conntrackEventsSysctl = "/proc/sys/net/netfilter/nf_conntrack_events"

// warnNoConntrackEvents warns, in the calling thread's namespace, when conntrack sends no
// destroy events: a translated UE flow's entries, kept by its packets, would then outlive
// its conntrack entry, and once conntrack gives the translated address and port to another
// UE's flow, that flow's replies would reach the earlier UE.
func warnNoConntrackEvents(log *slog.Logger) {
	if b, err := os.ReadFile(conntrackEventsSysctl); err == nil && strings.TrimSpace(string(b)) == "0" {
		log.Warn("flow cache: conntrack sends no events, so translated UE flows stay cached after conntrack "+
			"forgets them and their replies may reach the wrong UE; set net.netfilter.nf_conntrack_events to 1 or 2",
			"sysctl", conntrackEventsSysctl)
	}
}

// flowClockPeriod is how often the flow clock (xupf_flow_clock) advances: how far behind a
// forwarded packet's last_seen may be, against idle timeouts of a second or more.
const flowClockPeriod = 100 * time.Millisecond

// tickFlowClock sets the flow clock to now, through its mapping (no system call).
func (d *Datapath) tickFlowClock() {
	atomic.StoreUint64(&d.flowClock.words64()[0], monoNow())
}

// startAging keeps the flow clock and runs ageFlows every ScanInterval until the returned
// stop is called.
func (d *Datapath) startAging() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	d.tickFlowClock()
	go func() {
		defer close(finished)
		t := time.NewTicker(d.opts.FlowCache.ScanInterval)
		defer t.Stop()
		clock := time.NewTicker(flowClockPeriod)
		defer clock.Stop()
		for {
			select {
			case <-done:
				return
			case <-clock.C:
				d.tickFlowClock()
			case <-t.C:
				if _, _, err := d.ageFlows(monoNow()); err != nil {
					d.log.Warn("flow cache aging", "err", err)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// flowCounters are the counters of removals the daemon makes, beside the ager's state, and
// the base of the entry count (countFlows).
type flowCounters struct {
	flowsAged        atomic.Uint64
	flowsFlushed     atomic.Uint64
	flowsInvalidated atomic.Uint64
	flowsBase        atomic.Int64
	// flowsClean is an epoch no entry of the table is older than (countFlows, the aging
	// sweeps and removeVoidFlows move it on), in its low 16 bits.
	flowsClean atomic.Uint32
}

// attachLearner attaches the flow cache's learner to TC egress of ifindex, or takes over the
// link an earlier run pinned there; with the cache off it removes such a link. The caller
// holds d.mu.
func (d *Datapath) attachLearner(name string, ifindex int) (link.Link, error) {
	pin := d.learnerPin(name)
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("attach flow learner to %q: open pinned link %s: %w", name, pin, err)
	}
	if !d.opts.FlowCache.on() {
		if l != nil {
			return nil, errors.Join(l.Unpin(), l.Close())
		}
		return nil, nil
	}
	if l != nil {
		if err := l.Update(d.objs.XupfFlowLearn); err != nil {
			l.Close()
			return nil, fmt.Errorf("attach flow learner to %q: replace program in pinned link %s: %w", name, pin, err)
		}
		return l, nil
	}
	l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: d.objs.XupfFlowLearn, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return nil, fmt.Errorf("attach flow learner to %q (TCX egress needs Linux 6.6): %w", name, err)
	}
	if err := l.Pin(pin); err != nil {
		l.Close()
		return nil, fmt.Errorf("attach flow learner to %q: pin link: %w", name, err)
	}
	return l, nil
}

func (d *Datapath) learnerPin(ifname string) string {
	return filepath.Join(d.opts.PinPath, "learn_"+ifname)
}
