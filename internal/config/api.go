package config

import (
	"path/filepath"
	"strings"
)

// DefaultAPITokenFile is where xupfd keeps the API token unless api_token_file says otherwise;
// /var/lib/xupf is the systemd unit's StateDirectory.
const DefaultAPITokenFile = "/var/lib/xupf/api-token"

// APIAccess is the HTTP API's access control (README.md, "API security"): every request
// carries the bearer token of TokenFile, except reads of /metrics unless MetricsAuth.
type APIAccess struct {
	// TokenFile is the absolute path of the file holding the API token; xupfd creates it,
	// mode 0600, with a random token when it does not exist.
	TokenFile string `yaml:"api_token_file"`
	// AllowedHosts are the DNS names the API answers to in the Host header, besides IP
	// addresses and "localhost"; other names are refused (DNS rebinding).
	AllowedHosts []string `yaml:"api_allowed_hosts,omitempty"`
	// MetricsAuth makes /metrics require the token too; by default Prometheus reads it
	// without.
	MetricsAuth bool `yaml:"api_metrics_auth"`
	// TLSCert and TLSKey are the PEM certificate (chain) and key the API is served with over
	// HTTPS; both empty: plain HTTP.
	TLSCert string `yaml:"api_tls_cert,omitempty"`
	TLSKey  string `yaml:"api_tls_key,omitempty"`
}

// apiAccess checks the api_* keys.
func (v *validator) apiAccess(raw APIAccess) {
	switch {
	case raw.TokenFile == "":
		v.addf("api_token_file: empty; give an absolute file path, e.g. %s", DefaultAPITokenFile)
	case !filepath.IsAbs(raw.TokenFile) || strings.HasSuffix(raw.TokenFile, "/"):
		v.addf("api_token_file: %q is not an absolute file path; give one, e.g. %s", raw.TokenFile, DefaultAPITokenFile)
	default:
		v.cfg.TokenFile = raw.TokenFile
	}

	const hostFix = "list DNS names only (IP addresses and localhost are always accepted), e.g. upf1.example.net"
	for i, h := range raw.AllowedHosts {
		if err := checkDNSName(h, hostFix); err != nil {
			v.addf("api_allowed_hosts[%d]: %w", i, err)
			continue
		}
		v.cfg.AllowedHosts = append(v.cfg.AllowedHosts, strings.ToLower(h))
	}
	v.cfg.MetricsAuth = raw.MetricsAuth

	switch {
	case (raw.TLSCert == "") != (raw.TLSKey == ""):
		v.addf("api_tls_cert, api_tls_key: only one is set; give both (the certificate and its key, PEM) for HTTPS, or neither for HTTP")
	case raw.TLSCert != "" && (!filepath.IsAbs(raw.TLSCert) || !filepath.IsAbs(raw.TLSKey)):
		v.addf("api_tls_cert, api_tls_key: %q and %q must both be absolute paths", raw.TLSCert, raw.TLSKey)
	default:
		v.cfg.TLSCert, v.cfg.TLSKey = raw.TLSCert, raw.TLSKey
	}
}
