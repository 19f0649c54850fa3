package e2e

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// TestPrivateRoutes runs the router in private mode with xupfctl route and neigh: the
// kernel's default route toward the DN host is not read, so the uplink is dropped as
// no_route until a route is added; with the gateway unresolved the kernel forwards it; with a
// static neighbour the datapath does, also after a restart (the API's route and neighbour are
// kept); deleted, the route drops it again.
func TestPrivateRoutes(t *testing.T) {
	n3Net := netip.PrefixFrom(testbed.N3Addr, 24).Masked()
	e := newEnvConfig(t, func(c *config.Config) {
		c.Router.Mode = config.RouterPrivate
		// Toward the gNBs: on link, resolved by the kernel (no static neighbour).
		c.Router.Routes = []config.Route{{Prefix: n3Net, Interface: testbed.N3If}}
	}, sessQFI)
	payload := testbed.Payload("private routes")
	uplink := func(want int, why string) api.Stats {
		t.Helper()
		before := e.stats()
		if got := len(e.uplink(sessQFI, 10, payload, recvTimeout/5)); got != want {
			t.Errorf("%s: the DN host received %d of 10 uplink packets, want %d", why, got, want)
		}
		after := e.stats()
		for k, v := range before.Counters {
			after.Counters[k] -= v
		}
		for k, v := range before.Drops {
			after.Drops[k] -= v
		}
		return after
	}

	if st := uplink(0, "no route"); st.Drops["no_route"] != 10 {
		t.Errorf("without a route: drops %v, want 10 no_route", st.Drops)
	}
	reportProblems(t, "downlink, next hop resolved by the kernel",
		testbed.CheckDownlink(sessQFI, 10, payload, e.downlink(sessQFI, 10, payload)))

	dn := testbed.DNAddr.String()
	e.ctl(t, "route", "add", "0.0.0.0/0", "--via", dn, "--dev", testbed.N6If)
	if st := uplink(10, "gateway unresolved"); st.Counters["ul_kernel"] != 10 || st.Counters["fib_no_neigh"] != 10 {
		t.Errorf("gateway without a neighbour: counters %v, want 10 ul_kernel, 10 fib_no_neigh", st.Counters)
	}

	mac, err := e.topo.Run(e.ctx(), e.topo.DNNS, "cat", "/sys/class/net/"+testbed.DNIf+"/address")
	if err != nil {
		t.Fatal(err)
	}
	e.ctl(t, "neigh", "add", dn, "--dev", testbed.N6If, "--mac", strings.TrimSpace(mac))
	if st := uplink(10, "gateway resolved"); st.Counters["ul_tx"] != 10 {
		t.Errorf("gateway with a static neighbour: counters %v, want 10 ul_tx", st.Counters)
	}
	// The API's route and neighbour are kept across a restart.
	e.restart(t, e.daemon.Stop)
	if st := uplink(10, "after a restart"); st.Counters["ul_tx"] != 10 {
		t.Errorf("after a restart: counters %v, want 10 ul_tx", st.Counters)
	}
	var routes []api.Route
	e.ctlJSON(t, &routes, "route", "list")
	want := []api.Route{
		{Prefix: "0.0.0.0/0", Via: dn, Interface: testbed.N6If, Type: "unicast"},
		{Prefix: n3Net.String(), Interface: testbed.N3If, Type: "unicast"},
	}
	if len(routes) != 2 || routes[0] != want[0] || routes[1] != want[1] {
		t.Errorf("route list %+v, want %+v", routes, want)
	}
	// The running configuration holds them, as a file xupfd takes.
	shown, err := config.Parse([]byte(e.ctl(t, "config", "show")))
	if err != nil {
		t.Fatalf("xupfctl config show does not parse: %v", err)
	}
	wantRoutes := []config.Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Via: testbed.DNAddr, Interface: testbed.N6If},
		{Prefix: n3Net, Interface: testbed.N3If}}
	wantNeighbours := []config.Neighbour{{Address: testbed.DNAddr, Interface: testbed.N6If, MAC: strings.TrimSpace(mac)}}
	if r := shown.Router; r.Mode != config.RouterPrivate || !reflect.DeepEqual(r.Routes, wantRoutes) ||
		!reflect.DeepEqual(r.Neighbours, wantNeighbours) {
		t.Errorf("xupfctl config show: router %+v, want private with routes %+v and neighbours %+v", r, wantRoutes, wantNeighbours)
	}
	msg := e.xupfctlFails(t, "route", "add", "10.9.0.0/16", "--dev", "lo")
	if !strings.Contains(msg, `interface: "lo" is not one xupfd is attached to`) {
		t.Errorf("a route out of lo: %s", msg)
	}
	msg = e.xupfctlFails(t, "route", "add", "10.9.0.1/16", "--dev", testbed.N6If)
	if !strings.Contains(msg, "prefix: 10.9.0.1/16 has host bits set; use 10.9.0.0/16") {
		t.Errorf("a prefix with host bits: %s", msg)
	}

	e.ctl(t, "route", "del", "0.0.0.0/0")
	if st := uplink(0, "route deleted"); st.Drops["no_route"] != 10 {
		t.Errorf("after the deletion: drops %v, want 10 no_route", st.Drops)
	}
	// The API's deletions are kept too, of the configuration's route as of its own.
	e.ctl(t, "route", "del", n3Net.String())
	e.restart(t, e.daemon.Stop)
	routes = nil
	e.ctlJSON(t, &routes, "route", "list")
	if len(routes) != 0 {
		t.Errorf("route list after the deletions and a restart %+v, want none", routes)
	}
}

// TestMirrorRoutesAreTheKernels: in mirror mode (the default) route list shows the kernel's
// routes and route add is refused with what to do instead.
func TestMirrorRoutesAreTheKernels(t *testing.T) {
	e := newEnvWith(t)
	var routes []api.Route
	e.ctlJSON(t, &routes, "route", "list")
	def := api.Route{Prefix: "0.0.0.0/0", Via: testbed.DNAddr.String(), Interface: testbed.N6If, Type: "unicast"}
	found := false
	for _, r := range routes {
		found = found || r == def
	}
	if !found {
		t.Errorf("route list %+v lacks the kernel's default route %+v", routes, def)
	}
	msg := e.xupfctlFails(t, "route", "add", "10.9.0.0/16", "--dev", testbed.N6If)
	if !strings.Contains(msg, "router.mode: mirror") || !strings.Contains(msg, "ip route") {
		t.Errorf("route add in mirror mode: %s", msg)
	}
}
