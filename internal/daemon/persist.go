package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/state"
)

// The state file's buckets of what the API changes, each record as the API took it (JSON):
// classes and policer contracts by class id (4 bytes, big endian), private routes by prefix,
// private neighbours by interface and address ("n6/192.0.2.1").
const (
	bucketClasses    = "classes"
	bucketContracts  = "policer_contracts"
	bucketRoutes     = "private_routes"
	bucketNeighbours = "private_neighbours"
)

// storeBuckets are every bucket of xupfd's state file.
var storeBuckets = append([]string{bucketClasses, bucketContracts, bucketRoutes, bucketNeighbours},
	pfcp.StoreBuckets...)

func idKey(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

// neighbourKey names a private neighbour's record.
func neighbourKey(iface string, addr netip.Addr) []byte { return []byte(iface + "/" + addr.String()) }

// keep records value (nil: removes the record) under key in bucket and waits until it is
// durable, so that an answer to the API promises only what a restart keeps. Without a state
// file it does nothing.
func (d *Daemon) keep(bucket string, key []byte, value any) error {
	if d.store == nil {
		return nil
	}
	op := state.Op{Bucket: bucket, Key: key}
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return fmt.Errorf("state file: encode %s %q: %w", bucket, key, err)
		}
		op.Value = b
	}
	return d.store.Sync(op)
}

// restoreRoutes adds the private neighbours and routes of the state file, as the API set
// them before the restart (after the configuration's: the API's change wins, as it did), and
// returns how many.
func (d *Daemon) restoreRoutes() (routes, neighbours int, err error) {
	neighbours, err = replay(d.store, bucketNeighbours, func(_ []byte, n api.Neighbour) error {
		_, err := d.addNeighbour(n)
		return err
	})
	if err == nil {
		routes, err = replay(d.store, bucketRoutes, func(_ []byte, r api.Route) error {
			_, err := d.addRoute(r)
			return err
		})
	}
	if err != nil {
		return routes, neighbours, fmt.Errorf("state file %s: restore the private routes: %w", d.store.Path(), err)
	}
	return routes, neighbours, nil
}

// restoreClasses applies the classes and policer contracts of the state file, as the API set
// them before the restart, and returns how many.
func (d *Daemon) restoreClasses() (classes, contracts int, err error) {
	classes, err = replay(d.store, bucketClasses, func(_ []byte, c classifier.Class) error { return d.classes.Add(c) })
	if err == nil {
		contracts, err = replay(d.store, bucketContracts, func(k []byte, c api.Contract) error {
			if len(k) != 4 {
				return errors.New("not a class id")
			}
			class := binary.BigEndian.Uint32(k)
			if err := c.Check(class); err != nil {
				return err
			}
			return d.applyContract(class, c)
		})
	}
	if err != nil {
		return classes, contracts, fmt.Errorf("state file %s: restore the classes and contracts: %w", d.store.Path(), err)
	}
	return classes, contracts, nil
}

// replay decodes each record of bucket as a T and applies it, and returns how many it
// applied.
func replay[T any](st *state.Store, bucket string, apply func(key []byte, v T) error) (int, error) {
	n := 0
	err := st.ForEach(bucket, func(k, b []byte) error {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("%s %x: %w", bucket, k, err)
		}
		if err := apply(k, v); err != nil {
			return fmt.Errorf("%s %x: %w", bucket, k, err)
		}
		n++
		return nil
	})
	return n, err
}
