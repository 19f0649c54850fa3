// Command xupf-demo shows xupfd forwarding real traffic. It builds xupfd and xupfctl, creates
// three network namespaces (gnb — upf — dn) joined by veth pairs and starts xupfd in upf with
// no sessions. From gnb it plays the SMF over PFCP: it associates, then establishes two PDU
// sessions, one laid out as Open5GS does (the UPF chooses the UE address and uplink TEID; a QoS
// flow for UDP to the UE's port 7000) and one as free5GC does (the SMF chooses both). It adds
// two traffic classes with xupfctl, sends GTP-U uplink from gnb and plain IP downlink from dn
// through both sessions, hands one session over to a second gNB and follows its downlink,
// checks every packet that comes out, the class counters and the association, prints what
// xupfctl reports, deletes the sessions, releases the association and removes everything
// again.
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

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// The API listens inside the upf namespace, so a fixed port cannot clash with anything.
const httpListen = "127.0.0.1:8080"

const (
	echoSeq     = 0x1234
	recvTimeout = 5 * time.Second
)

// flowPort is the UE port that the QoS flow of session A selects, and flowPackets how many
// downlink packets the demo sends to it.
const (
	flowPort    = 7000
	flowPackets = 50
)

// The demo's two PFCP sessions, as the SMF asks for them, in the two layouts xupf must accept.
// A is laid out as Open5GS does: the UPF chooses the UE address (from testbed.UEPool) and the
// uplink TEID, and a QoS flow picks out UDP to the UE's port 7000. B is laid out as free5GC
// does: the SMF chooses both; it has no QFI, to show the GTP-U header without a PDU Session
// Container.
var sessionSpecs = []pfcpSession{
	sessA: {name: "A", spec: pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, QFI: 9, NetworkInstance: "internet",
		GNB: testbed.GNBAddr, GNBTEID: 0x200,
		Flows: []pfcpclient.Flow{{Filter: fmt.Sprintf("permit out 17 from any to assigned %d", flowPort), Precedence: 10, QFI: 5}}}},
	sessB: {name: "B", spec: pfcpclient.SessionSpec{Style: pfcpclient.Free5GC, UE: netip.MustParseAddr("10.45.0.3"),
		UplinkTEID: 0x101, N3: testbed.N3Addr, NetworkInstance: "internet", GNB: testbed.GNBAddr, GNBTEID: 0x201}},
}

// Indexes into sessionSpecs: A has the QoS flow and is shown by xupfctl session show, B is
// handed over.
const (
	sessA = iota
	sessB
)

// handoverTEID is the downlink TEID of session B at the second gNB (testbed.GNB2Addr).
const handoverTEID = 0x202

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
	// No static sessions: the SMF sets them up over PFCP, from the config's ue_pools.
	if err := topo.WriteConfig(cfgPath, nil, httpListen); err != nil {
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

	r := &report{w: w, topo: topo, daemon: d, xupfctl: o.xupfctl, sessions: newSessions()}
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
