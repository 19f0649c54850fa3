package e2e

import (
	"fmt"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/testbed"
)

// TestPolicer drives the policer through xupfctl against the real daemon: a class for the
// downlink of one session, a DROP contract for it (its packets stop, counted by the contract
// and as drop reason "policer", while the other session's go on under no contract), then a
// LIMIT whose burst lets exactly some through, then PASS, then deletion.
func TestPolicer(t *testing.T) {
	e := newEnv(t)
	e.ctl(t, "classifier", "add", "--id", "1", "--priority", "10", "--direction", "egress",
		"--dst-ip", sessQFI.UE.String()+"/32")
	const n = 20
	payload := testbed.Payload("policer")
	send := func(want int, why string) {
		t.Helper()
		if got := len(e.downlink(sessQFI, n, payload)); got != want {
			t.Errorf("%s: %d of %d downlink packets arrived, want %d", why, got, n, want)
		}
	}
	contract := func() api.ContractInfo {
		t.Helper()
		var list []api.ContractInfo
		e.ctlJSON(t, &list, "policer", "list")
		if len(list) != 1 || list[0].Class != 1 {
			t.Fatalf("contracts %+v, want one for class 1", list)
		}
		return list[0]
	}

	send(n, "no contract")
	e.ctl(t, "policer", "set", "--class", "1", "--drop")
	send(0, "DROP")
	if c := contract(); c.Action != "drop" || c.Counters.DroppedPackets != n {
		t.Errorf("contract after DROP: %+v, want %d dropped", c, n)
	}
	if got := e.stats().Drops["policer"]; got != n {
		t.Errorf("policer drops %d, want %d", got, n)
	}
	reportProblems(t, "other session", testbed.CheckDownlink(sessNoQFI, n, payload, e.downlink(sessNoQFI, n, payload)))

	// A burst of 5 packets (each inner packet is 20 + 8 + payload bytes) at a rate so low that
	// nothing refills during the test: exactly 5 pass.
	size := uint64(20 + 8 + len(payload(0)))
	e.ctl(t, "policer", "set", "--class", "1", "--limit", "--rate", "8bit", "--burst", fmt.Sprint(5*size))
	send(5, "LIMIT with a 5-packet burst")
	e.ctl(t, "policer", "set", "--class", "1", "--pass")
	reportProblems(t, "PASS", testbed.CheckDownlink(sessQFI, n, payload, e.downlink(sessQFI, n, payload)))
	if c := contract(); c.Counters.PassedPackets != 5+n || c.Counters.DroppedPackets != n+n-5 {
		t.Errorf("contract counters %+v, want %d passed and %d dropped", c.Counters, 5+n, 2*n-5)
	}
	e.ctl(t, "policer", "delete", "--class", "1")
	var list []api.ContractInfo
	e.ctlJSON(t, &list, "policer", "list")
	if len(list) != 0 {
		t.Errorf("contracts after delete: %+v", list)
	}
}

// ctl runs xupfctl args... in the upf namespace and fails t if it fails.
func (e *env) ctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, args...)
	if err != nil {
		t.Fatalf("xupfctl %v: %v\n%s", args, err, out)
	}
	return out
}
