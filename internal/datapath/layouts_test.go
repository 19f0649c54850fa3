package datapath

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// TestLayoutOfFields: the layout version changes when two fields of the same size swap (the
// kernel sees the same value size), and not when a typedef wraps the same struct.
func TestLayoutOfFields(t *testing.T) {
	u32 := &btf.Int{Name: "__u32", Size: 4}
	value := func(first, second string) btf.Type {
		return &btf.Struct{Name: "v", Size: 8, Members: []btf.Member{
			{Name: first, Type: u32, Offset: 0}, {Name: second, Type: u32, Offset: 32}}}
	}
	spec := func(v btf.Type) *ebpf.MapSpec {
		return &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1, Key: u32, Value: v}
	}
	base := layoutOf(spec(value("packets", "bytes")))
	if got := layoutOf(spec(value("bytes", "packets"))); got.Value == base.Value || got.Key != base.Key {
		t.Errorf("swapped fields: layout %x, was %x: want another value version, the same key version", got, base)
	}
	if got := layoutOf(spec(&btf.Typedef{Name: "v_t", Type: value("packets", "bytes")})); got != base {
		t.Errorf("a typedef of the same struct: layout %x, want %x", got, base)
	}
}

// TestLoadRefusesOtherLayouts: a build whose map differs from the pinned one, in its fields
// (a recorded layout version that is not this build's) or its size (other limits), is
// refused before anything is touched, naming the map and what changed.
func TestLoadRefusesOtherLayouts(t *testing.T) {
	e := newTestEnv(t, 8)
	opts := e.dp.opts
	layouts, err := ebpf.LoadPinnedMap(filepath.Join(opts.PinPath, layoutsPin), nil)
	if err != nil {
		t.Fatalf("the layout versions are not pinned: %v", err)
	}
	defer layouts.Close()
	var recorded mapLayout
	if err := layouts.Lookup(layoutKey(xupfMapXupfRefs), &recorded); err != nil {
		t.Fatalf("no layout version of %s: %v", xupfMapXupfRefs, err)
	}
	if err := layouts.Put(layoutKey(xupfMapXupfRefs), mapLayout{}); err != nil {
		t.Fatal(err)
	}
	smaller := opts
	smaller.MaxSessions = 4
	for _, c := range []struct {
		name string
		opts Options
		want []string
	}{
		{"fields", opts, []string{xupfMapXupfRefs + ": the value's fields changed", "xupfd --stop"}},
		{"sizes", smaller, []string{xupfMapXupfRefs + ": MaxEntries", "other sizes", "xupfd --stop"}},
	} {
		err := e.tryLoad(c.opts)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: load: %v; want an error saying %q", c.name, err, w)
			}
		}
	}
	if err := layouts.Put(layoutKey(xupfMapXupfRefs), recorded); err != nil {
		t.Fatal(err)
	}
	next := e.load(t, opts)
	if err := next.Close(false); err != nil {
		t.Error(err)
	}
}

// TestLoadMigratesGrownValue: a pinned map whose value this build grew at its end (as if an
// earlier build's xupf_quotas held only the used volumes) is carried over into a new map of
// this build's layout, each entry zero-extended, pinned in the old one's place; the links
// then take the program that uses it.
func TestLoadMigratesGrownValue(t *testing.T) {
	e := newTestEnv(t, 8)
	opts := e.dp.opts
	// used, without limit
	m, earlier, layouts := e.pinEarlierValue(t, xupfMapXupfQuotas, uint32(unsafe.Sizeof(xupfQuota{}.Used)))
	used := [2]uint64{5, 6}
	if err := m.Put(uint32(3), used); err != nil {
		t.Fatal(err)
	}
	// An earlier value that is not the start of this build's (a field renamed) is refused.
	renamed := *earlier
	other := *earlier.Value.(*btf.Struct)
	other.Members = []btf.Member{other.Members[0]}
	other.Members[0].Name = "spent"
	renamed.Value = &other
	if err := layouts.Put(layoutKey(xupfMapXupfQuotas), layoutOf(&renamed)); err != nil {
		t.Fatal(err)
	}
	err := e.tryLoad(opts)
	if want := xupfMapXupfQuotas + ": ValueSize"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("load over a value changed before its end: %v; want an error saying %q", err, want)
	}
	if err := layouts.Put(layoutKey(xupfMapXupfQuotas), layoutOf(earlier)); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}

	next := e.load(t, opts)
	e.dp = next // the environment's cleanup now closes and unpins this one
	for slot, want := range map[uint32]xupfQuota{3: {Used: used}, 4: {}} {
		var got xupfQuota
		if err := next.objs.XupfQuotas.Lookup(slot, &got); err != nil || got != want {
			t.Errorf("quota %d after the migration: %+v, %v; want %+v", slot, got, err, want)
		}
	}
	var recorded mapLayout
	if err := layouts.Lookup(layoutKey(xupfMapXupfQuotas), &recorded); err != nil || recorded != layoutOf(next.spec.Maps[xupfMapXupfQuotas]) {
		t.Errorf("recorded layout version %x, %v; want this build's", recorded, err)
	}
	e.takeOver(t, next)
}

// TestLoadReplacesEarlierPins: next-hop pins an earlier build laid out as one word each are
// replaced with this build's empty entries instead of refusing the load: every load clears
// the pins anyway, and the rule sets pin their peers again. The old map's words are cleared
// too: the earlier program follows them until Attach.
func TestLoadReplacesEarlierPins(t *testing.T) {
	e := newTestEnv(t, 8)
	opts := e.dp.opts
	earlier := e.dp.spec.Maps[xupfMapXupfNhPins].Copy()
	earlier.Value, earlier.ValueSize = &btf.Int{Name: "__u64", Size: 8}, 8
	m, earlier, layouts := e.pinEarlierSpec(t, earlier)
	next := e.loadOverEarlier(t, opts, m, earlier, layouts, 1, uint64(0x0a000001))
	if got, want := next.objs.XupfNhPins.ValueSize(), uint32(unsafe.Sizeof(xupfNhPin{})); got != want {
		t.Errorf("%s after the load: values of %d bytes, want this build's %d", earlier.Name, got, want)
	}
	// The earlier program reads the old map until Attach: its words must name no slot.
	var w uint64
	if err := m.Lookup(uint32(1), &w); err != nil || w != 0 {
		t.Errorf("the replaced %s's word 1 = %#x, %v; want 0", earlier.Name, w, err)
	}
}

// TestLoadEmptiesChangedCache: a pinned flow cache whose value an earlier build laid out
// otherwise (here a field of another name, as when fields are inserted before the counters)
// is replaced with an empty map of this build's layout instead of refusing the load: its
// flows are learnt again.
func TestLoadEmptiesChangedCache(t *testing.T) {
	e := newFlowEnv(t, 8)
	st := *btf.UnderlyingType(e.dp.spec.Maps[xupfMapXupfFlows].Value).(*btf.Struct)
	st.Members = slices.Clone(st.Members)
	st.Members[0].Name = "out_ifindex"
	m, earlier, layouts := e.pinEarlier(t, xupfMapXupfFlows, &st)
	e.loadOverCache(t, m, earlier, layouts, make([]byte, earlier.KeySize), make([]byte, earlier.ValueSize))
}

// loadOverCache puts k and v in m, the flow table an earlier build pinned (its spec earlier),
// records its layout, and loads this build over it: the table must be replaced by an empty
// one of this build's, its layout recorded. The environment takes the new datapath over.
func (e *testEnv) loadOverCache(t *testing.T, m *ebpf.Map, earlier *ebpf.MapSpec, layouts *ebpf.Map, k, v any) {
	t.Helper()
	if err := m.Put(k, v); err != nil {
		t.Fatal(err)
	}
	if err := layouts.Put(layoutKey(xupfMapXupfFlows), layoutOf(earlier)); err != nil {
		t.Fatal(err)
	}
	e.reloadEmptied(t, layouts)
}

// reloadEmptied loads this build over the environment's pins, whose flow table's recorded
// layout version (in layouts) is an earlier build's: the table must be replaced by an empty
// one of this build's, its layout recorded. The environment takes the new datapath over.
func (e *testEnv) reloadEmptied(t *testing.T, layouts *ebpf.Map) {
	t.Helper()
	opts := e.dp.opts
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	next := e.load(t, opts)
	e.dp = next // the environment's cleanup now closes and unpins this one
	for k := range next.flows.All() {
		t.Errorf("the replaced cache holds an entry: %+v", k)
	}
	var recorded mapLayout
	if err := layouts.Lookup(layoutKey(xupfMapXupfFlows), &recorded); err != nil || recorded != layoutOf(next.spec.Maps[xupfMapXupfFlows]) {
		t.Errorf("recorded layout version %x, %v; want this build's", recorded, err)
	}
	e.takeOver(t, next)
}

// TestLoadResizeLeavesOldFlowTable: a max_flows change replaces the flow table with an empty
// one of the new size and leaves the old one as it is: the earlier program reads and learns
// in it until Attach, and zeroing it a slot at a time would take a system call per slot and
// clear slots under its writers and readers.
func TestLoadResizeLeavesOldFlowTable(t *testing.T) {
	e := newFlowEnv(t, 8)
	e.putFlow(t, 0, xupfFlow{})
	old, err := e.dp.objs.XupfFlows.Clone()
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before := slices.Clone(e.dp.flowMem.mem)
	opts := e.dp.opts
	opts.FlowCache.MaxFlows = 64
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	next := e.load(t, opts)
	e.dp = next // the environment's cleanup now closes and unpins this one
	if next.objs.XupfFlows.MaxEntries() == old.MaxEntries() {
		t.Fatalf("%s kept %d elements for max_flows %d", xupfMapXupfFlows, old.MaxEntries(), opts.FlowCache.MaxFlows)
	}
	slot := make([]byte, old.ValueSize())
	for i := range old.MaxEntries() {
		if err := old.Lookup(i, slot); err != nil {
			t.Fatal(err)
		}
		if want := before[int(i)*len(slot):][:len(slot)]; !slices.Equal(slot, want) {
			t.Errorf("the old table's element %d changed in the load: %x, was %x", i, slot, want)
		}
	}
	e.takeOver(t, next)
}

// TestLoadEmptiesOtherPlacement: a pinned flow table of this build's slot layout whose
// entries an earlier build placed otherwise (another hash, bucket size or spill rule:
// flowtable.Format) is replaced with an empty one, not searched where its entries are not.
func TestLoadEmptiesOtherPlacement(t *testing.T) {
	e := newFlowEnv(t, 8)
	e.putFlow(t, 0, xupfFlow{})
	ms := e.dp.spec.Maps[xupfMapXupfFlows]
	if layoutOf(ms).Key == typeHash(ms.Key) {
		t.Errorf("the layout version of %s does not cover how it places entries", ms.Name)
	}
	layouts, err := openLayouts(e.dp.opts.PinPath, e.dp.spec)
	if err != nil {
		t.Fatal(err)
	}
	defer layouts.Close()
	earlier := mapLayout{Key: hashType(ms.Key, "an earlier placement", false), Value: typeHash(ms.Value)}
	if err := layouts.Put(layoutKey(xupfMapXupfFlows), earlier); err != nil {
		t.Fatal(err)
	}
	e.reloadEmptied(t, layouts)
}

// TestLoadReplacesHashFlowTable: the flow table earlier builds pinned as a hash map (flow_key
// to flow) is replaced at load with an empty table of this build's, an array of slots under
// the same pin: the cache starts empty and learns its flows again, and no pin of the old map
// is left behind.
func TestLoadReplacesHashFlowTable(t *testing.T) {
	e := newFlowEnv(t, 16)
	slot := btf.UnderlyingType(e.dp.spec.Maps[xupfMapXupfFlows].Value).(*btf.Struct)
	m, earlier, layouts := e.pinEarlierSpec(t, &ebpf.MapSpec{Name: xupfMapXupfFlows, Type: ebpf.Hash,
		KeySize: uint32(unsafe.Sizeof(xupfFlowKey{})), ValueSize: uint32(unsafe.Sizeof(xupfFlow{})),
		MaxEntries: 16, Key: slot.Members[0].Type, Value: slot.Members[2].Type})
	e.loadOverCache(t, m, earlier, layouts, transitKey.raw(), xupfFlow{Mtu: 1500})
	pinned, err := ebpf.LoadPinnedMap(filepath.Join(e.dp.opts.PinPath, xupfMapXupfFlows), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if pinned.Type() != ebpf.Array || pinned.Flags()&unix.BPF_F_MMAPABLE == 0 {
		t.Errorf("pinned %s after the load: %v, flags %#x; want this build's mmapable array",
			xupfMapXupfFlows, pinned.Type(), pinned.Flags())
	}
	left, err := filepath.Glob(filepath.Join(e.dp.opts.PinPath, "*"+xupfMapXupfFlows+"*"))
	if err != nil || len(left) != 1 {
		t.Errorf("pins of the flow table: %v (err %v), want %s alone", left, err, xupfMapXupfFlows)
	}
	e.handOverAndLearn(t, "flow_learned")
}

// TestLoadMigratesGrownPerCPUValue: a per-CPU map whose value this build grew at its end (as
// if an earlier build's usage counters held packets only) is carried over with each CPU's
// value zero-extended.
func TestLoadMigratesGrownPerCPUValue(t *testing.T) {
	e := newTestEnv(t, 8)
	opts := e.dp.opts
	m, earlier, layouts := e.pinEarlierValue(t, xupfMapXupfUsage, uint32(unsafe.Sizeof(xupfCounters{}.Packets)))
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	packets := make([]uint64, cpus) // a count per CPU
	for cpu := range packets {
		packets[cpu] = uint64(5 + cpu)
	}
	next := e.loadOverEarlier(t, opts, m, earlier, layouts, 3, packets)
	var got []xupfCounters
	if err := next.objs.XupfUsage.Lookup(uint32(3), &got); err != nil {
		t.Fatal(err)
	}
	for cpu, c := range got {
		if want := (xupfCounters{Packets: packets[cpu]}); c != want {
			t.Errorf("usage counter 3 on CPU %d after the migration: %+v, want %+v", cpu, c, want)
		}
	}
}

// TestLoadMigratesGrownStats: the build that added STAT_FLOW_STALE and STAT_FLOW_ENDED grew
// the one array of struct stats from 20 counters to 22, so its last field straddles the
// earlier value's end; an upgrade from the build before still carries each CPU's counters
// over, the new ones zero, and is not refused.
func TestLoadMigratesGrownStats(t *testing.T) {
	e := newTestEnv(t, 8)
	opts := e.dp.opts
	const earlierCounters = 20 // STAT_MAX before STAT_FLOW_STALE and STAT_FLOW_ENDED
	st := *btf.UnderlyingType(e.dp.spec.Maps[xupfMapXupfStats].Value).(*btf.Struct)
	n := st.Members[0]
	arr := *btf.UnderlyingType(n.Type).(*btf.Array)
	arr.Nelems = earlierCounters
	n.Type = &arr
	st.Members, st.Size = []btf.Member{n}, earlierCounters*8
	m, earlier, layouts := e.pinEarlier(t, xupfMapXupfStats, &st)
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	counts := make([][earlierCounters]uint64, cpus)
	for cpu := range counts {
		for i := range counts[cpu] {
			counts[cpu][i] = uint64(100*cpu + i + 1)
		}
	}
	next := e.loadOverEarlier(t, opts, m, earlier, layouts, 0, counts)
	var got []xupfStats
	if err := next.objs.XupfStats.Lookup(uint32(0), &got); err != nil {
		t.Fatal(err)
	}
	for cpu, s := range got {
		var want xupfStats
		copy(want.N[:], counts[cpu][:])
		if s != want {
			t.Errorf("stats on CPU %d after the migration: %v, want %v", cpu, s.N, want.N)
		}
	}
}

// loadOverEarlier puts value under key in m, the earlier build's map of spec earlier (from
// pinEarlier), records its layout version in layouts, and loads this build over the pins in
// e.dp's place, as after a crash: the pins stay.
func (e *testEnv) loadOverEarlier(t *testing.T, opts Options, m *ebpf.Map, earlier *ebpf.MapSpec, layouts *ebpf.Map, key uint32, value any) *Datapath {
	t.Helper()
	if err := m.Put(key, value); err != nil {
		t.Fatal(err)
	}
	if err := layouts.Put(layoutKey(earlier.Name), layoutOf(earlier)); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}
	e.dp = e.load(t, opts)
	return e.dp
}

// pinEarlierValue puts in the place of e's pinned map name a map as an earlier build made it:
// this build's spec with the value cut to its first size bytes. It returns the map, its spec
// and the pinned layout versions (where the caller records the earlier one).
func (e *testEnv) pinEarlierValue(t *testing.T, name string, size uint32) (*ebpf.Map, *ebpf.MapSpec, *ebpf.Map) {
	t.Helper()
	st := *btf.UnderlyingType(e.dp.spec.Maps[name].Value).(*btf.Struct)
	st.Members = slices.DeleteFunc(slices.Clone(st.Members), func(m btf.Member) bool { return m.Offset.Bytes() >= size })
	st.Size = size
	return e.pinEarlier(t, name, &st)
}

// pinEarlier puts in the place of e's pinned map name a map of this build's spec with the
// value type value, as an earlier build made it; it returns what pinEarlierValue does.
func (e *testEnv) pinEarlier(t *testing.T, name string, value *btf.Struct) (*ebpf.Map, *ebpf.MapSpec, *ebpf.Map) {
	t.Helper()
	earlier := e.dp.spec.Maps[name].Copy()
	earlier.Value, earlier.ValueSize = value, value.Size
	return e.pinEarlierSpec(t, earlier)
}

// pinEarlierSpec is pinEarlier with the earlier build's whole map spec.
func (e *testEnv) pinEarlierSpec(t *testing.T, earlier *ebpf.MapSpec) (*ebpf.Map, *ebpf.MapSpec, *ebpf.Map) {
	t.Helper()
	pin := filepath.Join(e.dp.opts.PinPath, earlier.Name)
	earlier.Pinning = ebpf.PinNone
	m, err := ebpf.NewMap(earlier)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Pin(pin + "_earlier"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pin+"_earlier", pin); err != nil {
		t.Fatal(err)
	}
	layouts, err := ebpf.LoadPinnedMap(filepath.Join(e.dp.opts.PinPath, layoutsPin), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { layouts.Close() })
	return m, earlier, layouts
}

// tryLoad loads another datapath over the environment's pins and closes it, keeping the
// pins: it returns the load's error.
func (e *testEnv) tryLoad(opts Options) error {
	return e.do(func() error {
		dp, err := Load(opts)
		if err == nil {
			dp.Close(false)
		}
		return err
	})
}

// TestPaddingTakeoversFit: each field declared to have taken over padding is in this build's
// struct, as large as the padding was, so an earlier build's entries hold the same bytes at
// the same place; and only the declared field reverts: another field in the padding's place
// is a changed layout.
func TestPaddingTakeoversFit(t *testing.T) {
	spec, err := loadXupf()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paddingTakeovers {
		var st *btf.Struct
		if err := spec.Types.TypeByName(p.Struct, &st); err != nil {
			t.Errorf("struct %s of paddingTakeovers: %v", p.Struct, err)
			continue
		}
		i := slices.IndexFunc(st.Members, func(m btf.Member) bool { return m.Name == p.Field })
		if i < 0 {
			t.Errorf("struct %s has no field %s (paddingTakeovers)", p.Struct, p.Field)
			continue
		}
		now, err1 := btf.Sizeof(st.Members[i].Type)
		was, err2 := btf.Sizeof(p.WasType)
		if err1 != nil || err2 != nil || now != was {
			t.Errorf("%s.%s: %d bytes (%v), the padding %s it took over %d (%v); want the same size",
				p.Struct, p.Field, now, err1, p.Was, was, err2)
		}
		earlier := *st
		earlier.Members = slices.Clone(st.Members)
		earlier.Members[i].Name, earlier.Members[i].Type = p.Was, p.WasType
		if !sameLayout(typeHash(&earlier), st) {
			t.Errorf("%s with %s in the place of %s: not taken for the same layout", p.Struct, p.Was, p.Field)
		}
		other := *st
		other.Members = slices.Clone(st.Members)
		other.Members[i].Name = "other"
		if sameLayout(typeHash(&other), st) {
			t.Errorf("%s with an undeclared field in the place of %s: taken for the same layout", p.Struct, p.Field)
		}
	}
}
