package daemon

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/xupf/xupf/internal/api"
)

// newAPIServer returns the HTTP server of the API behind its access control (README.md, "API
// security"), creating the token file on the first start, with TLS when it is configured.
func (d *Daemon) newAPIServer() (*http.Server, error) {
	token, created, err := api.LoadOrCreateToken(d.cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("api_token_file: %w", err)
	}
	if created {
		d.log.Info("created the API token file", "path", d.cfg.TokenFile)
	}
	access := api.Access{Token: token, AllowedHosts: d.cfg.AllowedHosts, OpenMetrics: !d.cfg.MetricsAuth}
	srv := &http.Server{
		Handler: api.Guard(api.NewHandler(d, d.log), access, d.log),
		// Bounds on what a client may hold: a slow or idle connection cannot pin a goroutine
		// and a socket for ever.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	if d.cfg.TLSCert == "" {
		if !isLoopback(d.cfg.HTTPListen) {
			d.log.Warn("the HTTP API is served without TLS on an address other than loopback: "+
				"its token crosses the network in clear; set api_tls_cert and api_tls_key", "http_listen", d.cfg.HTTPListen)
		}
		return srv, nil
	}
	// Loaded here rather than by ServeTLS so that a bad certificate fails the start with the
	// configuration's key names, before anything listens.
	cert, err := tls.LoadX509KeyPair(d.cfg.TLSCert, d.cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("api_tls_cert %s, api_tls_key %s: %w", d.cfg.TLSCert, d.cfg.TLSKey, err)
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return srv, nil
}

// isLoopback reports whether a listen address's host is a loopback address or localhost.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	return err == nil && api.IsLoopbackHost(host)
}

// serveAPI serves srv on ln, over TLS when srv has a TLS configuration, until srv is shut
// down.
func serveAPI(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}
