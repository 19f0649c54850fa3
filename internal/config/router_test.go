package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// TestRouter: the router section, private routes and neighbours, and every mistake named.
func TestRouter(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "router:\n  mode: private\n  max_routes: 1000\n  max_route_chunks: 16\n  max_nexthops: 100\n" +
		"  routes:\n" +
		"    - {prefix: 0.0.0.0/0, via: 203.0.113.1, interface: eth0, mtu: 1400}\n" +
		"    - {prefix: 198.51.100.0/24, type: blackhole}\n" +
		"  neighbours:\n" +
		"    - {address: 203.0.113.1, interface: eth0, mac: \"02:00:00:00:02:02\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Router{Mode: RouterPrivate, MaxRoutes: 1000, MaxRouteChunks: 16, MaxNexthops: 100,
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("203.0.113.1"), Interface: "eth0", MTU: 1400},
			{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Type: "blackhole"},
		},
		Neighbours: []Neighbour{{Address: netip.MustParseAddr("203.0.113.1"), Interface: "eth0", MAC: "02:00:00:00:02:02"}},
	}
	if !reflect.DeepEqual(cfg.Router, want) {
		t.Errorf("router %+v, want %+v", cfg.Router, want)
	}
	for _, c := range []struct{ section, want string }{
		{"mode: kernel", `router.mode: "kernel" is not a mode`},
		{"max_routes: 0", "router.max_routes:"},
		{"max_route_chunks: 0", "router.max_route_chunks:"},
		{"max_nexthops: 1", "router.max_nexthops:"},
		{"routes: [{prefix: 0.0.0.0/0, via: 203.0.113.1, interface: eth0}]", "only for router.mode: private"},
		{"mode: private\n  routes: [{prefix: 10.0.0.0/33, interface: eth0}]", `router.routes[0].prefix: "10.0.0.0/33" is not a prefix`},
		{"mode: private\n  routes: [{prefix: 10.0.0.0/8, interface: eth9}]", `router.routes[0].interface: "eth9" is not one of interfaces[].name`},
		{"mode: private\n  routes: [{prefix: 10.0.0.0/8, via: gw, interface: eth0}]", `router.routes[0].via: "gw" is not an IP address`},
		{"mode: private\n  routes: [{prefix: 10.0.0.0/8, interface: eth0, mtu: 20}]", "router.routes[0].mtu:"},
		{"mode: private\n  routes: [{prefix: 10.0.0.0/8, interface: eth0}, {prefix: 10.0.0.0/8, type: blackhole}]",
			"router.routes[1].prefix: 10.0.0.0/8 is router.routes[0]'s too"},
		{"mode: private\n  neighbours: [{address: 10.0.0.1, interface: eth0, mac: nope}]", `router.neighbours[0].mac: "nope" is not an Ethernet address`},
		{"mode: private\n  neighbours: [{address: 10.0.0.1, mac: \"02:00:00:00:00:01\"}]", "router.neighbours[0].interface: missing"},
		{"mode: private\n  neighbours: [{interface: eth0, mac: \"02:00:00:00:00:01\"}]", "router.neighbours[0].address: missing"},
		{"mode: private\n  routes: [{prefix: 10.0.0.0/8, gateway: 10.0.0.1}]", `unknown key "gateway" in a router.routes entry`},
	} {
		_, err := Parse([]byte(minimal + "router:\n  " + c.section + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.section, err, c.want)
		}
	}
}
