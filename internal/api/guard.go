package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Access is who may use the API (README.md, "API security").
type Access struct {
	// Token is the bearer token every request must carry ("Authorization: Bearer <token>"),
	// at least MinTokenLen characters.
	Token string
	// AllowedHosts are the DNS names, lower case, accepted in the Host header besides IP
	// addresses and localhost. A browser that an attacker's page has pointed at the API
	// through DNS rebinding sends the attacker's name, which is not among them.
	AllowedHosts []string
	// OpenMetrics lets GET and HEAD /metrics through without the token, for Prometheus.
	OpenMetrics bool
}

// MetricsPath is where the Prometheus metrics are served.
const MetricsPath = "/metrics"

// Guard returns next behind the access checks of a: the Host header, cross-origin browser
// requests, then the token. A refusal is a JSON Error that says what to fix: 403 for a
// request refused whoever sends it, 401 for a missing or wrong token. Each refusal is logged
// at warn level with the remote address, so an attack shows in the log.
func Guard(next http.Handler, a Access, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &guard{next: next, access: a, log: log, want: sha256.Sum256([]byte(a.Token)),
		crossOrigin: http.NewCrossOriginProtection()}
}

type guard struct {
	next        http.Handler
	access      Access
	log         *slog.Logger
	want        [sha256.Size]byte // the token's hash, for a comparison in constant time
	crossOrigin *http.CrossOriginProtection
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.hostAllowed(r.Host) {
		g.refuse(w, r, http.StatusForbidden, fmt.Sprintf("Host %q is not a name this API answers to; "+
			"use its IP address or localhost, or add the name to api_allowed_hosts in xupfd's configuration", r.Host))
		return
	}
	// A browser sends the token only if a script adds it, which CORS forbids across sites;
	// this refuses a page's cross-site writes even so (Sec-Fetch-Site, Origin).
	if err := g.crossOrigin.Check(r); err != nil {
		g.refuse(w, r, http.StatusForbidden, "cross-origin request refused: the API takes no changes "+
			"from web pages of other sites; call it with xupfctl, curl or an API client")
		return
	}
	if g.access.OpenMetrics && r.URL.Path == MetricsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		g.next.ServeHTTP(w, r)
		return
	}
	if msg := g.checkToken(r); msg != "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="xupf"`)
		g.refuse(w, r, http.StatusUnauthorized, msg)
		return
	}
	g.next.ServeHTTP(w, r)
}

// tokenHint says where the token is; it is in every 401 answer.
const tokenHint = "the token is in the file api_token_file of xupfd's configuration " +
	"(default /var/lib/xupf/api-token), which xupfctl reads (--token-file, XUPF_TOKEN_FILE)"

// checkToken returns why r does not carry the token, or "".
func (g *guard) checkToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if h == "" {
		return `this request needs the API token, sent as "Authorization: Bearer <token>"; ` + tokenHint
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return fmt.Sprintf(`the Authorization header uses the scheme %q; send "Authorization: Bearer <token>"; %s`, scheme, tokenHint)
	}
	// Hashes have one length whatever the token sent, so the comparison's time tells
	// nothing about the token, not even its length.
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], g.want[:]) != 1 {
		return "the API token is wrong; " + tokenHint
	}
	return ""
}

// hostAllowed reports whether the Host header names this API: an IP address, localhost or one
// of AllowedHosts, with or without a port.
func (g *guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "localhost" || slices.Contains(g.access.AllowedHosts, host)
}

func (g *guard) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	g.log.LogAttrs(r.Context(), slog.LevelWarn, "api request refused",
		slog.Int("status", code), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("remote", r.RemoteAddr), slog.String("reason", msg))
	writeError(w, code, msg)
}

// requireJSON answers 415 to a request that sends a body that is not declared JSON: every
// POST, PUT and PATCH, and any other request with a body but GET and HEAD. A form or a
// text/plain body, which a web page can send to another site without asking, is thus never
// read.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			ct := r.Header.Get("Content-Type")
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf(
					"the request body must be JSON, sent with Content-Type: application/json (got %q)", ct))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return false
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return r.ContentLength != 0 // -1: unknown length (chunked), so a body
}
