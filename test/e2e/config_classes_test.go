package e2e

import (
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// TestConfiguredPolicer writes a class for sessQFI's downlink and a DROP contract for it in
// the configuration file: from the start, that session's downlink is dropped by the policer
// (the other session's passes), and xupfctl lists the class and the contract with the drops.
func TestConfiguredPolicer(t *testing.T) {
	class := classifier.Class{ID: 4, Priority: 10, Direction: "egress", DstIP: sessQFI.UE.String() + "/32"}
	e := newEnvConfig(t, func(c *config.Config) {
		c.Classes = []classifier.Class{class}
		c.Contracts = []config.Contract{{Class: 4, Contract: api.Contract{Action: api.ActionDrop}}}
	}, sessQFI, sessNoQFI)

	const n = 10
	payload := testbed.Payload("configured policer")
	if got := len(e.downlink(sessQFI, n, payload)); got != 0 {
		t.Errorf("%d of %d downlink packets of the classified session arrived, want none (DROP)", got, n)
	}
	reportProblems(t, "other session", testbed.CheckDownlink(sessNoQFI, n, payload, e.downlink(sessNoQFI, n, payload)))

	var classes []api.ClassInfo
	e.ctlJSON(t, &classes, "classifier", "list")
	if len(classes) != 1 || classes[0].Class != class || classes[0].Counters.Packets != n {
		t.Errorf("xupfctl classifier list: %+v, want class %+v with %d packets", classes, class, n)
	}
	var contracts []api.ContractInfo
	e.ctlJSON(t, &contracts, "policer", "list")
	if len(contracts) != 1 || contracts[0].Class != 4 || contracts[0].Action != api.ActionDrop ||
		contracts[0].Counters.DroppedPackets != n {
		t.Errorf("xupfctl policer list: %+v, want class 4's DROP with %d dropped", contracts, n)
	}
	if out := e.ctl(t, "policer", "list"); !strings.Contains(out, "drop") {
		t.Errorf("xupfctl policer list does not show the drop contract:\n%s", out)
	}
	if got := e.stats().Drops["policer"]; got != n {
		t.Errorf("policer drops %d, want %d", got, n)
	}
}
