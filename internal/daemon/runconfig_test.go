package daemon

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
)

// The running configuration parses back into the configuration the daemon was given, with
// the classes and contracts the API changed since, and is served at /api/v1/config.
func TestRunningConfigRoundTrip(t *testing.T) {
	d, _, client := newClassDaemon(t)
	cfg, err := config.Parse([]byte(`interfaces: [{name: eth0, roles: [n3, n6]}]
gtpu_addresses: [192.0.2.1]
api_token_file: /etc/xupf/token
classifier_classes: [{id: 3, priority: 1, protocol: tcp}]
policer_contracts: [{class: 3, action: drop}]
`))
	if err != nil {
		t.Fatal(err)
	}
	d.cfg, d.version = cfg, "v9"
	if err := d.configureClasses(); err != nil {
		t.Fatal(err)
	}
	// Changes through the API show in the running configuration.
	added := classifier.Class{ID: 1, Priority: 7, Direction: "egress", DstIP: "10.45.0.0/16"}
	if _, err := client.AddClass(t.Context(), added); err != nil {
		t.Fatal(err)
	}
	limit := api.Contract{Action: "limit", RateBPS: 80000, BurstBytes: 3000}
	if _, err := client.SetContract(t.Context(), 0, limit); err != nil {
		t.Fatal(err)
	}

	data, err := client.RunningConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# xupfd v9: the running configuration") {
		t.Errorf("no heading comment:\n%s", data)
	}
	back, err := config.Parse(data)
	if err != nil {
		t.Fatalf("the running configuration does not parse: %v\n%s", err, data)
	}
	want := *cfg
	want.Classes = []classifier.Class{added, cfg.Classes[0]}
	want.Contracts = []config.Contract{{Class: 0, Contract: limit}, cfg.Contracts[0]}
	if !reflect.DeepEqual(*back, want) {
		t.Errorf("running configuration\n%+v\nwant\n%+v\n%s", *back, want, data)
	}
	if len(d.cfg.Classes) != 1 || len(d.cfg.Contracts) != 1 {
		t.Error("RunningConfig changed the daemon's configuration")
	}
}
