package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// TestAPIAccess replays the known attack on the real daemon: from inside its namespace, a
// client without the token adds a class and sets the default contract to drop, and a web
// page's cross-origin text/plain POST arrives with a foreign Host. All are refused and the
// traffic goes on; the operator's way in (the token file, read by xupfctl) still works.
func TestAPIAccess(t *testing.T) {
	e := newEnv(t)
	info, err := os.Stat(e.daemon.TokenFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v (err %v), want mode 0600", e.daemon.TokenFile, info, err)
	}
	token, err := api.ReadToken(e.daemon.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	client := e.daemon.HTTPClient()
	send := func(method, path, host string, headers map[string]string, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(e.ctx(), method, e.daemon.BaseURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var apiErr api.Error
		_ = json.Unmarshal(b, &apiErr)
		return resp.StatusCode, apiErr.Error
	}
	jsonType := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name, method, path, host string
		headers                  map[string]string
		body                     string
		wantCode                 int
		wantErr                  string
	}{
		{"add a class without the token", "POST", "/api/v1/classifier/classes", "", jsonType,
			`{"id": 1, "priority": 1}`, 401, "this request needs the API token"},
		{"default contract to drop without the token", "PUT", "/api/v1/policer/contracts/0", "", jsonType,
			`{"action": "drop"}`, 401, "this request needs the API token"},
		{"default contract to drop with a wrong token", "PUT", "/api/v1/policer/contracts/0", "",
			map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + strings.Repeat("f", 64)},
			`{"action": "drop"}`, 401, "the API token is wrong"},
		{"cross-origin text/plain POST with a foreign Host", "POST", "/api/v1/classifier/classes", "attacker.example:8080",
			map[string]string{"Content-Type": "text/plain", "Origin": "http://attacker.example:8080"},
			`{"id": 1, "priority": 1}`, 403, `Host "attacker.example:8080" is not a name this API answers to`},
		{"text/plain POST with the token", "POST", "/api/v1/classifier/classes", "",
			map[string]string{"Content-Type": "text/plain", "Authorization": "Bearer " + token},
			`{"id": 1, "priority": 1}`, 415, "the request body must be JSON"},
		{"reading sessions without the token", "GET", "/api/v1/sessions", "", nil, "", 401, "this request needs the API token"},
		{"metrics without the token", "GET", "/metrics", "", nil, "", 200, ""},
	} {
		code, msg := send(c.method, c.path, c.host, c.headers, c.body)
		if code != c.wantCode || !strings.Contains(msg, c.wantErr) {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, msg, c.wantCode, c.wantErr)
		}
	}

	// Nothing changed: no class, no contract, and the traffic flows.
	if list, err := e.api.Classes(e.ctx()); err != nil || len(list) != 0 {
		t.Errorf("classes after the refused calls: %+v, %v; want none", list, err)
	}
	if list, err := e.api.Contracts(e.ctx()); err != nil || len(list) != 0 {
		t.Errorf("contracts after the refused calls: %+v, %v; want none", list, err)
	}
	payload := testbed.Payload("api-access")
	reportProblems(t, "uplink after the refused calls", testbed.CheckUplink(sessNoQFI, 10, payload, e.uplink(sessNoQFI, 10, payload, recvTimeout)))

	// xupfctl without the token file is told where it is; with it (Xupfctl passes
	// --token-file) it gets in.
	if _, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "--token-file", "/nonexistent/api-token", "status"); err == nil ||
		!strings.Contains(err.Error(), "the daemon requires the API token, but the API token file /nonexistent/api-token does not exist") {
		t.Errorf("xupfctl without the token file: %v", err)
	}
	e.ctl(t, "classifier", "add", "--id", "1", "--priority", "1", "--protocol", "udp")
	if list, err := e.api.Classes(e.ctx()); err != nil || len(list) != 1 {
		t.Errorf("classes after xupfctl added one: %+v, %v", list, err)
	}
}

// TestAPITLS serves the real daemon's API over HTTPS with a certificate made by the test:
// xupfctl and the API client (trusting it, with the token) work, plain HTTP does not.
func TestAPITLS(t *testing.T) {
	cert, key := apitest.SelfSignedCert(t)
	e := newEnvConfig(t, func(c *config.Config) { c.TLSCert, c.TLSKey = cert, key }, sessQFI)
	if !strings.HasPrefix(e.daemon.BaseURL, "https://") {
		t.Fatalf("the testbed talks to %s, want https", e.daemon.BaseURL)
	}
	var sessions struct{ Static []api.SessionInfo }
	e.xupfctlJSON(&sessions, "session", "list")
	if len(sessions.Static) != 1 || sessions.Static[0].ID != sessQFI.ID {
		t.Errorf("xupfctl session list over HTTPS: %+v", sessions.Static)
	}
	if _, err := e.api.Status(e.ctx()); err != nil {
		t.Errorf("API client over HTTPS: %v", err)
	}
	plain := api.NewClient("http"+strings.TrimPrefix(e.daemon.BaseURL, "https"), e.daemon.HTTPClient()).WithTokenFile(e.daemon.TokenFile)
	if _, err := plain.Status(e.ctx()); err == nil || !strings.Contains(err.Error(), "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the HTTPS API: %v", err)
	}
	// xupfctl without --ca-cert does not trust the self-signed certificate.
	out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "--ca-cert", "", "status")
	if err == nil || !strings.Contains(err.Error(), "TLS certificate at "+e.daemon.BaseURL+" is not trusted") {
		t.Errorf("xupfctl without the CA: %v\n%s", err, out)
	}
}
