package returndev

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inNS runs fn on a thread in a new network namespace, as xupfd runs these functions in its own.
func inNS(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread ends in the new namespace: never unlocked, the runtime ends it.
		runtime.LockOSThread()
		ns, err := netns.New()
		if err != nil {
			t.Errorf("new network namespace: %v", err)
			return
		}
		defer ns.Close()
		fn()
	}()
	<-done
}

// routesTo lists the main table's IPv4 routes to p.
func routesTo(t *testing.T, p netip.Prefix) []netlink.Route {
	t.Helper()
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: ipNet(p), Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Error(err)
	}
	return rs
}

var pool = netip.MustParsePrefix("10.45.128.0/20")

// TestEnsureRecordRemove: Ensure records the device's name and routes nothing, Route routes
// the pools into it, Remove deletes the device with its routes and Forget the record.
func TestEnsureRecordRemove(t *testing.T) {
	dir := t.TempDir()
	inNS(t, func() {
		if err := Ensure("xr", dir); err != nil {
			t.Error(err)
			return
		}
		if name, err := Made(dir); name != "xr" || err != nil {
			t.Errorf("Made = %q, %v after Ensure; want xr", name, err)
		}
		if rs := routesTo(t, pool); len(rs) != 0 {
			t.Errorf("routes to %s after Ensure, before Route: %v; want none", pool, rs)
		}
		if err := Route("xr", []netip.Prefix{pool}); err != nil {
			t.Error(err)
			return
		}
		if err := Route("xr", []netip.Prefix{pool}); err != nil { // a restart's: its own route stays
			t.Errorf("Route again: %v", err)
		}
		dev, _ := netlink.LinkByName("xr")
		if rs := routesTo(t, pool); len(rs) != 1 || dev == nil || rs[0].LinkIndex != dev.Attrs().Index {
			t.Errorf("routes to %s: %v; want one into xr", pool, rs)
		}
		if err := errors.Join(Remove("xr"), Forget(dir)); err != nil {
			t.Error(err)
		}
		for _, n := range []string{"xr", Peer("xr")} {
			if _, err := netlink.LinkByName(n); err == nil {
				t.Errorf("%s is left after Remove", n)
			}
		}
		if rs := routesTo(t, pool); len(rs) != 0 {
			t.Errorf("routes to %s after Remove: %v", pool, rs)
		}
		if name, err := Made(dir); name != "" || err != nil {
			t.Errorf("Made = %q, %v after Remove; want none", name, err)
		}
		if err := errors.Join(Remove("xr"), Forget(dir)); err != nil {
			t.Errorf("Remove and Forget of a device that is gone: %v", err)
		}
	})
}

// TestRouteRefusesForeign: a pool the main table already routes elsewhere (through another
// interface, or a blackhole, at any metric) is refused with what to do, and that route stays;
// routes to a wider or narrower prefix do not stop Route.
func TestRouteRefusesForeign(t *testing.T) {
	inNS(t, func() {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "op"}, PeerName: "op1"}); err != nil {
			t.Error(err)
			return
		}
		op, _ := netlink.LinkByName("op")
		if err := netlink.LinkSetUp(op); err != nil {
			t.Error(err)
			return
		}
		if err := Ensure("xr", t.TempDir()); err != nil {
			t.Error(err)
			return
		}
		for _, r := range []netlink.Route{
			{LinkIndex: op.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("10.0.0.0/8")), Scope: netlink.SCOPE_LINK},
			{LinkIndex: op.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("10.45.128.0/24")), Scope: netlink.SCOPE_LINK},
		} {
			if err := netlink.RouteAdd(&r); err != nil {
				t.Error(err)
				return
			}
		}
		if err := Route("xr", []netip.Prefix{pool}); err != nil {
			t.Errorf("Route with routes to a wider and a narrower prefix elsewhere: %v", err)
		}
		if err := netlink.RouteDel(&netlink.Route{LinkIndex: mustIndex(t, "xr"), Dst: ipNet(pool), Scope: netlink.SCOPE_LINK}); err != nil {
			t.Error(err)
		}
		for _, c := range []struct {
			name  string
			route netlink.Route
		}{
			{"another interface", netlink.Route{LinkIndex: op.Attrs().Index, Dst: ipNet(pool), Scope: netlink.SCOPE_LINK}},
			{"another interface, metric 100", netlink.Route{LinkIndex: op.Attrs().Index, Dst: ipNet(pool), Scope: netlink.SCOPE_LINK, Priority: 100}},
			{"a blackhole", netlink.Route{Dst: ipNet(pool), Type: unix.RTN_BLACKHOLE}},
		} {
			if err := netlink.RouteAdd(&c.route); err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			err := Route("xr", []netip.Prefix{pool})
			if err == nil || !strings.Contains(err.Error(), "ue_pools "+pool.String()) || !strings.Contains(err.Error(), "ip route del") {
				t.Errorf("%s: Route: %v; want a refusal naming the pool and what to do", c.name, err)
			}
			if rs := routesTo(t, pool); len(rs) != 1 || rs[0].LinkIndex != c.route.LinkIndex || rs[0].Priority != c.route.Priority {
				t.Errorf("%s: routes to %s after the refusal: %v; want the operator's alone", c.name, pool, rs)
			}
			if err := netlink.RouteDel(&c.route); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	})
}

func mustIndex(t *testing.T, name string) int {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Error(err)
		return 0
	}
	return l.Attrs().Index
}

// TestMadeDamagedRecord: a record naming what no Ensure could have made is an error saying
// what to do, not a name to build paths from.
func TestMadeDamagedRecord(t *testing.T) {
	for _, rec := range []string{"../../../etc/x", "a:b", "twelve-chars", "..", "a b"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, recordFile), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		name, err := Made(dir)
		if err == nil || name != "" || !strings.Contains(err.Error(), "delete the device") {
			t.Errorf("record %q: Made = %q, %v; want an error saying what to do", rec, name, err)
		}
	}
	dir := t.TempDir()
	if name, err := Made(dir); name != "" || err != nil {
		t.Errorf("no record: Made = %q, %v; want none", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, recordFile), []byte("xupfret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if name, err := Made(dir); name != "xupfret" || err != nil {
		t.Errorf("Made = %q, %v; want xupfret", name, err)
	}
}
