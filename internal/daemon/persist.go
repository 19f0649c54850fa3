package daemon

import (
	"encoding/binary"
	"encoding/json"
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
	err = d.store.ForEach(bucketNeighbours, func(k, v []byte) error {
		var n api.Neighbour
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("neighbour %s: %w", k, err)
		}
		if _, err := d.addNeighbour(n); err != nil {
			return fmt.Errorf("neighbour %s: %w", k, err)
		}
		neighbours++
		return nil
	})
	if err == nil {
		err = d.store.ForEach(bucketRoutes, func(k, v []byte) error {
			var r api.Route
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("route %s: %w", k, err)
			}
			if _, err := d.addRoute(r); err != nil {
				return fmt.Errorf("route %s: %w", k, err)
			}
			routes++
			return nil
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
