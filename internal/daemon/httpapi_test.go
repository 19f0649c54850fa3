package daemon

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
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
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), pfcpNode: newPFCPNode(cfg, nil, nil)}
	err := d.listen()
	if err == nil || !strings.HasPrefix(err.Error(), "api_token_file: API token file "+cfg.TokenFile+" has mode 0644") {
		t.Errorf("listen = %v, want a refusal of the token file's mode", err)
	}
	if d.httpLn != nil {
		t.Error("the API listens with a token file it refused")
	}
}
