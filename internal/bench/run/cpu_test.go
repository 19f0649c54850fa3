package run

import (
	"math"
	"testing"
)

func TestSoftirqShare(t *testing.T) {
	a := cpuTimes{softirq: []uint64{10, 0}, total: []uint64{100, 100}}
	b := cpuTimes{softirq: []uint64{60, 0}, total: []uint64{300, 100}}
	got := softirqShare(a, b)
	if len(got) != 2 || math.Abs(got[0]-0.25) > 1e-9 || got[1] != 0 {
		t.Fatalf("%v", got)
	}
	now, err := readCPUTimes()
	if err != nil || len(now.total) == 0 || len(now.total) != len(now.softirq) {
		t.Fatalf("/proc/stat: %+v %v", now, err)
	}
}
