package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// setKeys makes the keys of m, a table whose values only say "present" (u8 1), exactly want:
// it writes them all before it deletes the others, so a key both sets have is never missing.
func setKeys[K comparable](m *ebpf.Map, want map[K]bool) error {
	for k := range want {
		if err := m.Put(k, uint8(1)); err != nil {
			return fmt.Errorf("add %+v to %s: %w", k, m, err)
		}
	}
	var k K
	var v uint8
	var stale []K
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list %s: %w", m, err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove %+v from %s: %w", k, m, err)
		}
	}
	return nil
}
