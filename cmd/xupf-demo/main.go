// Command xupf-demo shows xupfd forwarding real traffic. It builds xupfd and xupfctl, creates
// three network namespaces (gnb — upf — dn) joined by veth pairs, starts xupfd in upf with two
// static sessions (session 1 with a QoS flow for UDP to the UE's port 7000), associates an SMF
// with it over PFCP from gnb, adds two traffic classes with xupfctl, sends GTP-U uplink from
// gnb and plain IP downlink from dn, checks every packet that comes out, the class counters
// and the association, prints what xupfctl reports, releases the association and removes
// everything again.
//
// It needs root (namespaces, XDP): sudo go run ./cmd/xupf-demo. The exit code is 0 only when
// every packet arrived and every check passed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// The API listens inside the upf namespace, so a fixed port cannot clash with anything.
const httpListen = "127.0.0.1:8080"

const (
	echoSeq     = 0x1234
	recvTimeout = 5 * time.Second
)

// flowPort is the UE port that the QoS flow of session 1 selects, and flowPackets how many
// downlink packets the demo sends to it.
const (
	flowPort    = 7000
	flowPackets = 50
)

// sessions are the demo's two static sessions: one with a QFI, one without, to show both
// GTP-U header forms. Session 1 also has a QoS flow: downlink UDP to the UE's port 7000 goes
// with its own TEID and QFI, everything else by the session's default rule.
var sessions = []session.Session{
	{ID: 1, UE: netip.MustParseAddr("10.45.0.2"), UplinkTEID: 0x100, DownlinkTEID: 0x200, QFI: 9, GNB: testbed.GNBAddr,
		Flows: []session.Flow{{Precedence: 10, QFI: 5, SDF: []string{"permit out 17 from any to assigned 7000"},
			DownlinkTEID: 0x300}}},
	{ID: 2, UE: netip.MustParseAddr("10.45.0.3"), UplinkTEID: 0x101, DownlinkTEID: 0x201, GNB: testbed.GNBAddr},
}

type options struct {
	xupfd, xupfctl string
	packets        int
	verbose        bool
}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	flag.StringVar(&o.xupfd, "xupfd", "", "xupfd binary to run (default: build ./cmd/xupfd)")
	flag.StringVar(&o.xupfctl, "xupfctl", "", "xupfctl binary to run (default: build ./cmd/xupfctl)")
	flag.IntVar(&o.packets, "packets", 100, "packets per session and direction")
	flag.BoolVar(&o.verbose, "v", false, "copy xupfd's log to stderr")
	flag.Parse()
	if o.packets < 1 || o.packets > 10000 {
		fmt.Fprintln(os.Stderr, "xupf-demo: --packets must be from 1 to 10000")
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "xupf-demo: must run as root (it creates network namespaces and attaches XDP programs); use sudo:\n"+
			"  sudo go run ./cmd/xupf-demo\n"+
			"or, if root's PATH has no go:\n"+
			"  go build -o /tmp/xupf-demo ./cmd/xupf-demo && sudo /tmp/xupf-demo")
		return 2
	}
	// Ctrl-C stops the demo between steps (each step is bounded), and teardown still runs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ok, err := demo(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xupf-demo:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// demo runs the whole scenario and reports to w. ok is false when a packet was lost or a check
// failed; err is set when the scenario could not run (or clean up) at all.
func demo(ctx context.Context, o options, w io.Writer) (ok bool, err error) {
	tmp, err := os.MkdirTemp("", "xupf-demo-")
	if err != nil {
		return false, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	if o.xupfd == "" || o.xupfctl == "" {
		fmt.Fprintln(w, "building xupfd and xupfctl ...")
		xupfd, xupfctl, err := testbed.BuildBinaries(ctx, tmp)
		if err != nil {
			return false, err
		}
		if o.xupfd == "" {
			o.xupfd = xupfd
		}
		if o.xupfctl == "" {
			o.xupfctl = xupfctl
		}
	}

	topo, err := testbed.New("xupf")
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := topo.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", cerr))
		}
	}()
	cfgPath := tmp + "/xupfd.yaml"
	if err := topo.WriteConfig(cfgPath, sessions, httpListen); err != nil {
		return false, err
	}
	var logw io.Writer
	if o.verbose {
		logw = os.Stderr
	}
	d, err := topo.StartDaemon(o.xupfd, cfgPath, logw)
	if err != nil {
		return false, err
	}
	// Stopped explicitly below to report its exit; this covers the early returns.
	defer d.Stop()

	r := &report{w: w, topo: topo, daemon: d, xupfctl: o.xupfctl}
	r.header()
	if err := r.run(ctx, o); err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintf(w, "\nxupfd log (tail):\n%s\n", d.LogTail())
		}
		return false, err
	}
	if err := d.Stop(); err != nil {
		r.check("xupfd stop", err.Error())
		r.area("xupfd", false, "did not stop cleanly: %v", err)
	} else {
		r.check("xupfd stop")
		r.area("xupfd", true, "stopped cleanly on SIGTERM")
		fmt.Fprintln(w, "xupfd stopped (SIGTERM), namespaces removed")
	}
	if !r.ok() {
		fmt.Fprintf(w, "\nxupfd log (tail):\n%s\n", d.LogTail())
	}
	r.summary()
	return r.ok(), nil
}
