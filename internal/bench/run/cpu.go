package run

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes are each CPU's softirq and total time from /proc/stat, in clock ticks.
type cpuTimes struct {
	softirq, total []uint64
}

// readCPUTimes reads /proc/stat's per-CPU lines (cpu0, cpu1, ...).
func readCPUTimes() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var t cpuTimes
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// "cpu" alone is the sum; "cpuN user nice system idle iowait irq softirq steal ...".
		if len(fields) < 8 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		var total uint64
		for i, s := range fields[1:] {
			// guest and guest_nice (fields 9 and 10) are already counted in user and nice.
			if i >= 8 {
				break
			}
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("bench: /proc/stat %s: %w", fields[0], err)
			}
			total += v
		}
		soft, _ := strconv.ParseUint(fields[7], 10, 64)
		t.softirq = append(t.softirq, soft)
		t.total = append(t.total, total)
	}
	return t, sc.Err()
}

// softirqShare is each CPU's share of time spent in softirq between a and b.
func softirqShare(a, b cpuTimes) []float64 {
	out := make([]float64, min(len(a.total), len(b.total)))
	for i := range out {
		if dt := b.total[i] - a.total[i]; dt > 0 {
			out[i] = float64(b.softirq[i]-a.softirq[i]) / float64(dt)
		}
	}
	return out
}
