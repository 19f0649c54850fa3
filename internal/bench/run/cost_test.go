package run

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestFloor: the empty program's figure is measured only while the statistics are on, and
// is then a plausible clock-read cost.
func TestFloor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF programs")
	}
	p, err := newFloorProgram()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Another process may hold the statistics on (another xupf-bench); then the error case
	// cannot be seen, but the figure can.
	if on, _ := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); string(on) == "0\n" {
		if _, err := floorNs(p); err == nil {
			t.Error("a floor without statistics")
		}
	}
	s, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ns, err := floorNs(p)
	if err != nil {
		t.Fatal(err)
	}
	if ns <= 0 || ns > 1000 {
		t.Errorf("floor %.1f ns per run", ns)
	}
}
