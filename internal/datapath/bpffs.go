package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const defaultBPFFS = "/sys/fs/bpf"

// ensurePinPath makes dir, a directory on a BPF filesystem. When the standard mount point
// /sys/fs/bpf holds no bpffs yet (a fresh VM or container), it mounts one there.
func ensurePinPath(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("bpffs pin path %q must be absolute", dir)
	}
	if dir == defaultBPFFS || strings.HasPrefix(dir, defaultBPFFS+"/") {
		onBPF, err := isBPFFS(defaultBPFFS)
		if err != nil {
			return err
		}
		if !onBPF {
			if err := unix.Mount("bpf", defaultBPFFS, "bpf", 0, "mode=0700"); err != nil {
				return fmt.Errorf("mount bpffs on %s: %w (mount it yourself with `mount -t bpf bpf %s`)",
					defaultBPFFS, err, defaultBPFFS)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create bpffs pin path: %w", err)
	}
	onBPF, err := isBPFFS(dir)
	if err != nil {
		return err
	}
	if !onBPF {
		return fmt.Errorf("bpffs pin path %s is not on a BPF filesystem; mount one with `mount -t bpf bpf %s` "+
			"or use a path under %s", dir, dir, defaultBPFFS)
	}
	return nil
}

func isBPFFS(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return uint32(st.Type) == unix.BPF_FS_MAGIC, nil
}

// warnIfPinsDie logs a warning when the pins under dir cannot outlive this process: when the
// nearest ancestor in another mount namespace (the one this process's namespace was made
// from) does not see dir as this process does. `ip netns exec` gives its command a mount
// namespace of its own with a fresh /sys, so a bpffs mounted on /sys/fs/bpf there goes with
// the command, and a crash detaches XDP. When no ancestor is in another namespace, or one
// cannot be asked (no permission), it says nothing.
func warnIfPinsDie(dir string, log *slog.Logger) {
	var own, outside unix.Stat_t
	pid := outsideAncestor()
	if pid == 0 || unix.Stat(dir, &own) != nil {
		return
	}
	err := unix.Stat(fmt.Sprintf("/proc/%d/root%s", pid, dir), &outside)
	if err == nil && own.Dev == outside.Dev && own.Ino == outside.Ino {
		return
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
		log.Debug("cannot tell whether the pins outlive this process", "bpffs", dir, "err", err)
		return
	}
	log.Warn("the bpffs of the pins is private to this process's mount namespace (as `ip netns exec` "+
		"makes /sys): the pins go with the process, so a crash detaches XDP and stops forwarding; mount "+
		"a bpffs outside /sys that outlives it (`mkdir -p /run/xupf/bpffs && mount -t bpf bpf "+
		"/run/xupf/bpffs`) and set bpffs to a directory in it", "bpffs", dir, "outside_pid", pid)
}

// outsideAncestor returns the pid of the nearest ancestor process whose mount namespace is
// not this process's, or 0 when there is none or an ancestor cannot be read.
func outsideAncestor() int {
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return 0
	}
	for pid := os.Getppid(); pid > 0; pid = parentOf(pid) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil {
			return 0
		}
		if ns != own {
			return pid
		}
	}
	return 0
}

// parentOf returns the parent pid of pid from /proc/<pid>/status, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	return 0
}

// PinLock is one process's claim on a pin directory: an exclusive flock(2) on the directory,
// which the kernel drops when the process ends, so a crash leaves no stale lock behind.
type PinLock struct {
	dir string
	f   *os.File
}

// lockAttempts bounds LockPinPath's retries when the directory is replaced under it.
const lockAttempts = 3

// LockPinPath makes dir (mounting /sys/fs/bpf as Load does) and locks it. When another
// process holds the lock, the error names it and nothing under dir has been touched.
func LockPinPath(dir string) (*PinLock, error) {
	for range lockAttempts {
		if err := ensurePinPath(dir); err != nil {
			return nil, err
		}
		f, err := os.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("open bpffs pin path: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("bpffs %s is in use by %s; stop it first, or give this instance "+
					"its own bpffs directory and interfaces", dir, lockHolder(dir))
			}
			return nil, fmt.Errorf("lock bpffs pin path %s: %w", dir, err)
		}
		// The last holder removes the directory as it exits: a lock on the removed one
		// guards nothing, so lock the one that is there now.
		if sameFile(f, dir) {
			return &PinLock{dir: dir, f: f}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("lock bpffs pin path %s: it was replaced %d times while being locked", dir, lockAttempts)
}

// Unlock releases the lock, first removing the directory when it is empty (a start that failed
// before pinning anything leaves nothing behind) and still the one locked: once Close has
// removed it, a new instance may have made and locked another under the same name.
func (l *PinLock) Unlock() error {
	var err error
	if sameFile(l.f, l.dir) {
		err = os.Remove(l.dir)
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	return errors.Join(err, l.f.Close())
}

func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// PinHolder returns the pid of the process that holds the lock on dir (LockPinPath), if
// one does.
func PinHolder(dir string) (int, bool) {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return 0, false
	}
	return flockHolder(st)
}

// lockHolder names the process holding the flock on dir, from /proc/locks: "xupfd (pid 42)",
// or "another process" when it cannot tell.
func lockHolder(dir string) string {
	pid, ok := PinHolder(dir)
	if !ok {
		return "another process"
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return fmt.Sprintf("pid %d", pid)
	}
	return fmt.Sprintf("%s (pid %d)", strings.TrimSpace(string(comm)), pid)
}

// flockHolder finds the pid of the FLOCK write lock on the file st in /proc/locks, whose
// lines read "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF" (device in hex, inode in
// decimal); waiters' lines carry "->" and are skipped.
func flockHolder(st unix.Stat_t) (int, bool) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[3] != "WRITE" || fields[5] != file {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid, true
		}
	}
	return 0, false
}
