package api_test

import (
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

const (
	contract0JSON = `{"class":0,"action":"drop",
		"counters":{"passed_packets":0,"passed_bytes":0,"dropped_packets":12,"dropped_bytes":720}}`
	contract3JSON = `{"class":3,"action":"limit","rate_bps":10000000,"burst_bytes":65536,
		"counters":{"passed_packets":900,"passed_bytes":1170000,"dropped_packets":100,"dropped_bytes":130000}}`
	contract20JSON = `{"class":20,"action":"pass",
		"counters":{"passed_packets":7,"passed_bytes":9100,"dropped_packets":0,"dropped_bytes":0}}`
)

func TestContractHandlers(t *testing.T) {
	failing := apitest.NewBackend()
	failing.Err = errors.New("policer counters: operation not permitted")
	const (
		path    = "/api/v1/policer/contracts"
		badID   = "is not a number from 0 to 4294967295; use a class id from `xupfctl classifier list`, or 0 for the default contract"
		fields  = "the fields are action, rate_bps, burst_bytes"
		example = `e.g. {\"action\": \"limit\", \"rate_bps\": 10000000, \"burst_bytes\": 65536}`
	)
	fixture := apitest.Contracts() // 20, 3, 0
	unchanged := apitest.Contracts()
	replaced3 := apitest.Contracts()
	replaced3[1].Contract = api.Contract{Action: "drop"}
	zeroLimit := api.ContractInfo{Class: 0, Contract: api.Contract{Action: "limit", RateBPS: 8, BurstBytes: 1}}

	tests := []handlerCase{
		{
			name: "list sorted by class", method: "GET", path: path, wantCode: 200,
			wantBody: "[" + contract0JSON + "," + contract3JSON + "," + contract20JSON + "]",
		},
		{
			name: "no contracts is an empty array", backend: &apitest.Backend{},
			method: "GET", path: path, wantCode: 200, wantBody: `[]`,
		},
		{name: "one", method: "GET", path: path + "/3", wantCode: 200, wantBody: contract3JSON},
		{name: "the default", method: "GET", path: path + "/0", wantCode: 200, wantBody: contract0JSON},
		{
			name: "a class without a contract", method: "GET", path: path + "/7", wantCode: 404,
			wantBody: `{"error":"class 7 has no contract"}`,
		},
		{
			name: "no default contract", backend: &apitest.Backend{}, method: "GET", path: path + "/0", wantCode: 404,
			wantBody: `{"error":"there is no default contract (class 0)"}`,
		},
		{
			name: "class not a number", method: "GET", path: path + "/abc", wantCode: 400,
			wantBody: `{"error":"class id \"abc\" ` + badID + `"}`,
		},
		{
			name: "class beyond 32 bits", method: "PUT", path: path + "/4294967296", body: `{"action":"pass"}`, wantCode: 400,
			wantBody: `{"error":"class id \"4294967296\" ` + badID + `"}`, wantContracts: unchanged,
		},
		{
			name: "negative class", method: "DELETE", path: path + "/-1", wantCode: 400,
			wantBody: `{"error":"class id \"-1\" ` + badID + `"}`,
		},
		{
			name: "set a new contract", method: "PUT", path: path + "/4",
			body:     `{"action":"limit","rate_bps":1000000,"burst_bytes":3000}`,
			wantCode: 200, wantBody: `{"class":4,"action":"limit","rate_bps":1000000,"burst_bytes":3000,
				"counters":{"passed_packets":0,"passed_bytes":0,"dropped_packets":0,"dropped_bytes":0}}`,
			wantContracts: append(apitest.Contracts(), api.ContractInfo{Class: 4,
				Contract: api.Contract{Action: "limit", RateBPS: 1_000_000, BurstBytes: 3000}}),
		},
		{
			name: "replace a contract: the counters carry on", method: "PUT", path: path + "/3", body: `{"action":"drop"}`,
			wantCode: 200, wantBody: `{"class":3,"action":"drop",
				"counters":{"passed_packets":900,"passed_bytes":1170000,"dropped_packets":100,"dropped_bytes":130000}}`,
			wantContracts: replaced3,
		},
		{
			name: "set the default at the lowest rate", backend: &apitest.Backend{}, method: "PUT", path: path + "/0",
			body:     `{"action":"limit","rate_bps":8,"burst_bytes":1}`,
			wantCode: 200, wantBody: `{"class":0,"action":"limit","rate_bps":8,"burst_bytes":1,
				"counters":{"passed_packets":0,"passed_bytes":0,"dropped_packets":0,"dropped_bytes":0}}`,
			wantContracts: []api.ContractInfo{zeroLimit},
		},
		{
			name: "invalid: the message names every field", method: "PUT", path: path + "/3",
			body:     `{"action":"limit","rate_bps":1001}`,
			wantCode: 400, wantBody: `{"error":"contract for class 3: rate_bps: 1001 is not a multiple of 8 ` +
				`(the policer meters whole bytes per second); use 1000 or 1008\nburst_bytes: a limit needs a burst in bytes, ` +
				`at least the largest packet, e.g. 65536"}`,
			wantContracts: unchanged,
		},
		{
			name: "invalid: pass with a rate", method: "PUT", path: path + "/0", body: `{"action":"pass","rate_bps":8000}`,
			wantCode: 400, wantBody: `{"error":"default contract: rate_bps: pass takes no rate; leave rate_bps out, or use action limit"}`,
		},
		{
			name: "invalid: rate out of range", method: "PUT", path: path + "/3",
			body:     `{"action":"limit","rate_bps":1000000000008,"burst_bytes":99999999999}`,
			wantCode: 400, wantBody: `{"error":"contract for class 3: rate_bps: 1000000000008 is out of range; use 8 (1 byte/s) ` +
				`to 1000000000000 (1 Tbit/s)\nburst_bytes: 99999999999 is out of range; use 1 to 4611686018"}`,
		},
		{
			name: "invalid: no action", method: "PUT", path: path + "/3", body: `{}`,
			wantCode: 400, wantBody: `{"error":"contract for class 3: action: missing; use pass, drop or limit"}`,
		},
		{
			name: "invalid: unknown action", method: "PUT", path: path + "/3", body: `{"action":"Limit"}`,
			wantCode: 400, wantBody: `{"error":"contract for class 3: action: \"Limit\" is not an action; use pass, drop or limit"}`,
		},
		{
			name: "the class in the body", method: "PUT", path: path + "/3", body: `{"class":3,"action":"pass"}`,
			wantCode: 400, wantBody: `{"error":"unknown field \"class\" in the contract: the class id is in the path, ` +
				`as in PUT /api/v1/policer/contracts/3 (0 for the default contract)"}`,
		},
		{
			name: "an unknown field", method: "PUT", path: path + "/3", body: `{"action":"limit","rate":"10mbit"}`,
			wantCode: 400, wantBody: `{"error":"unknown field \"rate\" in the contract; ` + fields + `"}`,
		},
		{
			name: "the counters in the body", method: "PUT", path: path + "/3", body: `{"action":"pass","counters":{}}`,
			wantCode: 400, wantBody: `{"error":"unknown field \"counters\" in the contract; ` + fields + `"}`,
		},
		{
			name: "a rate as a string", method: "PUT", path: path + "/3", body: `{"action":"limit","rate_bps":"10mbit"}`,
			wantCode: 400, wantBody: `{"error":"field rate_bps: got a JSON string, want a whole number of bits per second, e.g. 10000000 for 10 Mbit/s"}`,
		},
		{
			name: "a fractional burst", method: "PUT", path: path + "/3", body: `{"action":"limit","burst_bytes":1.5}`,
			wantCode: 400, wantBody: `{"error":"field burst_bytes: got number 1.5, want a whole number of bytes, e.g. 65536"}`,
		},
		{
			name: "an action as a number", method: "PUT", path: path + "/3", body: `{"action":2}`,
			wantCode: 400, wantBody: `{"error":"field action: got a JSON number, want a string: pass, drop or limit"}`,
		},
		{
			name: "no body", method: "PUT", path: path + "/3",
			wantCode: 400, wantBody: `{"error":"the request body is empty; send a contract as a JSON object, ` + example + `"}`,
		},
		{
			name: "a string body", method: "PUT", path: path + "/3", body: `"drop"`,
			wantCode: 400, wantBody: `{"error":"the request body is a JSON string; send a contract as a JSON object, ` + example + `"}`,
		},
		{
			name: "two contracts", method: "PUT", path: path + "/3", body: `{"action":"pass"}{"action":"drop"}`,
			wantCode: 400, wantBody: `{"error":"the request body has more after the contract; send one contract as one JSON object"}`,
			wantContracts: unchanged,
		},
		{
			name: "a body too large", method: "PUT", path: path + "/3", body: `{"action":"` + strings.Repeat(" ", 5000) + `"}`,
			wantCode: 413, wantBody: `{"error":"the request body is larger than 4096 bytes; send one contract"}`,
		},
		{
			name: "delete", method: "DELETE", path: path + "/3", wantCode: 204,
			wantContracts: []api.ContractInfo{fixture[0], fixture[2]},
		},
		{
			name: "delete the default", method: "DELETE", path: path + "/0", wantCode: 204,
			wantContracts: []api.ContractInfo{fixture[0], fixture[1]},
		},
		{
			name: "delete a class without a contract", method: "DELETE", path: path + "/7", wantCode: 404,
			wantBody: `{"error":"class 7 has no contract"}`, wantContracts: unchanged,
		},
		{
			name: "wrong method on contracts", method: "POST", path: path, wantCode: 405,
			wantBody:  `{"error":"method POST is not allowed on /api/v1/policer/contracts; use GET"}`,
			wantAllow: "GET, HEAD",
		},
		{
			name: "wrong method on a contract", method: "POST", path: path + "/3", wantCode: 405,
			wantBody:  `{"error":"method POST is not allowed on /api/v1/policer/contracts/3; use GET or PUT or DELETE"}`,
			wantAllow: "GET, PUT, DELETE, HEAD",
		},
		{
			name: "backend error on list", backend: failing, method: "GET", path: path, wantCode: 500,
			wantBody: `{"error":"policer counters: operation not permitted"}`,
		},
		{
			name: "backend error on one", backend: failing, method: "GET", path: path + "/3", wantCode: 500,
			wantBody: `{"error":"policer counters: operation not permitted"}`,
		},
		{
			name: "backend error on set", backend: failing, method: "PUT", path: path + "/3", body: `{"action":"pass"}`,
			wantCode: 500, wantBody: `{"error":"policer counters: operation not permitted"}`,
		},
		{
			name: "backend error on delete", backend: failing, method: "DELETE", path: path + "/3", wantCode: 500,
			wantBody: `{"error":"policer counters: operation not permitted"}`,
		},
	}
	checkHandler(t, tests)
}

func TestContractCheck(t *testing.T) {
	for _, tt := range []struct {
		class uint32
		c     api.Contract
		want  string // "" for valid
	}{
		{0, api.Contract{Action: "pass"}, ""},
		{1, api.Contract{Action: "drop"}, ""},
		{2, api.Contract{Action: "limit", RateBPS: 8, BurstBytes: 1}, ""},
		{3, api.Contract{Action: "limit", RateBPS: api.MaxContractRateBPS, BurstBytes: api.MaxContractBurst}, ""},
		{4, api.Contract{Action: "limit", RateBPS: 7, BurstBytes: 1},
			"contract for class 4: rate_bps: 7 is out of range; use 8 (1 byte/s) to 1000000000000 (1 Tbit/s)"},
		{4, api.Contract{Action: "limit", RateBPS: 1_000_000_004, BurstBytes: 1},
			"contract for class 4: rate_bps: 1000000004 is not a multiple of 8 (the policer meters whole bytes per second); use 1000000000 or 1000000008"},
		{0, api.Contract{Action: "drop", RateBPS: 8, BurstBytes: 1}, "default contract: " +
			"rate_bps: drop takes no rate; leave rate_bps out, or use action limit\n" +
			"burst_bytes: drop takes no burst; leave burst_bytes out, or use action limit"},
		{5, api.Contract{Action: "limit", BurstBytes: 100},
			"contract for class 5: rate_bps: a limit needs a rate in bits per second, e.g. 10000000 for 10 Mbit/s"},
		{5, api.Contract{Action: "PASS"}, `contract for class 5: action: "PASS" is not an action; use pass, drop or limit`},
	} {
		err := tt.c.Check(tt.class)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want) {
			t.Errorf("Check(%d, %+v) = %v, want %q", tt.class, tt.c, err, tt.want)
		}
	}
}

func TestPolicerMetrics(t *testing.T) {
	rec := httptest.NewRecorder()
	api.NewHandler(apitest.NewBackend(), nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"# TYPE xupf_policer_packets_total counter",
		`xupf_policer_packets_total{class="0",verdict="dropped"} 12`,
		`xupf_policer_packets_total{class="0",verdict="passed"} 0`,
		`xupf_policer_packets_total{class="3",verdict="dropped"} 100`,
		`xupf_policer_packets_total{class="3",verdict="passed"} 900`,
		`xupf_policer_packets_total{class="20",verdict="passed"} 7`,
		"# TYPE xupf_policer_bytes_total counter",
		`xupf_policer_bytes_total{class="0",verdict="dropped"} 720`,
		`xupf_policer_bytes_total{class="3",verdict="passed"} 1.17e+06`,
		`xupf_policer_bytes_total{class="20",verdict="dropped"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack line %q; got:\n%s", want, body)
		}
	}
	rec = httptest.NewRecorder()
	api.NewHandler(&apitest.Backend{}, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), "xupf_policer_") {
		t.Errorf("metrics with no contracts have policer series:\n%s", rec.Body)
	}
}

func TestClientContracts(t *testing.T) {
	b := apitest.NewBackend()
	c := newTestClient(t, b)
	ctx := t.Context()
	fixture := apitest.Contracts() // 20, 3, 0

	list, err := c.Contracts(ctx)
	if want := []api.ContractInfo{fixture[2], fixture[1], fixture[0]}; err != nil || !reflect.DeepEqual(list, want) {
		t.Errorf("Contracts = %+v, %v; want %+v", list, err, want)
	}
	if one, err := c.Contract(ctx, 0); err != nil || one != fixture[2] {
		t.Errorf("Contract(0) = %+v, %v; want %+v", one, err, fixture[2])
	}

	limit := api.Contract{Action: "limit", RateBPS: 500_000, BurstBytes: 1500}
	info, err := c.SetContract(ctx, 20, limit)
	if want := (api.ContractInfo{Class: 20, Contract: limit, Counters: fixture[0].Counters}); err != nil || info != want {
		t.Errorf("SetContract(20) = %+v, %v; want %+v", info, err, want)
	}
	if got := b.ContractsData[0].Contract; got != limit {
		t.Errorf("the backend stored %+v, want %+v", got, limit)
	}

	if err := c.DeleteContract(ctx, 3); err != nil {
		t.Fatalf("DeleteContract: %v", err)
	}
	if _, err := c.Contract(ctx, 3); !errors.Is(err, api.ErrNotFound) || err.Error() != "class 3 has no contract" {
		t.Errorf("Contract(3) after DeleteContract: %v, want not found", err)
	}
	if _, err := c.SetContract(ctx, 3, api.Contract{Action: "limit"}); !errors.Is(err, api.ErrInvalid) ||
		!strings.HasPrefix(err.Error(), "contract for class 3: rate_bps: a limit needs a rate") {
		t.Errorf("SetContract of an invalid contract: %v, want ErrInvalid with the daemon's message", err)
	}
	if err := c.DeleteContract(ctx, 3); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("DeleteContract(3) again: %v, want not found", err)
	}

	list, err = newTestClient(t, &apitest.Backend{}).Contracts(ctx)
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("Contracts of none = %#v, %v; want an empty non-nil slice", list, err)
	}
}
