package datapath

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
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
		err := e.do(func() error {
			dp, err := Load(c.opts)
			if err == nil {
				dp.Close(false)
			}
			return err
		})
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
