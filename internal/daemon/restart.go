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
	made, err := madeReturnDevice(cfg)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), linkPinPrefix)
		if !ok || name == returndev.Peer(cfg.FlowCache.ReturnDevice) || made != "" && name == returndev.Peer(made) {
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
	made, err := madeReturnDevice(cfg)
	errs := []error{err}
	if made != "" {
		errs = append(errs, removeReturnDevice(cfg, made))
	}
	// Every pin (maps, links) lives in this directory: unlinking them all unpins them all,
	// and the links, which nothing else holds, detach.
	err = errors.Join(append(errs, os.RemoveAll(cfg.BPFFS), state.Remove(cfg.StateDir))...)
	if err != nil {
		err = fmt.Errorf("remove the gateway's pins and state: %w", err)
	}
	return errors.Join(err, lock.Unlock())
}

// returnPin is the pinned XDP link of the peer of the return device name.
func returnPin(cfg *config.Config, name string) string {
	return filepath.Join(cfg.BPFFS, linkPinPrefix+returndev.Peer(name))
}

// madeReturnDevice names the return device an earlier run made, "" if none: the one its
// record in the state directory names or, from a run that kept no record, the configured
// one if its peer's link is pinned.
func madeReturnDevice(cfg *config.Config) (string, error) {
	name, err := returndev.Made(cfg.StateDir)
	if err != nil || name != "" {
		return name, err
	}
	if _, err := os.Stat(returnPin(cfg, cfg.FlowCache.ReturnDevice)); err == nil {
		return cfg.FlowCache.ReturnDevice, nil
	}
	return "", nil
}

// removeReturnDevice removes the return device name an earlier run made, with its routes,
// then its pinned link, then its record: a crash in between leaves the record, by which the
// next start removes the rest.
func removeReturnDevice(cfg *config.Config, name string) error {
	if err := returndev.Remove(name); err != nil {
		return err
	}
	if err := os.Remove(returnPin(cfg, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("return device %q: unpin its link: %w", name, err)
	}
	return returndev.Forget(cfg.StateDir)
}

// returnDevice makes the return device when the kernel treats some network instance's UE
// traffic (flow_cache.kernel_n6 or kernel_n6_instances), or keeps the earlier run's, attaches
// the datapath to its peer, keeps its MTU with the interfaces' and then routes the UE pools
// into it. It removes the one an earlier
// run made under another name, or when no network instance has kernel_n6.
func (d *Daemon) returnDevice() error {
	fc := d.cfg.FlowCache
	made, err := madeReturnDevice(d.cfg)
	if err != nil {
		return err
	}
	if made != "" && (!fc.KernelN6.Any() || made != fc.ReturnDevice) {
		d.log.Info("removing the return device of an earlier run", "device", made,
			"kernel_n6", fc.KernelN6.Any(), "return_device", fc.ReturnDevice)
		if err := removeReturnDevice(d.cfg, made); err != nil {
			return err
		}
	}
	if !fc.KernelN6.Any() {
		return nil
	}
	if err := returndev.Ensure(fc.ReturnDevice, d.cfg.StateDir); err != nil {
		return err
	}
	a, err := d.dp.AttachReturn(returndev.Peer(fc.ReturnDevice))
	if err != nil {
		return err
	}
	// After the program: the MTU a veth takes depends on it.
	var names []string
	for _, iface := range d.cfg.Interfaces {
		names = append(names, iface.Name)
	}
	stop, err := returndev.FollowMTU(fc.ReturnDevice, names, d.log)
	if err != nil {
		return err
	}
	d.stopMTU = stop
	if err := returndev.Route(fc.ReturnDevice, d.cfg.UEPools); err != nil {
		return err
	}
	d.log.Info("return device ready", "device", fc.ReturnDevice, "peer", a.Name, "ue_pools", d.cfg.UEPools)
	return nil
}
