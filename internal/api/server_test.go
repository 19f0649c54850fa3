package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

const session2JSON = `{"id":2,"ue_ipv4":"10.45.0.2","uplink_teid":4096,"gnb_ipv4":"192.0.2.10",
	"downlink_teid":4097,"qfi":9,"gtpu_address":"192.0.2.1",
	"usage":{"uplink":{"packets":1042,"bytes":104200},"downlink":{"packets":2088,"bytes":2088000}}}`

// session9JSON has no "qfi": 0 is omitted, meaning no PDU Session Container.
const session9JSON = `{"id":9,"ue_ipv4":"10.45.0.9","uplink_teid":8192,"gnb_ipv4":"192.0.2.10",
	"downlink_teid":12288,"gtpu_address":"192.0.2.1",
	"usage":{"uplink":{"packets":5,"bytes":500},"downlink":{"packets":6,"bytes":6000}}}`

// pfcp1JSON is PFCP session 0x100000001 of the fixture: its downlink forwarded to the gNB.
// The rule maps are objects keyed by the rule ids; the usage has one entry per PDR.
const pfcp1JSON = `{"seid":4294967297,"cp_seid":32,"cp_address":"198.51.100.7","peer":"smf1.5gc.example",
	"established":"2025-01-02T03:05:00Z",
	"pdrs":{
		"1":{"id":1,"precedence":255,"source_interface":0,
			"f_teid":{"teid":16385,"ipv4":"192.0.2.1","chosen":true,"choose_id":1},
			"network_instance":"internet","qfi":9,"outer_header_removal":6,"far_id":1,"qer_ids":[1],"urr_ids":[1]},
		"2":{"id":2,"precedence":65535,"source_interface":1,"ue_ipv4":"10.45.0.20","far_id":2,"qer_ids":[1],"urr_ids":[1]},
		"3":{"id":3,"precedence":10,"source_interface":1,"ue_ipv4":"10.45.0.20",
			"sdf_filters":[{"flow_description":"permit out 17 from any to assigned 5060"}],"far_id":2,"qer_ids":[2]}},
	"fars":{
		"1":{"id":1,"apply_action":2,"destination_interface":1,"network_instance":"internet"},
		"2":{"id":2,"apply_action":2,"destination_interface":0,
			"outer_header_creation":{"description":256,"teid":20481,"ipv4":"192.0.2.10"},"transport_level_marking":47356}},
	"qers":{
		"1":{"id":1,"gate_ul":0,"gate_dl":0,"mbr_ul_kbps":100000,"mbr_dl_kbps":200000,"qfi":9},
		"2":{"id":2,"gate_ul":1,"gate_dl":0,"mbr_ul_kbps":5000,"mbr_dl_kbps":10000,"gbr_ul_kbps":1000,"gbr_dl_kbps":2000,"qfi":5}},
	"urrs":{
		"1":{"id":1,"measurement_method":3,"reporting_triggers":"AQA=","volume_threshold":1000000,
			"volume_quota":10000000,"time_threshold":60,"time_quota":3600}},
	"usage":[{"pdr_id":1,"packets":10,"bytes":1000},{"pdr_id":2,"packets":20,"bytes":20000},{"pdr_id":3,"packets":2,"bytes":400}]}`

// pfcp2JSON is PFCP session 0x100000002 of the fixture: its downlink buffered, with a BAR.
const pfcp2JSON = `{"seid":4294967298,"cp_seid":33,"cp_address":"198.51.100.7","peer":"smf1.5gc.example",
	"established":"2025-01-02T03:05:00Z",
	"pdrs":{
		"1":{"id":1,"precedence":255,"source_interface":0,
			"f_teid":{"teid":16386,"ipv4":"192.0.2.1","chosen":true,"choose_id":1},
			"network_instance":"internet","qfi":9,"outer_header_removal":6,"far_id":1,"qer_ids":[1],"urr_ids":[1]},
		"2":{"id":2,"precedence":65535,"source_interface":1,"ue_ipv4":"10.45.0.21","far_id":2,"qer_ids":[1],"urr_ids":[1]},
		"3":{"id":3,"precedence":10,"source_interface":1,"ue_ipv4":"10.45.0.21",
			"sdf_filters":[{"flow_description":"permit out 17 from any to assigned 5060"}],"far_id":2,"qer_ids":[2]}},
	"fars":{
		"1":{"id":1,"apply_action":2,"destination_interface":1,"network_instance":"internet"},
		"2":{"id":2,"apply_action":12,"destination_interface":0,"bar_id":1}},
	"qers":{
		"1":{"id":1,"gate_ul":0,"gate_dl":0,"mbr_ul_kbps":100000,"mbr_dl_kbps":200000,"qfi":9},
		"2":{"id":2,"gate_ul":1,"gate_dl":0,"mbr_ul_kbps":5000,"mbr_dl_kbps":10000,"gbr_ul_kbps":1000,"gbr_dl_kbps":2000,"qfi":5}},
	"urrs":{
		"1":{"id":1,"measurement_method":3,"reporting_triggers":"AQA=","volume_threshold":1000000,
			"volume_quota":10000000,"time_threshold":60,"time_quota":3600}},
	"bars":{"1":{"id":1,"downlink_data_notification_delay":2,"suggested_buffering_packets":10}},
	"usage":[{"pdr_id":1,"packets":3,"bytes":300},{"pdr_id":2,"packets":0,"bytes":0},{"pdr_id":3,"packets":2,"bytes":400}]}`

func TestHandler(t *testing.T) {
	failing := apitest.NewBackend()
	failing.Err = errors.New("reading session map: operation not permitted")

	tests := []handlerCase{
		{
			name: "status", method: "GET", path: "/api/v1/status", wantCode: 200,
			wantBody: `{"version":"v0.1.0","started_at":"2025-01-02T03:04:05Z","uptime_seconds":3725.5,
				"interfaces":[{"name":"eth0","ifindex":2,"roles":["n3"],"xdp_mode":"native"},
				              {"name":"eth1","ifindex":3,"roles":["n6"],"xdp_mode":"generic"}],
				"gtpu_addresses":["192.0.2.1"],"pfcp_address":"192.0.2.1:8805","pfcp_associations":2,
				"sessions":4,"max_sessions":65536,"bpffs_path":"/sys/fs/bpf/xupf",
				"qos_algorithm":"token_bucket","qos_clock":"ktime"}`,
		},
		{
			name: "sessions sorted by id", method: "GET", path: "/api/v1/sessions", wantCode: 200,
			wantBody: "[" + session2JSON + "," + session9JSON + "]",
		},
		{
			name: "no sessions is an empty array", backend: &apitest.Backend{},
			method: "GET", path: "/api/v1/sessions", wantCode: 200, wantBody: `[]`,
		},
		{
			name: "one session", method: "GET", path: "/api/v1/sessions/2", wantCode: 200,
			wantBody: session2JSON,
		},
		{
			name: "session id not a number", method: "GET", path: "/api/v1/sessions/abc", wantCode: 400,
			wantBody: `{"error":"session id \"abc\" is not a number; use the id shown by ` + "`xupfctl session list`" + `"}`,
		},
		{
			name: "negative session id", method: "GET", path: "/api/v1/sessions/-1", wantCode: 400,
			wantBody: `{"error":"session id \"-1\" is not a number; use the id shown by ` + "`xupfctl session list`" + `"}`,
		},
		{
			name: "unknown session", method: "GET", path: "/api/v1/sessions/7", wantCode: 404,
			wantBody: `{"error":"session 7 not found"}`,
		},
		{
			name: "stats", method: "GET", path: "/api/v1/stats", wantCode: 200,
			wantBody: `{"counters":{"ul_rx":1042,"dl_tx":2088,"pass":0},"drops":{"unknown_teid":2,"malformed_gtp":0},
				"pfcp_drops":{"undecodable_header":0,"amplification_limit":12,"unhandled_type":0},
				"pfcp_reports":{"sent":3,"accepted":2,"timed_out":1},
				"gtpu_signalling":{"error_indication_reported":1,"end_marker_sent":4},
				"buffer":{"buffered":12,"flushed":10,"discarded_overflow":2}}`,
		},
		{
			name: "pfcp associations sorted by node id", method: "GET", path: "/api/v1/pfcp/associations", wantCode: 200,
			wantBody: `[{"node_id":"198.51.100.5","address":"198.51.100.5:8805","recovery_time_stamp":"2025-01-01T00:00:00Z",
				"established":"2025-01-02T03:05:00Z","missed_heartbeats":2},
				{"node_id":"smf1.5gc.example","address":"198.51.100.7:8805","recovery_time_stamp":"2025-01-02T02:00:00Z",
				"established":"2025-01-02T03:04:10Z","missed_heartbeats":0}]`,
		},
		{
			name: "no pfcp associations is an empty array", backend: &apitest.Backend{},
			method: "GET", path: "/api/v1/pfcp/associations", wantCode: 200, wantBody: `[]`,
		},
		{
			// Associations cannot fail: a backend whose other reads fail still lists them.
			name: "pfcp associations with a failing backend", backend: failing,
			method: "GET", path: "/api/v1/pfcp/associations", wantCode: 200,
			wantBody: `[{"node_id":"198.51.100.5","address":"198.51.100.5:8805","recovery_time_stamp":"2025-01-01T00:00:00Z",
				"established":"2025-01-02T03:05:00Z","missed_heartbeats":2},
				{"node_id":"smf1.5gc.example","address":"198.51.100.7:8805","recovery_time_stamp":"2025-01-02T02:00:00Z",
				"established":"2025-01-02T03:04:10Z","missed_heartbeats":0}]`,
		},
		{
			name: "wrong method on pfcp associations", method: "DELETE", path: "/api/v1/pfcp/associations", wantCode: 405,
			wantBody:  `{"error":"method DELETE is not allowed on /api/v1/pfcp/associations; use GET"}`,
			wantAllow: "GET, HEAD",
		},
		{
			name: "pfcp sessions sorted by seid", method: "GET", path: "/api/v1/pfcp/sessions", wantCode: 200,
			wantBody: "[" + pfcp1JSON + "," + pfcp2JSON + "]",
		},
		{
			name: "no pfcp sessions is an empty array", backend: &apitest.Backend{},
			method: "GET", path: "/api/v1/pfcp/sessions", wantCode: 200, wantBody: `[]`,
		},
		{
			name: "one pfcp session", method: "GET", path: "/api/v1/pfcp/sessions/4294967298", wantCode: 200,
			wantBody: pfcp2JSON,
		},
		{
			name: "pfcp seid in hex", method: "GET", path: "/api/v1/pfcp/sessions/0x100000001", wantCode: 400,
			wantBody: `{"error":"PFCP SEID \"0x100000001\" is not a decimal number; use the seid shown by ` + "`xupfctl session list -o json`" + `"}`,
		},
		{
			name: "pfcp seid not a number", method: "GET", path: "/api/v1/pfcp/sessions/abc", wantCode: 400,
			wantBody: `{"error":"PFCP SEID \"abc\" is not a decimal number; use the seid shown by ` + "`xupfctl session list -o json`" + `"}`,
		},
		{
			name: "pfcp seid too large", method: "GET", path: "/api/v1/pfcp/sessions/18446744073709551616", wantCode: 400,
			wantBody: `{"error":"PFCP SEID \"18446744073709551616\" is not a decimal number; use the seid shown by ` + "`xupfctl session list -o json`" + `"}`,
		},
		{
			name: "unknown pfcp session", method: "GET", path: "/api/v1/pfcp/sessions/4294967299", wantCode: 404,
			wantBody: `{"error":"PFCP session 4294967299 not found"}`,
		},
		{
			// A static session's id is not a PFCP SEID.
			name: "static session id as a pfcp seid", method: "GET", path: "/api/v1/pfcp/sessions/2", wantCode: 404,
			wantBody: `{"error":"PFCP session 2 not found"}`,
		},
		{
			name: "backend error on pfcp sessions", backend: failing, method: "GET", path: "/api/v1/pfcp/sessions", wantCode: 500,
			wantBody: `{"error":"reading session map: operation not permitted"}`,
		},
		{
			name: "backend error on one pfcp session", backend: failing, method: "GET", path: "/api/v1/pfcp/sessions/4294967297", wantCode: 500,
			wantBody: `{"error":"reading session map: operation not permitted"}`,
		},
		{
			name: "wrong method on a pfcp session", method: "DELETE", path: "/api/v1/pfcp/sessions/4294967297", wantCode: 405,
			wantBody:  `{"error":"method DELETE is not allowed on /api/v1/pfcp/sessions/4294967297; use GET"}`,
			wantAllow: "GET, HEAD",
		},
		{
			name: "wrong method", method: "POST", path: "/api/v1/status", wantCode: 405,
			wantBody:  `{"error":"method POST is not allowed on /api/v1/status; use GET"}`,
			wantAllow: "GET, HEAD",
		},
		{
			name: "wrong method on a pattern with a wildcard", method: "DELETE", path: "/api/v1/sessions/2", wantCode: 405,
			wantBody:  `{"error":"method DELETE is not allowed on /api/v1/sessions/2; use GET"}`,
			wantAllow: "GET, HEAD",
		},
		{
			name: "unknown path", method: "GET", path: "/api/v2/status", wantCode: 404,
			wantBody: `{"error":"no endpoint at /api/v2/status; the API is under /api/v1 (see api/openapi.yaml)"}`,
		},
		{
			name: "trailing slash is not a session id", method: "GET", path: "/api/v1/sessions/", wantCode: 404,
			wantBody: `{"error":"no endpoint at /api/v1/sessions/; the API is under /api/v1 (see api/openapi.yaml)"}`,
		},
		{
			name: "backend error on sessions", backend: failing, method: "GET", path: "/api/v1/sessions", wantCode: 500,
			wantBody: `{"error":"reading session map: operation not permitted"}`,
		},
		{
			name: "backend error on one session", backend: failing, method: "GET", path: "/api/v1/sessions/2", wantCode: 500,
			wantBody: `{"error":"reading session map: operation not permitted"}`,
		},
		{
			name: "backend error on stats", backend: failing, method: "GET", path: "/api/v1/stats", wantCode: 500,
			wantBody: `{"error":"reading session map: operation not permitted"}`,
		},
	}
	checkHandler(t, tests)
}

// handlerCase is one request to the handler and what must come back.
type handlerCase struct {
	name         string
	backend      *apitest.Backend // nil: a fresh apitest.NewBackend()
	method, path string
	body         string
	wantCode     int
	wantBody     string // JSON, compared structurally; "" for no body
	wantAllow    string
	wantLocation string
	wantClasses  []uint32 // the backend's class ids afterwards, in its order; nil to skip
	// wantContracts is the backend's contracts afterwards, in its order; nil to skip.
	wantContracts []api.ContractInfo
}

// checkHandler sends every case's request through NewHandler and checks the answer.
func checkHandler(t *testing.T, tests []handlerCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.backend
			if b == nil {
				b = apitest.NewBackend()
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.method != http.MethodGet {
				req.Header.Set("Content-Type", "application/json")
			}
			api.NewHandler(b, nil).ServeHTTP(rec, req)

			if rec.Code != tt.wantCode {
				t.Errorf("status code = %d, want %d; body %s", rec.Code, tt.wantCode, rec.Body)
			}
			if allow := rec.Header().Get("Allow"); allow != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", allow, tt.wantAllow)
			}
			if loc := rec.Header().Get("Location"); loc != tt.wantLocation {
				t.Errorf("Location = %q, want %q", loc, tt.wantLocation)
			}
			if tt.wantBody == "" {
				if rec.Body.Len() != 0 {
					t.Errorf("body = %q, want none", rec.Body)
				}
			} else {
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", ct)
				}
				assertJSONEqual(t, rec.Body.Bytes(), tt.wantBody)
			}
			if tt.wantClasses != nil {
				var ids []uint32
				for _, c := range b.ClassesData {
					ids = append(ids, c.ID)
				}
				if !reflect.DeepEqual(ids, tt.wantClasses) {
					t.Errorf("backend classes = %v, want %v", ids, tt.wantClasses)
				}
			}
			if tt.wantContracts != nil && !reflect.DeepEqual(b.ContractsData, tt.wantContracts) {
				t.Errorf("backend contracts = %+v, want %+v", b.ContractsData, tt.wantContracts)
			}
		})
	}
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad test: want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body mismatch\n got: %s\nwant: %s", bytes.TrimSpace(got), want)
	}
}

func TestMetrics(t *testing.T) {
	rec := httptest.NewRecorder()
	api.NewHandler(apitest.NewBackend(), nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status code = %d, want 200; body %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
	body := rec.Body.String()
	for _, want := range []string{
		"# TYPE xupf_datapath_packets_total counter",
		`xupf_datapath_packets_total{counter="ul_rx"} 1042`,
		`xupf_datapath_packets_total{counter="dl_tx"} 2088`,
		`xupf_datapath_packets_total{counter="pass"} 0`,
		"# TYPE xupf_datapath_drops_total counter",
		`xupf_datapath_drops_total{reason="unknown_teid"} 2`,
		`xupf_datapath_drops_total{reason="malformed_gtp"} 0`,
		"# TYPE xupf_pfcp_drops_total counter",
		`xupf_pfcp_drops_total{reason="amplification_limit"} 12`,
		"# TYPE xupf_pfcp_reports_total counter",
		`xupf_pfcp_reports_total{outcome="timed_out"} 1`,
		"# TYPE xupf_gtpu_signalling_total counter",
		`xupf_gtpu_signalling_total{event="end_marker_sent"} 4`,
		"# TYPE xupf_buffer_packets_total counter",
		`xupf_buffer_packets_total{outcome="discarded_overflow"} 2`,
		"# TYPE xupf_sessions gauge",
		"xupf_sessions 4",
		"# TYPE xupf_pfcp_associations gauge",
		"xupf_pfcp_associations 2",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack line %q; got:\n%s", want, body)
		}
	}
	// Only this backend's metrics: a private registry, no Go runtime or process collectors.
	if strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics include the global registry's collectors:\n%s", body)
	}
}

func TestMetricsFollowBackend(t *testing.T) {
	// Values are read at scrape time, not cached at construction.
	b := apitest.NewBackend()
	h := api.NewHandler(b, nil)
	b.StatsData.Counters["ul_rx"] = 5000
	b.StatusData.Sessions = 3
	b.StatusData.PFCPAssociations = 0
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`xupf_datapath_packets_total{counter="ul_rx"} 5000`, "xupf_sessions 3", "xupf_pfcp_associations 0"} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("metrics lack line %q; got:\n%s", want, rec.Body)
		}
	}
}

func TestMetricsStatsError(t *testing.T) {
	b := apitest.NewBackend()
	b.Err = errors.New("map lookup failed")
	var logs bytes.Buffer
	h := api.NewHandler(b, slog.New(slog.NewTextHandler(&logs, nil)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status code = %d, want 500; body %s", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), "map lookup failed") {
		t.Errorf("body does not name the cause: %s", rec.Body)
	}
	if !strings.Contains(logs.String(), "map lookup failed") {
		t.Errorf("the failure was not logged: %q", logs.String())
	}
}

func TestHandlerLogsRequests(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := api.NewHandler(apitest.NewBackend(), log)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/sessions/7", nil))

	line := logs.String()
	for _, want := range []string{"level=DEBUG", "method=GET", "path=/api/v1/sessions/7", "status=404", "duration="} {
		if !strings.Contains(line, want) {
			t.Errorf("request log lacks %q: %s", want, line)
		}
	}
}

func TestHandlerHead(t *testing.T) {
	rec := httptest.NewRecorder()
	api.NewHandler(apitest.NewBackend(), nil).ServeHTTP(rec, httptest.NewRequest("HEAD", "/api/v1/status", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("HEAD status code = %d, want 200", rec.Code)
	}
}

// The handler must be usable through a real server too (Content-Length, no double
// WriteHeader), not only through the recorder.
func TestHandlerOverHTTP(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(apitest.NewBackend(), nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status code = %d, want 200", resp.StatusCode)
	}
	assertJSONEqual(t, body, "["+session2JSON+","+session9JSON+"]")
}
