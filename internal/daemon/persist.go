package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/router"
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

// keep records value under key in bucket, or with value nil that the API deleted it (a
// "null" record, so that a restart deletes what the configuration file defines too), and
// waits until it is durable, so that an answer to the API promises only what a restart
// keeps. Without a state file it does nothing.
func (d *Daemon) keep(bucket string, key []byte, value any) error {
	if d.store == nil {
		return nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("state file: encode %s %q: %w", bucket, key, err)
	}
	return d.store.Sync(state.Op{Bucket: bucket, Key: key, Value: b})
}

// restoreRoutes applies the API's changes to the private neighbours and routes kept in the
// state file, after the configuration's routes: the API's change wins, as it did.
func (d *Daemon) restoreRoutes() error {
	r := d.dp.Router()
	err := replay(d.store, bucketNeighbours, func(_ []byte, n api.Neighbour) error {
		_, err := d.addNeighbour(n)
		return err
	}, func(k []byte) error {
		iface, address, _ := strings.Cut(string(k), "/")
		addr, err := netip.ParseAddr(address)
		if err != nil {
			return err
		}
		ifindex, err := d.attachedIfindex(iface)
		if err != nil {
			return err
		}
		return ignoreNotFound(r.DeleteNeighbour(addr, ifindex))
	})
	if err == nil {
		err = replay(d.store, bucketRoutes, func(_ []byte, rt api.Route) error {
			_, err := d.addRoute(rt)
			return err
		}, func(k []byte) error {
			p, err := netip.ParsePrefix(string(k))
			if err != nil {
				return err
			}
			return ignoreNotFound(r.DeleteRoute(p))
		})
	}
	if err != nil {
		return fmt.Errorf("state file %s: restore the private routes: %w", d.store.Path(), err)
	}
	return nil
}

// ignoreNotFound: deleting what is not there (the configuration no longer defines what the
// API deleted) is no error.
func ignoreNotFound(err error) error {
	if errors.Is(err, router.ErrNotFound) {
		return nil
	}
	return err
}

// overlayClasses applies the API's changes kept in the state file to the configuration's
// classes and contracts, by id.
func (d *Daemon) overlayClasses(classes map[uint32]classifier.Class, contracts map[uint32]api.Contract) error {
	err := replay(d.store, bucketClasses, func(_ []byte, c classifier.Class) error {
		classes[c.ID] = c
		return nil
	}, func(k []byte) error {
		id, err := keyID(k)
		delete(classes, id)
		return err
	})
	if err == nil {
		err = replay(d.store, bucketContracts, func(k []byte, c api.Contract) error {
			class, err := keyID(k)
			contracts[class] = c
			return err
		}, func(k []byte) error {
			class, err := keyID(k)
			delete(contracts, class)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("state file %s: restore the classes and contracts: %w", d.store.Path(), err)
	}
	return nil
}

// keyID is the class id an idKey holds.
func keyID(k []byte) (uint32, error) {
	if len(k) != 4 {
		return 0, errors.New("not a class id")
	}
	return binary.BigEndian.Uint32(k), nil
}

// replay decodes each record of bucket as a T and applies it, or removes what a "null"
// record says the API deleted. Without a state file there is nothing to replay.
func replay[T any](st *state.Store, bucket string, apply func(key []byte, v T) error, remove func(key []byte) error) error {
	if st == nil {
		return nil
	}
	return st.ForEach(bucket, func(k, b []byte) error {
		var err error
		if string(b) == "null" {
			err = remove(k)
		} else {
			var v T
			if err = json.Unmarshal(b, &v); err == nil {
				err = apply(k, v)
			}
		}
		if err != nil {
			return fmt.Errorf("%s %x: %w", bucket, k, err)
		}
		return nil
	})
}
