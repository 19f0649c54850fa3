package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
)

// clsBuffer is what one of the two classifier table buffers holds, to be cleared before
// the buffer is filled again (the arrays are overwritten; the MAC hash entries must go).
type clsBuffer struct {
	macs []xupfClsMacKey
	// index is what the buffer's part of xupf_cls_index holds, so that a change writes only
	// the entries it changes (a batch write costs some 250 ns an entry, and the regions of a
	// port, an ethertype or an address have 65,536 each); nil: unknown.
	index     []xupfClsVref
	retiredAt time.Time // when the program stopped reading it
}

// clsUnknown is no entry a layout makes: the index entries of a buffer not written yet.
var clsUnknown = xupfClsVref{Present: ^uint32(0), Base: ^uint32(0)}

var _ classifier.Datapath = (*Datapath)(nil)

// SetClasses replaces the traffic classes. The tables are written into the buffer the
// running program does not read, then a program specialised to the new fields and vector
// width and reading that buffer is swapped in: every packet is classified by the old class
// set or the new one, and none is lost.
func (d *Datapath) SetClasses(c classifier.Compiled) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(c.Tables) != classifier.NumFields {
		return fmt.Errorf("set classes: %d tables for %d fields", len(c.Tables), classifier.NumFields)
	}
	return d.setClasses(c)
}

// setClasses is SetClasses, also used to publish changed policer contracts (which the class
// entries carry) with the classes as they are. The caller holds d.mu.
func (d *Datapath) setClasses(c classifier.Compiled) error {
	buf := 1 - d.prog.clsBuf
	switch free, ok := d.earlierFreeBuf(); {
	case d.earlierCls != nil && !ok:
		return errors.New("set classes: the pinned links run earlier programs that read both classifier " +
			"buffers (a start stopped partway through attaching); set them after Attach (ClassesWritable)")
	case d.earlierCls != nil:
		buf = free // the earlier run's programs read the other until Attach
	case len(d.classSlots) == 0 && d.prog.clsWords == 0:
		buf = d.prog.clsBuf // nothing reads either buffer yet
	}
	if wait := grace - time.Since(d.clsBufs[buf].retiredAt); wait > 0 {
		time.Sleep(wait)
	}
	if err := d.clearClsBuffer(buf); err != nil {
		return err
	}
	created, err := d.ensureClassCounters(c.IDs)
	if err != nil {
		d.releaseClassCounters(created)
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	if err := d.fillClsBuffer(buf, c); err != nil {
		d.releaseClassCounters(created)
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	cfg := d.prog
	cfg.clsFields, cfg.clsWords, cfg.clsBuf = c.Fields, uint32(c.Words), buf
	cfg.policer = len(d.contracts) > 0 && cfg.clsWords != 0
	if err := d.swapProgram(cfg); err != nil {
		d.releaseClassCounters(created)
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	d.clsBufs[1-buf].retiredAt = time.Now()
	d.releaseClassCounters(gone(d.classSlots, c.IDs))
	d.classes = c
	return nil
}

// adoptClsMacs takes the MAC entries an earlier run left as its buffers' own: the earlier
// program, which runs in the pinned links until Attach, still matches classes on MAC fields
// through them, and the next classes written into a buffer delete them (clearClsBuffer) so
// that none matches beside the new ones. Entries of no buffer are deleted at once. (Policer
// contracts live in the daemon's memory; the slots an earlier run left in xupf_contracts are
// reached only through class entries, which every classifier buffer rewrites.)
func (d *Datapath) adoptClsMacs() error {
	err := keepEntries(d.objs.XupfClsMacs, func(k xupfClsMacKey, _ xupfClsVref) bool {
		if k.Buf >= uint32(len(d.clsBufs)) {
			return false
		}
		d.clsBufs[k.Buf].macs = append(d.clsBufs[k.Buf].macs, k)
		return true
	})
	if err != nil {
		return fmt.Errorf("the earlier run's MAC class entries: %w", err)
	}
	return nil
}

func (d *Datapath) clearClsBuffer(buf uint32) error {
	b := &d.clsBufs[buf]
	var errs []error
	for _, k := range b.macs {
		if err := d.objs.XupfClsMacs.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	b.macs = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clear classifier buffer %d: %w", buf, err)
	}
	return nil
}

// fillClsBuffer lays c out (clslayout.go) and writes it into buffer buf: the index regions
// of the fields in use, the vector chunks, the MAC entries and the classes by bit.
func (d *Datapath) fillClsBuffer(buf uint32, c classifier.Compiled) error {
	if words := int(xupfClsLayoutCLS_CHUNKS) * clsChunkWords; c.Words > words {
		return fmt.Errorf("%d classes need %d vector words; the datapath has %d", len(c.IDs), c.Words, words)
	}
	poolChunks := d.objs.XupfClsChunks.MaxEntries() / 2
	l, err := layoutClasses(c, int(poolChunks))
	if err != nil {
		return err
	}
	b := &d.clsBufs[buf]
	if err := d.writeClsIndex(buf, l.regions); err != nil {
		return err
	}
	if err := batchPut(d.objs.XupfClsChunks, buf*poolChunks, l.chunks); err != nil {
		return fmt.Errorf("write classifier vectors: %w", err)
	}
	for _, m := range l.macs {
		k := xupfClsMacKey{Buf: buf, Field: m.field, Mac: m.mac}
		if err := d.objs.XupfClsMacs.Put(k, m.ref); err != nil {
			return fmt.Errorf("write MAC entry (more than %d distinct MACs?): %w", d.objs.XupfClsMacs.MaxEntries(), err)
		}
		b.macs = append(b.macs, k)
	}
	classes := make([]xupfClsClass, len(c.IDs))
	for i, id := range c.IDs {
		classes[i] = d.classEntry(id)
	}
	perBuf := uint32(xupfClsLayoutCLS_CLASSES_PER_BUF)
	if err := batchPut(d.objs.XupfClsClasses, buf*perBuf, classes); err != nil {
		return fmt.Errorf("write classes: %w", err)
	}
	if err := d.objs.XupfClsClasses.Put(buf*perBuf+uint32(xupfClsLayoutCLS_NO_CLASS),
		d.classEntry(DefaultContractClass)); err != nil {
		return fmt.Errorf("write the entry of packets without a class: %w", err)
	}
	return nil
}

// classEntry is class id's xupf_cls_classes entry: its counters and its contract, if any
// (DefaultContractClass: the entry of packets without a class).
func (d *Datapath) classEntry(id uint32) xupfClsClass {
	e := xupfClsClass{Id: id, Slot: d.classSlots[id]}
	if st, ok := d.contracts[id]; ok {
		e.Contract, e.PoliceSlot = st.meter+1, st.stats
	}
	return e
}

// writeClsIndex writes the entries of regions that differ from what buffer buf holds.
func (d *Datapath) writeClsIndex(buf uint32, regions []clsRegion) error {
	b := &d.clsBufs[buf]
	if b.index == nil {
		b.index = make([]xupfClsVref, xupfClsLayoutCLS_IX_PER_BUF)
		for i := range b.index {
			b.index[i] = clsUnknown
		}
	}
	var keys []uint32
	var refs []xupfClsVref
	for _, r := range regions {
		for i, ref := range r.refs {
			if at := r.at + uint32(i); b.index[at] != ref {
				keys = append(keys, buf*uint32(xupfClsLayoutCLS_IX_PER_BUF)+at)
				refs = append(refs, ref)
				b.index[at] = ref
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := d.objs.XupfClsIndex.BatchUpdate(keys, refs, nil); err != nil {
		b.index = nil // some entries may be written, some not
		return fmt.Errorf("write classifier index: %w", err)
	}
	return nil
}

// batchPut writes values into array m from index first on, in one system call.
func batchPut[V any](m *ebpf.Map, first uint32, values []V) error {
	if len(values) == 0 {
		return nil
	}
	keys := make([]uint32, len(values))
	for i := range keys {
		keys[i] = first + uint32(i)
	}
	_, err := m.BatchUpdate(keys, values, nil)
	return err
}

// ensureClassCounters gives the classes of ids that have none a counter slot: the one the
// earlier run's class of that id counts in, so that its counters carry on across a restart,
// or a fresh one, zeroed. It returns the ids it gave one, for releaseClassCounters should the
// change fail.
func (d *Datapath) ensureClassCounters(ids []uint32) ([]uint32, error) {
	zero := make([]xupfCounters, possibleCPUs())
	var created []uint32
	for _, id := range ids {
		if _, ok := d.classSlots[id]; ok {
			continue
		}
		if slot, ok := d.takeEarlier(d.clsSlots, id); ok {
			d.classSlots[id] = slot
			created = append(created, id)
			continue
		}
		slot, err := d.clsSlots.alloc()
		if err != nil {
			return created, fmt.Errorf("counters of class %d: %w", id, err)
		}
		d.classSlots[id] = slot
		created = append(created, id)
		if err := d.objs.XupfClsStats.Put(slot, zero); err != nil {
			return created, fmt.Errorf("zero the counters of class %d: %w", id, err)
		}
	}
	return created, nil
}

// gone returns the classes of slots that are not in ids.
func gone(slots map[uint32]uint32, ids []uint32) []uint32 {
	keep := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	var out []uint32
	for id := range slots {
		if !keep[id] {
			out = append(out, id)
		}
	}
	return out
}

// releaseClassCounters gives the counter slots of classes ids back; the FIFO and the spare
// slots let each rest before another class gets it.
func (d *Datapath) releaseClassCounters(ids []uint32) {
	for _, id := range ids {
		d.releaseSlot(d.clsSlots, d.classSlots[id])
		delete(d.classSlots, id)
	}
}

// ClassCounters returns what class id has counted.
func (d *Datapath) ClassCounters(id uint32) (session.Counters, error) {
	d.mu.Lock()
	slot, ok := d.classSlots[id]
	d.mu.Unlock()
	if !ok {
		return session.Counters{}, fmt.Errorf("class %d counters: %w", id, ebpf.ErrKeyNotExist)
	}
	c, err := lookupCounters(d.objs.XupfClsStats, slot)
	if err != nil {
		return c, fmt.Errorf("class %d counters: %w", id, err)
	}
	return c, nil
}
