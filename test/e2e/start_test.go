package e2e

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// privateBPFFSWarning starts the warning xupfd logs when its pins cannot outlive it.
const privateBPFFSWarning = "the bpffs of the pins is private"

// xdpAttached tells, for n3 and n6, whether an XDP program is attached.
func (e *env) xdpAttached(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := e.topo.Do(e.topo.UPFNS, func() error {
		for _, name := range []string{testbed.N3If, testbed.N6If} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			out[name] = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expectForwarding sends packets through sessNoQFI both ways and fails t unless every one
// arrives.
func (e *env) expectForwarding(t *testing.T, when string) {
	t.Helper()
	payload := testbed.Payload("forwarding " + when)
	if got := e.downlink(sessNoQFI, packets, payload); len(got) != packets {
		t.Errorf("%s: gNB received %d of %d downlink packets", when, len(got), packets)
	}
	if got := e.uplink(sessNoQFI, packets, payload, recvTimeout); len(got) != packets {
		t.Errorf("%s: DN received %d of %d uplink packets", when, len(got), packets)
	}
}

// TestCrashKeepsForwarding kills xupfd with SIGKILL. Its links and maps are pinned in a
// bpffs that outlives it (the testbed's, outside the /sys that `ip netns exec` replaces), so
// XDP stays attached and the sessions keep forwarding.
func TestCrashKeepsForwarding(t *testing.T) {
	e := newEnv(t)
	if strings.Contains(e.daemon.LogTail(), privateBPFFSWarning) {
		t.Errorf("xupfd warns about a private bpffs on the testbed's shared one:\n%s", e.daemon.LogTail())
	}
	e.expectForwarding(t, "before the crash")
	if err := e.daemon.Kill(); err != nil {
		t.Fatal(err)
	}
	if a := e.xdpAttached(t); !a[testbed.N3If] || !a[testbed.N6If] {
		t.Errorf("XDP detached when xupfd was killed: %v", a)
	}
	e.expectForwarding(t, "after the crash")
}

// TestPrivateBPFFSWarns runs xupfd on a bpffs under /sys/fs/bpf, which inside `ip netns
// exec` is a mount of its own that goes with it: it must say so, and how to fix it.
func TestPrivateBPFFSWarns(t *testing.T) {
	e := newEnvConfig(t, func(c *config.Config) { c.BPFFS = "/sys/fs/bpf/xupf-e2e-private" }, sessNoQFI)
	log := e.daemon.LogTail()
	for _, want := range []string{privateBPFFSWarning, "mount -t bpf bpf /run/xupf/bpffs"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}
