package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

// TestRouteAndNeigh: the route and neigh commands reach the API with what their flags say,
// and their usage errors say what to fix.
func TestRouteAndNeigh(t *testing.T) {
	b := &apitest.Backend{}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"route", "add", "0.0.0.0/0", "--via", "203.0.113.1", "--dev", "n6"}, "route 0.0.0.0/0 added\n"},
		{[]string{"route", "add", "198.51.100.0/24", "--dev", "n3", "--mtu", "1400"}, "route 198.51.100.0/24 added\n"},
		{[]string{"route", "add", "192.0.2.0/24", "--blackhole"}, "route 192.0.2.0/24 added\n"},
		{[]string{"route", "del", "198.51.100.0/24"}, "route 198.51.100.0/24 deleted\n"},
		{[]string{"neigh", "add", "203.0.113.1", "--dev", "n6", "--mac", "02:00:00:00:02:02"}, "neighbour 203.0.113.1 on n6 added\n"},
		{[]string{"route", "list"}, "PREFIX        TYPE       VIA          DEV  MTU\n" +
			"0.0.0.0/0     -          203.0.113.1  n6   -\n" +
			"192.0.2.0/24  blackhole  -            -    -\n"},
		{[]string{"neigh", "list"}, "ADDRESS      DEV  MAC\n203.0.113.1  n6   02:00:00:00:02:02\n"},
		{[]string{"neigh", "del", "203.0.113.1", "--dev", "n6"}, "neighbour 203.0.113.1 on n6 deleted\n"},
	} {
		r, _ := runCLI(t, b, nil, c.args...)
		if r.code != 0 || r.stdout != c.want {
			t.Errorf("%v: exit %d, output %q, want %q; stderr %q", c.args, r.code, r.stdout, c.want, r.stderr)
		}
	}
	want := []api.Route{{Prefix: "0.0.0.0/0", Via: "203.0.113.1", Interface: "n6"}, {Prefix: "192.0.2.0/24", Type: "blackhole"}}
	if !reflect.DeepEqual(b.RoutesData, want) || len(b.NeighboursData) != 0 {
		t.Errorf("routes %+v, neighbours %+v; want %+v and none", b.RoutesData, b.NeighboursData, want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"route", "add", "10.0.0.0/8"}, "--dev is required"},
		{[]string{"route", "add", "10.0.0.0/8", "--blackhole", "--dev", "n6"}, "--blackhole takes no --via, --dev or --mtu"},
		{[]string{"route", "add"}, "give one prefix"},
		{[]string{"neigh", "add", "203.0.113.1", "--mac", "02:00:00:00:02:02"}, "--dev is required"},
		{[]string{"route", "flush"}, `unknown command "flush"`},
	} {
		r, _ := runCLI(t, b, nil, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want one with %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
