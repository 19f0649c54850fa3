package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// report runs the traffic steps and prints their results as it goes.
type report struct {
	w      io.Writer
	topo   *testbed.Topology
	daemon *testbed.Daemon

	ok       bool
	sent     int
	received int
	failures []string
}

func (r *report) header() {
	t := r.topo
	fmt.Fprintf(r.w, "\nxupf demo (run %s)\n", t.Suffix)
	fmt.Fprintf(r.w, "  %-22s %-34s %s\n", t.GNBNS, t.UPFNS, t.DNNS)
	fmt.Fprintf(r.w, "  %-22s %-34s %s\n",
		fmt.Sprintf("%s %s", testbed.GNBIf, testbed.GNBAddr),
		fmt.Sprintf("%s %s | %s %s", testbed.N3If, testbed.N3Addr, testbed.N6If, testbed.N6Addr),
		fmt.Sprintf("%s %s", testbed.DNIf, testbed.DNAddr))
	fmt.Fprintf(r.w, "  xupfd pid %d, API %s (inside %s)\n\n", r.daemon.PID(), r.daemon.BaseURL, t.UPFNS)
	r.ok = true
}

func (r *report) fail(format string, args ...any) {
	r.ok = false
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// run does the echo, then uplink and downlink for every session, then shows xupfctl's view.
// An error means a step could not be carried out; lost packets and failed checks are only
// recorded.
func (r *report) run(ctx context.Context, o options) error {
	if err := r.echo(); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIRECTION\tSESSION\tSENT\tRECEIVED\tCHECKS")
	for _, dir := range []string{"uplink", "downlink"} {
		for _, s := range sessions {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			got, problems, err := r.traffic(dir, s, o.packets)
			if err != nil {
				return err
			}
			r.sent += o.packets
			r.received += got
			result := "OK (TEID, QFI, addresses, TTL, payload, checksums)"
			if dir == "uplink" {
				result = "OK (source UE, destination DN, TTL, payload)"
			}
			if len(problems) > 0 {
				result = "FAILED: " + strings.Join(problems, "; ")
				r.fail("%s session %d: %s", dir, s.ID, strings.Join(problems, "; "))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", dir, describe(s), o.packets, got, result)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	for _, args := range [][]string{{"session", "list"}, {"stats"}, {"status"}} {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		out, err := r.daemon.Xupfctl(ctx, o.xupfctl, args...)
		fmt.Fprintf(r.w, "\n$ xupfctl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			r.fail("%v", err)
			fmt.Fprintf(r.w, "FAILED: %v\n", err)
		}
	}
	fmt.Fprintln(r.w)
	return nil
}

// describe names a session the way the report's table shows it.
func describe(s session.Session) string {
	qfi := "no QFI"
	if s.QFI != 0 {
		qfi = fmt.Sprintf("QFI %d", s.QFI)
	}
	return fmt.Sprintf("%d (UE %s, UL TEID 0x%x, DL TEID 0x%x, %s)", s.ID, s.UE, s.UplinkTEID, s.DownlinkTEID, qfi)
}

// traffic sends n packets of session s in direction dir and checks what arrived; it returns
// how many arrived and the problems found.
func (r *report) traffic(dir string, s session.Session, n int) (int, []string, error) {
	payload := testbed.Payload(fmt.Sprintf("demo %s s%d", dir, s.ID))
	if dir == "uplink" {
		rx, err := r.topo.ListenDN()
		if err != nil {
			return 0, nil, err
		}
		defer rx.Close()
		// The gNB marks uplink packets with the session's QFI, as the PDR expects.
		if err := r.topo.SendUplink(s, n, payload, s.QFI); err != nil {
			return 0, nil, err
		}
		got, err := rx.Collect(n, recvTimeout)
		if err != nil {
			return 0, nil, err
		}
		return len(got), testbed.CheckUplink(s, n, payload, got), nil
	}
	rx, err := r.topo.ListenGNB()
	if err != nil {
		return 0, nil, err
	}
	defer rx.Close()
	if err := r.topo.SendDownlink(s, n, payload); err != nil {
		return 0, nil, err
	}
	got, err := testbed.ReceiveDownlink(rx, n, recvTimeout)
	problems := testbed.CheckDownlink(s, n, payload, got)
	if err != nil {
		// Undecodable datagrams are a finding about the UPF, not a failure to run.
		problems = append(problems, err.Error())
	}
	return len(got), problems, nil
}

func (r *report) echo() error {
	resp, err := r.topo.Echo(echoSeq, recvTimeout)
	if err != nil {
		r.fail("echo: %v", err)
		fmt.Fprintf(r.w, "GTP-U Echo Request seq 0x%04x -> FAILED: %v\n\n", echoSeq, err)
		return nil
	}
	recovery := "absent"
	if len(resp.IEs) >= 2 && resp.IEs[0] == testbed.RecoveryIE {
		recovery = fmt.Sprintf("%d", resp.IEs[1])
	}
	fmt.Fprintf(r.w, "GTP-U Echo Request seq 0x%04x, TEID 0 -> Echo Response (type %d) from %s, seq 0x%04x, Recovery IE restart counter %s: ",
		uint16(echoSeq), resp.MsgType, resp.OuterSrc, resp.Seq, recovery)
	if problems := testbed.CheckEchoResponse(echoSeq, resp); len(problems) > 0 {
		r.fail("echo: %s", strings.Join(problems, "; "))
		fmt.Fprintf(r.w, "FAILED: %s\n\n", strings.Join(problems, "; "))
		return nil
	}
	fmt.Fprint(r.w, "OK\n\n")
	return nil
}

func (r *report) summary() {
	if r.ok {
		fmt.Fprintf(r.w, "RESULT: PASS: %d of %d packets delivered, every check passed, GTP-U echo answered\n", r.received, r.sent)
		return
	}
	fmt.Fprintf(r.w, "RESULT: FAIL: %d of %d packets delivered\n", r.received, r.sent)
	for _, f := range r.failures {
		fmt.Fprintf(r.w, "  - %s\n", f)
	}
}
