package main

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/api/apitest"
	"github.com/xupf/xupf/internal/pfcp"
)

// The fixture's PFCP sessions (apitest.NewBackend): 0x100000001 forwards its downlink to the
// gNB, 0x100000002 buffers it.
func TestSessionShowPFCPTables(t *testing.T) {
	tests := []tableCase{
		{
			args: []string{"session", "show", "0x100000001"},
			want: `
SEID:         0x100000001
CP F-SEID:    0x20 at 198.51.100.7
Peer:         smf1.5gc.example
Established:  2025-01-02T03:05:00Z

PDR ID  PRECEDENCE  SOURCE  MATCH                              QFI  SDF                                      FAR  QERS  URRS  PACKETS  BYTES
1       255         access  TEID 0x4001 (chosen, choose id 1)  9    -                                        1    1     1     10       1000
2       65535       core    UE 10.45.0.20                      -    -                                        2    1     1     20       20000
3       10          core    UE 10.45.0.20                      -    permit out 17 from any to assigned 5060  2    2     -     2        400

FAR ID  ACTION  DEST    OHC                TLM      BAR
1       FORW    core    -                  -        -
2       FORW    access  192.0.2.10 0x5001  DSCP 46  -

QER ID  GATE UL/DL   MBR UL/DL (KBIT/S)  GBR UL/DL (KBIT/S)  QFI
1       open/open    100000/200000       -                   9
2       closed/open  5000/10000          1000/2000           5

URR ID  METHOD       THRESHOLD            QUOTA
1       DURAT+VOLUM  1000000 bytes, 60 s  10000000 bytes, 3600 s
`,
		},
		{
			// Decimal as the API takes it; a buffering FAR with its BAR.
			args: []string{"session", "show", "4294967298"},
			want: `
SEID:         0x100000002
CP F-SEID:    0x21 at 198.51.100.7
Peer:         smf1.5gc.example
Established:  2025-01-02T03:05:00Z

PDR ID  PRECEDENCE  SOURCE  MATCH                              QFI  SDF                                      FAR  QERS  URRS  PACKETS  BYTES
1       255         access  TEID 0x4002 (chosen, choose id 1)  9    -                                        1    1     1     3        300
2       65535       core    UE 10.45.0.21                      -    -                                        2    1     1     0        0
3       10          core    UE 10.45.0.21                      -    permit out 17 from any to assigned 5060  2    2     -     2        400

FAR ID  ACTION     DEST    OHC  TLM  BAR
1       FORW       core    -    -    -
2       BUFF+NOCP  access  -    -    1

QER ID  GATE UL/DL   MBR UL/DL (KBIT/S)  GBR UL/DL (KBIT/S)  QFI
1       open/open    100000/200000       -                   9
2       closed/open  5000/10000          1000/2000           5

URR ID  METHOD       THRESHOLD            QUOTA
1       DURAT+VOLUM  1000000 bytes, 60 s  10000000 bytes, 3600 s

BAR ID  DDN DELAY  SUGGESTED PACKETS
1       100ms      10
`,
		},
	}
	checkTables(t, tests)
}

// A PFCP session with only what an SMF must send: no QER, URR or BAR table, a UE address
// this UPF chose, and an uplink PDR on a TEID the SMF gave.
func TestSessionShowPFCPMinimal(t *testing.T) {
	b := &apitest.Backend{PFCPSessionsData: []api.PFCPSessionInfo{{
		Session: pfcp.Session{
			SEID: pfcp.FirstSEID, CPSEID: 1, CPAddress: netip.MustParseAddr("198.51.100.5"), Peer: "198.51.100.5",
			PDRs: map[uint16]*pfcp.PDR{
				1: {ID: 1, SourceInterface: 0, FTEID: &pfcp.FTEID{TEID: 0x10, Addr: netip.MustParseAddr("192.0.2.1")}, FAR: 1},
				2: {ID: 2, SourceInterface: 1, UE: netip.MustParseAddr("10.46.0.1"), UEChosen: true, FAR: 2},
			},
			FARs: map[uint32]*pfcp.FAR{
				1: {ID: 1, Apply: pfcp.ApplyForward, DestinationInterface: 2},
				2: {ID: 2, Apply: pfcp.ApplyDrop, DestinationInterface: 0},
			},
		},
		Usage: []api.PDRUsage{{PDR: 1}, {PDR: 2}},
	}}}

	r, _ := runCLI(t, b, nil, "session", "show", "4294967296")
	want := `SEID:         0x100000000
CP F-SEID:    0x1 at 198.51.100.5
Peer:         198.51.100.5
Established:  -

PDR ID  PRECEDENCE  SOURCE  MATCH                  QFI  SDF  FAR  QERS  URRS  PACKETS  BYTES
1       0           access  TEID 0x10              -    -    1    -     -     0        0
2       0           core    UE 10.46.0.1 (chosen)  -    -    2    -     -     0        0

FAR ID  ACTION  DEST    OHC  TLM  BAR
1       FORW    n6-lan  -    -    -
2       DROP    access  -    -    -
`
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}

	// Without static sessions, their empty table is left out.
	r, _ = runCLI(t, b, nil, "session", "list")
	want = `SEID         PEER          CP-SEID  UE         UL-TEIDS  DL-PEER  PDRS  UL-PKTS  DL-PKTS
0x100000000  198.51.100.5  0x1      10.46.0.1  0x10      DROP     2     0        0
`
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
}

func TestSessionJSONAndYAML(t *testing.T) {
	b := newBackend()
	lists := sessionLists{
		Static: []api.SessionInfo{b.SessionsData[1], b.SessionsData[0]},             // by id
		PFCP:   []api.PFCPSessionInfo{b.PFCPSessionsData[1], b.PFCPSessionsData[0]}, // by SEID
	}
	tests := []decodedCase{
		{[]string{"session", "list"}, func() any { return new(sessionLists) }, &lists},
		{[]string{"session", "show", "0x100000002"}, func() any { return new(api.PFCPSessionInfo) }, &b.PFCPSessionsData[0]},
		{[]string{"session", "show", "4294967297"}, func() any { return new(api.PFCPSessionInfo) }, &b.PFCPSessionsData[1]},
	}
	for _, tt := range tests {
		for _, format := range []string{"json", "yaml"} {
			t.Run(format+" "+strings.Join(tt.args, " "), func(t *testing.T) {
				r, _ := runCLI(t, newBackend(), nil, append([]string{"-o", format}, tt.args...)...)
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

// The JSON of session list is one object of two arrays; that of a PFCP session is the API's
// object, with its rules keyed by id.
func TestSessionOutputShape(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "-o", "json", "session", "list")
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &top); err != nil {
		t.Fatalf("session list -o json: %v\n%s", err, r.stdout)
	}
	if len(top) != 2 || !strings.HasPrefix(string(top["static"]), "[") || !strings.HasPrefix(string(top["pfcp"]), "[") {
		t.Errorf("session list -o json = %s, want an object of the arrays static and pfcp", r.stdout)
	}

	r, _ = runCLI(t, newBackend(), nil, "-o", "json", "session", "show", "0x100000001")
	for _, want := range []string{"{\n  \"seid\": 4294967297,\n  \"cp_seid\": 32,", "\n  \"pdrs\": {\n    \"1\": {\n      \"id\": 1,",
		"\n  \"usage\": [\n    {\n      \"pdr_id\": 1,\n      \"packets\": 10,"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session show -o json lacks %q:\n%s", want, r.stdout)
		}
	}

	r, _ = runCLI(t, &apitest.Backend{}, nil, "-o", "yaml", "session", "list")
	if want := "static: []\npfcp: []\n"; r.stdout != want {
		t.Errorf("yaml of no sessions = %q, want %q", r.stdout, want)
	}
}

func TestSessionErrors(t *testing.T) {
	tests := []errorCase{
		{
			name:       "unknown pfcp session",
			args:       []string{"session", "show", "4294967299"},
			wantStderr: "error: PFCP session 4294967299 not found\n",
		},
		{
			name:       "unknown pfcp session in hex",
			args:       []string{"session", "show", "0x100000003"},
			wantStderr: "error: PFCP session 4294967299 not found\n",
		},
		{
			name:       "bad hex id",
			args:       []string{"session", "show", "0xzz"},
			wantStderr: "error: session id \"0xzz\" is not a number; use the id shown by `xupfctl session list`\n",
		},
		{
			name:       "id too large",
			args:       []string{"session", "show", "18446744073709551616"},
			wantStderr: "error: session id \"18446744073709551616\" is not a number; use the id shown by `xupfctl session list`\n",
		},
	}
	checkErrors(t, tests)
}

// A failing PFCP read fails the list: showing the static sessions alone would look like
// there are no PFCP sessions.
func TestSessionListPFCPError(t *testing.T) {
	r, _ := runCLI(t, sessionPFCPFailing{newBackend()}, nil, "session", "list")
	if r.code != 1 || r.stderr != "error: reading PFCP sessions failed\n" || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 with the server's message only", r.code, r.stdout, r.stderr)
	}
}

// sessionPFCPFailing is the fixture backend whose PFCP session reads fail.
type sessionPFCPFailing struct{ *apitest.Backend }

func (sessionPFCPFailing) PFCPSessions() ([]api.PFCPSessionInfo, error) {
	return nil, errors.New("reading PFCP sessions failed")
}

func TestSessionCompletion(t *testing.T) {
	r, _ := runCLI(t, newBackend(), nil, "__complete", "session", "show", "")
	if r.code != 0 {
		t.Fatalf("__complete: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"2\tUE 10.45.0.2\n",
		"4294967297\tPFCP 0x100000001 of smf1.5gc.example, UE 10.45.0.20\n",
		"4294967298\tPFCP 0x100000002 of smf1.5gc.example, UE 10.45.0.21\n",
		":4\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session id completion lacks %q:\n%s", want, r.stdout)
		}
	}
}
