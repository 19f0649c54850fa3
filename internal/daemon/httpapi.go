package daemon

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/xupf/xupf/internal/api"
)

// newAPIServer returns the HTTP server of the API behind its access control (README.md, "API
// security"), creating the token file on the first start.
func (d *Daemon) newAPIServer() (*http.Server, error) {
	token, created, err := api.LoadOrCreateToken(d.cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("api_token_file: %w", err)
	}
	if created {
		d.log.Info("created the API token file", "path", d.cfg.TokenFile)
	}
	access := api.Access{Token: token, AllowedHosts: d.cfg.AllowedHosts, OpenMetrics: !d.cfg.MetricsAuth}
	return &http.Server{
		Handler: api.Guard(api.NewHandler(d, d.log), access, d.log),
		// Bounds on what a client may hold: a slow or idle connection cannot pin a goroutine
		// and a socket for ever.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}, nil
}

// serveAPI serves srv on ln until srv is shut down.
func serveAPI(srv *http.Server, ln net.Listener) error {
	return srv.Serve(ln)
}
