package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/config"
)

// config show prints the daemon's configuration as a file config.Parse takes back, its
// comments kept and anything unprintable escaped.
func TestConfigShow(t *testing.T) {
	b := newBackend()
	b.ConfigData = []byte("# xupfd test: the running configuration\n" +
		"interfaces: [{name: eth0, roles: [n3, n6]}]\ngtpu_addresses: [192.0.2.1]\n" +
		"network_instances: {\"bad\\e[2J\": eth0}\n" +
		"policer_contracts: [{class: 0, action: drop}]\n")
	res, _ := runCLI(t, b, nil, "config", "show")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if !strings.HasPrefix(res.stdout, "# xupfd test: the running configuration\n") || strings.Contains(res.stdout, "\x1b") {
		t.Errorf("output:\n%s", res.stdout)
	}
	got, err := config.Parse([]byte(res.stdout))
	if err != nil {
		t.Fatalf("config show output does not parse: %v\n%s", err, res.stdout)
	}
	want, err := config.Parse(b.ConfigData)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config show gave\n%+v\nwant\n%+v", got, want)
	}

	b.ConfigData = []byte("{not yaml")
	if res, _ := runCLI(t, b, nil, "config", "show"); res.code == 0 || !strings.Contains(res.stderr, "is not YAML") {
		t.Errorf("a body that is not YAML: exit %d, %s", res.code, res.stderr)
	}
}
