package e2e

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// TestUplinkSpread runs xupfd with uplink_spread: flow and sends one gNB's G-PDUs (one outer
// 5-tuple) from CPU 0, 16 inner flows of one session: every packet arrives intact and is
// counted once as received and once as forwarded, and some were handed to the other CPU
// (ul_spread; the chance that all 16 flows hash to CPU 0 is 1 in 65,536).
func TestUplinkSpread(t *testing.T) {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("needs two online CPUs: packets are spread from one to another")
	}
	e := newEnvConfig(t, func(c *config.Config) { c.UplinkSpread = config.SpreadFlow }, sessNoQFI)
	const flows = 16
	runtime.LockOSThread() // the gNB's transmit, and so the UPF's receive, run on this thread's CPU
	defer runtime.UnlockOSThread()
	var old, cpu0 unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &old)
	for f := range flows {
		port := uint16(41000 + f)
		payload := testbed.Payload(fmt.Sprintf("spread flow %d", f))
		got := e.uplinkFrom(sessNoQFI, port, 0, packets, payload, recvTimeout)
		reportProblems(t, fmt.Sprintf("flow %d", f), testbed.CheckUplinkFrom(sessNoQFI, port, packets, payload, got))
	}
	st := e.stats()
	c := st.Counters
	t.Logf("ul_rx %d, ul_tx %d, ul_kernel %d, ul_spread %d", c["ul_rx"], c["ul_tx"], c["ul_kernel"], c["ul_spread"])
	if c["ul_rx"] != flows*packets || c["ul_tx"]+c["ul_kernel"] != flows*packets {
		t.Errorf("ul_rx %d, ul_tx %d + ul_kernel %d; want %d received and as many forwarded",
			c["ul_rx"], c["ul_tx"], c["ul_kernel"], flows*packets)
	}
	if c["ul_spread"] == 0 || c["ul_spread"] >= flows*packets {
		t.Errorf("ul_spread %d of %d: want some flows handed to the other CPU, and some kept", c["ul_spread"], flows*packets)
	}
	expectNoDrops(t, st)
}
