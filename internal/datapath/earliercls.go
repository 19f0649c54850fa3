package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// earlierClasses is what the earlier run's program, which runs in the pinned links until
// Attach swaps this run's in, reads of the classifier: the buffer it reads, which this run
// must not write before then, and the slots its class entries name (class counters,
// contracts and their counters), which this run's allocators must not hand out before then.
// Classes set before Attach go into the other buffer, so the program Attach swaps in
// classifies from its first packet.
type earlierClasses struct {
	buf   uint32
	held  map[*slots]map[uint32]int
	links map[string]bool // the pinned links it still runs in, by interface name
}

// adoptEarlierClasses reads which classifier buffer the program in the pinned links reads
// and reserves the slots its class entries there name. An earlier program without classes
// (or none) holds nothing.
func (d *Datapath) adoptEarlierClasses() error {
	links, err := filepath.Glob(filepath.Join(d.opts.PinPath, "link_*"))
	if err != nil || len(links) == 0 {
		return err
	}
	buf, words, err := pinnedClsConfig(links[0])
	if err != nil {
		return fmt.Errorf("the earlier run's classifier settings (stop the gateway with `xupfd --stop` if its pins are damaged): %w", err)
	}
	if words == 0 || buf >= uint32(len(d.clsBufs)) {
		return nil
	}
	e := &earlierClasses{buf: buf, links: map[string]bool{},
		held: map[*slots]map[uint32]int{d.clsSlots: {}, d.contractSlots: {}, d.policeSlots: {}}}
	for _, l := range links {
		e.links[strings.TrimPrefix(filepath.Base(l), "link_")] = true
	}
	perBuf := uint32(xupfClsLayoutCLS_CLASSES_PER_BUF)
	bits := min(words*64, uint32(xupfClsLayoutCLS_NO_CLASS))
	for _, at := range append(seq(bits), uint32(xupfClsLayoutCLS_NO_CLASS)) {
		var c xupfClsClass
		if err := d.objs.XupfClsClasses.Lookup(buf*perBuf+at, &c); err != nil {
			return fmt.Errorf("read the earlier run's class entry %d: %w", at, err)
		}
		e.held[d.clsSlots][c.Slot]++
		if c.Contract != 0 {
			e.held[d.contractSlots][c.Contract-1]++
			e.held[d.policeSlots][c.PoliceSlot]++
		}
	}
	for s, u := range e.held {
		if err := s.reserve(u); err != nil {
			return fmt.Errorf("the earlier run's class entries do not fit this run's tables: %w", err)
		}
	}
	d.earlierCls = e
	// The program before the earlier one read the other buffer, and may have until a grace ago.
	d.clsBufs[1-buf].retiredAt = time.Now()
	return nil
}

// seq is 0 .. n-1.
func seq(n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// earlierTakenOver notes that the earlier run's program no longer runs in the pinned link
// of interface name (all: in none, as after Prune); once it runs in none, its buffer is
// retired and its slots are released. The caller holds d.mu.
func (d *Datapath) earlierTakenOver(name string, all bool) {
	e := d.earlierCls
	if e == nil {
		return
	}
	delete(e.links, name)
	if len(e.links) > 0 && !all {
		return
	}
	d.clsBufs[e.buf].retiredAt = time.Now() // packets it is handling may still read it
	for s, u := range e.held {
		for v := range u {
			s.release(v)
		}
	}
	d.earlierCls = nil
}

// pinnedClsConfig reads cfg_cls_buf and cfg_cls_words of the program in the pinned XDP link
// pin: from its .rodata map, at the offsets the program's own BTF gives (a build other than
// this one may lay its constants out otherwise). A program without them has no classes.
func pinnedClsConfig(pin string) (buf, words uint32, err error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("open %s: %w", pin, err)
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", pin, err)
	}
	prog, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: its program: %w", pin, err)
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: its program: %w", pin, err)
	}
	ids, _ := pi.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: its map %d: %w", pin, id, err)
		}
		vars, found, err := rodataVars(m, xupfVarCfgClsBuf, xupfVarCfgClsWords)
		m.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", pin, err)
		}
		if found {
			return vars[0], vars[1], nil
		}
	}
	return 0, 0, nil
}

// rodataVars reads the 4-byte constants names from m if it is a .rodata map holding them
// all (found).
func rodataVars(m *ebpf.Map, names ...string) (vals []uint32, found bool, err error) {
	mi, err := m.Info()
	if err != nil || mi.Name != ".rodata" {
		return nil, false, err
	}
	id, ok := mi.BTFID()
	if !ok {
		return nil, false, nil
	}
	h, err := btf.NewHandleFromID(id)
	if err != nil {
		return nil, false, fmt.Errorf("BTF of %s: %w", mi.Name, err)
	}
	defer h.Close()
	spec, err := h.Spec(nil)
	if err != nil {
		return nil, false, fmt.Errorf("BTF of %s: %w", mi.Name, err)
	}
	var ds *btf.Datasec
	if err := spec.TypeByName(".rodata", &ds); err != nil {
		if errors.Is(err, btf.ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("BTF of %s: %w", mi.Name, err)
	}
	value := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), &value); err != nil {
		return nil, false, fmt.Errorf("read %s: %w", mi.Name, err)
	}
	for _, name := range names {
		at := -1
		for _, v := range ds.Vars {
			if bv, ok := v.Type.(*btf.Var); ok && bv.Name == name && v.Size == 4 && int(v.Offset)+4 <= len(value) {
				at = int(v.Offset)
			}
		}
		if at < 0 {
			return nil, false, nil
		}
		vals = append(vals, binary.NativeEndian.Uint32(value[at:]))
	}
	return vals, true, nil
}
