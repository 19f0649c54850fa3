package datapath

import (
	"errors"
	"fmt"
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
