package e2e

import (
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/testbed"
)

// TestUpgradeWithoutLoss upgrades xupfd under traffic to a second build whose programs differ
// (built with the xupf_upgrade_probe tag: one instruction more in each) and back: the new
// build's program must run on the pinned links, taken over with link.Update, and every check
// of a restart must hold (checkRestartWithoutLoss): no packet lost or duplicated, the
// sessions kept with their counters, modifiable and deletable.
func TestUpgradeWithoutLoss(t *testing.T) {
	probe := filepath.Join(t.TempDir(), "xupfd-probe")
	if err := testbed.Build(t.Context(), probe, "./cmd/xupfd", "xupf_upgrade_probe"); err != nil {
		t.Fatal(err)
	}
	var release, upgraded map[string]string
	r := checkRestartWithoutLoss(t, func(r *restartEnv) time.Duration {
		release = r.xdpTags(t)
		took := r.restartWith(t, probe, r.daemon.Stop)
		upgraded = r.xdpTags(t)
		return took
	})
	t.Logf("XDP program tags: release build %v, upgraded %v", release, upgraded)
	for name, tag := range release {
		if upgraded[name] == tag {
			t.Errorf("%s: the upgraded xupfd left the program with tag %s on the pinned link, the release build's", name, tag)
		}
	}
	r.trafficDuring(t, func() { r.restartWith(t, xupfdBin, r.daemon.Stop) })
	if back := r.xdpTags(t); !maps.Equal(back, release) {
		t.Errorf("after going back to the release build the links run programs with tags %v, want %v", back, release)
	}
}

// xdpTags returns the tag of the XDP program attached to n3 and n6.
func (e *env) xdpTags(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, x := range e.xdp(t) {
		if x == nil {
			t.Errorf("%s: no XDP program attached", name)
			continue
		}
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
		if err != nil {
			t.Fatalf("%s: open the XDP program: %v", name, err)
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			t.Fatalf("%s: read the XDP program: %v", name, err)
		}
		out[name] = info.Tag
	}
	return out
}
