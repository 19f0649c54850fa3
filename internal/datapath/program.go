package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// ensureSDFFields makes the loaded program classify on every field in mask. The program is
// specialised at load time to the fields in use (cfg_sdf_fields): when a rule set needs one
// that is off, a program with the wider set is loaded beside the running one, sharing its
// maps, and swapped into every link atomically, so no packet meets a half-updated datapath.
// Fields are only ever added. The caller holds d.mu.
func (d *Datapath) ensureSDFFields(mask uint32) error {
	if mask&^d.sdfFields == 0 {
		return nil
	}
	want := d.sdfFields | mask
	prog, err := d.loadProgram(want)
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
			return fmt.Errorf("swap in the datapath program for new classification fields: %w", err)
		}
		swapped = append(swapped, a)
	}
	old := d.objs.XupfXdp
	d.objs.XupfXdp = prog
	d.sdfFields = want
	d.log.Info("datapath program reloaded for new classification fields", "fields", fmt.Sprintf("%#x", want))
	return old.Close()
}

// loadProgram loads the XDP program with classification fields set to fields, using the
// maps already pinned.
func (d *Datapath) loadProgram(fields uint32) (*ebpf.Program, error) {
	spec := d.spec.Copy()
	if err := spec.Variables[xupfVarCfgSdfFields].Set(fields); err != nil {
		return nil, fmt.Errorf("set classification fields: %w", err)
	}
	var progs xupfPrograms
	err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: d.opts.PinPath}})
	if err != nil {
		return nil, loadError(err, d.opts.PinPath)
	}
	return progs.XupfXdp, nil
}
