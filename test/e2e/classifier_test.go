package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// TestClassifier configures the traffic classifier through xupfctl only, sends real traffic
// both ways and checks which class counted each packet, through xupfctl and the API client:
//
//	class 10: priority 10, egress, udp to port 6000  -> every downlink packet of the test
//	class 20: priority 5, both, no fields            -> what no higher class takes
//	class 30: priority 50, ingress, udp from sessQFI's UE -> sessQFI's uplink
//
// Classification must not change forwarding: every packet still arrives.
func TestClassifier(t *testing.T) {
	e := newEnv(t)

	classes := []classifier.Class{
		{ID: 10, Priority: 10, Direction: "egress", Protocol: "udp", DstPort: fmt.Sprint(testbed.UEPort)},
		{ID: 20, Priority: 5, Direction: "both"},
		{ID: 30, Priority: 50, Direction: "ingress", Protocol: "udp", SrcIP: sessQFI.UE.String() + "/32"},
	}
	for _, c := range classes {
		var got api.ClassInfo
		e.xupfctlJSON(&got, classAddArgs(c)...)
		if got.Class != c || got.Counters != (session.Counters{}) {
			t.Fatalf("xupfctl classifier add %d: daemon answered %+v, want %+v with zero counters", c.ID, got, c)
		}
	}
	e.expectClassIDs(t, 10, 20, 30)

	// Different counts everywhere, so that a packet counted in the wrong class shows.
	const (
		dlQFI   = 23 // N: downlink to sessQFI's UE port 6000
		dlNoQFI = 17 // M: downlink to sessNoQFI's UE port 6000
		ulQFI   = 31 // K: uplink from sessQFI
		ulNoQFI = 13 // L: uplink from sessNoQFI
	)
	want := map[uint32]session.Counters{10: {}, 20: {}, 30: {}}
	add := func(id uint32, n int, payload func(int) []byte) {
		c := want[id]
		c.Packets += uint64(n)
		c.Bytes += innerBytes(n, payload)
		want[id] = c
	}
	var totalUL, totalDL uint64

	for _, tc := range []struct {
		name string
		s    session.Session
		n    int
	}{{"with_qfi", sessQFI, dlQFI}, {"without_qfi", sessNoQFI, dlNoQFI}} {
		payload := testbed.Payload("classifier dl " + tc.name)
		t.Run("downlink_"+tc.name, func(t *testing.T) {
			got := e.downlink(tc.s, tc.n, payload)
			if len(got) != tc.n {
				t.Errorf("gNB received %d of %d downlink packets", len(got), tc.n)
			}
			reportProblems(t, "downlink", testbed.CheckDownlink(tc.s, tc.n, payload, got))
		})
		add(10, tc.n, payload)
		totalDL += uint64(tc.n)
	}
	ul := func(name string, s session.Session, n int, class uint32) {
		payload := testbed.Payload("classifier ul " + name)
		t.Run("uplink_"+name, func(t *testing.T) {
			got := e.uplink(s, n, payload, recvTimeout)
			if len(got) != n {
				t.Errorf("DN received %d of %d uplink packets", len(got), n)
			}
			reportProblems(t, "uplink", testbed.CheckUplink(s, n, payload, got))
		})
		add(class, n, payload)
		totalUL += uint64(n)
	}
	ul("with_qfi", sessQFI, ulQFI, 30)
	ul("without_qfi", sessNoQFI, ulNoQFI, 20)

	t.Run("counters", func(t *testing.T) {
		e.expectClassCounters(t, want)
		st, err := e.api.Stats(e.ctx())
		if err != nil {
			t.Fatalf("API stats: %v", err)
		}
		expectClassifierStats(t, st, totalUL, totalDL)
	})

	// Mistakes are refused with a message that says what to fix, and change nothing.
	t.Run("invalid", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want []string
		}{
			{"ports without protocol",
				[]string{"classifier", "add", "--id", "40", "--priority", "1", "--src-port", "1000", "--dst-port", "6000"},
				[]string{"src_port", "dst_port", "set protocol"}},
			{"duplicate id",
				[]string{"classifier", "add", "--id", "10", "--priority", "1"},
				[]string{"class 10 already exists"}},
			{"show unknown id",
				[]string{"classifier", "show", "999"},
				[]string{"class 999 not found"}},
		} {
			t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				msg := e.xupfctlFails(t, tc.args...)
				t.Logf("xupfctl %s: %s", strings.Join(tc.args, " "), msg)
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("xupfctl %s: the error does not say %q:\n%s", strings.Join(tc.args, " "), w, msg)
					}
				}
			})
		}
		e.expectClassIDs(t, 10, 20, 30)
		e.expectClassCounters(t, want)
	})

	// Without class 30, sessQFI's uplink falls to the catch-all class 20.
	t.Run("delete", func(t *testing.T) {
		out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "classifier", "delete", "30")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "class 30 deleted") {
			t.Errorf("xupfctl classifier delete 30 printed %q, want it to say class 30 deleted", out)
		}
		e.expectClassIDs(t, 10, 20)
		if msg := e.xupfctlFails(t, "classifier", "show", "30"); !strings.Contains(msg, "class 30 not found") {
			t.Errorf("xupfctl classifier show 30 after the delete: %s", msg)
		}
	})
	delete(want, 30)
	ul("with_qfi_after_delete", sessQFI, ulQFI, 20)

	t.Run("counters_after_delete", func(t *testing.T) {
		e.expectClassCounters(t, want)
		st, err := e.api.Stats(e.ctx())
		if err != nil {
			t.Fatalf("API stats: %v", err)
		}
		expectClassifierStats(t, st, totalUL, totalDL)
	})

	// The table, as an operator reads it.
	t.Run("list_table", func(t *testing.T) {
		out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "classifier", "list")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("xupfctl classifier list:\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		wantLines := []string{
			"ID PRIORITY DIRECTION MATCH PACKETS BYTES",
			fmt.Sprintf("10 10 egress udp any -> any:%d %d %d", testbed.UEPort, want[10].Packets, want[10].Bytes),
			fmt.Sprintf("20 5 both any %d %d", want[20].Packets, want[20].Bytes),
		}
		if len(lines) != len(wantLines) {
			t.Fatalf("xupfctl classifier list has %d lines, want %d:\n%s", len(lines), len(wantLines), out)
		}
		for i, w := range wantLines {
			if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
				t.Errorf("xupfctl classifier list line %d: %q, want %q\n%s", i+1, got, w, out)
			}
		}
	})
}

// classAddArgs is the xupfctl command line that adds c.
func classAddArgs(c classifier.Class) []string {
	args := []string{"classifier", "add", "--id", fmt.Sprint(c.ID), "--priority", fmt.Sprint(c.Priority)}
	for _, f := range []struct{ flag, v string }{
		{"--direction", c.Direction}, {"--src-mac", c.SrcMAC}, {"--dst-mac", c.DstMAC},
		{"--ethertype", c.EtherType}, {"--src-ip", c.SrcIP}, {"--dst-ip", c.DstIP},
		{"--protocol", c.Protocol}, {"--src-port", c.SrcPort}, {"--dst-port", c.DstPort},
	} {
		if f.v != "" {
			args = append(args, f.flag, f.v)
		}
	}
	return args
}

// ctlJSON is xupfctlJSON failing t, for use in subtests.
func (e *env) ctlJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, append([]string{"-o", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("xupfctl -o json %v: decode %q: %v", args, out, err)
	}
}

// xupfctlFails runs xupfctl args... in the upf namespace, fails t unless it exits non-zero,
// and returns the error, which carries xupfctl's standard error.
func (e *env) xupfctlFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, args...)
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Errorf("xupfctl %s succeeded, want an error; it printed:\n%s", strings.Join(args, " "), out)
		return ""
	case !errors.As(err, &exit) || exit.ExitCode() == 0:
		t.Errorf("xupfctl %s did not run to a non-zero exit: %v", strings.Join(args, " "), err)
	}
	return err.Error()
}

// expectClassIDs checks that the daemon has exactly the classes ids, through xupfctl and the
// API client.
func (e *env) expectClassIDs(t *testing.T, ids ...uint32) {
	t.Helper()
	var cli []api.ClassInfo
	e.ctlJSON(t, &cli, "classifier", "list")
	apiList, err := e.api.Classes(e.ctx())
	if err != nil {
		t.Fatalf("API classes: %v", err)
	}
	for via, list := range map[string][]api.ClassInfo{"xupfctl": cli, "API": apiList} {
		got := make([]uint32, 0, len(list))
		for _, c := range list {
			got = append(got, c.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Errorf("%s: classes %v, want %v", via, got, ids)
		}
	}
}

// expectClassCounters checks every class's counters against want, through xupfctl (show and
// list) and the API client (one class and the list).
func (e *env) expectClassCounters(t *testing.T, want map[uint32]session.Counters) {
	t.Helper()
	cliList := map[uint32]session.Counters{}
	var list []api.ClassInfo
	e.ctlJSON(t, &list, "classifier", "list")
	for _, c := range list {
		cliList[c.ID] = c.Counters
	}
	apiList := map[uint32]session.Counters{}
	all, err := e.api.Classes(e.ctx())
	if err != nil {
		t.Fatalf("API classes: %v", err)
	}
	for _, c := range all {
		apiList[c.ID] = c.Counters
	}
	for id, w := range want {
		var show api.ClassInfo
		e.ctlJSON(t, &show, "classifier", "show", fmt.Sprint(id))
		one, err := e.api.Class(e.ctx(), id)
		if err != nil {
			t.Errorf("API class %d: %v", id, err)
		}
		for via, got := range map[string]session.Counters{
			"xupfctl classifier show": show.Counters,
			"xupfctl classifier list": cliList[id],
			"API class":               one.Counters,
			"API classes":             apiList[id],
		} {
			if got != w {
				t.Errorf("%s: class %d counted %d packets, %d bytes; want %d packets, %d bytes",
					via, id, got.Packets, got.Bytes, w.Packets, w.Bytes)
			}
		}
	}
}

// expectClassifierStats checks the global counters after totalUL uplink and totalDL downlink
// packets that all arrived and all fell in some class (class 20 takes anything).
func expectClassifierStats(t *testing.T, st api.Stats, totalUL, totalDL uint64) {
	t.Helper()
	expectTotals(t, "API", st, totalUL, totalDL)
	if hit, miss := st.Counters["cls_hit"], st.Counters["cls_miss"]; hit != totalUL+totalDL || miss != 0 {
		t.Errorf("API: cls_hit %d, cls_miss %d; want %d and 0", hit, miss, totalUL+totalDL)
	}
}
