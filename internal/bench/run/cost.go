package run

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/bench/result"
)

// ifindex is the index of the interface name in the upf namespace.
func (e *env) ifindex(name string) (int, error) {
	h, err := netlink.NewHandleAt(e.upf)
	if err != nil {
		return 0, fmt.Errorf("bench: netlink in upf: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("bench: interface %s in upf: %w", name, err)
	}
	return l.Attrs().Index, nil
}

// attachedProgram is the XDP program attached to interface ifindex of the upf namespace:
// whatever the datapath attached there (xupfd's program, a baseline). The caller closes it.
func (e *env) attachedProgram(ifindex int) (*ebpf.Program, error) {
	h, err := netlink.NewHandleAt(e.upf)
	if err != nil {
		return nil, fmt.Errorf("bench: netlink in upf: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		return nil, fmt.Errorf("bench: interface %d in upf: %w", ifindex, err)
	}
	x := l.Attrs().Xdp
	if x == nil || x.ProgId == 0 {
		return nil, fmt.Errorf("bench: no XDP program on %s in upf", l.Attrs().Name)
	}
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return nil, fmt.Errorf("bench: the XDP program of %s: %w", l.Attrs().Name, err)
	}
	return p, nil
}

// cpuMapProgram is the program in the entries of a CPU map dut uses (xupfd's uplink
// spreading), or nil when dut uses none or it has no entry. The caller closes it.
func cpuMapProgram(dut *ebpf.Program) (*ebpf.Program, error) {
	info, err := dut.Info()
	if err != nil {
		return nil, fmt.Errorf("bench: the datapath program's maps: %w", err)
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return nil, fmt.Errorf("bench: the datapath program's map %d: %w", id, err)
		}
		defer m.Close()
		if m.Type() != ebpf.CPUMap {
			continue
		}
		var v struct{ Qsize, ProgID uint32 } // struct bpf_cpumap_val as read back
		for cpu := range m.MaxEntries() {
			if m.Lookup(cpu, &v) == nil && v.ProgID != 0 {
				return ebpf.NewProgramFromID(ebpf.ProgramID(v.ProgID))
			}
		}
	}
	return nil, nil
}

// costReading is a lane's programs' statistics at one instant; spread is nil without a CPU
// map's program, ret without a return device's.
type costReading struct{ dut, sink, spread, ret *ebpf.ProgramStats }

func (l *lane) readCost() (costReading, error) {
	var r costReading
	var err error
	if r.dut, err = l.dut.Stats(); err != nil {
		return r, fmt.Errorf("bench: the datapath program's statistics: %w", err)
	}
	if r.sink, err = l.sink.Program().Stats(); err != nil {
		return r, fmt.Errorf("bench: the sink's statistics: %w", err)
	}
	if l.spread != nil {
		if r.spread, err = l.spread.Stats(); err != nil {
			return r, fmt.Errorf("bench: the CPU map program's statistics: %w", err)
		}
	}
	if l.ret != nil {
		if r.ret, err = l.ret.Stats(); err != nil {
			return r, fmt.Errorf("bench: the return device program's statistics: %w", err)
		}
	}
	return r, nil
}

// costBetween is what the lane's programs did from a to b.
func costBetween(a, b costReading, floor float64) *result.ProgramCost {
	c := &result.ProgramCost{
		RunTime: b.dut.Runtime - a.dut.Runtime, Runs: b.dut.RunCount - a.dut.RunCount,
		SinkRunTime: b.sink.Runtime - a.sink.Runtime, SinkRuns: b.sink.RunCount - a.sink.RunCount,
		FloorNs: floor,
	}
	if a.spread != nil && b.spread != nil {
		c.SpreadRunTime, c.SpreadRuns = b.spread.Runtime-a.spread.Runtime, b.spread.RunCount-a.spread.RunCount
	}
	if a.ret != nil && b.ret != nil {
		c.ReturnRunTime, c.ReturnRuns = b.ret.Runtime-a.ret.Runtime, b.ret.RunCount-a.ret.RunCount
	}
	return c
}

// costMeter measures the lanes' program costs over a trial: startCost turns the kernel's BPF
// run-time statistics on (they stay on while anyone holds them, and cost two clock reads a
// run, so only during trials) and reads every lane; stop reads them again, measures the
// floor and turns the statistics off.
type costMeter struct {
	stats  io.Closer
	floor  *ebpf.Program
	before []costReading
}

func startCost(lanes []*lane, floor *ebpf.Program) (*costMeter, error) {
	s, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil, fmt.Errorf("bench: turn on BPF statistics: %w", err)
	}
	m := &costMeter{stats: s, floor: floor}
	for _, l := range lanes {
		r, err := l.readCost()
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		m.before = append(m.before, r)
	}
	return m, nil
}

// stop returns each lane's cost since start, in lane order.
func (m *costMeter) stop(lanes []*lane) ([]*result.ProgramCost, error) {
	defer m.stats.Close()
	after := make([]costReading, len(lanes))
	for i, l := range lanes {
		var err error
		if after[i], err = l.readCost(); err != nil {
			return nil, err
		}
	}
	floor, err := floorNs(m.floor)
	if err != nil {
		return nil, err
	}
	out := make([]*result.ProgramCost, len(lanes))
	for i := range lanes {
		out[i] = costBetween(m.before[i], after[i], floor)
	}
	return out, nil
}

// The floor is the median of floorRounds rounds of floorRuns runs: a round takes a few
// milliseconds, and the median leaves out a round an interrupt or another task lengthened.
const (
	floorRounds = 15
	floorRuns   = 50_000
)

// newFloorProgram loads an XDP program that only returns XDP_DROP.
func newFloorProgram() (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xupf_bench_floor", Type: ebpf.XDP, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err != nil {
		return nil, fmt.Errorf("bench: load the empty program: %w", err)
	}
	return p, nil
}

// floorNs is the run time per run of p (an empty program) with the statistics on, which must
// be: what the accounting itself adds to every program's figure.
func floorNs(p *ebpf.Program) (float64, error) {
	rounds := make([]float64, floorRounds)
	frame := make([]byte, 64)
	for i := range rounds {
		a, err := p.Stats()
		if err != nil {
			return 0, fmt.Errorf("bench: the empty program's statistics: %w", err)
		}
		if _, err := p.Run(&ebpf.RunOptions{Data: frame, Repeat: floorRuns}); err != nil {
			return 0, fmt.Errorf("bench: run the empty program: %w", err)
		}
		b, err := p.Stats()
		if err != nil {
			return 0, fmt.Errorf("bench: the empty program's statistics: %w", err)
		}
		if b.RunCount == a.RunCount {
			return 0, errors.New("bench: the empty program's runs were not counted: are BPF statistics on?")
		}
		rounds[i] = float64(b.Runtime-a.Runtime) / float64(b.RunCount-a.RunCount)
	}
	slices.Sort(rounds)
	return rounds[len(rounds)/2], nil
}
