package main

import (
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

// TestFlows: flows list, show and flush reach the API with what their arguments say, print
// what it answers, and their usage errors say what to fix.
func TestFlows(t *testing.T) {
	b := apitest.NewBackend()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"flows", "list"}, "" +
			"PROTO  SRC               DST               IN    OUT   VLAN     PACKETS  BYTES\n" +
			"tcp    198.51.100.9:443  10.0.0.1:40000    eth1  eth0  -        90       9000\n" +
			"udp    198.51.100.9:53   10.0.0.2:5353     eth1  eth0  -        20       2000\n" +
			"tcp    10.0.0.1:40000    198.51.100.9:443  eth0  eth1  push 20  5        500\n"},
		{[]string{"flows", "list", "--proto", "udp"}, "" +
			"PROTO  SRC              DST            IN    OUT   VLAN  PACKETS  BYTES\n" +
			"udp    198.51.100.9:53  10.0.0.2:5353  eth1  eth0  -     20       2000\n"},
		{[]string{"flows", "show", "10.0.0.1:40000", "198.51.100.9:443"}, "" +
			"proto       tcp\n" +
			"src         10.0.0.1:40000\n" +
			"dst         198.51.100.9:443\n" +
			"in          eth0\n" +
			"out         eth1\n" +
			"src mac     02:00:00:00:00:01\n" +
			"dst mac     02:00:00:00:00:02\n" +
			"vlan        push 20\n" +
			"ttl         decremented (routed)\n" +
			"dscp        46\n" +
			"mtu         1500\n" +
			"packets     5\n" +
			"bytes       500\n" +
			"first seen  2025-01-02T03:04:05Z\n" +
			"last seen   2025-01-02T03:05:05Z\n"},
		{[]string{"flows", "flush", "--address", "10.0.0.1", "--port", "443"}, "2 flows flushed\n"},
		{[]string{"flows", "flush", "--all"}, "1 flows flushed\n"},
	} {
		r, _ := runCLI(t, b, nil, c.args...)
		if r.code != 0 || r.stdout != c.want {
			t.Errorf("%v: exit %d, output\n%s\nwant\n%s\nstderr %q", c.args, r.code, r.stdout, c.want, r.stderr)
		}
	}
	if len(b.FlowsData) != 0 {
		t.Errorf("flows left after flush --all: %+v", b.FlowsData)
	}
	off := apitest.NewBackend()
	off.FlowCacheOff = true
	for _, c := range []struct {
		b    api.Backend
		args []string
		want string
	}{
		{b, []string{"flows", "flush"}, "give either --all or filters"},
		{b, []string{"flows", "flush", "--all", "--port", "53"}, "give either --all or filters"},
		{b, []string{"flows", "list", "--port", "http"}, `port: "http" is not a port, 1 to 65535`},
		{b, []string{"flows", "list", "--proto", "icmp"}, "use tcp or udp"},
		{b, []string{"flows", "show", "10.0.0.1"}, "give the flow's two ends"},
		{b, []string{"flows", "show", "10.0.0.1:1", "10.0.0.2:2"}, "no cached flow from 10.0.0.1:1 to 10.0.0.2:2"},
		{b, []string{"flows", "drop"}, `unknown command "drop"`},
		{off, []string{"flows", "list"}, "the flow cache is off (flow_cache.max_flows is 0)"},
	} {
		r, _ := runCLI(t, c.b, nil, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want one with %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// TestStatsFlowCache: with the flow cache on, stats end with its entries and removals.
func TestStatsFlowCache(t *testing.T) {
	b := apitest.NewBackend()
	b.StatsData.FlowCache = &api.FlowCacheStats{Entries: 3, Evicted: map[string]uint64{"aged": 7, "flushed": 1, "invalidated": 2}}
	r, _ := runCLI(t, b, nil, "stats")
	want := "FLOW CACHE           VALUE\n" +
		"entries              3\n" +
		"evicted_aged         7\n" +
		"evicted_flushed      1\n" +
		"evicted_invalidated  2\n"
	if r.code != 0 || !strings.HasSuffix(r.stdout, want) {
		t.Errorf("exit %d, output\n%s\nwant it to end with\n%s", r.code, r.stdout, want)
	}
}
