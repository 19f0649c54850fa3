package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
)

// progConfig is what the XDP program is specialised to at load time (its volatile const
// settings): the verifier drops the code of every field and module that is off.
type progConfig struct {
	sdfFields uint32 // cfg_sdf_fields: classification fields some rule set uses
	clsFields uint32 // cfg_cls_fields: traffic-classifier fields some class uses
	clsWords  uint32 // cfg_cls_words: 64-bit words of class vectors; 0 = no classes
	clsBuf    uint32 // cfg_cls_buf: the classifier table buffer the program reads
	policer   bool   // cfg_policer: the policer is on (some contract exists, and classes do)
	// cfg_spread: how the attached program spreads uplink G-PDUs (fixed at Load); the CPU
	// map's program never does.
	spread SpreadMode
}

// direct is cfg_direct: the direct caches (rules.h) are read only where xupfd writes them
// (x86-64) and in the variants without SDF fields or traffic classes, which with them would
// pass the verifier's limit (a hit's pointer into another map doubles what it walks).
func (c progConfig) direct() uint32 {
	if !loadsInOrder(runtime.GOARCH) || c.sdfFields != 0 || c.clsWords != 0 {
		return 0
	}
	return 1
}

// ensureSDFFields makes the loaded program classify on every field in mask. Fields are only
// ever added, so rule sets never wait for a reload they do not need. The caller holds d.mu.
func (d *Datapath) ensureSDFFields(mask uint32) error {
	if mask&^d.prog.sdfFields == 0 {
		return nil
	}
	cfg := d.prog
	cfg.sdfFields |= mask
	return d.swapProgram(cfg)
}

// stage is where a loaded program runs.
type stage int

const (
	stageAttached stage = iota // on the interfaces: spreads uplink G-PDUs when that is on
	stageCPUMap                // in the CPU map's entries: processes what was spread to its CPU
	stageReturn                // on the return device's peer (xupf_xdp_return)
)

// swapProgram loads a program specialised to cfg beside the running one, sharing its maps,
// and swaps it into every link atomically: each packet meets either the old program with the
// old settings or the new one with the new. With uplink spreading, the CPU map's entries get
// the same settings first. The caller holds d.mu.
func (d *Datapath) swapProgram(cfg progConfig) error {
	var cpuProg *ebpf.Program
	if d.cpuProg != nil {
		var err error
		if cpuProg, err = d.loadProgram(cfg, stageCPUMap); err != nil {
			return err
		}
		if err := d.swapCPUMap(cpuProg); err != nil {
			err = errors.Join(err, d.swapCPUMap(d.cpuProg))
			cpuProg.Close()
			return err
		}
	}
	// undoCPUMap puts the running CPU map program back should the swap fail.
	undoCPUMap := func(err error) error {
		if cpuProg == nil {
			return err
		}
		err = errors.Join(err, d.swapCPUMap(d.cpuProg))
		cpuProg.Close()
		return err
	}
	progs, err := d.loadPrograms(cfg)
	if err != nil {
		return undoCPUMap(err)
	}
	var swapped []*attachment
	for _, a := range d.links {
		if err := a.link.Update(a.program(progs)); err != nil {
			for _, s := range swapped { // put the running program back where it was replaced
				if rerr := s.link.Update(s.program(d.objs.programs())); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
			progs.close()
			return undoCPUMap(fmt.Errorf("swap in the datapath program: %w", err))
		}
		swapped = append(swapped, a)
	}
	old, oldCPU := d.objs.programs(), d.cpuProg
	d.objs.XupfXdp, d.objs.XupfXdpReturn, d.cpuProg = progs.xdp, progs.ret, cpuProg
	d.prog = cfg
	d.log.Debug("datapath program swapped", "sdf_fields", fmt.Sprintf("%#x", cfg.sdfFields),
		"cls_fields", fmt.Sprintf("%#x", cfg.clsFields), "cls_words", cfg.clsWords, "cls_buf", cfg.clsBuf,
		"policer", cfg.policer, "spread", cfg.spread)
	if oldCPU != nil {
		return errors.Join(old.close(), oldCPU.Close())
	}
	return old.close()
}

func (p xdpPrograms) close() error { return errors.Join(p.xdp.Close(), p.ret.Close()) }

// loadPrograms loads the programs of the attached links specialised to cfg: the interfaces',
// and with kernel_n6 the return device's, which runs the same rules.
func (d *Datapath) loadPrograms(cfg progConfig) (xdpPrograms, error) {
	xdp, err := d.loadProgram(cfg, stageAttached)
	if err != nil || !d.opts.FlowCache.KernelN6.Any() {
		return xdpPrograms{xdp: xdp}, err
	}
	ret, err := d.loadProgram(cfg, stageReturn)
	if err != nil {
		xdp.Close()
		return xdpPrograms{}, err
	}
	return xdpPrograms{xdp, ret}, nil
}

// loadProgram loads the XDP program specialised to cfg for stage, using the maps already
// pinned. The CPU map's is the same program with spreading off (a packet is spread once) and
// the attach type the kernel requires of a CPU map's program.
func (d *Datapath) loadProgram(cfg progConfig, st stage) (*ebpf.Program, error) {
	spec := d.spec.Copy()
	policer := uint32(0)
	if cfg.policer {
		policer = 1
	}
	vars := map[string]any{
		xupfVarCfgDirect:    cfg.direct(),
		xupfVarCfgSdfFields: cfg.sdfFields,
		xupfVarCfgClsFields: cfg.clsFields,
		xupfVarCfgClsWords:  cfg.clsWords,
		xupfVarCfgClsBuf:    cfg.clsBuf,
		xupfVarCfgPolicer:   policer,
		xupfVarCfgSpread:    uint32(cfg.spread),
	}
	// xupf_own_addrs is not pinned (syncLocalAddrs writes it whole at every start): the new
	// program reads the running one's, which syncLocalAddrs keeps, not a zeroed one.
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: d.opts.PinPath},
		MapReplacements: map[string]*ebpf.Map{xupfMapXupfOwnAddrs: d.objs.XupfOwnAddrs}}
	if st == stageCPUMap {
		vars[xupfVarCfgSpread] = uint32(SpreadOff)
		spec.Programs[xupfProgXupfXdp].AttachType = ebpf.AttachXDPCPUMap
		// The CPU map's entries hold this program. Were it to hold the CPU map in turn (the
		// verifier drops the spreading code, not the map reference), neither would ever be
		// freed, nor their kthreads stopped: it gets an empty CPU map of its own instead.
		ms := spec.Maps[xupfMapXupfCpus].Copy()
		ms.Pinning = ebpf.PinNone
		empty, err := ebpf.NewMap(ms)
		if err != nil {
			return nil, fmt.Errorf("an empty CPU map for the CPU map's program: %w", err)
		}
		defer empty.Close()
		opts.MapReplacements[xupfMapXupfCpus] = empty
	}
	if err := setVars(spec, vars); err != nil {
		return nil, err
	}
	// The one program alone: Load loaded the rest once.
	var xdp struct {
		Prog *ebpf.Program `ebpf:"xupf_xdp"`
	}
	var ret struct {
		Prog *ebpf.Program `ebpf:"xupf_xdp_return"`
	}
	var err error
	if st == stageReturn {
		err = spec.LoadAndAssign(&ret, opts)
	} else {
		err = spec.LoadAndAssign(&xdp, opts)
	}
	if err != nil {
		return nil, loadError(err, d.opts.PinPath)
	}
	return cmp.Or(xdp.Prog, ret.Prog), nil
}

// setVars sets the program's load-time constants (volatile const globals) in spec, by name.
func setVars(spec *ebpf.CollectionSpec, vars map[string]any) error {
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}
