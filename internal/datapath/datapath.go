// Package datapath loads the XDP datapath (bpf/), pins its maps and links under bpffs,
// attaches it to interfaces and turns sessions into map entries.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/flowtable"
	"github.com/xupf/xupf/internal/keytable"
	"github.com/xupf/xupf/internal/routedir"
	"github.com/xupf/xupf/internal/router"
	"github.com/xupf/xupf/internal/rules"
)

// Options configure Load.
type Options struct {
	// PinPath is the bpffs directory for maps and links, e.g. /sys/fs/bpf/xupf.
	PinPath string
	// MaxSessions sizes the TEID, UE-address and rule tables (see pdrsPerSession).
	MaxSessions int
	// GTPUAddrs are the local N3 addresses uplink packets are sent to.
	GTPUAddrs []netip.Addr
	// N3Interfaces name the interfaces with the n3 role: GTP-U (N3 from gNBs, N9 from peer
	// UPFs) to GTPUAddrs is accepted only when it arrives on one of them. Elsewhere it is
	// dropped as gtpu_not_n3, never decapsulated. Each must exist when Load is called.
	N3Interfaces []string
	// UEAllowed are the services on the UPF itself UEs may reach through their tunnels
	// (ue_to_upf_allowed). Every other uplink packet to one of the UPF's own addresses (of any
	// interface of the namespace Load runs in) is dropped as ue_to_upf.
	UEAllowed []UEService
	// MaxRuleSets is how many TEIDs and UE addresses may have several PDRs or SDF filters
	// (and so a classification step) at once; default DefaultMaxRuleSets.
	MaxRuleSets int
	// MaxSDFEntries sizes each classification table; default DefaultMaxSDFEntries.
	MaxSDFEntries int
	// DirectSlots sizes each key table's direct cache (rounded up to a power of two); 0: a
	// slot per key the key table is sized for.
	DirectSlots int
	// MeterAlgo and Clock are the rate-limiting algorithm and time source of QER MBRs and
	// policer contracts; default TokenBucket and ClockKtime.
	MeterAlgo MeterAlgo
	Clock     Clock
	// MBRBurst is how long a QER's MBR may be exceeded in a burst (the meter's burst is MBR ×
	// MBRBurst, at least MinMBRBurst bytes); default DefaultMBRBurst.
	MBRBurst time.Duration
	// PrivateRoutes makes the routes and neighbours the datapath forwards with its own
	// (router.mode: private, set through Router()); otherwise they mirror the kernel's.
	PrivateRoutes bool
	// MaxRoutes, MaxRouteChunks and MaxNexthops size the route table (entries, chunks of
	// xupf_route_dir, slots of xupf_nexthops); defaults DefaultMaxRoutes,
	// DefaultMaxRouteChunks, DefaultMaxNexthops.
	MaxRoutes      int
	MaxRouteChunks int
	MaxNexthops    int
	// FlowCache configures the flow cache; its zero value leaves it off.
	FlowCache FlowCacheOptions
	// Spread spreads uplink G-PDUs over SpreadCPUs (every online CPU when empty), each
	// CPU's queue SpreadQueue packets long (default DefaultSpreadQueue); default SpreadOff.
	Spread      SpreadMode
	SpreadCPUs  []int
	SpreadQueue int
	// BufferMaxPackets is how many packets one PDR whose FAR buffers may hold, in the ring to
	// xupfd and in xupfd together; more are dropped as buffer_full. Default
	// buffer.DefaultMaxPacketsPerSession.
	BufferMaxPackets int
	Logger           *slog.Logger
}

// Defaults of the classification limits.
const (
	DefaultMaxRuleSets   = 100000
	DefaultMaxSDFEntries = 262144
)

// A session averages at most pdrsPerSession PDRs and teidsPerSession local F-TEIDs: what
// Open5GS sends (an uplink, a downlink and two CP-function PDRs, on two TEIDs).
const (
	pdrsPerSession   = 4
	teidsPerSession  = 2
	metersPerSession = 4 // e.g. the AMBR and one flow's MBR, both ways
)

// spareRuleSlots are PDR/FAR slots beyond pdrsPerSession per session, and spareRuleSets rule set ids
// beyond limits.max_rule_sets: a modification writes the new before it frees the old.
const (
	spareRuleSlots = 1024
	spareRuleSets  = 64
)

// grace is how long tables the datapath no longer points at are kept before they are
// deleted or rewritten: an XDP program runs to completion in microseconds, so a packet that
// looked them up just before the switch has long finished.
const grace = 10 * time.Millisecond

// ErrNotFound is returned for an unknown owner (or a class without a contract).
var ErrNotFound = errors.New("session not found")

// Datapath is a loaded datapath. It holds rule sets by owner (a static session's id or a
// PFCP session's SEID) and knows nothing of sessions beyond them.
type Datapath struct {
	opts  Options
	log   *slog.Logger
	spec  *ebpf.CollectionSpec // sized; reloaded with other classification fields
	objs  objects
	names names
	// prog is what the loaded program is specialised to.
	prog progConfig
	// cpuProg is the CPU map entries' program with uplink spreading (else nil), over
	// spreadCPUs.
	cpuProg    *ebpf.Program
	spreadCPUs []uint32
	// spreadDrops counts the CPU map's enqueue drops while spreading (else nil).
	spreadDrops link.Link

	mu         sync.Mutex
	owners     map[uint64][]*installedSet         // by static session id or PFCP SEID
	adopted    map[rules.Key]*adoptedSet          // an earlier run's entries not installed again yet
	adoptUses  map[*slots]map[uint32]int          // how many adopted keys use each of their slots
	keys       map[rules.Key]uint64               // TEIDs and UE addresses in use -> owner
	meters     map[uint64]map[meterKey]ownedMeter // each owner's QER meters
	ulKeys     *keyTable                          // xupf_ul_keys: TEID -> ref
	dlKeys     *keyTable                          // xupf_dl_keys: UE address -> ref
	ulDirect   *directCache                       // xupf_ul_direct: TEID -> a copy of its rule_ref
	dlDirect   *directCache                       // xupf_dl_direct: UE address -> a copy of its rule_ref
	refill     *time.Timer                        // writes the direct caches' held-back copies
	refs       *slots                             // xupf_refs slots (one per rule set)
	rules      *slots                             // PDR and FAR slots (one FAR per PDR)
	counters   *slots                             // usage counter slots
	meterSlots *slots                             // QER meter slots
	quotas     map[uint64]map[uint32]ownedQuota   // each owner's URR quotas, by URR id
	quotaSlots *slots                             // URR quota slots
	rulesets   *slots                             // classification rule set ids, less one
	retired    []retiredTables                    // classification tables waiting out their grace
	classSlots map[uint32]uint32                  // class id -> its counter slot in xupf_cls_stats
	clsSlots   *slots                             // class counter slots
	classes    classifier.Compiled                // the classes the program reads
	contracts  map[uint32]*contractState          // policer contracts by class id
	// contractSlots and policeSlots hand out xupf_contracts and xupf_police_stats slots.
	contractSlots, policeSlots *slots
	clsBufs                    [2]clsBuffer
	earlierCls                 *earlierClasses // until Attach took over every pinned link
	links                      map[string]*attachment
	stopAddrs                  func()      // stops keeping xupf_local_addrs up to date
	addrs                      addrSync    // syncs them on demand (localaddrs.go)
	routes                     *routeTable // xupf_route_dir, written by the router
	router                     *router.Router
	stopRouter                 func() // stops following netlink for the router
	ager                       flowAger
	flows                      *flowTable  // xupf_flows, with the flow cache on
	flowMem                    mappedArray // its mapping
	flowGen                    mappedArray // xupf_flow_gen, with the flow cache on
	flowClock                  mappedArray // xupf_flow_clock, with the flow cache on
	// flowUse keeps the flow mappings from being unmapped under the listings and flushes of
	// the API, which run without mu (a flush of millions of flows takes seconds): they hold
	// it for reading, Close for writing while it marks them gone (flowsGone).
	flowUse     sync.RWMutex
	flowsGone   bool
	stopFlows   func()       // stops aging the flow cache and following netfilter for it
	invalidator *invalidator // removes the flows route and netfilter events void
	flowCounters
	drainState
	stopDrains func() // stops finishDrains
	// zeroCounters are the counter slots known to hold zero: allocCounter need not reset them.
	zeroCounters zeroSlots
	// localAddrs is what xupf_local_addrs holds (keys as addrBE); nil while that is not known.
	localAddrs atomic.Pointer[map[uint32]bool]
}

// objects are what Load loads: every map, the XDP program and the flow cache's learner (TC).
// The tracepoint program that counts the CPU map's drops is loaded with uplink spreading only
// (startSpread): it needs CAP_PERFMON's tracing, and the map's id.
type objects struct {
	XupfXdp       *ebpf.Program `ebpf:"xupf_xdp"`
	XupfXdpReturn *ebpf.Program `ebpf:"xupf_xdp_return"` // the return device's (flowcache.h flow_return)
	XupfFlowLearn *ebpf.Program `ebpf:"xupf_flow_learn"`
	xupfMaps
	xupfVariables
}

func (o *objects) Close() error {
	return errors.Join(o.XupfXdp.Close(), o.XupfXdpReturn.Close(), o.XupfFlowLearn.Close(), o.xupfMaps.Close())
}

// xdpPrograms are the XDP programs of one load: the interfaces' and the return device's.
type xdpPrograms struct{ xdp, ret *ebpf.Program }

func (o *objects) programs() xdpPrograms { return xdpPrograms{o.XupfXdp, o.XupfXdpReturn} }

// Load loads the datapath into the kernel, reusing maps already pinned under PinPath.
func Load(opts Options) (*Datapath, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRuleSets == 0 {
		opts.MaxRuleSets = DefaultMaxRuleSets
	}
	if opts.MaxSDFEntries == 0 {
		opts.MaxSDFEntries = DefaultMaxSDFEntries
	}
	if opts.MBRBurst == 0 {
		opts.MBRBurst = DefaultMBRBurst
	}
	if opts.MaxRoutes == 0 {
		opts.MaxRoutes = DefaultMaxRoutes
	}
	if opts.MaxRouteChunks == 0 {
		opts.MaxRouteChunks = DefaultMaxRouteChunks
	}
	if opts.MaxNexthops == 0 {
		opts.MaxNexthops = DefaultMaxNexthops
	}
	opts.FlowCache.setDefaults()
	if opts.SpreadQueue == 0 {
		opts.SpreadQueue = DefaultSpreadQueue
	}
	if opts.BufferMaxPackets == 0 {
		opts.BufferMaxPackets = buffer.DefaultMaxPacketsPerSession
	}
	if opts.MaxSessions <= 0 {
		return nil, fmt.Errorf("load datapath: max sessions must be positive, got %d", opts.MaxSessions)
	}
	spec, err := loadXupf()
	if err != nil {
		return nil, fmt.Errorf("load datapath spec: %w", err)
	}
	if err := varyPrograms(spec); err != nil {
		return nil, fmt.Errorf("load datapath spec: %w", err)
	}
	// pdrsPerSession PDR/FAR slots per session, plus spares: a modification writes fresh
	// slots before it frees the old ones, so it must work with a full table too, and the
	// spares let freed slots rest a while before reuse (see slots).
	nrules := uint32(pdrsPerSession*opts.MaxSessions + spareRuleSlots)
	ulBits, err := keytable.Bits(teidsPerSession * opts.MaxSessions)
	if err != nil {
		return nil, fmt.Errorf("load datapath: uplink key table: %w", err)
	}
	dlBits, err := keytable.Bits(opts.MaxSessions)
	if err != nil {
		return nil, fmt.Errorf("load datapath: downlink key table: %w", err)
	}
	spec.Maps[xupfMapXupfUlKeys].MaxEntries = 1 << ulBits
	spec.Maps[xupfMapXupfDlKeys].MaxEntries = 1 << dlBits
	ulDirect, dlDirect := directSlots(runtime.GOARCH, opts)
	spec.Maps[xupfMapXupfUlDirect].MaxEntries = ulDirect
	spec.Maps[xupfMapXupfDlDirect].MaxEntries = dlDirect
	// One ref per key, plus spares: a replaced key's new ref is written before the old is freed.
	nrefs := uint32((teidsPerSession+1)*opts.MaxSessions + spareRuleSlots)
	spec.Maps[xupfMapXupfRefs].MaxEntries = nrefs
	for _, m := range []string{xupfMapXupfPdrs, xupfMapXupfFars, xupfMapXupfQuotas, xupfMapXupfQuotaLists} {
		spec.Maps[m].MaxEntries = nrules
	}
	// Two counters for a PDR that measures before QoS enforcement too.
	ncounters := 2 * nrules
	for _, m := range []string{xupfMapXupfUsage, xupfMapXupfBufferIn, xupfMapXupfBufferOut, xupfMapXupfBufferFull} {
		spec.Maps[m].MaxEntries = ncounters
	}
	nmeters := uint32(metersPerSession*opts.MaxSessions + spareRuleSlots)
	spec.Maps[xupfMapXupfMeters].MaxEntries = nmeters
	spec.Maps[xupfMapXupfMeterCredits].MaxEntries = nmeters
	if err := setVars(spec, map[string]any{xupfVarCfgMeterAlgo: uint32(opts.MeterAlgo), xupfVarCfgClock: uint32(opts.Clock),
		xupfVarCfgUlKeyBits: uint32(ulBits), xupfVarCfgDlKeyBits: uint32(dlBits), xupfVarCfgUlDirectMask: ulDirect - 1,
		xupfVarCfgDlDirectMask:     dlDirect - 1,
		xupfVarCfgBufferMaxPackets: uint32(opts.BufferMaxPackets)}); err != nil {
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	spec.Maps[xupfMapXupfRouteDir].MaxEntries = uint32(routedir.Words(opts.MaxRouteChunks) / routedir.ChunkEntries)
	spec.Maps[xupfMapXupfNexthops].MaxEntries = uint32(opts.MaxNexthops)
	spec.Maps[xupfMapXupfRulesets].MaxEntries = uint32(opts.MaxRuleSets + spareRuleSets + 1) // id 0: none
	spec.Maps[xupfMapXupfSdfExact].MaxEntries = uint32(opts.MaxSDFEntries)
	spec.Maps[xupfMapXupfSdfLpm].MaxEntries = uint32(opts.MaxSDFEntries)
	var cpus []uint32
	if opts.Spread != SpreadOff {
		if cpus, err = spreadCPUs(opts); err != nil {
			return nil, fmt.Errorf("load datapath: %w", err)
		}
	}
	if err := setSpread(spec, opts.Spread, cpus); err != nil {
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if err := setFlowCache(spec, opts.FlowCache); err != nil {
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if err := setGTPUAddrs(spec, opts.GTPUAddrs, opts.N3Interfaces); err != nil {
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	nm, err := namesFromSpec(spec)
	if err != nil {
		return nil, err
	}
	if err := ensurePinPath(opts.PinPath); err != nil {
		return nil, err
	}
	warnIfPinsDie(opts.PinPath, opts.Logger)
	seed, err := keySeed(opts.PinPath)
	if err != nil {
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if err := spec.Variables[xupfVarCfgKeySeed].Set(seed); err != nil {
		return nil, fmt.Errorf("load datapath: set %s: %w", xupfVarCfgKeySeed, err)
	}
	var flowSeed flowtable.Seed
	if opts.FlowCache.on() {
		if flowSeed, err = pinnedSeed(opts.PinPath, flowSeedPin, flowtable.Seed.Valid, flowtable.NewSeed); err != nil {
			return nil, fmt.Errorf("load datapath: %w", err)
		}
		if err := spec.Variables[xupfVarCfgFlowSeed].Set(flowSeed); err != nil {
			return nil, fmt.Errorf("load datapath: set %s: %w", xupfVarCfgFlowSeed, err)
		}
	}
	layouts, err := openLayouts(opts.PinPath, spec)
	if err != nil {
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	defer layouts.Close()
	grown, emptied, err := checkLayouts(opts.PinPath, spec, layouts)
	if err != nil {
		return nil, loadError(err, opts.PinPath)
	}
	for _, name := range grown {
		if err := migrateMap(opts.PinPath, name, spec, layouts, true); err != nil {
			return nil, fmt.Errorf("load datapath: %w", err)
		}
		opts.Logger.Info("carried a pinned map's entries over into this build's layout", "map", name)
	}
	for _, name := range emptied {
		if err := migrateMap(opts.PinPath, name, spec, layouts, false); err != nil {
			return nil, fmt.Errorf("load datapath: %w", err)
		}
		opts.Logger.Info("replaced a pinned cache of another layout or size with an empty one", "map", name)
	}

	d := &Datapath{
		opts:       opts,
		log:        opts.Logger,
		spec:       spec,
		names:      nm,
		owners:     map[uint64][]*installedSet{},
		keys:       map[rules.Key]uint64{},
		meters:     map[uint64]map[meterKey]ownedMeter{},
		meterSlots: newSlots(nmeters),
		refs:       newSlots(nrefs),
		quotas:     map[uint64]map[uint32]ownedQuota{},
		quotaSlots: newSlots(nrules),
		rules:      newSlots(nrules),
		counters:   newSlots(ncounters),
		rulesets:   newSlots(uint32(opts.MaxRuleSets + spareRuleSets)),
		classSlots: map[uint32]uint32{},
		clsSlots:   newSlots(spec.Maps[xupfMapXupfClsStats].MaxEntries), // a slot per class and spares
		contracts:  map[uint32]*contractState{},
		// a slot per contract and spares
		contractSlots: newSlots(spec.Maps[xupfMapXupfContracts].MaxEntries),
		policeSlots:   newSlots(spec.Maps[xupfMapXupfPoliceStats].MaxEntries),
		links:         map[string]*attachment{},
		spreadCPUs:    cpus,
		prog:          progConfig{spread: opts.Spread},
		drainState: drainState{draining: map[uint32]bool{}, byCounter: map[uint32]counterRef{},
			drainKick: make(chan struct{}, 1)},
		// Counter maps this run creates (none of them pinned yet) hold zero.
		zeroCounters: newZeroSlots(ncounters,
			!anyPinned(opts.PinPath, xupfMapXupfUsage, xupfMapXupfBufferIn, xupfMapXupfBufferOut)),
	}
	err = spec.LoadAndAssign(&d.objs, &ebpf.CollectionOptions{
		Maps: ebpf.MapOptions{PinPath: opts.PinPath},
	})
	if err != nil {
		return nil, loadError(err, opts.PinPath)
	}
	if err := recordLayouts(spec, layouts); err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.ulKeys, err = mapKeyTable(d.objs.XupfUlKeys, ulBits, seed); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.dlKeys, err = mapKeyTable(d.objs.XupfDlKeys, dlBits, seed); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.ulDirect, err = mapDirect(d.objs.XupfUlDirect); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.dlDirect, err = mapDirect(d.objs.XupfDlDirect); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if err := d.adoptEarlierRun(); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if err := d.setUEAllowed(opts.UEAllowed); err != nil {
		d.closeObjs()
		return nil, err
	}
	if err := d.adoptClsMacs(); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if err := d.adoptEarlierClasses(); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.routes, err = mapRouteTable(d.objs.XupfRouteDir, d.objs.XupfNexthops, d.objs.XupfNhPins, opts); err != nil {
		d.closeObjs()
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.router, err = router.New(d.routes, opts.PrivateRoutes, opts.Logger); err != nil {
		d.closeObjs()
		return nil, err
	}
	if d.stopAddrs, err = d.watchLocalAddrs(); err != nil {
		d.closeObjs()
		return nil, err
	}
	if opts.FlowCache.on() {
		if err = d.mapFlowTable(flowSeed); err == nil {
			if d.flowGen, err = mapArray(d.objs.XupfFlowGen); err == nil {
				d.flowClock, err = mapArray(d.objs.XupfFlowClock)
			}
		}
		if err != nil {
			d.stopAddrs()
			d.closeObjs()
			return nil, fmt.Errorf("load datapath: %w", err)
		}
		d.invalidator = newInvalidator(d.invalidate)
		d.router.Watch(d.invalidateFlows)
	}
	if d.stopRouter, err = d.followRoutes(); err != nil {
		d.stopAddrs()
		d.closeObjs()
		return nil, err
	}
	if d.stopFlows, err = d.startFlowUpkeep(); err != nil {
		d.stopRouter()
		d.stopAddrs()
		d.closeObjs()
		return nil, err
	}
	if err := d.startSpread(); err != nil {
		d.stopFlows()
		d.stopRouter()
		d.stopAddrs()
		d.closeObjs()
		return nil, err
	}
	stop, exited := make(chan struct{}), make(chan struct{})
	go func() { defer close(exited); d.finishDrains(stop) }()
	d.stopDrains = sync.OnceFunc(func() { close(stop); <-exited })
	return d, nil
}

// anyPinned reports whether any of the maps names is pinned under pinPath; an error other
// than "not there" counts as pinned, the safe answer for its callers.
func anyPinned(pinPath string, names ...string) bool {
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(pinPath, name)); !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}

// loadError explains a failed load: a verifier rejection with the verifier's whole log (the
// last lines alone rarely say why), or pinned maps that do not fit this build.
func loadError(err error, pinPath string) error {
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve):
		return fmt.Errorf("load datapath: the verifier rejected the program:\n%+v", ve)
	case errors.Is(err, ebpf.ErrMapIncompatible):
		return fmt.Errorf("load datapath: maps pinned under %s were made with other sizes, types or layouts "+
			"(another xupfd build or other limits), which still forward; put back the limits they were made with, "+
			"or stop the gateway for good with `xupfd --stop` (its sessions go): %w", pinPath, err)
	}
	return fmt.Errorf("load datapath: %w", err)
}

// clearMap deletes every entry of m.
func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	key := make([]byte, m.KeySize())
	var prev any // nil: start at the first key
	for {
		if err := m.NextKey(prev, &key); errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		} else if err != nil {
			return err
		}
		keys = append(keys, slices.Clone(key))
		prev = keys[len(keys)-1]
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// closeObjs unmaps the key, route and flow tables and the flow generation and clock, and closes the
// maps and program.
func (d *Datapath) closeObjs() error {
	return errors.Join(d.ulKeys.close(), d.dlKeys.close(), d.ulDirect.close(), d.dlDirect.close(),
		d.routes.close(), d.flowMem.unmap(), d.flowGen.unmap(), d.flowClock.unmap(), d.objs.Close())
}

// Program is the XDP program, for tests and benchmarks that run it with BPF_PROG_TEST_RUN.
func (d *Datapath) Program() *ebpf.Program { return d.objs.XupfXdp }

// Close releases the datapath. With unpin, the maps and links pinned under PinPath are
// removed too, so the programs detach and the kernel frees everything; without, the
// attached programs keep forwarding with the current tables after this process exits.
func (d *Datapath) Close(unpin bool) error {
	d.stopDrains() // before the lock: it takes it
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for name, a := range d.links {
		errs = append(errs, a.close(unpin))
		delete(d.links, name)
	}
	d.stopFlows()
	d.stopRouter()
	d.stopAddrs()
	if d.cpuProg != nil {
		errs = append(errs, d.spreadDrops.Close(), d.cpuProg.Close())
	}
	d.flowUse.Lock()
	d.flowsGone = true
	d.flowUse.Unlock()
	d.stopRefill()
	errs = append(errs, d.closeObjs())
	if unpin {
		// Every pin (maps by name, links) lives in this directory, which is ours alone:
		// unlinking them all is unpinning them all.
		if err := os.RemoveAll(d.opts.PinPath); err != nil {
			errs = append(errs, fmt.Errorf("remove pins: %w", err))
		}
	}
	return errors.Join(errs...)
}
