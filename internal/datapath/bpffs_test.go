package datapath

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// testPinDir returns a fresh pin directory name under /sys/fs/bpf, removed after the test.
func testPinDir(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	dir := fmt.Sprintf("/sys/fs/bpf/xupf-lock-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestWarnIfPinsDie: no warning for a bpffs the parent process sees too (the one this test
// runs on). The warning itself is checked end to end (test/e2e), under `ip netns exec`.
func TestWarnIfPinsDie(t *testing.T) {
	dir := testPinDir(t)
	if err := ensurePinPath(dir); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	warnIfPinsDie(dir, log)
	if buf.Len() != 0 {
		t.Errorf("warning for a bpffs the parent sees:\n%s", buf.String())
	}
}
