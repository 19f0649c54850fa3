package daemon

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/state"
)

// The state file's buckets of what the API changes: classes and policer contracts, by class
// id (4 bytes, big endian), each as the API took it (JSON).
const (
	bucketClasses   = "classes"
	bucketContracts = "policer_contracts"
)

// storeBuckets are every bucket of xupfd's state file.
var storeBuckets = append([]string{bucketClasses, bucketContracts}, pfcp.StoreBuckets...)

func idKey(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

// keep records value (nil: removes the record) under id in bucket and waits until it is
// durable, so that an answer to the API promises only what a restart keeps. Without a state
// file it does nothing.
func (d *Daemon) keep(bucket string, id uint32, value any) error {
	if d.store == nil {
		return nil
	}
	op := state.Op{Bucket: bucket, Key: idKey(id)}
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return fmt.Errorf("state file: encode %s %d: %w", bucket, id, err)
		}
		op.Value = b
	}
	return d.store.Sync(op)
}

// restoreClasses applies the classes and policer contracts of the state file, as the API set
// them before the restart, and returns how many.
func (d *Daemon) restoreClasses() (classes, contracts int, err error) {
	err = d.store.ForEach(bucketClasses, func(k, v []byte) error {
		var c classifier.Class
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("class %x: %w", k, err)
		}
		if err := d.classes.Add(c); err != nil {
			return fmt.Errorf("class %d: %w", c.ID, err)
		}
		classes++
		return nil
	})
	if err != nil {
		return classes, 0, fmt.Errorf("state file %s: restore the classes: %w", d.store.Path(), err)
	}
	err = d.store.ForEach(bucketContracts, func(k, v []byte) error {
		var c api.Contract
		if len(k) != 4 {
			return fmt.Errorf("contract key %x", k)
		}
		class := binary.BigEndian.Uint32(k)
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("contract of class %d: %w", class, err)
		}
		if err := c.Check(class); err != nil {
			return fmt.Errorf("contract of class %d: %w", class, err)
		}
		if err := d.applyContract(class, c); err != nil {
			return fmt.Errorf("contract of class %d: %w", class, err)
		}
		contracts++
		return nil
	})
	if err != nil {
		return classes, contracts, fmt.Errorf("state file %s: restore the policer contracts: %w", d.store.Path(), err)
	}
	return classes, contracts, nil
}
