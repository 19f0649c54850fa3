package datapath

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// releaseObject is the BPF object of the last release: this build must take over the maps it
// pinned. Refresh it at each release, from the release's commit:
//
//	git show <release>:internal/datapath/xupf_bpfel.o > internal/datapath/testdata/release_xupf.o
const releaseObject = "testdata/release_xupf.o"

// loadRelease returns the spec of the last release's object.
func loadRelease(t *testing.T) *ebpf.CollectionSpec {
	t.Helper()
	release, err := ebpf.LoadCollectionSpec(releaseObject)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// releasePins returns the maps both the release and this build (spec) pin, sorted.
func releasePins(release, spec *ebpf.CollectionSpec) []string {
	names := slices.DeleteFunc(pinnedMaps(spec), func(name string) bool {
		was, ok := release.Maps[name]
		return !ok || was.Pinning != ebpf.PinByName
	})
	slices.Sort(names)
	return names
}

// pinReleaseMap pins under dir, in the place of any map pinned there, the release's map name
// with maxEntries entries (Load sizes some maps from the options, the same for both builds),
// and records its layout version in layouts, as the release's Load did.
func pinReleaseMap(t *testing.T, release *ebpf.CollectionSpec, name string, maxEntries uint32, dir string, layouts *ebpf.Map) *ebpf.Map {
	t.Helper()
	ms := release.Maps[name].Copy()
	ms.MaxEntries, ms.Pinning = maxEntries, ebpf.PinNone
	m, err := ebpf.NewMap(ms)
	if err != nil {
		t.Fatalf("%s: make the release's map: %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	pin := filepath.Join(dir, name)
	if err := m.Pin(pin + "_release"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pin+"_release", pin); err != nil {
		t.Fatal(err)
	}
	if err := layouts.Put(layoutKey(name), layoutOf(release.Maps[name])); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestUpgradeFromRelease: every map this build pins is new, unchanged since the last release,
// grown at its end (migrated), a cache (replaced empty) or changed only by fields declared in paddingTakeovers, so an
// upgrade from the release takes its maps over instead of refusing to load. The release's maps
// are pinned, with its layout versions recorded, in a bpffs directory of their own, and
// checkLayouts runs over them one map at a time, to name each map refused.
func TestUpgradeFromRelease(t *testing.T) {
	requireRoot(t)
	release := loadRelease(t)
	head, err := loadXupf()
	if err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/sys/fs/bpf/xupf-upgrade-test-%d", os.Getpid())
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	layouts, err := openLayouts(dir, release)
	if err != nil {
		t.Fatal(err)
	}
	defer layouts.Close()

	for _, name := range releasePins(release, head) {
		was, now := release.Maps[name], head.Maps[name]
		pinReleaseMap(t, release, name, now.MaxEntries, dir, layouts).Close()
		one := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{name: now}}
		grown, emptied, err := checkLayouts(dir, one, layouts)
		switch {
		case err != nil:
			t.Errorf("an upgrade from the release (%s) is refused: %v.\n"+
				"Fields may only be added at the end of a map's value (the load migrates it), or take "+
				"over padding the release wrote zero when zero means \"not set\" (declare them in "+
				"paddingTakeovers, layouts.go); otherwise give the map another name.",
				releaseObject, strings.TrimSuffix(err.Error(), ": "+ebpf.ErrMapIncompatible.Error()))
		case len(grown) > 0:
			t.Logf("%s: grown %d -> %d bytes, migrated", name, was.ValueSize, now.ValueSize)
		case len(emptied) > 0:
			t.Logf("%s: a cache of another layout, replaced empty", name)
		case layoutOf(was) != layoutOf(now):
			t.Logf("%s: fields took over padding (paddingTakeovers)", name)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadOverRelease: Load takes over the maps the last release pinned, as they are or
// migrated, and keeps their entries: a FAR the release wrote (its padding zero) reads as the
// same FAR without a next-hop pin.
func TestLoadOverRelease(t *testing.T) {
	e := newTestEnv(t, 8)
	opts := e.dp.opts
	release := loadRelease(t)
	layouts, err := ebpf.LoadPinnedMap(filepath.Join(opts.PinPath, layoutsPin), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer layouts.Close()
	names := releasePins(release, e.dp.spec)
	var fars *ebpf.Map
	for _, name := range names {
		m := pinReleaseMap(t, release, name, e.dp.spec.Maps[name].MaxEntries, opts.PinPath, layouts)
		if name == xupfMapXupfFars {
			fars = m
		}
	}
	far := xupfFar{Action: uint32(xupfFarActionFAR_FORWARD), Flags: uint8(xupfFarFlagFAR_F_OHC),
		Teid: 0x01020304, PeerAddr: 0x0201000a, LocalAddr: 0x0101000a}
	if err := fars.Put(uint32(3), far); err != nil {
		t.Fatal(err)
	}
	if err := e.dp.Close(false); err != nil {
		t.Fatal(err)
	}

	next := e.load(t, opts)
	e.dp = next // the environment's cleanup now closes and unpins this one
	var got xupfFar
	if err := next.objs.XupfFars.Lookup(uint32(3), &got); err != nil || got != far {
		t.Errorf("FAR 3 after the upgrade: %+v, %v; want %+v", got, err, far)
	}
	for _, name := range names {
		var recorded mapLayout
		if err := layouts.Lookup(layoutKey(name), &recorded); err != nil || recorded != layoutOf(next.spec.Maps[name]) {
			t.Errorf("%s: recorded layout version %x, %v; want this build's", name, recorded, err)
		}
	}
	e.takeOver(t, next)
}
