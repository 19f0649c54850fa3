package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/returndev"
	"github.com/xupf/xupf/internal/state"
)

// linkPinPrefix starts the name of an interface's pinned XDP link in the bpffs directory.
const linkPinPrefix = "link_"

// earlierRun reports whether the bpffs directory holds an earlier run's pins, and refuses a
// restart that would leave one of its interfaces behind: an interface it attached to that
// the configuration no longer names would keep forwarding with no daemon to change it.
func earlierRun(cfg *config.Config) (bool, error) {
	entries, err := os.ReadDir(cfg.BPFFS)
	if err != nil {
		return false, fmt.Errorf("bpffs %s: %w", cfg.BPFFS, err)
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), linkPinPrefix)
		if !ok || name == returndev.Peer(cfg.FlowCache.ReturnDevice) {
			continue // returnDevice keeps or removes the return device
		}
		if !slices.ContainsFunc(cfg.Interfaces, func(i config.Interface) bool { return i.Name == name }) {
			return true, fmt.Errorf("interface %q is attached by the earlier run (pin %s/%s) and no longer in "+
				"interfaces: put it back in the configuration, or stop the gateway for good with `xupfd --stop` "+
				"(which detaches it and removes the saved sessions)", name, cfg.BPFFS, e.Name())
		}
	}
	return len(entries) > 0, nil
}

// stopWait bounds how long Stop waits for the running xupfd to exit.
const stopWait = 30 * time.Second

// Stop stops the gateway of cfg for good, which a SIGTERM does not: it stops the running
// xupfd (SIGTERM, then waits for its lock on the bpffs directory to go), then removes the
// pins, which detaches XDP and frees the maps, and the state file, so the next start has no
// sessions.
func Stop(cfg *config.Config, log *slog.Logger) error {
	if pid, ok := datapath.PinHolder(cfg.BPFFS); ok {
		log.Info("stopping the running xupfd", "pid", pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop xupfd (pid %d): %w", pid, err)
		}
	}
	var lock *datapath.PinLock
	for deadline := time.Now().Add(stopWait); ; {
		var err error
		if lock, err = datapath.LockPinPath(cfg.BPFFS); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (it did not exit within %s of SIGTERM)", err, stopWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var errs []error
	if ownsReturnDevice(cfg) {
		errs = append(errs, returndev.Remove(cfg.FlowCache.ReturnDevice))
	}
	// Every pin (maps, links) lives in this directory: unlinking them all unpins them all,
	// and the links, which nothing else holds, detach.
	err := errors.Join(append(errs, os.RemoveAll(cfg.BPFFS), state.Remove(cfg.StateDir))...)
	if err != nil {
		err = fmt.Errorf("remove the gateway's pins and state: %w", err)
	}
	return errors.Join(err, lock.Unlock())
}

// returnPin is the pinned XDP link of the return device's peer: the sign that an earlier run
// made the device.
func returnPin(cfg *config.Config) string {
	return filepath.Join(cfg.BPFFS, linkPinPrefix+returndev.Peer(cfg.FlowCache.ReturnDevice))
}

// ownsReturnDevice tells whether an earlier run made the return device (its link is pinned).
func ownsReturnDevice(cfg *config.Config) bool {
	_, err := os.Stat(returnPin(cfg))
	return err == nil
}

// returnDevice makes the return device when the kernel treats some network instance's UE
// traffic (flow_cache.kernel_n6 or kernel_n6_instances), or keeps the earlier run's, routes
// the UE pools into it and attaches the datapath to its peer. Otherwise it removes the one an
// earlier run made, and its pinned link.
func (d *Daemon) returnDevice() error {
	fc := d.cfg.FlowCache
	if !fc.AnyKernelN6() {
		if !ownsReturnDevice(d.cfg) {
			return nil
		}
		d.log.Info("removing the return device of an earlier run: flow_cache.kernel_n6 is off", "device", fc.ReturnDevice)
		return errors.Join(returndev.Remove(fc.ReturnDevice), os.Remove(returnPin(d.cfg)))
	}
	if err := returndev.Ensure(fc.ReturnDevice, d.cfg.UEPools); err != nil {
		return err
	}
	a, err := d.dp.AttachReturn(returndev.Peer(fc.ReturnDevice))
	if err != nil {
		return err
	}
	d.log.Info("return device ready", "device", fc.ReturnDevice, "peer", a.Name, "ue_pools", d.cfg.UEPools)
	return nil
}
