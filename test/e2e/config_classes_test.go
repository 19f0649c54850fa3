package e2e

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// TestConfiguredPolicer writes a class for sessQFI's downlink and a DROP contract for it in
// the configuration file: from the start, that session's downlink is dropped by the policer
// (the other session's passes), and xupfctl lists the class and the contract with the drops;
// xupfctl config show prints the configuration back.
func TestConfiguredPolicer(t *testing.T) {
	class := classifier.Class{ID: 4, Priority: 10, Direction: "egress", DstIP: sessQFI.UE.String() + "/32"}
	var written *config.Config
	e := newEnvConfig(t, func(c *config.Config) {
		c.Classes = []classifier.Class{class}
		c.Contracts = []config.Contract{{Class: 4, Contract: api.Contract{Action: api.ActionDrop}}}
		written = c
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

	t.Run("config_show", func(t *testing.T) { e.checkConfigShow(t, written) })
}

// checkConfigShow checks that xupfctl config show prints what xupfd runs with: the file it
// was started with, parsed (defaults filled in), which config.Parse, and so xupfd, takes back
// as it is; and that it does not hold the API token.
func (e *env) checkConfigShow(t *testing.T, written *config.Config) {
	out := e.ctl(t, "config", "show")
	got, err := config.Parse([]byte(out))
	if err != nil {
		t.Fatalf("xupfctl config show does not parse: %v\n%s", err, out)
	}
	file, err := yaml.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("xupfctl config show\n%+v\nwant the configuration xupfd was started with\n%+v", got, want)
	}
	token, err := os.ReadFile(e.daemon.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if tok := strings.TrimSpace(string(token)); tok == "" || strings.Contains(out, tok) {
		t.Errorf("xupfctl config show prints the API token (or the token is empty)")
	}
}

// TestPolicerAcrossRestart: downlink packets of a class whose contract drops them, sent
// throughout a restart (SIGTERM, or SIGKILL, then xupfd again), are all dropped: the classes
// are in the program the restart swaps into the links from its first packet. The class's
// counters and its contract's count every packet once, across the restart: they carry on.
func TestPolicerAcrossRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		stop func(*env) error
	}{
		{"SIGTERM", func(e *env) error { return e.daemon.Stop() }},
		{"SIGKILL", func(e *env) error { return e.daemon.Kill() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			policerAcrossRestart(t, func(e *env) { e.restart(t, func() error { return c.stop(e) }) })
		})
	}
}

func policerAcrossRestart(t *testing.T, restart func(*env)) {
	class := classifier.Class{ID: 4, Priority: 10, Direction: "egress", DstIP: sessQFI.UE.String() + "/32"}
	e := newEnvConfig(t, func(c *config.Config) {
		c.Classes = []classifier.Class{class}
		c.Contracts = []config.Contract{{Class: 4, Contract: api.Contract{Action: api.ActionDrop}}}
	}, sessQFI, sessNoQFI)
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	payload := testbed.Payload("policed across a restart")
	done, sent := make(chan struct{}), make(chan error, 1)
	var n int
	go func() {
		for {
			select {
			case <-done:
				sent <- nil
				return
			default:
			}
			if err := e.topo.SendDownlinkTo(sessQFI, testbed.UEPort, 10, payload); err != nil {
				sent <- err
				return
			}
			n += 10
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	restart(e)
	time.Sleep(50 * time.Millisecond)
	close(done)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	got, _ := testbed.ReceiveDownlink(rx, 1, 500*time.Millisecond)
	if len(got) != 0 {
		t.Errorf("%d of %d downlink packets of the dropped class arrived across the restart, want none", len(got), n)
	}
	if drops := e.stats().Drops["policer"]; drops != uint64(n) {
		t.Errorf("policer drops %d across the restart, want %d (every packet sent)", drops, n)
	}
	ci, err := e.api.Class(e.ctx(), class.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ci.Counters.Packets != uint64(n) {
		t.Errorf("class %d counted %d packets across the restart, want %d (every packet sent)", class.ID, ci.Counters.Packets, n)
	}
	pi, err := e.api.Contract(e.ctx(), class.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Counters.DroppedPackets != uint64(n) || pi.Counters.PassedPackets != 0 {
		t.Errorf("the contract of class %d counted %+v across the restart, want %d dropped, none passed",
			class.ID, pi.Counters, n)
	}
}
