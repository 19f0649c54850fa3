package datapath

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/lbvs"
	"github.com/xupf/xupf/internal/session"
)

// clsVecsPerBuf is CLS_VECS_PER_BUF: the base vector and one wildcard vector per exact field
// (the exact fields come first, up to the protocol).
const clsVecsPerBuf = 1 + classifier.FieldProtocol + 1

// clsBuffer is what one of the two classifier table buffers holds, to be cleared before
// the buffer is filled again.
type clsBuffer struct {
	exact     []xupfClsExactKey
	lpm       []xupfClsLpmKey
	ids       int       // entries written to xupf_cls_classes
	retiredAt time.Time // when the program stopped reading it
}

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
	buf := 1 - d.prog.clsBuf
	if len(d.classSlots) == 0 && d.prog.clsWords == 0 {
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
	contracts, err := d.anyContract()
	if err != nil {
		d.releaseClassCounters(created)
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	cfg.policer = contracts && cfg.clsWords != 0
	if err := d.swapProgram(cfg); err != nil {
		d.releaseClassCounters(created)
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	d.clsBufs[1-buf].retiredAt = time.Now()
	d.releaseClassCounters(gone(d.classSlots, c.IDs))
	return nil
}

func (d *Datapath) clearClsBuffer(buf uint32) error {
	b := &d.clsBufs[buf]
	var errs []error
	for _, k := range b.exact {
		if err := d.objs.XupfClsExact.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	for _, k := range b.lpm {
		if err := d.objs.XupfClsLpm.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	b.exact, b.lpm = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clear classifier buffer %d: %w", buf, err)
	}
	return nil
}

func (d *Datapath) fillClsBuffer(buf uint32, c classifier.Compiled) error {
	b := &d.clsBufs[buf]
	words := len(xupfClsVec{}.W)
	vec := func(v lbvs.Vector) xupfClsVec {
		var out xupfClsVec
		copy(out.W[:], v)
		return out
	}
	all := lbvs.Vector(make([]uint64, c.Words))
	for i := range c.IDs {
		all[i/64] |= 1 << (i % 64)
	}
	if c.Words > words {
		return fmt.Errorf("%d classes need %d vector words; the datapath has %d", len(c.IDs), c.Words, words)
	}
	if err := d.objs.XupfClsVecs.Put(buf*clsVecsPerBuf, vec(all)); err != nil {
		return fmt.Errorf("write classifier base vector: %w", err)
	}
	for f, t := range c.Tables {
		switch t.Field.Kind {
		case lbvs.ExactMatch:
			if err := d.objs.XupfClsVecs.Put(buf*clsVecsPerBuf+1+uint32(f), vec(t.Wildcard)); err != nil {
				return fmt.Errorf("write %s wildcard vector: %w", t.Field.Name, err)
			}
			if !t.Used {
				continue
			}
			for v, bits := range t.Values {
				k := xupfClsExactKey{Buf: buf, Field: uint32(f), Value: v}
				if err := d.objs.XupfClsExact.Put(k, vec(bits)); err != nil {
					return fmt.Errorf("write %s entry (too many distinct values?): %w", t.Field.Name, err)
				}
				b.exact = append(b.exact, k)
			}
		case lbvs.PrefixMatch:
			if !t.Used {
				continue
			}
			for _, e := range t.Prefixes {
				k := xupfClsLpmKey{Prefixlen: 64 + uint32(e.Prefix.Len), Buf: buf, Field: uint32(f),
					Value: be32(uint32(e.Prefix.Value << (32 - t.Field.Bits)))}
				if err := d.objs.XupfClsLpm.Put(k, vec(e.Bits)); err != nil {
					return fmt.Errorf("write %s entry (too many distinct prefixes?): %w", t.Field.Name, err)
				}
				b.lpm = append(b.lpm, k)
			}
		}
	}
	for i, id := range c.IDs {
		cls := xupfClsClass{Id: id, Slot: d.classSlots[id]}
		if err := d.objs.XupfClsClasses.Put(buf*classifier.MaxClasses+uint32(i), cls); err != nil {
			return fmt.Errorf("write classes: %w", err)
		}
	}
	b.ids = len(c.IDs)
	return nil
}

// ensureClassCounters gives the classes of ids that have none a counter slot, zeroed; it
// returns the ids it gave one, for releaseClassCounters should the change fail.
func (d *Datapath) ensureClassCounters(ids []uint32) ([]uint32, error) {
	zero := make([]xupfCounters, possibleCPUs())
	var created []uint32
	for _, id := range ids {
		if _, ok := d.classSlots[id]; ok {
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
		d.clsSlots.release(d.classSlots[id])
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
