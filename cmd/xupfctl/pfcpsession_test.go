package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/pfcpclient/pfcptest"
)

// runSMF runs xupfctl with no API server configured: the pfcp session commands need none.
func runSMF(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIAt(t, "", map[string]string{}, args...)
}

// downlinkFAR returns the downlink FAR a fake UPF's session was created with.
func downlinkFAR(t *testing.T, s pfcptest.Session) *ie.IE {
	t.Helper()
	for _, f := range s.Establishment.CreateFAR {
		if id, _ := f.FARID(); id == pfcpclient.DownlinkFARID {
			return f
		}
	}
	t.Fatalf("session %#x has no downlink FAR", s.UPSEID)
	return nil
}

// ohc returns the gNB address and TEID of the Outer Header Creation inside a FAR.
func ohc(t *testing.T, far *ie.IE, params uint16) (string, uint32) {
	t.Helper()
	o := pfcptest.One(far, params, ie.OuterHeaderCreation)
	if o == nil {
		t.Fatalf("FAR without Outer Header Creation: %v", far)
	}
	f, err := o.OuterHeaderCreation()
	if err != nil {
		t.Fatal(err)
	}
	return f.IPv4Address.String(), f.TEID
}

func TestPFCPSessionCreateTable(t *testing.T) {
	upf := pfcptest.Start(t, pfcptest.Options{})
	r := runSMF(t, "pfcp", "session", "create", "--upf", upf.Addr().String(), "--node-id", "smf.cli", "--count", "3",
		"--ue-pool", "10.45.0.0/16", "--gnb", "192.0.2.100", "--gnb-teid-base", "0x1000", "--qfi", "9")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	held := upf.Sessions()
	if len(held) != 3 {
		t.Fatalf("the UPF has %d sessions, want 3", len(held))
	}
	want := [][]string{{"CP-SEID", "UP-SEID", "UE", "UL-TEID", "UPF-N3", "GNB", "DL-TEID"}}
	for i, s := range held {
		want = append(want, []string{fmt.Sprintf("0x%x", s.CPSEID), fmt.Sprintf("0x%x", s.UPSEID), fmt.Sprintf("10.45.0.%d", i+1),
			fmt.Sprintf("0x%x", 0x100+i), "192.0.2.1", "192.0.2.100", fmt.Sprintf("0x%x", 0x1000+i)})
		if s.NodeID != "smf.cli" {
			t.Errorf("session %d from node %q", i, s.NodeID)
		}
		gnb, teid := ohc(t, downlinkFAR(t, s), ie.ForwardingParameters)
		if gnb != "192.0.2.100" || teid != uint32(0x1000+i) {
			t.Errorf("session %d downlink to %s TEID %#x", i, gnb, teid)
		}
		if q := pfcptest.One(s.Establishment.CreateQER[0], ie.QFI); q == nil || q.Payload[0] != 9 {
			t.Errorf("session %d QER QFI %v, want 9", i, q)
		}
	}
	var got [][]string
	for line := range strings.Lines(r.stdout) {
		got = append(got, strings.Fields(line))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("table:\n%s\nwant rows %q", r.stdout, want)
	}
	if lines := strings.Split(r.stdout, "\n"); strings.Index(lines[0], "UE") != strings.Index(lines[1], "10.45.0.1") {
		t.Errorf("columns are not aligned:\n%s", r.stdout)
	}
	// Without --hold the association is left in place, and with it the sessions.
	if as := upf.Associations(); len(as) != 1 || as[0].NodeID != "smf.cli" {
		t.Errorf("associations after create: %+v", as)
	}
	// A second run with the same Node ID adds sessions: the UPF is asked to keep the others.
	r = runSMF(t, "pfcp", "session", "create", "--upf", upf.Addr().String(), "--node-id", "smf.cli", "--ue-pool", "10.46.0.0/16")
	if n := len(upf.Sessions()); r.code != 0 || n != 4 {
		t.Errorf("after a second create: exit %d (%q), %d sessions, want 4", r.code, r.stderr, n)
	}
}

func TestPFCPSessionCreateJSONAndYAML(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			upf := pfcptest.Start(t, pfcptest.Options{UEPool: netip.MustParsePrefix("10.70.0.0/24")})
			// The UPF chooses the UE addresses; no gNB yet: downlink buffers.
			r := runSMF(t, "-o", format, "pfcp", "session", "create", "--upf", upf.Addr().String(), "--count", "2", "--ue-choose")
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			var rows []pfcpSessionRow
			var err error
			if format == "json" {
				err = json.Unmarshal([]byte(r.stdout), &rows)
			} else {
				err = yaml.Unmarshal([]byte(r.stdout), &rows)
			}
			if err != nil {
				t.Fatalf("output is not %s: %v\n%s", format, err, r.stdout)
			}
			var want []pfcpSessionRow
			for i, s := range upf.Sessions() {
				want = append(want, pfcpSessionRow{CPSEID: s.CPSEID, UPSEID: s.UPSEID, UE: netip.MustParseAddr(fmt.Sprintf("10.70.0.%d", i+1)),
					UplinkTEID: uint32(0x100 + i), GTPUAddr: netip.MustParseAddr("192.0.2.1")})
				if f := downlinkFAR(t, s); !f.HasBUFF() || !f.HasNOCP() {
					t.Errorf("session %d downlink FAR does not buffer: %v", i, f)
				}
				if ue, _ := s.Establishment.CreatePDR[1].UEIPAddress(); ue == nil || ue.Flags&0x10 == 0 {
					t.Errorf("session %d downlink PDR does not ask the UPF to choose the UE address: %+v", i, ue)
				}
			}
			if !reflect.DeepEqual(rows, want) {
				t.Errorf("decoded %+v\nwant %+v\n%s", rows, want, r.stdout)
			}
		})
	}
	// The field names.
	upf := pfcptest.Start(t, pfcptest.Options{})
	r := runSMF(t, "-o", "json", "pfcp", "session", "create", "--upf", upf.Addr().String(), "--ue-pool", "10.45.0.0/30",
		"--gnb", "192.0.2.7", "--gnb-teid-base", "77")
	for _, want := range []string{`"up_seid": 20480,`, `"ue_ipv4": "10.45.0.1",`, `"uplink_teid": 256,`,
		`"gtpu_address": "192.0.2.1",`, `"gnb_ipv4": "192.0.2.7",`, `"downlink_teid": 77`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("json lacks %s:\n%s", want, r.stdout)
		}
	}
}

func TestPFCPSessionCreateFree5GC(t *testing.T) {
	upf := pfcptest.Start(t, pfcptest.Options{})
	r := runSMF(t, "pfcp", "session", "create", "--upf", upf.Addr().String(), "--style", "free5gc", "--n3", "192.0.2.9",
		"--teid-base", "0x700", "--count", "2", "--ue-pool", "10.60.0.0/24", "--network-instance", "dn1")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for i, s := range upf.Sessions() {
		pdr := s.Establishment.CreatePDR[0]
		f, err := pfcptest.One(pdr, ie.PDI, ie.FTEID).FTEID()
		if err != nil || f.HasCh() || f.TEID != uint32(0x700+i) || f.IPv4Address.String() != "192.0.2.9" {
			t.Errorf("session %d uplink F-TEID %+v (%v), want %#x at 192.0.2.9 chosen by the SMF", i, f, err, 0x700+i)
		}
		if ue, _ := pdr.UEIPAddress(); ue == nil || ue.IPv4Address.String() != fmt.Sprintf("10.60.0.%d", i+1) {
			t.Errorf("session %d uplink PDR UE address %+v", i, ue)
		}
		if n := pfcptest.One(pdr, ie.PDI, ie.NetworkInstance); n == nil || string(n.Payload) != "dn1" {
			t.Errorf("session %d network instance %v, want plain dn1", i, n)
		}
		if !strings.Contains(r.stdout, fmt.Sprintf("0x%x", 0x700+i)) {
			t.Errorf("the table lacks uplink TEID %#x:\n%s", 0x700+i, r.stdout)
		}
	}
}

// With --hold the command answers heartbeats until stopped, then deletes its sessions and
// releases the association.
func TestPFCPSessionCreateHold(t *testing.T) {
	upf := pfcptest.Start(t, pfcptest.Options{})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan result)
	go func() {
		done <- runCLIContext(ctx, "", map[string]string{}, "pfcp", "session", "create", "--upf", upf.Addr().String(),
			"--node-id", "smf.hold", "--count", "2", "--ue-pool", "10.45.0.0/16", "--hold")
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(upf.Sessions()) < 2 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no sessions after 5s; %+v", <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		if err := upf.Heartbeat("smf.hold"); err != nil {
			t.Errorf("while holding: %v", err)
		}
	}
	stop() // as SIGINT would
	r := <-done
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if want := "deleted 2 sessions and released the association\n"; !strings.HasPrefix(r.stderr, "holding 2 sessions") ||
		!strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr %q", r.stderr)
	}
	if n := len(upf.Sessions()); n != 0 {
		t.Errorf("%d sessions left after --hold ended", n)
	}
	if as := upf.Associations(); len(as) != 0 {
		t.Errorf("associations left after --hold ended: %+v", as)
	}
	if !strings.HasPrefix(r.stdout, "CP-SEID") {
		t.Errorf("the table was not printed before holding:\n%s", r.stdout)
	}
}

// Modify and delete run in processes of their own, after the create that left the sessions.
func TestPFCPSessionModifyAndDelete(t *testing.T) {
	upf := pfcptest.Start(t, pfcptest.Options{})
	addr := upf.Addr().String()
	if r := runSMF(t, "pfcp", "session", "create", "--upf", addr, "--ue-pool", "10.45.0.0/16"); r.code != 0 {
		t.Fatalf("create: exit %d, stderr %q", r.code, r.stderr)
	}
	seid := upf.Sessions()[0].UPSEID
	hex := fmt.Sprintf("0x%x", seid)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--gnb", "192.0.2.10", "--gnb-teid", "0x20"}, "session " + hex + ": downlink forwarded to gNB 192.0.2.10, TEID 0x20\n"},
		{[]string{"--gnb", "192.0.2.11", "--gnb-teid", "48"}, "session " + hex + ": downlink forwarded to gNB 192.0.2.11, TEID 0x30\n"},
		{[]string{"--buffer"}, "session " + hex + ": downlink buffered\n"},
		{[]string{"--drop"}, "session " + hex + ": downlink dropped\n"},
	} {
		// The SEID in decimal works as well as in hexadecimal.
		r := runSMF(t, append([]string{"pfcp", "session", "modify", "--upf", addr, "--seid", fmt.Sprint(seid)}, tt.args...)...)
		if r.code != 0 || r.stderr != "" || r.stdout != tt.want {
			t.Errorf("modify %v: exit %d, stdout %q, stderr %q; want %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
	s, ok := upf.Session(seid)
	if !ok {
		t.Fatal("the session is gone: modifying from a new process did not retain it")
	}
	if len(s.Modifications) != 4 {
		t.Fatalf("%d modifications, want 4", len(s.Modifications))
	}
	for i, want := range []struct {
		gnb  string
		teid uint32
	}{{"192.0.2.10", 0x20}, {"192.0.2.11", 0x30}} {
		m := s.Modifications[i]
		if m.SEID() != seid || len(m.UpdateFAR) != 1 {
			t.Fatalf("modification %d: header SEID %#x, %d Update FARs", i, m.SEID(), len(m.UpdateFAR))
		}
		far := m.UpdateFAR[0]
		if id, _ := far.FARID(); id != pfcpclient.DownlinkFARID || !far.HasFORW() {
			t.Errorf("modification %d: FAR %d, FORW %v", i, id, far.HasFORW())
		}
		if gnb, teid := ohc(t, far, ie.UpdateForwardingParameters); gnb != want.gnb || teid != want.teid {
			t.Errorf("modification %d: downlink to %s TEID %#x, want %s %#x", i, gnb, teid, want.gnb, want.teid)
		}
		if n := pfcptest.One(far, ie.UpdateForwardingParameters, ie.NetworkInstance); n == nil || string(n.Payload) != "\x08internet" {
			t.Errorf("modification %d network instance %v", i, n)
		}
	}
	if f := s.Modifications[2].UpdateFAR[0]; !f.HasBUFF() || !f.HasNOCP() {
		t.Errorf("--buffer sent %v", f)
	}
	if f := s.Modifications[3].UpdateFAR[0]; !f.HasDROP() {
		t.Errorf("--drop sent %v", f)
	}

	// json prints nothing; the exit code tells.
	r := runSMF(t, "-o", "json", "pfcp", "session", "modify", "--upf", addr, "--seid", hex, "--drop")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("modify -o json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runSMF(t, "pfcp", "session", "delete", "--upf", addr, "--seid", hex)
	if r.code != 0 || r.stderr != "" || r.stdout != "session "+hex+" deleted\n" {
		t.Errorf("delete: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := len(upf.Sessions()); n != 0 {
		t.Errorf("%d sessions after delete", n)
	}
	// Neither modify nor delete released the association.
	if n := len(upf.Associations()); n != 1 {
		t.Errorf("%d associations after modify and delete, want 1", n)
	}
}

func TestPFCPSessionErrors(t *testing.T) {
	upf := pfcptest.Start(t, pfcptest.Options{})
	addr := upf.Addr().String()
	rejecting := pfcptest.Start(t, pfcptest.Options{EstablishCause: ie.CauseNoResourcesAvailable})
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silentAddr := silent.LocalAddr().String()

	create := func(args ...string) []string { return append([]string{"pfcp", "session", "create"}, args...) }
	modify := func(args ...string) []string { return append([]string{"pfcp", "session", "modify"}, args...) }
	pool := []string{"--upf", addr, "--ue-pool", "10.45.0.0/16"}
	const badFlag = "error: invalid argument %q for \"%s\" flag: %s\n"
	tests := []errorCase{
		{
			name:       "create without --upf",
			args:       create("--ue-choose"),
			wantStderr: "error: --upf is required: give the UPF's PFCP address, e.g. --upf 192.0.2.1:8805\n",
			wantUsage:  true,
		},
		{
			name:       "bad --upf",
			args:       create("--upf", "upf.example", "--ue-choose"),
			wantStderr: fmt.Sprintf(badFlag, "upf.example", "--upf", "not a PFCP address; use an IPv4 address with an optional port, e.g. 192.0.2.1 or 192.0.2.1:8805"),
			wantUsage:  true,
		},
		{
			name:       "no UE addresses",
			args:       create("--upf", addr),
			wantStderr: "error: give the UE addresses: --ue-pool 10.45.0.0/16, or --ue-choose to let the UPF choose them\n",
		},
		{
			name:       "--ue-pool and --ue-choose",
			args:       create(append(pool, "--ue-choose")...),
			wantStderr: "error: --ue-pool and --ue-choose exclude each other; give one\n",
		},
		{
			name:       "--ue-pool with host bits",
			args:       create("--upf", addr, "--ue-pool", "10.45.0.1/16"),
			wantStderr: fmt.Sprintf(badFlag, "10.45.0.1/16", "--ue-pool", "has host bits set; did you mean 10.45.0.0/16"),
			wantUsage:  true,
		},
		{
			name:       "--ue-pool not IPv4",
			args:       create("--upf", addr, "--ue-pool", "2001:db8::/64"),
			wantStderr: fmt.Sprintf(badFlag, "2001:db8::/64", "--ue-pool", "not an IPv4 prefix; use e.g. 10.45.0.0/16"),
			wantUsage:  true,
		},
		{
			name:       "pool too small",
			args:       create("--upf", addr, "--ue-pool", "10.45.0.0/30", "--count", "4"),
			wantStderr: "error: --ue-pool 10.45.0.0/30 has 3 UE addresses, fewer than --count 4; use a shorter prefix\n",
		},
		{
			name:       "--count 0",
			args:       create(append(pool, "--count", "0")...),
			wantStderr: "error: --count 0: give how many sessions to create, 1 or more\n",
		},
		{
			name:       "--count not a number",
			args:       create(append(pool, "--count", "many")...),
			wantStderr: fmt.Sprintf(badFlag, "many", "--count", "not a session count; use a whole number from 1 to 4294967295"),
			wantUsage:  true,
		},
		{
			name:       "--qfi too big",
			args:       create(append(pool, "--qfi", "64")...),
			wantStderr: "error: --qfi 64 is not a QFI; use 0 (none) to 63\n",
		},
		{
			name:       "bad --gnb",
			args:       create(append(pool, "--gnb", "gnb1")...),
			wantStderr: fmt.Sprintf(badFlag, "gnb1", "--gnb", "not an IPv4 address; use e.g. 192.0.2.10"),
			wantUsage:  true,
		},
		{
			name:       "bad --gnb-teid-base",
			args:       create(append(pool, "--gnb", "192.0.2.10", "--gnb-teid-base", "0")...),
			wantStderr: fmt.Sprintf(badFlag, "0", "--gnb-teid-base", "not a TEID; use a number from 1 to 0xffffffff, e.g. 0x1000 or 4096"),
			wantUsage:  true,
		},
		{
			name:       "--gnb-teid-base without --gnb",
			args:       create(append(pool, "--gnb-teid-base", "0x10")...),
			wantStderr: "error: --gnb-teid-base needs --gnb, the gNB the TEIDs belong to\n",
		},
		{
			name:       "gNB TEIDs overflow",
			args:       create(append(pool, "--gnb", "192.0.2.10", "--gnb-teid-base", "0xffffffff", "--count", "2")...),
			wantStderr: "error: --gnb-teid-base 0xffffffff leaves no room for 2 TEIDs; use a lower base\n",
		},
		{
			name:       "bad --style",
			args:       create(append(pool, "--style", "oai")...),
			wantStderr: fmt.Sprintf(badFlag, "oai", "--style", "not a session style; use open5gs or free5gc"),
			wantUsage:  true,
		},
		{
			name:       "--n3 with open5gs",
			args:       create(append(pool, "--n3", "192.0.2.1")...),
			wantStderr: "error: --n3 and --teid-base are for --style free5gc, where the SMF chooses the uplink F-TEID; with open5gs the UPF chooses it\n",
		},
		{
			name:       "free5gc without --n3",
			args:       create(append(pool, "--style", "free5gc")...),
			wantStderr: "error: --style free5gc needs --n3, the UPF's N3 address the SMF puts in the uplink F-TEIDs, e.g. --n3 192.0.2.1\n",
		},
		{
			name:       "create with an argument",
			args:       create(append(pool, "5")...),
			wantStderr: "error: unknown command \"5\" for \"xupfctl pfcp session create\"\n",
			wantUsage:  true,
		},
		{
			name:       "rejected establishment",
			args:       create("--upf", rejecting.Addr().String(), "--ue-choose", "--count", "2"),
			wantStderr: "error: session 1 of 2: pfcp client: session establishment: UPF answered cause 75 (No resources available)\n",
		},
		{
			name:       "UPF not answering",
			args:       create("--timeout", "100ms", "--upf", silentAddr, "--ue-choose"),
			wantStderr: "error: associating with the UPF at " + silentAddr + ": pfcp client: Association Setup Request to " + silentAddr + ": no answer after 1 tries of 100ms\n",
		},
		{
			name:       "modify without --seid",
			args:       modify("--upf", addr, "--drop"),
			wantStderr: "error: --seid is required: give the session's UP SEID, the UP-SEID column of `xupfctl pfcp session create`\n",
			wantUsage:  true,
		},
		{
			name:       "bad --seid",
			args:       modify("--upf", addr, "--seid", "x5000", "--drop"),
			wantStderr: fmt.Sprintf(badFlag, "x5000", "--seid", "not a SEID; use the UP-SEID column of `xupfctl pfcp session create`, e.g. 0x5000"),
			wantUsage:  true,
		},
		{
			name:       "modify without a change",
			args:       modify("--upf", addr, "--seid", "0x5000"),
			wantStderr: "error: give one change: --gnb with --gnb-teid (forward to a gNB), --buffer or --drop\n",
		},
		{
			name:       "modify with two changes",
			args:       modify("--upf", addr, "--seid", "0x5000", "--buffer", "--drop"),
			wantStderr: "error: give one change: --gnb with --gnb-teid (forward to a gNB), --buffer or --drop\n",
		},
		{
			name:       "--gnb without --gnb-teid",
			args:       modify("--upf", addr, "--seid", "0x5000", "--gnb", "192.0.2.10"),
			wantStderr: "error: --gnb needs --gnb-teid, the gNB's downlink TEID, e.g. --gnb-teid 0x2000\n",
		},
		{
			name:       "--gnb-teid without --gnb",
			args:       modify("--upf", addr, "--seid", "0x5000", "--gnb-teid", "7"),
			wantStderr: "error: --gnb-teid needs --gnb, the gNB the TEID belongs to\n",
		},
		{
			name:       "modify an unknown session",
			args:       modify("--upf", addr, "--seid", "0x5000", "--buffer"),
			wantStderr: "error: the UPF at " + addr + " has no session with UP SEID 0x5000 (Session context not found); use an UP-SEID shown by `xupfctl pfcp session create`\n",
		},
		{
			name:       "delete an unknown session",
			args:       []string{"pfcp", "session", "delete", "--upf", addr, "--seid", "20480"},
			wantStderr: "error: the UPF at " + addr + " has no session with UP SEID 0x5000 (Session context not found); use an UP-SEID shown by `xupfctl pfcp session create`\n",
		},
		{
			name:       "delete without --upf",
			args:       []string{"pfcp", "session", "delete", "--seid", "1"},
			wantStderr: "error: --upf is required: give the UPF's PFCP address, e.g. --upf 192.0.2.1:8805\n",
			wantUsage:  true,
		},
		{
			name:       "unknown pfcp session subcommand",
			args:       []string{"pfcp", "session", "list"},
			wantStderr: "error: unknown command \"list\" for \"xupfctl pfcp session\"; use create, modify or delete\n",
			wantUsage:  true,
		},
	}
	checkErrors(t, tests)
	if n := len(upf.Sessions()); n != 0 {
		t.Errorf("failed commands created %d sessions", n)
	}
}

func TestPFCPSessionHelp(t *testing.T) {
	r := runSMF(t, "pfcp", "session", "create", "--help")
	for _, want := range []string{"--hold", "leaves the sessions", "keeps forwarding", "--style", "free5gc", "--ue-choose"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("create help lacks %q", want)
		}
	}
	r = runSMF(t, "pfcp", "--help")
	if !strings.Contains(r.stdout, "session") {
		t.Errorf("pfcp help lacks the session command:\n%s", r.stdout)
	}
	r = runSMF(t, "__complete", "pfcp", "session", "create", "--style", "")
	for _, v := range pfcpclient.Styles {
		if !strings.Contains(r.stdout, v+"\n") {
			t.Errorf("--style completion lacks %q:\n%s", v, r.stdout)
		}
	}
}
