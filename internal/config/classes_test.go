package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
)

const classesYAML = `classifier_classes:
  - {id: 10, priority: 10, direction: egress, protocol: udp, dst_port: "6000"}
  - {id: 20, priority: 5}
policer_contracts:
  - {class: 10, action: limit, rate_bps: 8000000, burst_bytes: 15000}
  - {class: 0, action: drop}
`

func TestClassesAndContracts(t *testing.T) {
	cfg, err := Parse([]byte(minimal + classesYAML))
	if err != nil {
		t.Fatal(err)
	}
	wantClasses := []classifier.Class{
		{ID: 10, Priority: 10, Direction: "egress", Protocol: "udp", DstPort: "6000"},
		{ID: 20, Priority: 5},
	}
	wantContracts := []Contract{
		{Class: 10, Contract: api.Contract{Action: "limit", RateBPS: 8000000, BurstBytes: 15000}},
		{Class: 0, Contract: api.Contract{Action: "drop"}},
	}
	if !reflect.DeepEqual(cfg.Classes, wantClasses) || !reflect.DeepEqual(cfg.Contracts, wantContracts) {
		t.Errorf("classes %+v, contracts %+v; want %+v, %+v", cfg.Classes, cfg.Contracts, wantClasses, wantContracts)
	}

	// They survive a round trip through YAML, as xupfctl config show prints them.
	checkRoundTrip(t, cfg)
}

// checkRoundTrip checks that cfg, written as YAML, parses back to itself.
func checkRoundTrip(t *testing.T, cfg *Config) {
	t.Helper()
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(Marshal(cfg)): %v\n%s", err, data)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip changed the config:\n%+v\nwant\n%+v", back, cfg)
	}
}

func TestClassesAndContractsErrors(t *testing.T) {
	var many strings.Builder
	many.WriteString("classifier_classes:\n")
	for i := range classifier.MaxClasses + 1 {
		fmt.Fprintf(&many, "  - {id: %d}\n", i+1)
	}
	for _, c := range []struct{ yaml, want string }{
		{"classifier_classes: [{id: 1, protocol: udpp}]\n", `config: classifier_classes[0]: class 1: protocol: "udpp"`},
		{"classifier_classes: [{id: 0}]\n", "classifier_classes[0]: class 0: id: 0 is not a class id"},
		{"classifier_classes: [{id: 1}, {id: 1, priority: 2}]\n", "classifier_classes[1].id: 1 is classifier_classes[0]'s too"},
		{"classifier_classes: [{id: 1, port: 80}]\n", `unknown key "port" in a classifier_classes entry`},
		{"classifier_classes: [{id: x}]\n", "x is not valid here; expected an integer"},
		{many.String(), fmt.Sprintf("classifier_classes: %d classes: the classifier holds at most %d", classifier.MaxClasses+1, classifier.MaxClasses)},
		{"policer_contracts: [{class: 1, action: limit, rate_bps: 7, burst_bytes: 100}]\n", "policer_contracts[0]: contract for class 1: rate_bps: 7 is out of range"},
		{"policer_contracts: [{class: 1}]\n", "policer_contracts[0]: contract for class 1: action: missing"},
		{"policer_contracts: [{class: 0, action: pass}, {class: 0, action: drop}]\n", "policer_contracts[1].class: 0 is policer_contracts[0]'s too"},
		{"policer_contracts: [{class: 1, action: drop, rate: 5}]\n", `unknown key "rate" in a policer_contracts entry; remove it or correct its spelling (valid keys: class, action, rate_bps, burst_bytes)`},
	} {
		_, err := Parse([]byte(minimal + c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.60q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}
