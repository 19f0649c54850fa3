package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

// The fixture's flows (apitest.Flows) as JSON.
const (
	flowUDPJSON = `{"proto":"udp","src":"198.51.100.9:53","dst":"10.0.0.2:5353","in_interface":"eth1","out_interface":"eth0",
		"src_mac":"02:00:00:00:00:01","dst_mac":"02:00:00:00:00:02","vlan":"none","ttl_decrement":true,"mtu":1500,
		"packets":20,"bytes":2000,"first_seen":"2025-01-02T03:04:05Z","last_seen":"2025-01-02T03:05:05Z"}`
	flowUpJSON = `{"proto":"tcp","src":"10.0.0.1:40000","dst":"198.51.100.9:443","in_interface":"eth0","out_interface":"eth1",
		"src_mac":"02:00:00:00:00:01","dst_mac":"02:00:00:00:00:02","vlan":"push","out_vlan":20,"dscp":46,"ttl_decrement":true,
		"mtu":1500,"packets":5,"bytes":500,"first_seen":"2025-01-02T03:04:05Z","last_seen":"2025-01-02T03:05:05Z"}`
	flowDownJSON = `{"proto":"tcp","src":"198.51.100.9:443","dst":"10.0.0.1:40000","in_interface":"eth1","out_interface":"eth0",
		"src_mac":"02:00:00:00:00:01","dst_mac":"02:00:00:00:00:02","vlan":"none","ttl_decrement":true,"mtu":1500,
		"packets":90,"bytes":9000,"first_seen":"2025-01-02T03:04:05Z","last_seen":"2025-01-02T03:05:05Z"}`
)

func TestFlowsHandler(t *testing.T) {
	off := apitest.NewBackend()
	off.FlowCacheOff = true
	const offBody = `{"error":"the flow cache is off (flow_cache.max_flows is 0)"}`
	checkHandler(t, []handlerCase{
		{name: "every flow, most bytes first", method: "GET", path: "/api/v1/flows", wantCode: 200,
			wantBody: "[" + flowDownJSON + "," + flowUDPJSON + "," + flowUpJSON + "]"},
		{name: "by address", method: "GET", path: "/api/v1/flows?address=10.0.0.1", wantCode: 200,
			wantBody: "[" + flowDownJSON + "," + flowUpJSON + "]"},
		{name: "by port and interface", method: "GET", path: "/api/v1/flows?port=443&interface=eth0", wantCode: 200,
			wantBody: "[" + flowDownJSON + "," + flowUpJSON + "]"},
		{name: "by protocol", method: "GET", path: "/api/v1/flows?proto=udp", wantCode: 200, wantBody: "[" + flowUDPJSON + "]"},
		{name: "by ends", method: "GET", path: "/api/v1/flows?src=10.0.0.1:40000&dst=198.51.100.9:443", wantCode: 200,
			wantBody: "[" + flowUpJSON + "]"},
		{name: "none selected", method: "GET", path: "/api/v1/flows?address=192.0.2.1", wantCode: 200, wantBody: "[]"},
		{name: "bad address", method: "GET", path: "/api/v1/flows?address=10.0.0", wantCode: 400,
			wantBody: `{"error":"address: \"10.0.0\" is not an IPv4 address, e.g. 192.0.2.1"}`},
		{name: "bad port", method: "GET", path: "/api/v1/flows?port=0", wantCode: 400,
			wantBody: `{"error":"port: \"0\" is not a port, 1 to 65535"}`},
		{name: "bad protocol", method: "GET", path: "/api/v1/flows?proto=icmp", wantCode: 400,
			wantBody: `{"error":"proto: \"icmp\" is not one the flow cache holds; use tcp or udp"}`},
		{name: "bad end", method: "GET", path: "/api/v1/flows?src=10.0.0.1", wantCode: 400,
			wantBody: `{"error":"src: \"10.0.0.1\" is not an IPv4 address and port, e.g. 192.0.2.1:443"}`},
		{name: "unknown parameter", method: "GET", path: "/api/v1/flows?host=a", wantCode: 400,
			wantBody: `{"error":"unknown query parameter \"host\"; use address, port, interface, proto, src or dst"}`},
		{name: "a parameter twice", method: "GET", path: "/api/v1/flows?port=1&port=2", wantCode: 400,
			wantBody: `{"error":"query parameter port: give it once"}`},
		{name: "cache off", backend: off, method: "GET", path: "/api/v1/flows", wantCode: 409, wantBody: offBody},
		{name: "flush selected", method: "DELETE", path: "/api/v1/flows?proto=tcp", wantCode: 200, wantBody: `{"flushed":2}`},
		{name: "flush all", method: "DELETE", path: "/api/v1/flows", wantCode: 200, wantBody: `{"flushed":3}`},
		{name: "flush with a bad filter", method: "DELETE", path: "/api/v1/flows?port=x", wantCode: 400,
			wantBody: `{"error":"port: \"x\" is not a port, 1 to 65535"}`},
		{name: "flush with the cache off", backend: off, method: "DELETE", path: "/api/v1/flows", wantCode: 409, wantBody: offBody},
	})
}

// TestFlowFilterQuery: a filter survives the trip through query parameters.
func TestFlowFilterQuery(t *testing.T) {
	f, err := api.ParseFlowFilter(map[string][]string{"address": {"10.0.0.1"}, "port": {"443"}, "interface": {"eth0"},
		"proto": {"tcp"}, "src": {"10.0.0.1:40000"}, "dst": {"198.51.100.9:443"}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := api.ParseFlowFilter(f.Query())
	if err != nil || back != f {
		t.Errorf("through Query: %+v (err %v), want %+v", back, err, f)
	}
	if q := (api.FlowFilter{}).Query(); len(q) != 0 {
		t.Errorf("the zero filter's query = %v, want none", q)
	}
}

func TestFlowCacheMetrics(t *testing.T) {
	b := apitest.NewBackend()
	b.StatsData.FlowCache = &api.FlowCacheStats{Entries: 3, Evicted: map[string]uint64{"aged": 7, "flushed": 1, "invalidated": 2}}
	rec := httptest.NewRecorder()
	api.NewHandler(b, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status code = %d, want 200; body %s", rec.Code, rec.Body)
	}
	for _, want := range []string{
		"# TYPE xupf_flow_cache_entries gauge", "xupf_flow_cache_entries 3",
		"# TYPE xupf_flow_cache_evictions_total counter", `xupf_flow_cache_evictions_total{reason="aged"} 7`,
		`xupf_flow_cache_evictions_total{reason="invalidated"} 2`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
