package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestGuard sends requests through Guard(NewHandler) as the daemon serves it, and checks who
// gets in and what a refused client is told.
func TestGuard(t *testing.T) {
	const classBody = `{"id": 77, "priority": 1, "protocol": "udp"}`
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	tests := []struct {
		name         string
		access       api.Access
		method, path string
		host         string // "" : 127.0.0.1:8080
		headers      map[string]string
		body         string
		wantCode     int
		wantErr      string // in the Error body
	}{
		{name: "read with the token", method: "GET", path: "/api/v1/status", headers: bearer, wantCode: 200},
		{name: "read without a token", method: "GET", path: "/api/v1/sessions", wantCode: 401,
			wantErr: `this request needs the API token, sent as "Authorization: Bearer <token>"; the token is in the file api_token_file`},
		{name: "wrong token", method: "GET", path: "/api/v1/status",
			headers: map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64)}, wantCode: 401,
			wantErr: "the API token is wrong; the token is in the file api_token_file of xupfd's configuration (default /var/lib/xupf/api-token)"},
		{name: "token prefix", method: "GET", path: "/api/v1/status",
			headers: map[string]string{"Authorization": "Bearer " + testToken[:32]}, wantCode: 401, wantErr: "the API token is wrong"},
		{name: "basic scheme", method: "GET", path: "/api/v1/status",
			headers: map[string]string{"Authorization": "Basic " + testToken}, wantCode: 401,
			wantErr: `the Authorization header uses the scheme "Basic"; send "Authorization: Bearer <token>"`},
		{name: "scheme in lower case", method: "GET", path: "/api/v1/status",
			headers: map[string]string{"Authorization": "bearer " + testToken}, wantCode: 200},
		{name: "write with the token", method: "POST", path: "/api/v1/classifier/classes", headers: with(nil),
			body: classBody, wantCode: 201},
		{name: "write without a token", method: "POST", path: "/api/v1/classifier/classes",
			headers: map[string]string{"Content-Type": "application/json"}, body: classBody, wantCode: 401},
		{name: "default contract to drop without a token", method: "PUT", path: "/api/v1/policer/contracts/0",
			headers: map[string]string{"Content-Type": "application/json"}, body: `{"action": "drop"}`, wantCode: 401},
		{name: "delete without a token", method: "DELETE", path: "/api/v1/classifier/classes/1", wantCode: 401},
		{name: "unknown path without a token", method: "GET", path: "/nothing", wantCode: 401},
		{name: "options without a token", method: "OPTIONS", path: "/api/v1/status", wantCode: 401},

		{name: "text/plain write", method: "POST", path: "/api/v1/classifier/classes",
			headers: with(map[string]string{"Content-Type": "text/plain"}), body: classBody, wantCode: 415,
			wantErr: `the request body must be JSON, sent with Content-Type: application/json (got "text/plain")`},
		{name: "form write", method: "PUT", path: "/api/v1/policer/contracts/0",
			headers: with(map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), body: `{"action": "drop"}`, wantCode: 415},
		{name: "write without a content type", method: "POST", path: "/api/v1/classifier/classes",
			headers: bearer, body: classBody, wantCode: 415, wantErr: `(got "")`},
		{name: "JSON with a charset", method: "POST", path: "/api/v1/classifier/classes",
			headers: with(map[string]string{"Content-Type": "application/json; charset=utf-8"}), body: classBody, wantCode: 201},
		{name: "delete with a text body", method: "DELETE", path: "/api/v1/classifier/classes/1",
			headers: with(map[string]string{"Content-Type": "text/plain"}), body: "x", wantCode: 415},

		{name: "foreign host", method: "GET", path: "/api/v1/status", host: "evil.example:8080", headers: bearer,
			wantCode: 403, wantErr: `Host "evil.example:8080" is not a name this API answers to; use its IP address or localhost, or add the name to api_allowed_hosts`},
		{name: "cross-origin text/plain write from a foreign host", method: "POST", path: "/api/v1/classifier/classes",
			host: "rebound.evil.example", headers: map[string]string{"Content-Type": "text/plain", "Origin": "http://rebound.evil.example"},
			body: classBody, wantCode: 403, wantErr: `Host "rebound.evil.example" is not a name`},
		{name: "foreign host for metrics", method: "GET", path: "/metrics", host: "evil.example",
			access: api.Access{OpenMetrics: true}, wantCode: 403},
		{name: "localhost", method: "GET", path: "/api/v1/status", host: "LocalHost:8080", headers: bearer, wantCode: 200},
		{name: "localhost with a trailing dot", method: "GET", path: "/api/v1/status", host: "localhost.", headers: bearer, wantCode: 200},
		{name: "IPv6 address", method: "GET", path: "/api/v1/status", host: "[::1]:8080", headers: bearer, wantCode: 200},
		{name: "IPv4 address without a port", method: "GET", path: "/api/v1/status", host: "192.0.2.1", headers: bearer, wantCode: 200},
		{name: "allowed name", method: "GET", path: "/api/v1/status", host: "UPF1.example.net:8080", headers: bearer,
			access: api.Access{AllowedHosts: []string{"upf1.example.net"}}, wantCode: 200},
		{name: "name not allowed", method: "GET", path: "/api/v1/status", host: "upf2.example.net", headers: bearer,
			access: api.Access{AllowedHosts: []string{"upf1.example.net"}}, wantCode: 403},

		{name: "cross-site write with the token", method: "POST", path: "/api/v1/classifier/classes",
			headers: with(map[string]string{"Sec-Fetch-Site": "cross-site"}), body: classBody, wantCode: 403,
			wantErr: "cross-origin request refused"},
		{name: "write from another origin", method: "PUT", path: "/api/v1/policer/contracts/0",
			headers: with(map[string]string{"Origin": "http://evil.example"}), body: `{"action": "drop"}`, wantCode: 403,
			wantErr: "cross-origin request refused"},
		{name: "same-origin write", method: "POST", path: "/api/v1/classifier/classes",
			headers: with(map[string]string{"Sec-Fetch-Site": "same-origin"}), body: classBody, wantCode: 201},

		{name: "open metrics", method: "GET", path: "/metrics", access: api.Access{OpenMetrics: true}, wantCode: 200},
		{name: "metrics behind the token", method: "GET", path: "/metrics", wantCode: 401},
		{name: "open metrics take no other method", method: "POST", path: "/metrics",
			headers: map[string]string{"Content-Type": "application/json"}, access: api.Access{OpenMetrics: true}, wantCode: 401},
		{name: "metrics with the token", method: "GET", path: "/metrics", headers: bearer, wantCode: 200},
		{name: "open metrics leave the rest closed", method: "GET", path: "/api/v1/stats",
			access: api.Access{OpenMetrics: true}, wantCode: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			access := tt.access
			access.Token = testToken
			var logs bytes.Buffer
			h := api.Guard(api.NewHandler(apitest.NewBackend(), nil), access, slog.New(slog.NewTextHandler(&logs, nil)))
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Host = "127.0.0.1:8080"
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantCode {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.wantCode, rec.Body)
			}
			if got := rec.Header().Get("WWW-Authenticate"); (rec.Code == 401) != (got == `Bearer realm="xupf"`) {
				t.Errorf("WWW-Authenticate = %q with status %d", got, rec.Code)
			}
			if rec.Code < 400 {
				return
			}
			var e api.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("refusal is not an Error body: %q (%v)", rec.Body, err)
			}
			if !strings.Contains(e.Error, tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", e.Error, tt.wantErr)
			}
			if strings.Contains(rec.Body.String(), testToken) {
				t.Errorf("the refusal gives the token away: %s", rec.Body)
			}
			if rec.Code != 415 && !strings.Contains(logs.String(), "api request refused") {
				t.Errorf("refusal not logged: %q", logs.String())
			}
		})
	}
}

// A write with a body that is not JSON changes nothing, even with the token: adding a class
// and dropping all traffic by default (what a cross-site text/plain POST would try) leave the
// backend as it was, and both get 415.
func TestGuardRefusedWritesChangeNothing(t *testing.T) {
	b := apitest.NewBackend()
	classes, contracts := len(b.ClassesData), len(b.ContractsData)
	h := api.Guard(api.NewHandler(b, nil), api.Access{Token: testToken}, nil)
	for _, r := range []*http.Request{
		httptest.NewRequest("POST", "/api/v1/classifier/classes", strings.NewReader(`{"id": 77, "priority": 1}`)),
		httptest.NewRequest("PUT", "/api/v1/policer/contracts/0", strings.NewReader(`{"action": "drop"}`)),
	} {
		r.Header.Set("Content-Type", "text/plain")
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Host = "127.0.0.1:8080"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("%s %s with a text/plain body: %d, want 415", r.Method, r.URL.Path, rec.Code)
		}
	}
	if len(b.ClassesData) != classes || len(b.ContractsData) != contracts {
		t.Errorf("refused writes changed the backend: %d classes (was %d), %d contracts (was %d)",
			len(b.ClassesData), classes, len(b.ContractsData), contracts)
	}
}
