package testbed

import "testing"

func TestCPUMask(t *testing.T) {
	for n, want := range map[int]string{1: "1", 2: "3", 8: "ff", 32: "ffffffff", 40: "ff,ffffffff", 64: "ffffffff,ffffffff"} {
		if got := cpuMask(n); got != want {
			t.Errorf("cpuMask(%d) = %q, want %q", n, got, want)
		}
	}
}
