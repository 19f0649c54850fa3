package datapath

import (
	"errors"
	"fmt"

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

// swapProgram loads a program specialised to cfg beside the running one, sharing its maps,
// and swaps it into every link atomically: each packet meets either the old program with the
// old settings or the new one with the new. The caller holds d.mu.
func (d *Datapath) swapProgram(cfg progConfig) error {
	prog, err := d.loadProgram(cfg)
	if err != nil {
		return err
	}
	var swapped []*attachment
	for _, a := range d.links {
		if err := a.link.Update(prog); err != nil {
			for _, s := range swapped { // put the running program back where it was replaced
				if rerr := s.link.Update(d.objs.XupfXdp); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
			prog.Close()
			return fmt.Errorf("swap in the datapath program: %w", err)
		}
		swapped = append(swapped, a)
	}
	old := d.objs.XupfXdp
	d.objs.XupfXdp = prog
	d.prog = cfg
	d.log.Debug("datapath program swapped", "sdf_fields", fmt.Sprintf("%#x", cfg.sdfFields),
		"cls_fields", fmt.Sprintf("%#x", cfg.clsFields), "cls_words", cfg.clsWords, "cls_buf", cfg.clsBuf,
		"policer", cfg.policer)
	return old.Close()
}

// loadProgram loads the XDP program specialised to cfg, using the maps already pinned.
func (d *Datapath) loadProgram(cfg progConfig) (*ebpf.Program, error) {
	spec := d.spec.Copy()
	policer := uint32(0)
	if cfg.policer {
		policer = 1
	}
	for name, v := range map[string]uint32{
		xupfVarCfgSdfFields: cfg.sdfFields,
		xupfVarCfgClsFields: cfg.clsFields,
		xupfVarCfgClsWords:  cfg.clsWords,
		xupfVarCfgClsBuf:    cfg.clsBuf,
		xupfVarCfgPolicer:   policer,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	var progs xupfPrograms
	err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: d.opts.PinPath}})
	if err != nil {
		return nil, loadError(err, d.opts.PinPath)
	}
	return progs.XupfXdp, nil
}
