package datapath

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// layoutsPin is the pinned hash map that keeps, beside the pinned maps, the layout version of
// each: a hash of the BTF of its key and value types. The kernel checks a pinned map's
// sizes, type and flags when a new build reuses it, but not what the bytes mean: a build
// that reorders two fields of the same size would read the earlier run's entries wrongly.
// The program never reads it, so it is not in the BPF object.
const layoutsPin = "xupf_layouts"

// mapLayout is the layout version of one map: what its key and value types are made of.
type mapLayout struct {
	Key, Value [16]byte
}

// layoutOf returns the layout version of the map spec ms.
func layoutOf(ms *ebpf.MapSpec) mapLayout {
	var l mapLayout
	for _, t := range []struct {
		typ btf.Type
		out *[16]byte
	}{{ms.Key, &l.Key}, {ms.Value, &l.Value}} {
		h := sha256.New()
		describeType(h, t.typ, 0)
		copy(t.out[:], h.Sum(nil))
	}
	return l
}

// maxTypeDepth bounds describeType's recursion: map keys and values are plain structs a few
// levels deep; a pointer cycle must not recurse for ever.
const maxTypeDepth = 16

// describeType writes what makes up the layout of t: sizes, offsets, member and enumerator
// names and values. Typedef names and qualifiers are left out: renaming a typedef or adding
// const changes no byte.
func describeType(h hash.Hash, t btf.Type, depth int) {
	if t == nil {
		fmt.Fprint(h, "none;")
		return
	}
	if depth > maxTypeDepth {
		fmt.Fprint(h, "deep;")
		return
	}
	t = btf.UnderlyingType(t)
	switch t := t.(type) {
	case *btf.Int:
		fmt.Fprintf(h, "int %d %v;", t.Size, t.Encoding)
	case *btf.Enum:
		fmt.Fprintf(h, "enum %d %v{", t.Size, t.Signed)
		for _, v := range t.Values {
			fmt.Fprintf(h, "%s=%d,", v.Name, v.Value)
		}
		fmt.Fprint(h, "};")
	case *btf.Array:
		fmt.Fprintf(h, "array %d of ", t.Nelems)
		describeType(h, t.Type, depth+1)
	case *btf.Struct:
		describeMembers(h, "struct", t.Size, t.Members, depth)
	case *btf.Union:
		describeMembers(h, "union", t.Size, t.Members, depth)
	case *btf.Pointer:
		fmt.Fprint(h, "pointer to ")
		describeType(h, t.Target, depth+1)
	default:
		size, _ := btf.Sizeof(t)
		fmt.Fprintf(h, "%T %d;", t, size)
	}
}

func describeMembers(h hash.Hash, kind string, size uint32, members []btf.Member, depth int) {
	fmt.Fprintf(h, "%s %d{", kind, size)
	for _, m := range members {
		fmt.Fprintf(h, "%s@%d:%d ", m.Name, m.Offset, m.BitfieldSize)
		describeType(h, m.Type, depth+1)
	}
	fmt.Fprint(h, "};")
}

// pinnedMaps returns the names of the maps of spec that are pinned by name, which a restart
// reuses.
func pinnedMaps(spec *ebpf.CollectionSpec) []string {
	var out []string
	for name, ms := range spec.Maps {
		if ms.Pinning == ebpf.PinByName {
			out = append(out, name)
		}
	}
	return out
}

// openLayouts opens the layout versions pinned under pinPath, first making the map when
// there is none.
func openLayouts(pinPath string, spec *ebpf.CollectionSpec) (*ebpf.Map, error) {
	m, err := ebpf.NewMapWithOptions(&ebpf.MapSpec{
		Name: layoutsPin, Type: ebpf.Hash, KeySize: layoutKeySize, ValueSize: uint32(len(mapLayout{}.Key) * 2),
		MaxEntries: uint32(max(64, 2*len(spec.Maps))), Pinning: ebpf.PinByName,
	}, ebpf.MapOptions{PinPath: pinPath})
	if err != nil {
		return nil, fmt.Errorf("open the map layout versions (%s): %w", layoutsPin, err)
	}
	return m, nil
}

// layoutKeySize is the size of a map name in the kernel (BPF_OBJ_NAME_LEN).
const layoutKeySize = 16

func layoutKey(name string) [layoutKeySize]byte {
	var k [layoutKeySize]byte
	copy(k[:], name)
	return k
}

// checkLayouts compares the maps an earlier run pinned under pinPath with this build's
// spec: their type, sizes and flags (from the kernel) and their layout version. It returns
// an error naming each map that differs and what changed, wrapping ebpf.ErrMapIncompatible.
// Maps not pinned yet, and pinned maps without a recorded version (pinned by a build that
// kept none), are left to the load.
func checkLayouts(pinPath string, spec *ebpf.CollectionSpec, layouts *ebpf.Map) error {
	var diffs []string
	for _, name := range pinnedMaps(spec) {
		ms := spec.Maps[name]
		m, err := ebpf.LoadPinnedMap(filepath.Join(pinPath, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("open pinned map %s: %w", name, err)
		}
		err = ms.Compatible(m)
		m.Close()
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			diffs = append(diffs, fmt.Sprintf("%s: %v", name, strings.TrimSuffix(err.Error(), ": "+ebpf.ErrMapIncompatible.Error())))
			continue
		} else if err != nil {
			return fmt.Errorf("compare pinned map %s: %w", name, err)
		}
		var was mapLayout
		if err := layouts.Lookup(layoutKey(name), &was); errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("read the layout version of %s: %w", name, err)
		}
		now := layoutOf(ms)
		if was.Key != now.Key {
			diffs = append(diffs, fmt.Sprintf("%s: the key's fields changed", name))
		}
		if was.Value != now.Value {
			diffs = append(diffs, fmt.Sprintf("%s: the value's fields changed", name))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s: %w", strings.Join(diffs, "; "), ebpf.ErrMapIncompatible)
	}
	return nil
}

// recordLayouts records the layout version of every pinned map of spec, once the load has
// pinned them.
func recordLayouts(spec *ebpf.CollectionSpec, layouts *ebpf.Map) error {
	for _, name := range pinnedMaps(spec) {
		if err := layouts.Put(layoutKey(name), layoutOf(spec.Maps[name])); err != nil {
			return fmt.Errorf("record the layout version of %s: %w", name, err)
		}
	}
	return nil
}
