// Package daemon is xupfd as a library: it loads and attaches the datapath, installs the
// configured sessions and serves the HTTP API. cmd/xupfd only wires flags and signals to it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/datapath"
)

// Daemon is a running xupfd.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	version  string
	started  time.Time
	dp       *datapath.Datapath
	attached []api.Interface

	// The traffic classifier, configured through the API. classMu makes the Backend's class
	// methods atomic: a duplicate id is found before the Manager sees it, and a listing
	// never reads the counters of a class that is being deleted.
	classMu sync.RWMutex
	classes *classifier.Manager
	classDP classDatapath
}

// New loads the datapath, attaches it to the configured interfaces and installs the static
// sessions. On error everything it did is undone.
func New(cfg *config.Config, log *slog.Logger, version string) (d *Daemon, err error) {
	// Check the host first: a missing interface should not cost a datapath load and unload.
	for _, iface := range cfg.Interfaces {
		if err := checkForwarding(iface.Name); err != nil {
			return nil, err
		}
	}
	dp, err := datapath.Load(datapath.Options{
		PinPath:       cfg.BPFFS,
		MaxSessions:   cfg.Limits.MaxSessions,
		MaxRuleSets:   cfg.Limits.MaxRuleSets,
		MaxSDFEntries: cfg.Limits.MaxSDFEntries,
		GTPUAddrs:     cfg.GTPUAddresses,
		Logger:        log,
	})
	if err != nil {
		return nil, err
	}
	d = &Daemon{cfg: cfg, log: log, version: version, started: time.Now(), dp: dp}
	d.initClassifier(dp)
	defer func() {
		if err != nil {
			d.dp.Close(true)
		}
	}()

	for _, iface := range cfg.Interfaces {
		a, err := dp.Attach(iface.Name, datapath.XDPMode(cfg.XDPMode), cfg.XDPFallback)
		if err != nil {
			return nil, err
		}
		if iface.HasRole(config.RoleN6) {
			if err := acceptLocal(iface.Name); err != nil {
				return nil, err
			}
		}
		d.attached = append(d.attached, api.Interface{
			Name: a.Name, Ifindex: a.Ifindex, Roles: iface.Roles, XDPMode: string(a.Mode),
		})
		log.Info("attached", "interface", a.Name, "ifindex", a.Ifindex, "roles", iface.Roles, "xdp_mode", a.Mode)
	}
	for _, s := range cfg.Sessions {
		if err := dp.AddSession(s); err != nil {
			return nil, fmt.Errorf("static session: %w", err)
		}
	}
	if err := dp.Prune(); err != nil {
		return nil, fmt.Errorf("prune entries of an earlier run: %w", err)
	}
	log.Info("datapath ready", "sessions", len(cfg.Sessions), "max_sessions", cfg.Limits.MaxSessions,
		"gtpu_addresses", cfg.GTPUAddresses, "bpffs", cfg.BPFFS)
	return d, nil
}

// Run serves the HTTP API until ctx is done, then shuts the server down.
func (d *Daemon) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("http_listen %s: %w", d.cfg.HTTPListen, err)
	}
	srv := &http.Server{Handler: api.NewHandler(d, d.log), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	d.log.Info("http api listening", "address", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("http api: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http api shutdown: %w", err)
	}
	return nil
}

// Close detaches the datapath and removes its pins.
func (d *Daemon) Close() error {
	return d.dp.Close(true)
}

// checkForwarding fails when name does not exist or IPv4 forwarding is off on it: bpf_fib_lookup then refuses to
// route for packets arriving there, and nothing would be forwarded.
func checkForwarding(name string) error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + name + "/forwarding")
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("interface %q: no such interface (or it has no IPv4); check interfaces[].name "+
			"against `ip link`", name)
	}
	if err != nil {
		return fmt.Errorf("interface %q: read forwarding setting: %w", name, err)
	}
	if len(b) > 0 && b[0] == '0' {
		return fmt.Errorf("interface %q: IPv4 forwarding is off, so the kernel FIB will not route for it; "+
			"enable it with `sysctl -w net.ipv4.conf.all.forwarding=1`", name)
	}
	return nil
}

// acceptLocal lets the kernel forward, from an N6 interface, the downlink packets the datapath
// has already encapsulated but hands over because the gNB's MAC is not resolved yet: their
// source is our GTP-U address, which the kernel otherwise rejects as a martian.
func acceptLocal(name string) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+name+"/accept_local", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("interface %q: set accept_local: %w", name, err)
	}
	return nil
}
