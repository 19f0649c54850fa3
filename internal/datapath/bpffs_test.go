package datapath

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// testPinDir returns a fresh pin directory name under /sys/fs/bpf, removed after the test.
func testPinDir(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	dir := fmt.Sprintf("/sys/fs/bpf/xupf-lock-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestLockPinPathExclusive: a second claim on a locked pin directory fails and names the
// holder, as long as the first holds it.
func TestLockPinPathExclusive(t *testing.T) {
	dir := testPinDir(t)
	l, err := LockPinPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockPinPath(dir)
	if err == nil {
		t.Fatal("a second lock on a locked pin directory succeeded")
	}
	if want := fmt.Sprintf("bpffs %s is in use by datapath.test (pid %d)", dir, os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the empty pin directory is still there after Unlock (%v)", err)
	}
	l, err = LockPinPath(dir)
	if err != nil {
		t.Fatalf("lock after Unlock: %v", err)
	}
	l.Unlock()
}

// TestUnlockLeavesAnotherDirectory: when the locked directory was removed (Close removes the
// pins) and another instance made and locked a new one of the same name, Unlock leaves it.
func TestUnlockLeavesAnotherDirectory(t *testing.T) {
	dir := testPinDir(t)
	l, err := LockPinPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	other, err := LockPinPath(dir)
	if err != nil {
		t.Fatalf("a new instance locks the directory made again: %v", err)
	}
	defer other.Unlock()
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the first instance's Unlock removed the second's directory: %v", err)
	}
}

// helperEnv makes the test binary, run as a child process by the tests below, act as
// TestBPFFSHelper says instead of testing.
const helperEnv = "XUPF_TEST_BPFFS_HELPER"

// TestBPFFSHelper is not a test but a child process of the tests below, as helperEnv asks:
// "lock DIR" locks DIR, says "locked" and holds the lock until killed; "warn DIR" writes what
// warnIfPinsDie logs for DIR.
func TestBPFFSHelper(t *testing.T) {
	verb, dir, ok := strings.Cut(os.Getenv(helperEnv), " ")
	if !ok {
		t.Skip("a child process of TestLockPinPathOtherProcess and TestWarnIfPinsDiePrivate")
	}
	switch verb {
	case "lock":
		if _, err := LockPinPath(dir); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Minute)
	case "warn":
		if err := ensurePinPath(dir); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		warnIfPinsDie(dir, slog.New(slog.NewTextHandler(os.Stdout, nil)))
		os.Exit(0)
	}
	os.Exit(1)
}

// TestLockPinPathOtherProcess: the holder is named when it is another process.
func TestLockPinPathOtherProcess(t *testing.T) {
	dir := testPinDir(t)
	holder := exec.Command(os.Args[0], "-test.run=^TestBPFFSHelper$")
	holder.Env = append(os.Environ(), helperEnv+"=lock "+dir)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("the child did not lock %s: %q, %v", dir, line, err)
	}
	_, err = LockPinPath(dir)
	if want := fmt.Sprintf("in use by datapath.test (pid %d)", holder.Process.Pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("locking a directory another process holds: %v; want an error saying %q", err, want)
	}
	// The kernel drops the lock of a process that dies, however it dies.
	holder.Process.Kill()
	holder.Wait()
	l, err := LockPinPath(dir)
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	l.Unlock()
}

// TestUnlockKeepsPins: Unlock removes the directory only when nothing is pinned in it.
func TestUnlockKeepsPins(t *testing.T) {
	dir := testPinDir(t)
	l, err := LockPinPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pin := filepath.Join(dir, "m")
	if err := m.Pin(pin); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pin); err != nil {
		t.Errorf("Unlock removed a pin: %v", err)
	}
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

// TestWarnIfPinsDiePrivate: a bpffs mounted in a private mount namespace draws the warning,
// also when the process's parent (a shell, as in `ip netns exec NS bash`) shares that
// namespace: what counts is the first ancestor outside it.
func TestWarnIfPinsDiePrivate(t *testing.T) {
	requireRoot(t)
	mnt := t.TempDir()
	// The helper is not the shell's last command, so the shell stays as its parent.
	script := `mount -t bpf bpf "$0" && "$1" -test.run='^TestBPFFSHelper$'; exit $?`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, mnt, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=warn "+filepath.Join(mnt, "xupf"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper in a private mount namespace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the bpffs of the pins is private") {
		t.Errorf("no warning for a bpffs in a private mount namespace:\n%s", out)
	}
}
