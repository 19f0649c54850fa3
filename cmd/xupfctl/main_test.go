package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
	"github.com/xupf/xupf/internal/pfcp"
)

// newBackend is the shared fixture, served through the real api.NewHandler so that these
// tests cover the CLI, the client and the server together. Its status is changed so that
// the status table shows an uptime that rounds down, two GTP-U addresses and interface
// names of different widths.
func newBackend() *apitest.Backend {
	b := apitest.NewBackend()
	b.StatusData.UptimeSeconds = 3725.4
	b.StatusData.Interfaces[1] = api.Interface{Name: "veth-n6", Ifindex: 13, Roles: []string{"n6"}, XDPMode: "generic"}
	b.StatusData.GTPUAddresses = []string{"192.0.2.1", "192.0.2.2"}
	return b
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs xupfctl against a server for b, guarded as the daemon's is; env is the whole
// environment it sees, by default the server's address and token file.
func runCLI(t *testing.T, b api.Backend, env map[string]string, args ...string) (result, string) {
	t.Helper()
	h, tokenFile := apitest.Guarded(t, b)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if env == nil {
		env = map[string]string{"XUPF_SERVER": srv.URL, "XUPF_TOKEN_FILE": tokenFile}
	}
	return runCLIAt(t, srv.URL, env, args...), srv.URL
}

func runCLIAt(t *testing.T, url string, env map[string]string, args ...string) result {
	t.Helper()
	return runCLIContext(t.Context(), url, env, args...)
}

// runCLIContext is runCLIAt under ctx, which stands for the process's signals.
func runCLIContext(ctx context.Context, url string, env map[string]string, args ...string) result {
	if env == nil {
		env = map[string]string{"XUPF_SERVER": url}
	}
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr, func(k string) string { return env[k] })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestTables(t *testing.T) {
	tests := []tableCase{
		{
			args: []string{"session", "list"},
			want: `
ID  UE         UL-TEID  GNB         DL-TEID  QFI  UL-PKTS  DL-PKTS
2   10.45.0.2  0x1000   192.0.2.10  0x1001   9    1042     2088
9   10.45.0.9  0x2000   192.0.2.10  0x3000   -    5        6

SEID         PEER              CP-SEID  UE          UL-TEIDS  DL-PEER            PDRS  UL-PKTS  DL-PKTS
0x100000001  smf1.5gc.example  0x20     10.45.0.20  0x4001    192.0.2.10:0x5001  3     10       22
0x100000002  smf1.5gc.example  0x21     10.45.0.21  0x4002    BUFF               3     3        2
`,
		},
		{
			args: []string{"session", "show", "2"},
			want: `
ID:              2
UE:              10.45.0.2
Uplink TEID:     0x1000
gNB:             192.0.2.10
Downlink TEID:   0x1001
QFI:             9
GTP-U address:   192.0.2.1
Uplink usage:    1042 packets, 104200 bytes
Downlink usage:  2088 packets, 2088000 bytes
`,
		},
		{
			args: []string{"session", "show", "9"},
			want: `
ID:              9
UE:              10.45.0.9
Uplink TEID:     0x2000
gNB:             192.0.2.10
Downlink TEID:   0x3000
QFI:             none (no PDU Session Container)
GTP-U address:   192.0.2.1
Uplink usage:    5 packets, 500 bytes
Downlink usage:  6 packets, 6000 bytes
`,
		},
		{
			args: []string{"stats"},
			want: `
COUNTER  VALUE
dl_tx    2088
pass     0
ul_rx    1042

DROP REASON    VALUE
malformed_gtp  0
unknown_teid   2

PFCP DROP REASON     VALUE
amplification_limit  12
undecodable_header   0
unhandled_type       0

PFCP REPORTS  VALUE
accepted      2
sent          3
timed_out     1

GTP-U SIGNALLING           VALUE
end_marker_sent            4
error_indication_reported  1

BUFFER              VALUE
buffered            12
discarded_overflow  2
flushed             10
`,
		},
		{
			args: []string{"status"},
			want: `
Version:            v0.1.0
Started:            2025-01-02T03:04:05Z (up 1h2m5s)
Sessions:           4/65536
GTP-U addresses:    192.0.2.1, 192.0.2.2
PFCP address:       192.0.2.1:8805
PFCP associations:  2
QoS meters:         token_bucket, clock ktime
BPF FS path:        /sys/fs/bpf/xupf

INTERFACE  IFINDEX  ROLES  XDP MODE
eth0       2        n3     native
veth-n6    13       n6     generic
`,
		},
		{
			args: []string{"pfcp", "associations"},
			want: `
NODE ID           ADDRESS            RECOVERY              ESTABLISHED           MISSED
198.51.100.5      198.51.100.5:8805  2025-01-01T00:00:00Z  2025-01-02T03:05:00Z  2
smf1.5gc.example  198.51.100.7:8805  2025-01-02T02:00:00Z  2025-01-02T03:04:10Z  0
`,
		},
	}
	checkTables(t, tests)
}

// tableCase is a command and its whole table output (a leading newline is dropped).
type tableCase struct {
	args []string
	want string
}

// checkTables runs every case against a fresh fixture backend, with the default output and
// with "-o table", which must agree.
func checkTables(t *testing.T, tests []tableCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// "-o table" explicitly and the default must agree.
			for _, args := range [][]string{tt.args, append([]string{"-o", "table"}, tt.args...)} {
				r, _ := runCLI(t, newBackend(), nil, args...)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("xupfctl %v: exit %d, stderr %q", args, r.code, r.stderr)
				}
				if want := strings.TrimPrefix(tt.want, "\n"); r.stdout != want {
					t.Errorf("xupfctl %v output:\n%s\nwant:\n%s", args, r.stdout, want)
				}
			}
		})
	}
}

func TestSessionListEmptyTable(t *testing.T) {
	r, _ := runCLI(t, &apitest.Backend{}, nil, "session", "list")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if want := "ID  UE  UL-TEID  GNB  DL-TEID  QFI  UL-PKTS  DL-PKTS\n"; r.stdout != want {
		t.Errorf("output %q, want %q", r.stdout, want)
	}
}

func TestPFCPAssociationsEmpty(t *testing.T) {
	r, _ := runCLI(t, &apitest.Backend{}, nil, "pfcp", "associations")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if want := "NODE ID  ADDRESS  RECOVERY  ESTABLISHED  MISSED\n"; r.stdout != want {
		t.Errorf("output %q, want %q", r.stdout, want)
	}
	r, _ = runCLI(t, &apitest.Backend{}, nil, "-o", "json", "pfcp", "associations")
	if r.stdout != "[]\n" {
		t.Errorf("json of no associations = %q, want %q", r.stdout, "[]\n")
	}
}

// The YAML output uses the API's field names.
func TestPFCPAssociationsYAMLShape(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "-o", "yaml", "pfcp", "associations")
	for _, want := range []string{"- node_id: 198.51.100.5\n", "  address: 198.51.100.5:8805\n",
		"  recovery_time_stamp: 2025-01-01T00:00:00Z\n", "  missed_heartbeats: 2\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("yaml output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestJSONAndYAML(t *testing.T) {
	b := newBackend()
	assocs := []pfcp.Association{b.AssociationsData[1], b.AssociationsData[0]} // by Node ID
	tests := []decodedCase{
		{[]string{"status"}, func() any { return new(api.Status) }, &b.StatusData},
		{[]string{"session", "show", "9"}, func() any { return new(api.SessionInfo) }, &b.SessionsData[0]},
		{[]string{"stats"}, func() any { return new(api.Stats) }, &b.StatsData},
		{[]string{"pfcp", "associations"}, func() any { return new([]pfcp.Association) }, &assocs},
	}
	checkDecoded(t, func() api.Backend { return b }, tests)
}

// decodedCase is a command whose -o json and -o yaml outputs must decode to want.
type decodedCase struct {
	args []string
	into func() any // a fresh value to decode the output into
	want any
}

// checkDecoded runs every case in both formats, each against a backend from backend, and
// compares the decoded output with want.
func checkDecoded(t *testing.T, backend func() api.Backend, tests []decodedCase) {
	t.Helper()
	for _, tt := range tests {
		for _, format := range []string{"json", "yaml"} {
			t.Run(format+" "+strings.Join(tt.args, " "), func(t *testing.T) {
				r, _ := runCLI(t, backend(), nil, append([]string{"-o", format}, tt.args...)...)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				got := tt.into()
				var err error
				if format == "json" {
					err = json.Unmarshal([]byte(r.stdout), got)
				} else {
					err = yaml.Unmarshal([]byte(r.stdout), got)
				}
				if err != nil {
					t.Fatalf("output is not %s: %v\n%s", format, err, r.stdout)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("decoded output = %+v, want %+v\n%s", got, tt.want, r.stdout)
				}
			})
		}
	}
}

// The JSON output is the API's object, indented; the YAML uses the same field names.
func TestOutputShape(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "--output", "json", "session", "show", "2")
	if !strings.HasPrefix(r.stdout, "{\n  \"id\": 2,\n  \"ue_ipv4\": \"10.45.0.2\",") {
		t.Errorf("json output is not the indented API object:\n%s", r.stdout)
	}
	r, _ = runCLI(t, newBackend(), nil, "-o", "yaml", "session", "show", "2")
	for _, want := range []string{"id: 2\n", "ue_ipv4: 10.45.0.2\n", "uplink_teid: 4096\n", "usage:\n  uplink:\n    packets: 1042\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("yaml output lacks %q:\n%s", want, r.stdout)
		}
	}
	r, _ = runCLI(t, &apitest.Backend{}, nil, "-o", "json", "session", "list")
	if want := "{\n  \"static\": [],\n  \"pfcp\": []\n}\n"; r.stdout != want {
		t.Errorf("json of no sessions = %q, want %q", r.stdout, want)
	}
}

func TestErrors(t *testing.T) {
	tests := []errorCase{
		{
			name:       "bad output format",
			args:       []string{"-o", "x", "status"},
			wantStderr: "error: output format \"x\" is not supported; use table, json or yaml\n",
		},
		{
			name:       "bad session id",
			args:       []string{"session", "show", "abc"},
			wantStderr: "error: session id \"abc\" is not a number; use the id shown by `xupfctl session list`\n",
		},
		{
			name:       "unknown session",
			args:       []string{"session", "show", "7"},
			wantStderr: "error: session 7 not found\n",
		},
		{
			name:       "bad timeout",
			args:       []string{"--timeout", "0s", "status"},
			wantStderr: "error: --timeout 0s must be positive, e.g. 5s\n",
		},
		{
			name:       "missing id",
			args:       []string{"session", "show"},
			wantStderr: "error: accepts 1 arg(s), received 0\n",
			wantUsage:  true,
		},
		{
			name:       "unknown session subcommand",
			args:       []string{"session", "delete"},
			wantStderr: "error: unknown command \"delete\" for \"xupfctl session\"; use list or show\n",
			wantUsage:  true,
		},
		{
			name:       "unknown pfcp subcommand",
			args:       []string{"pfcp", "sess"},
			wantStderr: "error: unknown command \"sess\" for \"xupfctl pfcp\"; use associations or session\n",
			wantUsage:  true,
		},
		{
			name:       "pfcp associations takes no argument",
			args:       []string{"pfcp", "associations", "smf1"},
			wantStderr: "error: unknown command \"smf1\" for \"xupfctl pfcp associations\"\n",
			wantUsage:  true,
		},
		{
			name:       "unknown command",
			args:       []string{"sesion"},
			wantStderr: "error: unknown command \"sesion\" for \"xupfctl\"\n\nDid you mean this?\n\tsession\n\n",
		},
	}
	checkErrors(t, tests)
}

// errorCase is a command that must fail with exit code 1.
type errorCase struct {
	name       string
	args       []string
	wantStderr string // the end of stderr
	wantUsage  bool   // whether the usage text is shown along with the error
}

// checkErrors runs every case against a fresh fixture backend.
func checkErrors(t *testing.T, tests []errorCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := runCLI(t, newBackend(), nil, tt.args...)
			if r.code != 1 {
				t.Errorf("exit code %d, want 1", r.code)
			}
			usage := strings.Contains(r.stdout, "Usage:") || strings.Contains(r.stderr, "Usage:")
			if usage != tt.wantUsage {
				t.Errorf("usage shown = %v, want %v; stdout %q", usage, tt.wantUsage, r.stdout)
			}
			// The error is the last thing printed, after any usage text.
			if !strings.HasSuffix(r.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to end with %q", r.stderr, tt.wantStderr)
			}
			if !tt.wantUsage && r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	r := runCLIAt(t, url, nil, "status")
	if r.code != 1 {
		t.Errorf("exit code %d, want 1", r.code)
	}
	for _, want := range []string{"error: the daemon is not reachable at " + url, "XUPF_SERVER"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "Usage:") {
		t.Errorf("a runtime error printed the usage: %q", r.stderr)
	}
}

func TestServerSelection(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(newBackend(), nil))
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	// --server wins over XUPF_SERVER.
	r := runCLIAt(t, "", map[string]string{"XUPF_SERVER": deadURL}, "--server", srv.URL, "stats")
	if r.code != 0 {
		t.Errorf("--server over XUPF_SERVER: exit %d, stderr %q", r.code, r.stderr)
	}
	// XUPF_SERVER is used without --server (runCLIAt sets it from url).
	r = runCLIAt(t, srv.URL, nil, "stats")
	if r.code != 0 {
		t.Errorf("XUPF_SERVER: exit %d, stderr %q", r.code, r.stderr)
	}
	// host:port without a scheme is accepted.
	r = runCLIAt(t, "", map[string]string{}, "--server", strings.TrimPrefix(srv.URL, "http://"), "stats")
	if r.code != 0 {
		t.Errorf("--server without scheme: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestDefaultServer(t *testing.T) {
	root := newRootCmd(func(string) string { return "" })
	if got := root.PersistentFlags().Lookup("server").DefValue; got != "http://127.0.0.1:8080" {
		t.Errorf("--server default = %q, want http://127.0.0.1:8080", got)
	}
	root = newRootCmd(func(k string) string { return map[string]string{"XUPF_SERVER": "http://192.0.2.5:9000"}[k] })
	if got := root.PersistentFlags().Lookup("server").DefValue; got != "http://192.0.2.5:9000" {
		t.Errorf("--server default with XUPF_SERVER set = %q", got)
	}
}

func TestHelpMentionsCompletion(t *testing.T) {
	r := runCLIAt(t, "", map[string]string{}, "--help")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	for _, want := range []string{"completion", "XUPF_SERVER", "--output", "--timeout", "session", "stats", "status", "pfcp"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestCompletion(t *testing.T) {
	r := runCLIAt(t, "", map[string]string{}, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "__start_xupfctl") {
		t.Errorf("completion bash: exit %d, output starts %.80q", r.code, r.stdout)
	}

	// Session ids are completed from the daemon.
	r, _ = runCLI(t, newBackend(), nil, "__complete", "session", "show", "")
	if r.code != 0 {
		t.Fatalf("__complete: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"2\tUE 10.45.0.2\n", "9\tUE 10.45.0.9\n", ":4\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session id completion lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runCLIAt(t, "", map[string]string{}, "__complete", "-o", "")
	for _, want := range []string{"table\n", "json\n", "yaml\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("-o completion lacks %q:\n%s", want, r.stdout)
		}
	}
}

// xupfctl sends the token of --token-file, else of XUPF_TOKEN_FILE; when it has none the
// daemon accepts, it says which file it read and what to do.
func TestTokenFile(t *testing.T) {
	h, tokenFile := apitest.Guarded(t, newBackend())
	srv := httptest.NewServer(h)
	defer srv.Close()
	otherFile, _ := apitest.TokenFile(t)
	missing := filepath.Join(t.TempDir(), "api-token")

	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string // "" : success
	}{
		{name: "env", env: map[string]string{"XUPF_TOKEN_FILE": tokenFile}},
		{name: "flag over env", env: map[string]string{"XUPF_TOKEN_FILE": otherFile}, args: []string{"--token-file", tokenFile}},
		{name: "wrong token", env: map[string]string{"XUPF_TOKEN_FILE": otherFile},
			wantErr: "error: the API token is wrong; the token is in the file api_token_file of xupfd's configuration"},
		{name: "missing file", args: []string{"--token-file", missing},
			wantErr: "error: the daemon requires the API token, but the API token file " + missing +
				" does not exist; xupfd creates it on its first start (api_token_file in its configuration); point --token-file or XUPF_TOKEN_FILE at it\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"XUPF_SERVER": srv.URL}
			maps.Copy(env, c.env)
			expectResult(t, runCLIAt(t, srv.URL, env, append(c.args, "stats")...), c.wantErr)
		})
	}
}

// An https:// daemon is trusted through --ca-cert (or XUPF_CA_CERT); without it the error
// says what to give.
func TestCACert(t *testing.T) {
	h, tokenFile := apitest.Guarded(t, newBackend())
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(extra ...string) map[string]string {
		m := map[string]string{"XUPF_SERVER": srv.URL, "XUPF_TOKEN_FILE": tokenFile}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{name: "flag", env: env(), args: []string{"--ca-cert", ca}},
		{name: "env", env: env("XUPF_CA_CERT", ca)},
		{name: "untrusted", env: env(), wantErr: "error: the daemon's TLS certificate at " + srv.URL +
			" is not trusted; give the certificate of the CA that signed it (the certificate itself if it is self-signed) with --ca-cert or XUPF_CA_CERT"},
		{name: "not PEM", env: env(), args: []string{"--ca-cert", tokenFile},
			wantErr: "error: --ca-cert: CA certificate " + tokenFile + " holds no PEM certificate"},
		{name: "missing", env: env(), args: []string{"--ca-cert", "/nonexistent.pem"},
			wantErr: "error: --ca-cert: CA certificate: open /nonexistent.pem: no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectResult(t, runCLIAt(t, srv.URL, c.env, append(c.args, "status")...), c.wantErr)
		})
	}
}

// expectResult checks that r succeeded when wantErr is "", else that it failed with wantErr
// in its standard error.
func expectResult(t *testing.T, r result, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && r.code != 0:
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	case wantErr != "" && (r.code != 1 || !strings.Contains(r.stderr, wantErr)):
		t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, wantErr)
	}
}

// xupfctl warns before it sends the token in clear to anything but loopback.
func TestCleartextWarning(t *testing.T) {
	h, tokenFile := apitest.Guarded(t, newBackend())
	srv := httptest.NewServer(h)
	defer srv.Close()
	const warning = "warning: the API token goes to "
	for server, warn := range map[string]bool{
		srv.URL: false,
		strings.Replace(srv.URL, "127.0.0.1", "localhost", 1): false,
		"http://0.0.0.0:1":          true, // refused: nothing listens on port 1
		"https://0.0.0.0:1":         false,
		"0.0.0.0:1":                 true, // no scheme: http
		"http://[::ffff:0.0.0.0]:1": true,
	} {
		r := runCLIAt(t, server, map[string]string{"XUPF_SERVER": server, "XUPF_TOKEN_FILE": tokenFile}, "--timeout", "2s", "status")
		if got := strings.Contains(r.stderr, warning); got != warn {
			t.Errorf("--server %s: warned %v, want %v; stderr %q", server, got, warn, r.stderr)
		}
	}
	r := runCLIAt(t, "", map[string]string{"XUPF_TOKEN_FILE": tokenFile}, "--server", "http://0.0.0.0:1", "status")
	if want := warning + "0.0.0.0:1 in clear, readable on the way; serve the API over HTTPS (api_tls_cert) and use https://\n"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr %q, want it to start with %q", r.stderr, want)
	}
}
