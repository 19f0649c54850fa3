package e2e

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xupf/xupf/internal/testbed"
)

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
	e.expectForwarding(t, "before the crash")
	if err := e.daemon.Kill(); err != nil {
		t.Fatal(err)
	}
	if a := e.xdpAttached(t); !a[testbed.N3If] || !a[testbed.N6If] {
		t.Errorf("XDP detached when xupfd was killed: %v", a)
	}
	e.expectForwarding(t, "after the crash")
}
