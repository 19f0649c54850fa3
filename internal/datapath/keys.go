package datapath

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/keytable"
)

// keySeedPin is the pinned one-entry array that keeps the key tables' hash seed beside them:
// a restarted daemon that reuses the tables must place and find keys as the one that filled
// them did. The program never reads it (the seed is a load-time constant), so it is not in
// the BPF object.
const keySeedPin = "xupf_key_seed"

// keySeed returns the key tables' seed pinned under pinPath, first choosing and pinning a
// random one when there is none.
func keySeed(pinPath string) (keytable.Seed, error) {
	return pinnedSeed(pinPath, keySeedPin, keytable.Seed.Valid, keytable.NewSeed)
}

// pinnedSeed returns the seed pinned under pinPath as name, first choosing one with fresh and
// pinning it when there is none (or none valid).
func pinnedSeed[S any](pinPath, name string, valid func(S) bool, fresh func() S) (S, error) {
	var s S
	m, err := ebpf.NewMapWithOptions(&ebpf.MapSpec{
		Name: name, Type: ebpf.Array, KeySize: 4, ValueSize: uint32(unsafe.Sizeof(s)),
		MaxEntries: 1, Pinning: ebpf.PinByName,
	}, ebpf.MapOptions{PinPath: pinPath})
	if err != nil {
		return s, fmt.Errorf("open the hash seed %s: %w", name, err)
	}
	defer m.Close()
	if err := m.Lookup(uint32(0), &s); err != nil {
		return s, fmt.Errorf("read the hash seed %s: %w", name, err)
	}
	if valid(s) {
		return s, nil
	}
	s = fresh()
	if err := m.Put(uint32(0), s); err != nil {
		return s, fmt.Errorf("write the hash seed %s: %w", name, err)
	}
	return s, nil
}

// keyTable is a key table map mapped into this process.
type keyTable struct {
	*keytable.Table
	mem mappedArray
}

// mapKeyTable maps m, a key table of 1<<bits buckets, for writing through keytable.
func mapKeyTable(m *ebpf.Map, bits uint, seed keytable.Seed) (*keyTable, error) {
	mem, err := mapArray(m)
	if err != nil {
		return nil, err
	}
	t, err := keytable.New(mem.words64(), bits, seed)
	if err != nil {
		mem.unmap()
		return nil, fmt.Errorf("%s: %w", m, err)
	}
	return &keyTable{Table: t, mem: mem}, nil
}

func (t *keyTable) close() error {
	if t == nil {
		return nil
	}
	return t.mem.unmap()
}

// keyTableOf returns the table of set's key and the key as the datapath reads it.
func (d *Datapath) keyTableOf(set *installedSet) (*keyTable, uint32) {
	if set.rs.Uplink {
		return d.ulKeys, be32(set.rs.TEID)
	}
	return d.dlKeys, addrBE(set.rs.UE)
}
