package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
	"github.com/xupf/xupf/internal/classifier"
)

func TestClassifierTables(t *testing.T) {
	tests := []tableCase{
		{
			args: []string{"classifier", "list"},
			want: `
ID  PRIORITY  DIRECTION  MATCH                                           PACKETS  BYTES
3   100       ingress    udp 10.0.0.0/8:1000-2000 -> any:5060            1042     208400
5   0         both       mac 02:00:00:00:00:01 -> any, ethertype 0x0806  0        0
20  10        egress     tcp 198.51.100.0/24:443 -> any                  7        9100
`,
		},
		{
			args: []string{"classifier", "show", "3"},
			want: `
ID:                3
Priority:          100
Direction:         ingress
Source MAC:        any
Destination MAC:   any
EtherType:         any
Source IP:         10.0.0.0/8
Destination IP:    any
Protocol:          udp
Source port:       1000-2000
Destination port:  5060
Matched:           1042 packets, 208400 bytes
`,
		},
		{
			args: []string{"classifier", "show", "5"},
			want: `
ID:                5
Priority:          0
Direction:         both
Source MAC:        02:00:00:00:00:01
Destination MAC:   any
EtherType:         0x0806
Source IP:         any
Destination IP:    any
Protocol:          any
Source port:       any
Destination port:  any
Matched:           0 packets, 0 bytes
`,
		},
	}
	checkTables(t, tests)
}

func TestClassifierListEmpty(t *testing.T) {
	r, _ := runCLI(t, &apitest.Backend{}, nil, "classifier", "list")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if want := "ID  PRIORITY  DIRECTION  MATCH  PACKETS  BYTES\n"; r.stdout != want {
		t.Errorf("output %q, want %q", r.stdout, want)
	}
	r, _ = runCLI(t, &apitest.Backend{}, nil, "-o", "json", "classifier", "list")
	if r.stdout != "[]\n" {
		t.Errorf("json of no classes = %q, want %q", r.stdout, "[]\n")
	}
}

func TestClassifierJSONAndYAML(t *testing.T) {
	fixture := apitest.Classes() // 20, 3, 5
	sorted := []api.ClassInfo{fixture[1], fixture[2], fixture[0]}
	added := api.ClassInfo{Class: classifier.Class{ID: 7, Priority: 2, Direction: "egress", Protocol: "udp", DstPort: "53"}}
	tests := []decodedCase{
		{[]string{"classifier", "list"}, func() any { return new([]api.ClassInfo) }, &sorted},
		{[]string{"classifier", "show", "20"}, func() any { return new(api.ClassInfo) }, &fixture[0]},
		{[]string{"classifier", "show", "5"}, func() any { return new(api.ClassInfo) }, &fixture[2]},
		{
			[]string{"classifier", "add", "--id", "7", "--priority", "2", "--direction", "egress", "--protocol", "udp", "--dst-port", "53"},
			func() any { return new(api.ClassInfo) }, &added,
		},
	}
	checkDecoded(t, func() api.Backend { return newBackend() }, tests)
}

// The JSON and YAML outputs use the API's field names, the class's fields flat beside its
// counters.
func TestClassifierOutputShape(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "-o", "json", "classifier", "show", "3")
	if !strings.HasPrefix(r.stdout, "{\n  \"id\": 3,\n  \"priority\": 100,\n  \"direction\": \"ingress\",") ||
		!strings.Contains(r.stdout, "\"counters\": {\n    \"packets\": 1042,") {
		t.Errorf("json output is not the indented API object:\n%s", r.stdout)
	}
	r, _ = runCLI(t, newBackend(), nil, "-o", "yaml", "classifier", "show", "3")
	want := `id: 3
priority: 100
direction: ingress
src_ip: 10.0.0.0/8
protocol: udp
src_port: 1000-2000
dst_port: "5060"
counters:
  packets: 1042
  bytes: 208400
`
	if r.stdout != want {
		t.Errorf("yaml output:\n%s\nwant:\n%s", r.stdout, want)
	}
}

func TestClassifierAdd(t *testing.T) {
	b := newBackend()
	r, _ := runCLI(t, b, nil, "classifier", "add", "--id", "7", "--priority", "50", "--direction", "egress",
		"--src-mac", "02:00:00:00:00:0a", "--dst-mac", "02:00:00:00:00:0b", "--ethertype", "0x0800",
		"--src-ip", "198.51.100.0/24", "--dst-ip", "10.45.0.7", "--protocol", "tcp", "--src-port", "443", "--dst-port", "1024-65535")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if want := "class 7 added: mac 02:00:00:00:00:0a -> 02:00:00:00:00:0b, ethertype 0x0800, " +
		"tcp 198.51.100.0/24:443 -> 10.45.0.7:1024-65535 (egress, priority 50)\n"; r.stdout != want {
		t.Errorf("output %q, want %q", r.stdout, want)
	}
	want := classifier.Class{ID: 7, Priority: 50, Direction: "egress", SrcMAC: "02:00:00:00:00:0a", DstMAC: "02:00:00:00:00:0b",
		EtherType: "0x0800", SrcIP: "198.51.100.0/24", DstIP: "10.45.0.7", Protocol: "tcp", SrcPort: "443", DstPort: "1024-65535"}
	if got := b.ClassesData[len(b.ClassesData)-1].Class; got != want {
		t.Errorf("the daemon got %+v, want %+v", got, want)
	}

	// Only --id: every other field is left empty (match anything, default direction).
	b = &apitest.Backend{}
	r, _ = runCLI(t, b, nil, "classifier", "add", "--id", "1")
	if r.code != 0 || r.stdout != "class 1 added: any (both, priority 0)\n" {
		t.Errorf("exit %d, output %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := []api.ClassInfo{{Class: classifier.Class{ID: 1}}}; !reflect.DeepEqual(b.ClassesData, want) {
		t.Errorf("the daemon has %+v, want %+v", b.ClassesData, want)
	}
}

func TestClassifierDelete(t *testing.T) {
	b := newBackend()
	r, _ := runCLI(t, b, nil, "classifier", "delete", "3")
	if r.code != 0 || r.stderr != "" || r.stdout != "class 3 deleted\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var ids []uint32
	for _, c := range b.ClassesData {
		ids = append(ids, c.ID)
	}
	if !reflect.DeepEqual(ids, []uint32{20, 5}) {
		t.Errorf("classes left = %v, want [20 5]", ids)
	}
	// json and yaml print nothing: there is no object to show.
	for _, format := range []string{"json", "yaml"} {
		r, _ = runCLI(t, b, nil, "-o", format, "classifier", "delete", "20")
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Errorf("-o %s: exit %d, stdout %q, stderr %q", format, r.code, r.stdout, r.stderr)
		}
		b.ClassesData = apitest.Classes()
	}
}

func TestClassifierErrors(t *testing.T) {
	const badID = "is not a number from 1 to 4294967295; use the id shown by `xupfctl classifier list`\n"
	tests := []errorCase{
		{
			name:       "missing --id",
			args:       []string{"classifier", "add", "--priority", "3", "--protocol", "udp"},
			wantStderr: "error: --id is required: give the class a number from 1 to 4294967295, e.g. --id 10\n",
			wantUsage:  true,
		},
		{
			name:       "--id not a number",
			args:       []string{"classifier", "add", "--id", "x"},
			wantStderr: "error: invalid argument \"x\" for \"--id\" flag: not a class id; use a whole number from 1 to 4294967295\n",
			wantUsage:  true,
		},
		{
			name:       "--priority negative",
			args:       []string{"classifier", "add", "--id", "3", "--priority", "-1"},
			wantStderr: "error: invalid argument \"-1\" for \"--priority\" flag: not a priority; use a whole number from 0 to 4294967295\n",
			wantUsage:  true,
		},
		{
			name:       "invalid class: the daemon's message as it is",
			args:       []string{"classifier", "add", "--id", "8", "--src-port", "80"},
			wantStderr: "error: class 8: src_port: ports need protocol tcp, udp or sctp; set protocol too\n",
		},
		{
			name:       "several invalid fields",
			args:       []string{"classifier", "add", "--id", "8", "--direction", "up", "--src-ip", "10.0.0.1/8"},
			wantStderr: "error: class 8: direction: \"up\" is not a direction; use ingress (uplink), egress (downlink) or both\nsrc_ip: \"10.0.0.1/8\" has host bits set; did you mean 10.0.0.0/8\n",
		},
		{
			name:       "id 0",
			args:       []string{"classifier", "add", "--id", "0"},
			wantStderr: "error: class 0: id: 0 is not a class id; use 1 to 4294967295\n",
		},
		{
			name:       "duplicate id",
			args:       []string{"classifier", "add", "--id", "3"},
			wantStderr: "error: class 3 already exists; delete it first or use another id\n",
		},
		{
			name:       "show unknown class",
			args:       []string{"classifier", "show", "7"},
			wantStderr: "error: class 7 not found\n",
		},
		{
			name:       "delete unknown class",
			args:       []string{"classifier", "delete", "7"},
			wantStderr: "error: class 7 not found\n",
		},
		{
			name:       "show bad id",
			args:       []string{"classifier", "show", "abc"},
			wantStderr: "error: class id \"abc\" " + badID,
		},
		{
			name:       "delete id 0",
			args:       []string{"classifier", "delete", "0"},
			wantStderr: "error: class id \"0\" " + badID,
		},
		{
			name:       "delete without id",
			args:       []string{"classifier", "delete"},
			wantStderr: "error: accepts 1 arg(s), received 0\n",
			wantUsage:  true,
		},
		{
			name:       "add with an argument",
			args:       []string{"classifier", "add", "3"},
			wantStderr: "error: unknown command \"3\" for \"xupfctl classifier add\"\n",
			wantUsage:  true,
		},
		{
			name:       "unknown classifier subcommand",
			args:       []string{"classifier", "remove"},
			wantStderr: "error: unknown command \"remove\" for \"xupfctl classifier\"; use list, show, add or delete\n",
			wantUsage:  true,
		},
	}
	checkErrors(t, tests)
}

// A bad id is reported without asking the daemon, so even when it is down.
func TestClassifierBadIDOffline(t *testing.T) {
	r := runCLIAt(t, "http://127.0.0.1:1", nil, "classifier", "show", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "class id \"x\" is not a number") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestClassifierCompletion(t *testing.T) {
	for _, verb := range []string{"show", "delete"} {
		r, _ := runCLI(t, newBackend(), nil, "__complete", "classifier", verb, "")
		if r.code != 0 {
			t.Fatalf("__complete %s: exit %d, stderr %q", verb, r.code, r.stderr)
		}
		want := "3\tudp 10.0.0.0/8:1000-2000 -> any:5060\n" +
			"5\tmac 02:00:00:00:00:01 -> any, ethertype 0x0806\n" +
			"20\ttcp 198.51.100.0/24:443 -> any\n" +
			":4\n"
		if r.stdout != want {
			t.Errorf("class id completion for %s:\n%s\nwant:\n%s", verb, r.stdout, want)
		}
		// One id only.
		r, _ = runCLI(t, newBackend(), nil, "__complete", "classifier", verb, "3", "")
		if r.stdout != ":4\n" {
			t.Errorf("completion after the id for %s = %q, want none", verb, r.stdout)
		}
	}
	for flag, values := range map[string][]string{
		"--direction": {"ingress", "egress", "both"},
		"--protocol":  {"tcp", "udp", "sctp", "icmp"},
	} {
		r := runCLIAt(t, "", map[string]string{}, "__complete", "classifier", "add", flag, "")
		for _, v := range values {
			if !strings.Contains(r.stdout, v+"\n") {
				t.Errorf("%s completion lacks %q:\n%s", flag, v, r.stdout)
			}
		}
	}
}

func TestClassMatch(t *testing.T) {
	for _, tt := range []struct {
		class classifier.Class
		want  string
	}{
		{classifier.Class{ID: 1}, "any"},
		{classifier.Class{Protocol: "ICMP"}, "icmp"},
		{classifier.Class{Protocol: "47"}, "47"},
		{classifier.Class{DstIP: "10.45.0.0/16"}, "any -> 10.45.0.0/16"},
		{classifier.Class{Protocol: "udp", DstPort: "53"}, "udp any -> any:53"},
		{classifier.Class{Protocol: "udp", SrcIP: "10.0.0.0/8", SrcPort: "1000-2000", DstPort: "5060"}, "udp 10.0.0.0/8:1000-2000 -> any:5060"},
		{classifier.Class{DstMAC: "ff:ff:ff:ff:ff:ff"}, "mac any -> ff:ff:ff:ff:ff:ff"},
		{classifier.Class{EtherType: "0x0800", Protocol: "tcp"}, "ethertype 0x0800, tcp"},
	} {
		if got := classMatch(tt.class); got != tt.want {
			t.Errorf("classMatch(%+v) = %q, want %q", tt.class, got, tt.want)
		}
	}
}

func TestHelpMentionsClassifier(t *testing.T) {
	r := runCLIAt(t, "", map[string]string{}, "--help")
	if !strings.Contains(r.stdout, "classifier") {
		t.Errorf("help lacks the classifier command:\n%s", r.stdout)
	}
}
