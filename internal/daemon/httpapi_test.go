package daemon

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
)

// The daemon serves its API behind the token it writes on its first start: an operator's
// client with the file gets in, anyone else gets 401, and Prometheus reads /metrics.
func TestRunAPIAccess(t *testing.T) {
	cfg := testConfig(t, "")
	r := startRun(t, cfg)
	info, err := os.Stat(cfg.TokenFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, err %v; want mode 0600", cfg.TokenFile, info, err)
	}
	if _, err := r.client.Associations(t.Context()); err != nil {
		t.Errorf("with the token file: %v", err)
	}
	_, err = api.NewClient("http://"+r.httpAddr.String(), nil).Associations(t.Context())
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %v, want a 401", err)
	}
	// Without a datapath the scrape itself fails (500); what matters is that it is let in.
	if code := get(t, "http://"+r.httpAddr.String()+api.MetricsPath); code == http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token: %d, want it let in (api_metrics_auth is false)", code)
	}

	cfg = testConfig(t, "api_metrics_auth: true\n")
	r = startRun(t, cfg)
	if code := get(t, "http://"+r.httpAddr.String()+api.MetricsPath); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token, api_metrics_auth true: %d, want 401", code)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A token file others may read is refused before anything listens (New calls listen before
// it loads the datapath).
func TestRunRefusesOpenTokenFile(t *testing.T) {
	cfg := testConfig(t, "")
	if err := os.WriteFile(cfg.TokenFile, []byte(strings.Repeat("x", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.TokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), pfcpNode: newPFCPNode(cfg, nil, nil, nil, nil, nil)}
	err := d.listen()
	if err == nil || !strings.HasPrefix(err.Error(), "api_token_file: API token file "+cfg.TokenFile+" has mode 0644") {
		t.Errorf("listen = %v, want a refusal of the token file's mode", err)
	}
	if d.httpLn != nil {
		t.Error("the API listens with a token file it refused")
	}
}

// With api_tls_cert and api_tls_key the API is HTTPS only: a client that trusts the
// certificate gets in (with the token), one that does not is told so, plain HTTP is refused.
func TestRunAPITLS(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.TLSCert, cfg.TLSKey = apitest.SelfSignedCert(t)
	r := startRun(t, cfg)
	addr := r.httpAddr.String()

	tlsCfg, err := api.TLSConfig(cfg.TLSCert)
	if err != nil {
		t.Fatal(err)
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	if _, err := api.NewClient("https://"+addr, trusting).WithTokenFile(cfg.TokenFile).Associations(t.Context()); err != nil {
		t.Errorf("HTTPS with the certificate as CA: %v", err)
	}
	_, err = api.NewClient("https://"+addr, nil).WithTokenFile(cfg.TokenFile).Associations(t.Context())
	if err == nil || !strings.Contains(err.Error(), "TLS certificate at https://"+addr+" is not trusted; give the certificate of the CA") {
		t.Errorf("HTTPS without trusting the certificate: %v", err)
	}
	_, err = r.client.Associations(t.Context()) // plain http://
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest || !strings.Contains(re.Message, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the HTTPS API: %v, want a 400", err)
	}
}

// A certificate that cannot be loaded fails the start, naming the keys, before anything
// listens.
func TestRunBadTLSCert(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.TLSCert, _ = apitest.SelfSignedCert(t)
	cfg.TLSKey = cfg.TLSCert // a certificate is no key
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), pfcpNode: newPFCPNode(cfg, nil, nil, nil, nil, nil)}
	err := d.listen()
	if want := "api_tls_cert " + cfg.TLSCert + ", api_tls_key " + cfg.TLSKey + ": "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("listen = %v, want an error starting with %q", err, want)
	}
	if d.httpLn != nil {
		t.Error("the API listens with a certificate it could not load")
	}
}

func TestIsLoopback(t *testing.T) {
	for listen, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true,
		"127.0.0.2:80": true, ":8080": false, "0.0.0.0:8080": false, "192.0.2.1:8080": false, "upf.example:8080": false} {
		if got := isLoopback(listen); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", listen, got, want)
		}
	}
}

// Plain HTTP beyond loopback is warned about; on loopback or with TLS it is not.
func TestAPIServerWarnsOfCleartext(t *testing.T) {
	cert, key := apitest.SelfSignedCert(t)
	for _, c := range []struct {
		listen, cert, key string
		warn              bool
	}{
		{"0.0.0.0:8080", "", "", true},
		{"127.0.0.1:8080", "", "", false},
		{"0.0.0.0:8080", cert, key, false},
	} {
		cfg := testConfig(t, "")
		cfg.HTTPListen, cfg.TLSCert, cfg.TLSKey = c.listen, c.cert, c.key
		var logs strings.Builder
		d := &Daemon{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
		if _, err := d.newAPIServer(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "its token crosses the network in clear"); got != c.warn {
			t.Errorf("http_listen %s, TLS %v: warned %v, want %v; log:\n%s", c.listen, c.cert != "", got, c.warn, logs.String())
		}
	}
}
