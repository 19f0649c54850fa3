package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// BPFFSRoot holds the testbed runs' bpffs mounts. It is outside /sys on purpose: `ip netns
// exec` gives the daemon a fresh /sys in a mount namespace of its own, so a bpffs there would
// be private to the daemon and its pins would go with it (a killed daemon would take XDP
// along). A mount made here before the daemon starts is shared with it and outlives it, as
// /sys/fs/bpf does for a daemon run without a network namespace.
const BPFFSRoot = "/run/xupf"

// mountBPFFS mounts a bpffs of the run's own on the parent of t.BPFFS. Its own rather than one
// shared by all runs: parallel runs cannot race to mount it, and unmounting it on Close frees
// whatever a killed daemon left pinned.
func (t *Topology) mountBPFFS() error {
	dir := filepath.Dir(t.BPFFS)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("testbed: bpffs mount point: %w", err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(dir)
		return fmt.Errorf("testbed: mount bpffs on %s: %w", dir, err)
	}
	t.bpffsMount = dir
	return nil
}

// unmountBPFFS removes the pins under t.BPFFS, unmounts the run's bpffs and removes its
// mount point. It does nothing when none was mounted.
func (t *Topology) unmountBPFFS() error {
	if t.bpffsMount == "" {
		return nil
	}
	var errs []error
	if err := os.RemoveAll(t.BPFFS); err != nil {
		errs = append(errs, fmt.Errorf("testbed: remove the pins in %s: %w", t.BPFFS, err))
	}
	// Detached: a process still in the mount (a daemon that has not exited) keeps its own
	// reference until it goes.
	if err := unix.Unmount(t.bpffsMount, unix.MNT_DETACH); err != nil {
		errs = append(errs, fmt.Errorf("testbed: unmount %s: %w", t.bpffsMount, err))
	} else if err := os.Remove(t.bpffsMount); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("testbed: remove %s: %w", t.bpffsMount, err))
	}
	t.bpffsMount = ""
	return errors.Join(errs...)
}
