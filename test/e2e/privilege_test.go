package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/testbed"
)

// unitPath is the systemd unit the project ships.
const unitPath = "../../packaging/xupfd.service"

// unitSettings returns the [Service] settings of the unit, by key (repeated keys joined by
// spaces, as systemd does for capability lists).
func unitSettings(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", unitPath, line)
			}
			out[k] = strings.TrimSpace(out[k] + " " + v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// capNumbers maps the capability names the unit may use to their numbers.
var capNumbers = map[string]int{"CAP_NET_ADMIN": unix.CAP_NET_ADMIN,
	"CAP_PERFMON": unix.CAP_PERFMON, "CAP_BPF": unix.CAP_BPF}

// capMask is the bit mask /proc/PID/status shows for caps.
func capMask(t *testing.T, caps []string) uint64 {
	t.Helper()
	var m uint64
	for _, c := range caps {
		n, ok := capNumbers[c]
		if !ok {
			t.Fatalf("capability %s: unknown to this test", c)
		}
		m |= 1 << n
	}
	return m
}

// leastPrivilegeWrapper is the command line that starts the daemon in the upf namespace as
// the unit does: ExecStartPre with full privileges, then xupfd as root's uid with only caps,
// in the bounding, inheritable and ambient sets, and no_new_privs.
func leastPrivilegeWrapper(pre string, caps []string) []string {
	set := "-all"
	for _, c := range caps {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	return []string{"/bin/sh", "-c", pre + ` && exec setpriv --bounding-set=` + set + ` --inh-caps=` + set +
		` --ambient-caps=` + set + ` --no-new-privs -- "$@"`, "sh"}
}

// procStatus returns the fields of /proc/PID/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestLeastPrivilege starts the real xupfd as packaging/xupfd.service does, with only the
// capabilities of its CapabilityBoundingSet, and checks that this is all it has and all it
// needs: it attaches, serves the API (with its token file), forwards both ways, and stops
// cleanly. Then it starts it without each of them in turn: each is needed.
func TestLeastPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and XDP")
	}
	unit := unitSettings(t)
	caps := strings.Fields(unit["CapabilityBoundingSet"])
	if want := []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"}; strings.Join(caps, " ") != strings.Join(want, " ") {
		t.Errorf("CapabilityBoundingSet = %v, want %v", caps, want)
	}
	if unit["AmbientCapabilities"] != unit["CapabilityBoundingSet"] || unit["NoNewPrivileges"] != "yes" {
		t.Errorf("AmbientCapabilities %q, NoNewPrivileges %q: want the bounding set and yes",
			unit["AmbientCapabilities"], unit["NoNewPrivileges"])
	}
	pre, ok := strings.CutPrefix(unit["ExecStartPre"], "+")
	if !ok {
		t.Fatalf("ExecStartPre = %q, want a command run with full privileges (+)", unit["ExecStartPre"])
	}

	e, err := startEnv(t, leastPrivilegeWrapper(pre, caps), nil, sessNoQFI)
	if err != nil {
		t.Fatal(err)
	}
	status := procStatus(t, e.daemon.PID())
	want := fmt.Sprintf("%016x", capMask(t, caps))
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb"} {
		if status[set] != want {
			t.Errorf("xupfd's %s = %s, want %s (%v only)", set, status[set], want, caps)
		}
	}
	if status["NoNewPrivs"] != "1" || status["Uid"] != "0\t0\t0\t0" {
		t.Errorf("xupfd's NoNewPrivs %q, Uid %q: want 1 and root's", status["NoNewPrivs"], status["Uid"])
	}
	payload := testbed.Payload("least-privilege")
	reportProblems(t, "uplink", testbed.CheckUplink(sessNoQFI, 10, payload, e.uplink(sessNoQFI, 10, payload, recvTimeout)))
	reportProblems(t, "downlink", testbed.CheckDownlink(sessNoQFI, 10, payload, e.downlink(sessNoQFI, 10, payload)))
	if list, err := e.api.Sessions(e.ctx()); err != nil || len(list) != 1 {
		t.Errorf("API sessions: %v, %v", list, err)
	}
	if err := e.daemon.Stop(); err != nil {
		t.Errorf("xupfd did not stop cleanly with these capabilities: %v\n%s", err, e.daemon.LogTail())
	}

	// What fails without each (README.md, "Running xupfd as a service").
	why := map[string]string{
		"CAP_BPF":       "map create: operation not permitted",                    // any map
		"CAP_NET_ADMIN": "map xupf_tx_ports: map create: operation not permitted", // a devmap
		"CAP_PERFMON":   "pointer arithmetic with it prohibited for !root",        // the verifier
	}
	for _, drop := range caps {
		t.Run("without "+drop, func(t *testing.T) {
			without := slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == drop })
			_, err := startEnv(t, leastPrivilegeWrapper(pre, without), nil, sessNoQFI)
			if err == nil || !strings.Contains(err.Error(), why[drop]) {
				t.Errorf("xupfd without %s: %v; want it to fail with %q", drop, err, why[drop])
			}
		})
	}
}

// TestUnitVerifies has systemd check the unit: a misspelt key or a bad value is only a
// warning to systemd, and would leave xupfd with less protection than the unit claims.
func TestUnitVerifies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs the xupfd binary, built as root by TestMain")
	}
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	// systemd-analyze wants the binary to exist.
	copyPath := filepath.Join(t.TempDir(), "xupfd.service")
	unit = bytes.ReplaceAll(unit, []byte("ExecStart=/usr/local/bin/xupfd "), []byte("ExecStart="+xupfdBin+" "))
	if err := os.WriteFile(copyPath, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", copyPath).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}
}
