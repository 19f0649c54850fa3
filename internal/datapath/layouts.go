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

	"github.com/xupf/xupf/internal/flowtable"
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
	return mapLayout{Key: hashType(ms.Key, placements[ms.Name], false), Value: typeHash(ms.Value)}
}

// placements name how a map places its entries where its types do not say: the flow table
// finds a key's slots by a hash, a bucket size and a spill rule (flowtable.Format). They are
// part of the map's key layout version, so that a build placing entries otherwise replaces a
// pinned table (a cacheMaps map) rather than look its entries up where they are not.
var placements = map[string]string{xupfMapXupfFlows: flowtable.Format}

func typeHash(t btf.Type) [16]byte {
	return hashType(t, "", false)
}

// hashType hashes what makes up the layout of t and, for a map's key, how the map places its
// entries (placements; "" for none); with revert, as an earlier build knew t, before the
// fields of paddingTakeovers took over its padding.
func hashType(t btf.Type, placement string, revert bool) [16]byte {
	h := sha256.New()
	if placement != "" {
		fmt.Fprintf(h, "placed %q;", placement)
	}
	describeType(h, t, 0, revert)
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// paddingTakeover is a field that took over padding of its struct: an earlier build wrote the
// padding zero, so its entries hold the same bytes the field's zero is, and a pinned map of
// that build is taken over as it is, with no migration. Declare a field here only if zero
// means "not set" to the code that reads it.
type paddingTakeover struct {
	Struct, Field string // the struct and its field in this build
	Was           string // the padding's name before
	WasType       btf.Type
}

// paddingTakeovers are the fields that took over padding since the oldest release this build
// takes maps over from.
var paddingTakeovers = []paddingTakeover{
	// The next-hop pin of a tunnel's peer (route.h pinned_nexthop): 0 is no pin, the packets
	// walk the route table.
	{Struct: "far", Field: "nh_pin", Was: "pad",
		WasType: &btf.Array{Type: &btf.Int{Name: "__u8", Size: 1}, Nelems: 2}},
}

// revertMember returns m, a member of the struct named st, as it was before it took over
// padding (paddingTakeovers), or m itself.
func revertMember(st string, m btf.Member) btf.Member {
	for _, p := range paddingTakeovers {
		if p.Struct == st && p.Field == m.Name {
			m.Name, m.Type = p.Was, p.WasType
		}
	}
	return m
}

// sameLayout tells whether was, a recorded layout version, is that of t, either as this build
// has it or as the build before the paddingTakeovers had it: a map of that build is taken
// over as it is.
func sameLayout(was [16]byte, t btf.Type) bool {
	return was == hashType(t, "", false) || was == hashType(t, "", true)
}

// sameKeyLayout tells whether was is the layout version of the key of ms (sameLayout, with
// the map's placement).
func sameKeyLayout(was [16]byte, ms *ebpf.MapSpec) bool {
	p := placements[ms.Name]
	return was == hashType(ms.Key, p, false) || was == hashType(ms.Key, p, true)
}

// prefixType returns the struct t cut to its first size bytes: what an earlier build's value
// was when this build only added fields at its end, or elements at the end of an array field
// (the counters of struct stats, one per STAT_*). It reports false when t is no struct or a
// field other than an array cut at a whole element straddles size.
func prefixType(t btf.Type, size uint32) (*btf.Struct, bool) {
	st, ok := btf.UnderlyingType(t).(*btf.Struct)
	if !ok {
		return nil, false
	}
	cut := &btf.Struct{Name: st.Name, Size: size}
	for _, m := range st.Members {
		msize, err := btf.Sizeof(m.Type)
		start := m.Offset.Bytes()
		switch {
		case err != nil:
			return nil, false
		case start+uint32(msize) <= size:
			cut.Members = append(cut.Members, m)
		case start < size:
			short, ok := arrayPrefix(m.Type, size-start)
			if !ok {
				return nil, false
			}
			m.Type = short
			cut.Members = append(cut.Members, m)
		}
	}
	return cut, true
}

// arrayPrefix returns the array t cut to its first size bytes, or false when t is no array
// or size is no whole number of its elements.
func arrayPrefix(t btf.Type, size uint32) (*btf.Array, bool) {
	arr, ok := btf.UnderlyingType(t).(*btf.Array)
	if !ok {
		return nil, false
	}
	esize, err := btf.Sizeof(arr.Type)
	if err != nil || esize <= 0 || size%uint32(esize) != 0 {
		return nil, false
	}
	short := *arr
	short.Nelems = size / uint32(esize)
	return &short, true
}

// maxTypeDepth bounds describeType's recursion: map keys and values are plain structs a few
// levels deep; a pointer cycle must not recurse for ever.
const maxTypeDepth = 16

// describeType writes what makes up the layout of t: sizes, offsets, member and enumerator
// names and values; with revert, the members of paddingTakeovers as they were before. Typedef
// names and qualifiers are left out: renaming a typedef or adding const changes no byte.
func describeType(h hash.Hash, t btf.Type, depth int, revert bool) {
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
		describeType(h, t.Type, depth+1, revert)
	case *btf.Struct:
		describeMembers(h, "struct", t.Name, t.Size, t.Members, depth, revert)
	case *btf.Union:
		describeMembers(h, "union", t.Name, t.Size, t.Members, depth, revert)
	case *btf.Pointer:
		fmt.Fprint(h, "pointer to ")
		describeType(h, t.Target, depth+1, revert)
	default:
		size, _ := btf.Sizeof(t)
		fmt.Fprintf(h, "%T %d;", t, size)
	}
}

func describeMembers(h hash.Hash, kind, name string, size uint32, members []btf.Member, depth int, revert bool) {
	fmt.Fprintf(h, "%s %d{", kind, size)
	for _, m := range members {
		if revert {
			m = revertMember(name, m)
		}
		fmt.Fprintf(h, "%s@%d:%d ", m.Name, m.Offset, m.BitfieldSize)
		describeType(h, m.Type, depth+1, revert)
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

// cacheMaps are the pinned maps whose entries a load may drop: the flow cache's, which the
// kernel's decisions fill again (a load removes the flows an earlier run cached anyway), and
// the next-hop pins, which every load clears and the rule sets fill again (a FAR without its
// pin walks the route table meanwhile), and the key tables' direct caches, which every load
// clears too (mapDirect). A build that changes one of them, in any way,
// replaces it with an empty map of its own instead of being refused.
var cacheMaps = map[string]bool{xupfMapXupfFlows: true, xupfMapXupfFlowSeen: true, xupfMapXupfNhPins: true,
	xupfMapXupfUlDirect: true, xupfMapXupfDlDirect: true}

// checkLayouts compares the maps an earlier run pinned under pinPath with this build's
// spec: their type, sizes and flags (from the kernel) and their layout version. It returns
// the names of the maps whose values this build only grew at their end (migrateMap carries
// them over), the cacheMaps that differ (replaced empty), or an error naming each other map
// that differs and what changed, wrapping ebpf.ErrMapIncompatible. Maps not pinned yet, and
// pinned maps without a recorded version (pinned by a build that kept none), are left to the
// load.
func checkLayouts(pinPath string, spec *ebpf.CollectionSpec, layouts *ebpf.Map) (grown, emptied []string, err error) {
	var diffs []string
	for _, name := range pinnedMaps(spec) {
		ms := spec.Maps[name]
		m, err := ebpf.LoadPinnedMap(filepath.Join(pinPath, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, nil, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		info, infoErr := m.Info()
		incompatible := ms.Compatible(m)
		m.Close()
		if infoErr != nil {
			return nil, nil, fmt.Errorf("read pinned map %s: %w", name, infoErr)
		}
		var was mapLayout
		recorded := true
		if err := layouts.Lookup(layoutKey(name), &was); errors.Is(err, ebpf.ErrKeyNotExist) {
			recorded = false
		} else if err != nil {
			return nil, nil, fmt.Errorf("read the layout version of %s: %w", name, err)
		}
		switch {
		case cacheMaps[name] && (errors.Is(incompatible, ebpf.ErrMapIncompatible) ||
			(recorded && !(sameKeyLayout(was.Key, ms) && sameLayout(was.Value, ms.Value)))):
			emptied = append(emptied, name)
		case recorded && valueGrew(ms, info, was):
			grown = append(grown, name)
		case errors.Is(incompatible, ebpf.ErrMapIncompatible):
			diffs = append(diffs, fmt.Sprintf("%s: %v", name,
				strings.TrimSuffix(incompatible.Error(), ": "+ebpf.ErrMapIncompatible.Error())))
		case incompatible != nil:
			return nil, nil, fmt.Errorf("compare pinned map %s: %w", name, incompatible)
		case recorded:
			if !sameKeyLayout(was.Key, ms) {
				diffs = append(diffs, fmt.Sprintf("%s: the key's fields changed", name))
			}
			if !sameLayout(was.Value, ms.Value) {
				diffs = append(diffs, fmt.Sprintf("%s: the value's fields changed (only fields added at "+
					"its end are carried over)", name))
			}
		}
	}
	if len(diffs) > 0 {
		return nil, nil, fmt.Errorf("%s: %w", strings.Join(diffs, "; "), ebpf.ErrMapIncompatible)
	}
	return grown, emptied, nil
}

// valueGrew tells whether this build's map ms differs from the pinned one (info, layout
// version was) only by fields added at the end of its value: an entry then converts by
// zero-extending its value (each CPU's, in a per-CPU map). Special maps are not converted.
func valueGrew(ms *ebpf.MapSpec, info *ebpf.MapInfo, was mapLayout) bool {
	switch ms.Type {
	case ebpf.Array, ebpf.Hash, ebpf.LRUHash, ebpf.PerCPUArray, ebpf.PerCPUHash, ebpf.LRUCPUHash:
	default:
		return false
	}
	if info.Type != ms.Type || info.KeySize != ms.KeySize || info.MaxEntries != ms.MaxEntries ||
		info.Flags != ms.Flags || info.ValueSize >= ms.ValueSize || !sameKeyLayout(was.Key, ms) {
		return false
	}
	prefix, ok := prefixType(ms.Value, info.ValueSize)
	return ok && sameLayout(was.Value, prefix)
}

// migrateMap makes a new map of the pinned map name from this build's spec and puts it in
// the old one's place under pinPath with one rename, so a crash leaves either map pinned,
// never none. With carry it first copies the old entries over, each value (each CPU's value
// of a per-CPU map) zero-extended: name's value this build grew (valueGrew); without, the
// new map starts empty (a cacheMaps map). The running program keeps the old map until the
// links take the new program: what it writes meanwhile (counts of those moments) is lost.
func migrateMap(pinPath, name string, spec *ebpf.CollectionSpec, layouts *ebpf.Map, carry bool) error {
	pin := filepath.Join(pinPath, name)
	old, err := ebpf.LoadPinnedMap(pin, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	defer old.Close()
	ms := spec.Maps[name].Copy()
	ms.Pinning = ebpf.PinNone
	m, err := ebpf.NewMap(ms)
	if err != nil {
		return fmt.Errorf("migrate %s: make the new map: %w", name, err)
	}
	defer m.Close()
	if carry {
		if err := copyGrown(old, m, ms); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	} else if name == xupfMapXupfNhPins {
		// The earlier program reads the old pins until Attach, and their values name
		// xupf_nexthops slots (carried over) that this run's router releases and reuses:
		// zeroed, they name nothing, as SetPins clears the new map. The other cache maps'
		// values name nothing and are left to the earlier program: zeroing the flow table a
		// slot at a time (a system call each, seconds for a million slots) would clear
		// slots under its learner and show its readers an action half zeroed.
		if err := zeroArray(old); err != nil {
			return fmt.Errorf("migrate %s: clear the old map: %w", name, err)
		}
	} else if name == xupfMapXupfUlDirect || name == xupfMapXupfDlDirect {
		// The earlier program reads the old direct cache until Attach, while this run
		// changes rules it does not copy there: cleared, it sends packets to the key tables.
		if err := clearDirect(old); err != nil {
			return fmt.Errorf("migrate %s: clear the old map: %w", name, err)
		}
	}
	// bpffs refuses names with a dot.
	tmp := filepath.Join(pinPath, "migrating_"+name)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("migrate %s: remove an unfinished migration: %w", name, err)
	}
	if err := m.Pin(tmp); err != nil {
		return fmt.Errorf("migrate %s: pin the new map: %w", name, err)
	}
	if err := os.Rename(tmp, pin); err != nil {
		return errors.Join(fmt.Errorf("migrate %s: put the new map in place: %w", name, err), os.Remove(tmp))
	}
	// Recorded at once: a load that fails later must find the version of what is pinned.
	if err := layouts.Put(layoutKey(name), layoutOf(spec.Maps[name])); err != nil {
		return fmt.Errorf("record the layout version of %s: %w", name, err)
	}
	return nil
}

// zeroArray stores zero in every value of the array m.
func zeroArray(m *ebpf.Map) error {
	zero := make([]byte, m.ValueSize())
	for k := range m.MaxEntries() {
		if err := m.Put(k, zero); err != nil {
			return err
		}
	}
	return nil
}

// copyGrown copies every entry of old into m, whose values (ms) are longer, zero-extending
// each value, or each CPU's value of a per-CPU map.
func copyGrown(old, m *ebpf.Map, ms *ebpf.MapSpec) error {
	var k []byte
	it := old.Iterate()
	switch ms.Type {
	case ebpf.PerCPUArray, ebpf.PerCPUHash, ebpf.LRUCPUHash:
		var v [][]byte // one value per possible CPU
		for it.Next(&k, &v) {
			values := make([][]byte, len(v))
			for cpu := range v {
				values[cpu] = make([]byte, ms.ValueSize)
				copy(values[cpu], v[cpu])
			}
			if err := m.Put(k, values); err != nil {
				return fmt.Errorf("copy an entry: %w", err)
			}
		}
	default:
		var v []byte
		value := make([]byte, ms.ValueSize)
		for it.Next(&k, &v) {
			clear(value[copy(value, v):])
			if err := m.Put(k, value); err != nil {
				return fmt.Errorf("copy an entry: %w", err)
			}
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the pinned entries: %w", err)
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
