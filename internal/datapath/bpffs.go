package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
// process that started it (whose mount namespace it came from) does not see dir as it does.
// `ip netns exec` gives its command a mount namespace of its own with a fresh /sys, so a
// bpffs mounted on /sys/fs/bpf there goes with the command: a crash then detaches XDP. When
// the parent cannot be asked (no parent, no permission), it says nothing.
func warnIfPinsDie(dir string, log *slog.Logger) {
	var own, parent unix.Stat_t
	ppid := os.Getppid()
	if ppid <= 0 || unix.Stat(dir, &own) != nil {
		return
	}
	err := unix.Stat(fmt.Sprintf("/proc/%d/root%s", ppid, dir), &parent)
	if err == nil && own.Dev == parent.Dev && own.Ino == parent.Ino {
		return
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
		log.Debug("cannot tell whether the pins outlive this process", "bpffs", dir, "err", err)
		return
	}
	log.Warn("the bpffs of the pins is private to this process's mount namespace (as `ip netns exec` "+
		"makes /sys): the pins go with the process, so a crash detaches XDP and stops forwarding; mount "+
		"a bpffs outside /sys that outlives it (`mkdir -p /run/xupf/bpffs && mount -t bpf bpf "+
		"/run/xupf/bpffs`) and set bpffs to a directory in it", "bpffs", dir)
}
