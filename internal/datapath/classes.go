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
	ids       int       // entries written to xupf_cls_ids
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
	if len(d.classIDs) == 0 && d.prog.clsWords == 0 {
		buf = d.prog.clsBuf // nothing reads either buffer yet
	}
	if wait := grace - time.Since(d.clsBufs[buf].retiredAt); wait > 0 {
		time.Sleep(wait)
	}
	if err := d.clearClsBuffer(buf); err != nil {
		return err
	}
	if err := d.fillClsBuffer(buf, c); err != nil {
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	if err := d.ensureClassCounters(c.IDs); err != nil {
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	cfg := d.prog
	cfg.clsFields, cfg.clsWords, cfg.clsBuf = c.Fields, uint32(c.Words), buf
	contracts, err := d.anyContract()
	if err != nil {
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	cfg.policer = contracts && cfg.clsWords != 0
	if err := d.swapProgram(cfg); err != nil {
		return errors.Join(err, d.clearClsBuffer(buf))
	}
	d.clsBufs[1-buf].retiredAt = time.Now()
	d.dropClassCounters(c.IDs)
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
		if err := d.objs.XupfClsIds.Put(buf*classifier.MaxClasses+uint32(i), id); err != nil {
			return fmt.Errorf("write class ids: %w", err)
		}
	}
	b.ids = len(c.IDs)
	return nil
}

// ensureClassCounters creates zeroed counters for classes that have none yet.
func (d *Datapath) ensureClassCounters(ids []uint32) error {
	zero := make([]xupfCounters, possibleCPUs())
	for _, id := range ids {
		if d.classIDs[id] {
			continue
		}
		if err := d.objs.XupfClsStats.Put(id, zero); err != nil {
			return fmt.Errorf("create counters of class %d: %w", id, err)
		}
		d.classIDs[id] = true
	}
	return nil
}

// dropClassCounters removes the counters of classes not in ids.
func (d *Datapath) dropClassCounters(ids []uint32) {
	keep := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	for id := range d.classIDs {
		if !keep[id] {
			if err := d.objs.XupfClsStats.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				d.log.Warn("delete class counters", "class", id, "err", err)
			}
			delete(d.classIDs, id)
		}
	}
}

// ClassCounters returns what class id has counted.
func (d *Datapath) ClassCounters(id uint32) (session.Counters, error) {
	c, err := lookupCounters(d.objs.XupfClsStats, id)
	if err != nil {
		return c, fmt.Errorf("class %d counters: %w", id, err)
	}
	return c, nil
}
