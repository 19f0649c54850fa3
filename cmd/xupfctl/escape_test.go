package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/pfcp"
)

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"smf1.5gc.example":           "smf1.5gc.example",
		"":                           "",
		"permit out 17 from any":     "permit out 17 from any",
		"smf-é-中":                    "smf-é-中",
		"smf\nFAKE ROW":              `"smf\nFAKE ROW"`,
		"smf\x1b[31mred":             `"smf\x1b[31mred"`,
		"a\tb":                       `"a\tb"`,
		"a\rb":                       `"a\rb"`,
		"del\x7f":                    `"del\x7f"`,
		"csi\u009b2J":                `"csi\u009b2J"`,
		"bidi\u202eevil":             `"bidi\u202eevil"`,
		"bad\xffutf8":                `"bad\xffutf8"`,
		`"smf\n"`:                    `"\"smf\\n\""`,
		"\x1b]0;title\x07":           `"\x1b]0;title\a"`,
		"zero\u200bwidth":            `"zero\u200bwidth"`,
		"nul\x00":                    `"nul\x00"`,
		"ok with spaces and quotes'": "ok with spaces and quotes'",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestMessage(t *testing.T) {
	in := "line one\nline two\twith a tab \x1b[2J\u009b\xff end"
	want := "line one\nline two\twith a tab \\x1b[2J\\u009b\\xff end"
	if got := message(in); got != want {
		t.Errorf("message(%q) = %q, want %q", in, got, want)
	}
}

func TestEscapeJSON(t *testing.T) {
	value := map[string]string{"k": "a\x7fb\u009bc\u202ed😀e\u00e9\U000e0001"}
	data, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	out := escapeJSON(data)
	if want := `{"k":"a\u007fb\u009bc\u202ed😀eé\udb40\udc01"}`; string(out) != want {
		t.Errorf("escapeJSON = %s, want %s", out, want)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["k"] != value["k"] {
		t.Errorf("escaped JSON decodes to %q (%v), want %q", back["k"], err, value["k"])
	}
	if plain := []byte(`{"k":"plain é"}`); &escapeJSON(plain)[0] != &plain[0] {
		t.Error("JSON with nothing to escape was copied")
	}
}

// A hostile SMF's Node ID and flow description, as the daemon reports them, reach the
// operator's terminal escaped in every output format, and the error of a hostile server too.
func TestPeerStringsEscaped(t *testing.T) {
	const nodeID = "smf\nsmf2.evil  198.51.100.9:8805\x1b[2J\x1b]0;pwned\x07\u009b31m\u202e"
	b := newBackend()
	b.AssociationsData = []pfcp.Association{{NodeID: nodeID}}
	for _, s := range b.PFCPSessionsData {
		s.Peer = nodeID
		s.PDRs[3].SDF[0].FlowDescription = "permit out 17 from any to assigned 5060\r\x1b[1A"
		s.PDRs[1].NetworkInstance = "internet\x1b[8m"
	}
	raw := func(s string) bool { return strings.ContainsAny(s, "\x1b\r\a\u009b\u202e") }

	for _, args := range [][]string{
		{"pfcp", "associations"},
		{"session", "list"},
		{"session", "show", "0x100000001"},
		{"-o", "json", "pfcp", "associations"},
		{"-o", "yaml", "pfcp", "associations"},
		{"-o", "json", "session", "show", "0x100000001"},
	} {
		r, _ := runCLI(t, b, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if raw(r.stdout) {
			t.Errorf("%v printed a raw control character:\n%q", args, r.stdout)
		}
		if args[0] != "-o" && strings.Contains(r.stdout, "\nsmf2.evil") {
			t.Errorf("%v: the Node ID's newline forged a row:\n%s", args, r.stdout)
		}
	}
	r, _ := runCLI(t, b, nil, "pfcp", "associations")
	if want := `"smf\nsmf2.evil  198.51.100.9:8805\x1b[2J\x1b]0;pwned\a\u009b31m\u202e"`; !strings.Contains(r.stdout, want) {
		t.Errorf("the Node ID is not shown quoted as %s:\n%s", want, r.stdout)
	}
	// The machine-readable outputs still carry the exact value.
	r, _ = runCLI(t, b, nil, "-o", "json", "pfcp", "associations")
	var list []pfcp.Association
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].NodeID != nodeID {
		t.Errorf("-o json decodes to %+v (%v), want the Node ID intact", list, err)
	}
	r, _ = runCLI(t, b, nil, "-o", "yaml", "pfcp", "associations")
	if err := yaml.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].NodeID != nodeID {
		t.Errorf("-o yaml decodes to %+v (%v), want the Node ID intact", list, err)
	}

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error": "bad\u001b[2J\u009b"}`))
	}))
	defer evil.Close()
	r = runCLIAt(t, evil.URL, nil, "status")
	if raw(r.stderr) || !strings.Contains(r.stderr, `error: bad\x1b[2J\u009b`) {
		t.Errorf("the server's error reached stderr as %q", r.stderr)
	}
}

// A value with a rune yaml.v3 thinks printable (a bidirectional override) is double-quoted
// and escaped, beside those yaml.v3 escapes itself, and reads back the same.
func TestWriteYAMLEscapes(t *testing.T) {
	value := map[string]string{"node_id": "smf\u202elive\U000e0001\U0001d173", "plain": "smf1.5gc.example é"}
	var out strings.Builder
	if err := writeYAML(&out, value); err != nil {
		t.Fatal(err)
	}
	want := "node_id: \"smf\\u202elive\\U000E0001\\U0001D173\"\nplain: smf1.5gc.example é\n"
	if out.String() != want {
		t.Errorf("writeYAML = %q, want %q", out.String(), want)
	}
	var back map[string]string
	if err := yaml.Unmarshal([]byte(out.String()), &back); err != nil || back["node_id"] != value["node_id"] {
		t.Errorf("reads back as %q (%v)", back, err)
	}
}
