package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
// classifies from its first packet. After a start that stopped partway through Attach,
// the links run two programs, which may read both buffers: then there is no other buffer,
// and classes wait for Attach (ClassesWritable).
//
// A class (or contract) of this run with the id of one of the earlier run's takes over its
// slots (takeEarlier): its counters, and a contract's meter when the contract is the same,
// carry on across the restart, the earlier and this run's program counting into the same
// slot until Attach.
type earlierClasses struct {
	bufs  map[uint32]bool // the buffers the programs in the pinned links read
	held  map[*slots]map[uint32]int
	links map[string]bool // the pinned links an earlier program still runs in, by interface name
	// named is, by allocator, the slot each class id's entries name: the class counters,
	// the contract (meter) and the contract counters. An id whose entries name different
	// slots, or a slot named by two ids (stale entries past a buffer's classes may name a
	// deleted class), is left out: its class starts afresh.
	named map[*slots]map[uint32]uint32
	// taken are the held slots this run's classes and contracts took over: Attach leaves
	// them to their new owners.
	taken map[*slots]map[uint32]bool
}

// adoptEarlierClasses reads which classifier buffers the programs in the pinned links read
// and reserves the slots their class entries there name. An earlier program without
// classes (or none) holds nothing.
func (d *Datapath) adoptEarlierClasses() error {
	links, err := filepath.Glob(filepath.Join(d.opts.PinPath, "link_*"))
	if err != nil || len(links) == 0 {
		return err
	}
	e := &earlierClasses{bufs: map[uint32]bool{}, links: map[string]bool{},
		held:  map[*slots]map[uint32]int{d.clsSlots: {}, d.contractSlots: {}, d.policeSlots: {}},
		taken: map[*slots]map[uint32]bool{d.clsSlots: {}, d.contractSlots: {}, d.policeSlots: {}}}
	names := map[*slots]map[uint32][]uint32{d.clsSlots: {}, d.contractSlots: {}, d.policeSlots: {}}
	words := map[uint32]uint32{} // by buffer: the most vector words a program reads in it
	for _, l := range links {
		buf, w, err := pinnedClsConfig(l)
		if err != nil {
			return fmt.Errorf("the earlier run's classifier settings (stop the gateway with `xupfd --stop` if its pins are damaged): %w", err)
		}
		e.links[strings.TrimPrefix(filepath.Base(l), "link_")] = true
		if w != 0 && buf < uint32(len(d.clsBufs)) {
			e.bufs[buf] = true
			words[buf] = max(words[buf], w)
		}
	}
	if len(e.bufs) == 0 {
		return nil
	}
	for buf, w := range words {
		if err := e.hold(d, buf, w, names); err != nil {
			return err
		}
	}
	e.named = map[*slots]map[uint32]uint32{}
	for s, byID := range names {
		e.named[s] = uniqueNames(byID)
	}
	for s, u := range e.held {
		if err := s.reserve(u); err != nil {
			return fmt.Errorf("the earlier run's class entries do not fit this run's tables: %w", err)
		}
	}
	d.earlierCls = e
	// The program before the earlier one read the other buffer, and may have until a grace ago.
	for buf := range uint32(len(d.clsBufs)) {
		if !e.bufs[buf] {
			d.clsBufs[buf].retiredAt = time.Now()
		}
	}
	return nil
}

// hold counts the slots the class entries of buffer buf, for a program of words vector
// words, name, and adds them to names (by allocator, by class id).
func (e *earlierClasses) hold(d *Datapath, buf, words uint32, names map[*slots]map[uint32][]uint32) error {
	perBuf := uint32(xupfClsLayoutCLS_CLASSES_PER_BUF)
	bits := min(words*64, uint32(xupfClsLayoutCLS_NO_CLASS))
	for _, at := range append(seq(bits), uint32(xupfClsLayoutCLS_NO_CLASS)) {
		var c xupfClsClass
		if err := d.objs.XupfClsClasses.Lookup(buf*perBuf+at, &c); err != nil {
			return fmt.Errorf("read the earlier run's class entry %d of buffer %d: %w", at, buf, err)
		}
		e.held[d.clsSlots][c.Slot]++
		if c.Id != DefaultContractClass { // no class: the entry of packets without one, or never written
			names[d.clsSlots][c.Id] = append(names[d.clsSlots][c.Id], c.Slot)
		}
		if c.Contract != 0 {
			e.held[d.contractSlots][c.Contract-1]++
			e.held[d.policeSlots][c.PoliceSlot]++
			names[d.contractSlots][c.Id] = append(names[d.contractSlots][c.Id], c.Contract-1)
			names[d.policeSlots][c.Id] = append(names[d.policeSlots][c.Id], c.PoliceSlot)
		}
	}
	return nil
}

// uniqueNames keeps, of the slots each id's entries name, those of ids that name one slot
// that no other id names.
func uniqueNames(byID map[uint32][]uint32) map[uint32]uint32 {
	ids := map[uint32]int{} // slot -> how many ids name it
	for _, slots := range byID {
		for _, v := range slices.Compact(slices.Sorted(slices.Values(slots))) {
			ids[v]++
		}
	}
	out := map[uint32]uint32{}
	for id, slots := range byID {
		if v := slots[0]; ids[v] == 1 && !slices.ContainsFunc(slots, func(w uint32) bool { return w != v }) {
			out[id] = v
		}
	}
	return out
}

// takeEarlier gives class id the slot of s the earlier run's entries of that id name, if any
// is left to take: ok is false otherwise. The caller holds d.mu.
func (d *Datapath) takeEarlier(s *slots, id uint32) (slot uint32, ok bool) {
	e := d.earlierCls
	if e == nil {
		return 0, false
	}
	slot, ok = e.named[s][id]
	if !ok || e.taken[s][slot] {
		return 0, false
	}
	e.taken[s][slot] = true
	return slot, true
}

// releaseSlot gives v back to s; a slot taken over from the earlier run while its program
// still runs goes back to the earlier run's, to be released at Attach. The caller holds d.mu.
func (d *Datapath) releaseSlot(s *slots, v uint32) {
	if e := d.earlierCls; e != nil && e.taken[s][v] {
		delete(e.taken[s], v)
		return
	}
	s.release(v)
}

// ClassesWritable is whether classes and contracts can be set now: not while the programs
// in the pinned links read both classifier buffers (after a start that stopped partway
// through attaching), so that none is free to write until Attach has taken them all over,
// or Prune.
func (d *Datapath) ClassesWritable() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.earlierFreeBuf()
	return d.earlierCls == nil || ok
}

// earlierFreeBuf is a classifier buffer no program in the pinned links reads; ok is false
// when they read both. The caller holds d.mu.
func (d *Datapath) earlierFreeBuf() (buf uint32, ok bool) {
	for buf := range uint32(len(d.clsBufs)) {
		if d.earlierCls == nil || !d.earlierCls.bufs[buf] {
			return buf, true
		}
	}
	return 0, false
}

// seq is 0 .. n-1.
func seq(n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// earlierTakenOver notes that an earlier run's program no longer runs in the pinned link
// of interface name (all: in none, as after Prune); once none runs in any, their buffers
// are retired and their slots released. The caller holds d.mu.
func (d *Datapath) earlierTakenOver(name string, all bool) {
	e := d.earlierCls
	if e == nil {
		return
	}
	delete(e.links, name)
	if len(e.links) > 0 && !all {
		return
	}
	for buf := range e.bufs {
		d.clsBufs[buf].retiredAt = time.Now() // packets it is handling may still read it
	}
	for s, u := range e.held {
		for v := range u {
			if !e.taken[s][v] {
				s.release(v)
			}
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
