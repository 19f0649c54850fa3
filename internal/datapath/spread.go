package datapath

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// SpreadMode is how uplink G-PDUs are spread over CPUs (cfg_spread, bpf/lib/spread.h): the
// program attached to the interfaces redirects each to a CPU chosen from its TEID or inner
// flow, through the CPU map xupf_cpus, whose entries run the program with spreading off.
type SpreadMode uint32

const (
	SpreadOff  = SpreadMode(xupfSpreadModeSPREAD_OFF)  // processed where they arrive
	SpreadTEID = SpreadMode(xupfSpreadModeSPREAD_TEID) // by TEID
	SpreadFlow = SpreadMode(xupfSpreadModeSPREAD_FLOW) // by inner flow
)

func (m SpreadMode) String() string {
	switch m {
	case SpreadOff:
		return "off"
	case SpreadTEID:
		return "teid"
	case SpreadFlow:
		return "flow"
	}
	return fmt.Sprintf("SpreadMode(%d)", uint32(m))
}

const (
	// DefaultSpreadQueue is the default length of each CPU's queue in the CPU map: what
	// the kernel's own samples use, a few NAPI polls' worth of packets.
	DefaultSpreadQueue = 2048
	// MaxSpreadQueue is the kernel's limit on a CPU map queue (cpu_map_update_elem).
	MaxSpreadQueue = 16384
	// MaxSpreadCPUs is how many CPUs packets may be spread over (XUPF_MAX_SPREAD_CPUS).
	MaxSpreadCPUs = 256
)

// cpumapVal is struct bpf_cpumap_val: the queue length and the program, an fd when written
// and its id when read back.
type cpumapVal struct {
	Qsize  uint32
	ProgFD int32
}

// spreadCPUs checks opts.SpreadCPUs against the machine (every online CPU when empty) and
// returns them.
func spreadCPUs(opts Options) ([]uint32, error) {
	online, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	cpus := opts.SpreadCPUs
	if len(cpus) == 0 {
		cpus = online
	}
	if len(cpus) > MaxSpreadCPUs {
		return nil, fmt.Errorf("uplink spreading: %d CPUs; at most %d may be used, list them in uplink_spread_cpus",
			len(cpus), MaxSpreadCPUs)
	}
	out := make([]uint32, 0, len(cpus))
	for _, c := range cpus {
		if !slices.Contains(online, c) {
			return nil, fmt.Errorf("uplink spreading: CPU %d is not online (online: %v); fix uplink_spread_cpus", c, online)
		}
		if slices.Contains(out, uint32(c)) {
			return nil, fmt.Errorf("uplink spreading: CPU %d is listed twice; list each CPU once in uplink_spread_cpus", c)
		}
		out = append(out, uint32(c))
	}
	return out, nil
}

// onlineCPUs lists the online CPUs (/sys/devices/system/cpu/online, e.g. "0-3,6").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("list online CPUs: %w", err)
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList parses the kernel's CPU list format: ranges and numbers, comma separated.
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err := errors.Join(err1, err2); err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("CPU list %q: %q is not a CPU or a range of CPUs", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// setSpread writes the spreading settings into spec, the one every program is loaded from
// (loadProgram turns spreading off for the CPU map's), and sizes the CPU map by the machine's
// possible CPUs (its keys).
func setSpread(spec *ebpf.CollectionSpec, mode SpreadMode, cpus []uint32) error {
	possible, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("count possible CPUs: %w", err)
	}
	spec.Maps[xupfMapXupfCpus].MaxEntries = uint32(possible)
	var list [MaxSpreadCPUs]uint32
	copy(list[:], cpus)
	return setVars(spec, map[string]any{
		xupfVarCfgSpread:      uint32(mode),
		xupfVarCfgSpreadNcpus: uint32(len(cpus)),
		xupfVarCfgSpreadCpus:  list,
	})
}

// startSpread loads the CPU map's program and gives it the spreading CPUs; without spreading,
// it empties the CPU map of an earlier run's entries.
func (d *Datapath) startSpread() error {
	if d.opts.Spread == SpreadOff {
		return d.fillCPUMap(nil)
	}
	drops, err := d.attachSpreadDrops()
	if err != nil {
		return err
	}
	prog, err := d.loadProgram(d.prog, stageCPUMap)
	if err != nil {
		drops.Close()
		return err
	}
	if err := d.fillCPUMap(prog); err != nil {
		drops.Close()
		prog.Close()
		return err
	}
	d.cpuProg, d.spreadDrops = prog, drops
	d.log.Info("uplink spreading", "mode", d.opts.Spread, "cpus", d.spreadCPUs, "queue", d.opts.SpreadQueue)
	return nil
}

// attachSpreadDrops loads xupf_spread_drops for this datapath's CPU map and attaches it to
// the xdp_cpumap_enqueue tracepoint.
func (d *Datapath) attachSpreadDrops() (link.Link, error) {
	info, err := d.objs.XupfCpus.Info()
	if err != nil {
		return nil, fmt.Errorf("uplink spreading: read the CPU map's id: %w", err)
	}
	id, _ := info.ID()
	spec := d.spec.Copy()
	if err := spec.Variables[xupfVarCfgSpreadMapId].Set(uint32(id)); err != nil {
		return nil, fmt.Errorf("uplink spreading: set %s: %w", xupfVarCfgSpreadMapId, err)
	}
	var progs struct {
		XupfSpreadDrops *ebpf.Program `ebpf:"xupf_spread_drops"`
	}
	if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: d.opts.PinPath}}); err != nil {
		return nil, fmt.Errorf("uplink spreading: the program counting the CPU map's drops: %w", loadError(err, d.opts.PinPath))
	}
	defer progs.XupfSpreadDrops.Close() // the link holds it
	l, err := link.AttachTracing(link.TracingOptions{Program: progs.XupfSpreadDrops})
	if err != nil {
		return nil, fmt.Errorf("uplink spreading: attach to the xdp_cpumap_enqueue tracepoint, which counts "+
			"what the CPU map's full queues drop: %w", err)
	}
	return l, nil
}

// fillCPUMap gives each spreading CPU an entry running prog, and removes every other entry
// (an earlier run's, with other CPUs or spreading off). The caller holds d.mu or has not
// shared d yet.
func (d *Datapath) fillCPUMap(prog *ebpf.Program) error {
	for cpu := range d.objs.XupfCpus.MaxEntries() {
		var err error
		if prog != nil && slices.Contains(d.spreadCPUs, cpu) {
			err = d.putCPU(cpu, prog)
		} else if err = d.objs.XupfCpus.Delete(cpu); errors.Is(err, ebpf.ErrKeyNotExist) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("uplink spreading: CPU %d: %w", cpu, err)
		}
	}
	return nil
}

// swapCPUMap points every spreading CPU's entry at prog. Each update starts a new kthread;
// the old one finishes the packets already in its queue with the old program. The caller
// holds d.mu.
func (d *Datapath) swapCPUMap(prog *ebpf.Program) error {
	for _, cpu := range d.spreadCPUs {
		if err := d.putCPU(cpu, prog); err != nil {
			return fmt.Errorf("uplink spreading: CPU %d: %w", cpu, err)
		}
	}
	return nil
}

func (d *Datapath) putCPU(cpu uint32, prog *ebpf.Program) error {
	v := cpumapVal{Qsize: uint32(d.opts.SpreadQueue), ProgFD: int32(prog.FD())}
	if err := d.objs.XupfCpus.Put(cpu, v); err != nil {
		return fmt.Errorf("set its CPU map entry (queue %d): %w", d.opts.SpreadQueue, err)
	}
	return nil
}
