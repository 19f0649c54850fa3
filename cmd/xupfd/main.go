// Command xupfd is the xupf user plane daemon: it loads the XDP datapath, installs sessions
// and serves the HTTP API. See README.md for the configuration.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/daemon"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "xupfd:", err)
		os.Exit(1)
	}
}

func run() error {
	path := flag.String("config", "/etc/xupf/xupfd.yaml", "configuration file (YAML)")
	stopGateway := flag.Bool("stop", false, "stop the gateway of the configuration for good: stop its xupfd, "+
		"detach XDP, remove the pins and the saved sessions (a SIGTERM leaves them forwarding)")
	flag.Parse()
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("log_level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *stopGateway {
		if err := daemon.Stop(cfg, log); err != nil {
			return err
		}
		log.Info("gateway stopped: XDP detached, pins and saved sessions removed", "bpffs", cfg.BPFFS,
			"state_dir", cfg.StateDir)
		return nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := daemon.New(cfg, log, version)
	if err != nil {
		return err
	}
	runErr := d.Run(ctx)
	log.Info("shutting down: the datapath keeps forwarding and the next xupfd takes it over " +
		"(`xupfd --stop` removes it)")
	if err := d.Close(); err != nil {
		log.Error("close datapath", "err", err)
	}
	return runErr
}
