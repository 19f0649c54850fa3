package testbed

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
)

// Bounds of the daemon's life cycle.
const (
	startTimeout = 30 * time.Second // loading and verifying the BPF object takes a moment
	stopTimeout  = 10 * time.Second
	killTimeout  = 5 * time.Second
)

// Daemon is an xupfd process running in the upf namespace.
type Daemon struct {
	t       *Topology
	cmd     *exec.Cmd
	log     *tailBuffer
	BaseURL string // the API as seen from inside the upf namespace
	// ConfigPath is the daemon's configuration file, for a restart or `xupfd --stop`.
	ConfigPath string
	// TokenFile is the daemon's api_token_file, which its clients read as an operator's do.
	TokenFile string
	// CACert is the daemon's api_tls_cert when it serves HTTPS: its clients trust it as the
	// CA, which fits a self-signed certificate. "" for HTTP.
	CACert    string
	tlsConfig *tls.Config

	done    chan struct{} // closed when the process has exited
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// StartDaemon runs `ip netns exec <upf> binary --config configPath`, copies its output to logw
// (nil discards it) and returns once its HTTP API answers. On failure the process is stopped
// and the error ends with the last lines it logged.
func (t *Topology) StartDaemon(binary, configPath string, logw io.Writer) (*Daemon, error) {
	return t.StartDaemonWrapped(nil, binary, configPath, logw)
}

// StartDaemonWrapped is StartDaemon with wrapper (a command and its arguments, run in the
// upf namespace, that ends by exec'ing the arguments after them, as setpriv does) in front
// of the daemon's command line, so that the process keeps its pid.
func (t *Topology) StartDaemonWrapped(wrapper []string, binary, configPath string, logw io.Writer) (*Daemon, error) {
	cfg, err := config.Load(configPath)
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if logw == nil {
		logw = io.Discard
	}
	d := &Daemon{t: t, log: newTailBuffer(4096), BaseURL: "http://" + dialAddr(cfg.HTTPListen), ConfigPath: configPath,
		TokenFile: cfg.TokenFile, CACert: cfg.TLSCert, done: make(chan struct{})}
	if d.CACert != "" {
		d.BaseURL = "https://" + dialAddr(cfg.HTTPListen)
		if d.tlsConfig, err = api.TLSConfig(d.CACert); err != nil {
			return nil, fmt.Errorf("testbed: %w", err)
		}
	}
	out := io.MultiWriter(logw, d.log)
	args := append(append([]string{"netns", "exec", t.UPFNS}, wrapper...), binary, "--config", configPath)
	d.cmd = exec.Command("ip", args...)
	d.cmd.Stdout, d.cmd.Stderr = out, out
	// Its own process group: a Ctrl-C meant for the demo must not reach the daemon before the
	// demo has finished with it; Stop decides when it ends.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("testbed: start %s: %w", binary, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.done)
	}()
	if err := d.waitReady(); err != nil {
		var stopErr error
		if !d.exited() {
			stopErr = d.Stop()
		}
		return nil, fmt.Errorf("testbed: xupfd did not become ready: %w%s\n--- xupfd log (tail) ---\n%s",
			err, joinedSuffix(stopErr), d.LogTail())
	}
	return d, nil
}

// WaitExited reports whether the daemon exits within timeout.
func (d *Daemon) WaitExited(timeout time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (d *Daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// dialAddr turns a listen address into one to connect to: an unspecified host means every
// local address, of which loopback is one.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func joinedSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; stopping it: " + err.Error()
}

// waitReady polls GET /api/v1/status until it answers, the process exits or startTimeout.
func (d *Daemon) waitReady() error {
	client := d.API()
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			return fmt.Errorf("it exited: %v", d.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Status(ctx)
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-d.done:
			return fmt.Errorf("it exited: %v", d.waitErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer from %s/api/v1/status within %s: %w", d.BaseURL, startTimeout, lastErr)
}

// PID is the daemon's process id (ip netns exec execs it in place).
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// LogTail returns the last lines the daemon wrote.
func (d *Daemon) LogTail() string { return d.log.String() }

// HTTPClient returns a client whose connections are dialled from inside the upf namespace,
// where the API listens.
func (d *Daemon) HTTPClient() *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := d.t.Do(d.t.UPFNS, func() error {
			// The socket is created, and stays, in upf; the address is a literal, so no
			// resolver goroutine runs outside the namespace.
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			conn = c
			return err
		})
		return conn, err
	}
	// No keep-alive: a pooled connection would outlive the daemon between tests and fail the
	// next request in a confusing way.
	return &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true, TLSClientConfig: d.tlsConfig}}
}

// API returns an API client for the daemon, with its token.
func (d *Daemon) API() *api.Client {
	return api.NewClient(d.BaseURL, d.HTTPClient()).WithTokenFile(d.TokenFile)
}

// Xupfctl runs `ip netns exec <upf> xupfctl --server <api> --token-file <file> args...` (and
// --ca-cert for HTTPS) and returns its standard output; on failure the error carries its
// standard error.
func (d *Daemon) Xupfctl(ctx context.Context, xupfctl string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	full := []string{"netns", "exec", d.t.UPFNS, xupfctl, "--server", d.BaseURL, "--token-file", d.TokenFile}
	if d.CACert != "" {
		full = append(full, "--ca-cert", d.CACert)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "ip", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("testbed: xupfctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Stop sends SIGTERM to the daemon and waits for it to exit; after stopTimeout it sends
// SIGKILL to that process only. It returns an error if the daemon did not exit cleanly.
// Calling it again returns the first result.
func (d *Daemon) Stop() error {
	d.stopOnce.Do(func() { d.stopErr = d.stop() })
	return d.stopErr
}

// Kill ends the daemon with SIGKILL, as a crash would, and waits until it has exited; Stop
// then returns nil. It fails when the daemon was already stopped.
func (d *Daemon) Kill() error {
	err := errors.New("testbed: xupfd was already stopped")
	d.stopOnce.Do(func() {
		err = d.kill()
		d.stopErr = err
	})
	return err
}

func (d *Daemon) kill() error {
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testbed: SIGKILL xupfd (pid %d): %w", d.PID(), err)
	}
	select {
	case <-d.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("testbed: xupfd (pid %d) still running after SIGKILL", d.PID())
	}
}

func (d *Daemon) stop() error {
	select {
	case <-d.done:
		return exitErr(d.waitErr)
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testbed: SIGTERM xupfd (pid %d): %w", d.PID(), err)
	}
	select {
	case <-d.done:
		return exitErr(d.waitErr)
	case <-time.After(stopTimeout):
	}
	if err := d.kill(); err != nil {
		return err
	}
	return fmt.Errorf("testbed: xupfd (pid %d) ignored SIGTERM for %s and was killed", d.PID(), stopTimeout)
}

func exitErr(err error) error {
	if err != nil {
		return fmt.Errorf("testbed: xupfd exited: %w", err)
	}
	return nil
}
