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

// lockHelperEnv names the pin directory TestLockHelper locks in a child process.
const lockHelperEnv = "XUPF_TEST_LOCK_HELPER"

// TestLockHelper is not a test: run by TestLockPinPathOtherProcess as a child process, it
// locks the directory, says so and holds the lock until killed.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("the child process of TestLockPinPathOtherProcess")
	}
	if _, err := LockPinPath(dir); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(1)
}

// TestLockPinPathOtherProcess: the holder is named when it is another process.
func TestLockPinPathOtherProcess(t *testing.T) {
	dir := testPinDir(t)
	holder := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	holder.Env = append(os.Environ(), lockHelperEnv+"="+dir)
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
