package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// smfNodeID is the Node ID of the SMF the demo plays over PFCP from the gnb namespace.
const smfNodeID = "demo-smf"

// apiTimeout bounds one request to the daemon's API, and pfcpTimeout one PFCP exchange
// (retransmissions included).
const (
	apiTimeout  = 10 * time.Second
	pfcpTimeout = 10 * time.Second
)

// The traffic classes the demo adds with xupfctl before any traffic: class 1 takes the
// downlink UDP to the UE's port 7000 (the QoS flow's traffic), class 2, with a lower priority
// and no match fields, everything else, both ways.
const (
	classFlow  = 1
	classOther = 2
)

var classAdds = [][]string{
	{"classifier", "add", "--id", fmt.Sprint(classFlow), "--priority", "10", "--direction", "egress",
		"--protocol", "udp", "--dst-port", fmt.Sprint(flowPort)},
	{"classifier", "add", "--id", fmt.Sprint(classOther), "--priority", "1"},
}

// report runs the steps and prints their results as it goes.
type report struct {
	w       io.Writer
	topo    *testbed.Topology
	daemon  *testbed.Daemon
	xupfctl string

	sent     int
	received int
	rows     int // traffic rows sent
	checks   int // checks made, passed or not
	failures []string
	areas    []area
	// wantClass is what each traffic class should have counted for the traffic sent.
	wantClass map[uint32]session.Counters
	// ctlRuns and ctlFails count the xupfctl commands run and failed; pfcpFails the PFCP
	// checks failed.
	ctlRuns, ctlFails, pfcpFails int
}

// area is one line of the summary: a feature and what the demo found about it.
type area struct {
	name string
	ok   bool
	text string
}

func (r *report) header() {
	t := r.topo
	fmt.Fprintf(r.w, "\nxupf demo (run %s)\n", t.Suffix)
	fmt.Fprintf(r.w, "  %-22s %-34s %s\n", t.GNBNS, t.UPFNS, t.DNNS)
	fmt.Fprintf(r.w, "  %-22s %-34s %s\n",
		fmt.Sprintf("%s %s", testbed.GNBIf, testbed.GNBAddr),
		fmt.Sprintf("%s %s | %s %s", testbed.N3If, testbed.N3Addr, testbed.N6If, testbed.N6Addr),
		fmt.Sprintf("%s %s", testbed.DNIf, testbed.DNAddr))
	fmt.Fprintf(r.w, "  xupfd pid %d, API %s (inside %s)\n", r.daemon.PID(), r.daemon.BaseURL, t.UPFNS)
	for _, s := range sessions {
		fmt.Fprintf(r.w, "  session %s\n", describe(s))
		for _, f := range s.Flows {
			fmt.Fprintf(r.w, "    QoS flow: precedence %d, QFI %d, DL TEID 0x%x, SDF %q\n",
				f.Precedence, f.QFI, f.DownlinkTEID, f.SDF)
		}
	}
	fmt.Fprintln(r.w)
	r.wantClass = map[uint32]session.Counters{classFlow: {}, classOther: {}}
}

// check records one check, which passed when there are no problems.
func (r *report) check(name string, problems ...string) bool {
	r.checks++
	if len(problems) == 0 {
		return true
	}
	r.failures = append(r.failures, name+": "+strings.Join(problems, "; "))
	return false
}

// area records a line of the summary.
func (r *report) area(name string, ok bool, format string, args ...any) {
	r.areas = append(r.areas, area{name: name, ok: ok, text: fmt.Sprintf(format, args...)})
}

func (r *report) ok() bool { return len(r.failures) == 0 }

// verdict is how a step's result line ends.
func verdict(problems []string) string {
	if len(problems) > 0 {
		return "FAILED: " + strings.Join(problems, "; ")
	}
	return "OK"
}

func (r *report) apiCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, apiTimeout)
}

// run associates the SMF, adds the traffic classes, does the echo, then the traffic of every
// session both ways and of the QoS flow, shows xupfctl's view, checks the class counters and
// the association, and releases it. An error means a step could not be carried out; lost
// packets and failed checks are only recorded.
func (r *report) run(ctx context.Context, o options) error {
	smf, err := r.associate(ctx)
	if err != nil {
		return err
	}
	if smf != nil {
		defer smf.Close()
	}
	if err := r.addClasses(ctx); err != nil {
		return err
	}
	if err := r.echo(); err != nil {
		return err
	}
	if err := r.trafficTable(ctx, o); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"session", "list"}, {"stats"}, {"status"}, {"classifier", "list"}, {"pfcp", "associations"},
	} {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		out, cmdOK := r.ctl(ctx, args...)
		switch args[0] {
		case "classifier":
			r.checkClasses(ctx)
		case "pfcp":
			r.checkAssociationListed(ctx, smf, out, cmdOK)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	r.area("xupfctl", r.ctlFails == 0, "%d of %d commands succeeded in %s", r.ctlRuns-r.ctlFails, r.ctlRuns, r.topo.UPFNS)
	r.release(ctx, smf)
	fmt.Fprintln(r.w)
	return nil
}

// ctl runs xupfctl in the upf namespace, prints the command and its output, and records
// whether it succeeded.
func (r *report) ctl(ctx context.Context, args ...string) (string, bool) {
	out, err := r.daemon.Xupfctl(ctx, r.xupfctl, args...)
	fmt.Fprintf(r.w, "\n$ xupfctl %s\n%s", strings.Join(args, " "), out)
	name := "xupfctl " + strings.Join(args, " ")
	r.ctlRuns++
	if err != nil {
		r.ctlFails++
		r.check(name, err.Error())
		fmt.Fprintf(r.w, "FAILED: %v\n", err)
		return out, false
	}
	r.check(name)
	return out, true
}

// flowRow is one row of the traffic table: n packets of session s one way, and what the
// receiver must see.
type flowRow struct {
	dir   string // "uplink" or "downlink"
	s     session.Session
	n     int
	label string
	// want is, downlink, the UE port the packets go to and the TEID and QFI they must be
	// tunnelled with.
	want testbed.DownlinkExpect
	// class is the traffic class that must count the packets.
	class uint32
}

// rows lists the traffic of the demo: both sessions both ways by their default rules, then
// the QoS flow of session 1.
func rows(o options) []flowRow {
	var out []flowRow
	for _, dir := range []string{"uplink", "downlink"} {
		for _, s := range sessions {
			out = append(out, flowRow{dir: dir, s: s, n: o.packets, label: describe(s),
				want:  testbed.DownlinkExpect{UEPort: testbed.UEPort, TEID: s.DownlinkTEID, QFI: s.QFI},
				class: classOther})
		}
	}
	s, f := sessions[0], sessions[0].Flows[0]
	out = append(out, flowRow{dir: "downlink", s: s, n: flowPackets,
		label: fmt.Sprintf("%d QoS flow (UE %s port %d, DL TEID 0x%x, QFI %d)", s.ID, s.UE, flowPort, f.DownlinkTEID, f.QFI),
		want:  testbed.DownlinkExpect{UEPort: flowPort, TEID: f.DownlinkTEID, QFI: f.QFI},
		class: classFlow})
	return out
}

func (r *report) trafficTable(ctx context.Context, o options) error {
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIRECTION\tSESSION\tSENT\tRECEIVED\tCHECKS")
	// The QoS flow works when its packets take its TEID and QFI while the rest of session 1's
	// downlink keeps the default rule's.
	flowOK, defaultOK, flowGot := false, false, 0
	before := len(r.failures)
	for _, row := range rows(o) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		got, problems, err := r.traffic(row)
		if err != nil {
			return err
		}
		r.rows++
		r.sent += row.n
		r.received += got
		result := "OK (source UE, destination DN, TTL, payload)"
		if row.dir == "downlink" {
			qfi := "no QFI"
			if row.want.QFI != 0 {
				qfi = fmt.Sprintf("QFI %d", row.want.QFI)
			}
			result = fmt.Sprintf("OK (TEID 0x%x, %s, addresses, TTL, payload, checksums)", row.want.TEID, qfi)
		}
		name := fmt.Sprintf("%s session %d", row.dir, row.s.ID)
		switch {
		case row.class == classFlow:
			name = fmt.Sprintf("downlink session %d QoS flow (port %d)", row.s.ID, flowPort)
			flowOK, flowGot = len(problems) == 0, got
		case row.dir == "downlink" && row.s.ID == sessions[0].ID:
			defaultOK = len(problems) == 0
		}
		if !r.check(name, problems...) {
			result = "FAILED: " + strings.Join(problems, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", row.dir, row.label, row.n, got, result)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	r.area("traffic", len(r.failures) == before, "%d of %d packets delivered over the %d rows above, every packet checked",
		r.received, r.sent, r.rows)
	s, f := sessions[0], sessions[0].Flows[0]
	with, keeps := "with", "kept"
	if !flowOK || !defaultOK {
		with, keeps = "want", "must keep"
	}
	r.area("QoS flow", flowOK && defaultOK, "session %d, UE port %d: %d of %d packets, %s TEID 0x%x, QFI %d; port %d %s TEID 0x%x, QFI %d",
		s.ID, flowPort, flowGot, flowPackets, with, f.DownlinkTEID, f.QFI, testbed.UEPort, keeps, s.DownlinkTEID, s.QFI)
	return nil
}

// describe names a session's default rule the way the report shows it.
func describe(s session.Session) string {
	qfi := "no QFI"
	if s.QFI != 0 {
		qfi = fmt.Sprintf("QFI %d", s.QFI)
	}
	return fmt.Sprintf("%d (UE %s, UL TEID 0x%x, DL TEID 0x%x, %s)", s.ID, s.UE, s.UplinkTEID, s.DownlinkTEID, qfi)
}

// traffic sends the packets of row and checks what arrived; it returns how many arrived and
// the problems found. It also adds them to what row.class should count.
func (r *report) traffic(row flowRow) (int, []string, error) {
	s, n := row.s, row.n
	tag := fmt.Sprintf("demo %s s%d", row.dir, s.ID)
	if row.dir == "downlink" && row.want.UEPort != testbed.UEPort {
		tag += fmt.Sprintf(" port %d", row.want.UEPort)
	}
	payload := testbed.Payload(tag)
	c := r.wantClass[row.class]
	c.Packets += uint64(n)
	for i := range n {
		c.Bytes += uint64(20 + 8 + len(payload(i))) // the classifier counts IPv4 length
	}
	r.wantClass[row.class] = c

	if row.dir == "uplink" {
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
	if err := r.topo.SendDownlinkTo(s, row.want.UEPort, n, payload); err != nil {
		return 0, nil, err
	}
	got, err := testbed.ReceiveDownlink(rx, n, recvTimeout)
	problems := testbed.CheckDownlinkTo(s, row.want, n, payload, got)
	if err != nil {
		// Undecodable datagrams are a finding about the UPF, not a failure to run.
		problems = append(problems, err.Error())
	}
	return len(got), problems, nil
}

func (r *report) echo() error {
	resp, err := r.topo.Echo(echoSeq, recvTimeout)
	if err != nil {
		r.check("GTP-U echo", err.Error())
		r.area("GTP-U echo", false, "no answer: %v", err)
		fmt.Fprintf(r.w, "GTP-U Echo Request seq 0x%04x -> FAILED: %v\n\n", echoSeq, err)
		return nil
	}
	recovery := "absent"
	if len(resp.IEs) >= 2 && resp.IEs[0] == testbed.RecoveryIE {
		recovery = fmt.Sprintf("%d", resp.IEs[1])
	}
	fmt.Fprintf(r.w, "GTP-U Echo Request seq 0x%04x, TEID 0 -> Echo Response (type %d) from %s, seq 0x%04x, Recovery IE restart counter %s: ",
		uint16(echoSeq), resp.MsgType, resp.OuterSrc, resp.Seq, recovery)
	problems := testbed.CheckEchoResponse(echoSeq, resp)
	r.check("GTP-U echo", problems...)
	r.area("GTP-U echo", len(problems) == 0, "Echo Response from %s, Recovery IE restart counter %s", resp.OuterSrc, recovery)
	fmt.Fprintf(r.w, "%s\n\n", verdict(problems))
	return nil
}

// addClasses adds the demo's traffic classes with xupfctl, before any traffic.
func (r *report) addClasses(ctx context.Context) error {
	fmt.Fprintln(r.w, "Traffic classes, added before any traffic:")
	for _, args := range classAdds {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		r.ctl(ctx, args...)
	}
	fmt.Fprintln(r.w)
	return nil
}

// checkClasses checks that class 1 counted exactly the QoS flow's packets and class 2 all the
// others, and that no packet went unclassified.
func (r *report) checkClasses(ctx context.Context) {
	actx, cancel := r.apiCtx(ctx)
	defer cancel()
	var problems []string
	got := map[uint32]session.Counters{}
	list, err := r.daemon.API().Classes(actx)
	if err != nil {
		problems = append(problems, fmt.Sprintf("API classes: %v", err))
	}
	for _, c := range list {
		got[c.ID] = c.Counters
		if _, ok := r.wantClass[c.ID]; !ok {
			problems = append(problems, fmt.Sprintf("unexpected class %d", c.ID))
		}
	}
	for _, id := range []uint32{classFlow, classOther} {
		if g, w := got[id], r.wantClass[id]; g != w {
			problems = append(problems, fmt.Sprintf("class %d counted %d packets, %d bytes; want %d packets, %d bytes",
				id, g.Packets, g.Bytes, w.Packets, w.Bytes))
		}
	}
	var total uint64
	for _, w := range r.wantClass {
		total += w.Packets
	}
	st, err := r.daemon.API().Stats(actx)
	if err != nil {
		problems = append(problems, fmt.Sprintf("API stats: %v", err))
	} else if hit, miss := st.Counters["cls_hit"], st.Counters["cls_miss"]; hit != total || miss != 0 {
		problems = append(problems, fmt.Sprintf("cls_hit %d, cls_miss %d; want %d and 0", hit, miss, total))
	}
	r.check("classifier counters", problems...)
	f, o := r.wantClass[classFlow], r.wantClass[classOther]
	fmt.Fprintf(r.w, "-> class %d: %d packets, %d bytes (want the %d to UE port %d); class %d: %d packets, %d bytes (want the other %d); cls_hit %d, cls_miss 0: %s\n",
		classFlow, got[classFlow].Packets, got[classFlow].Bytes, f.Packets, flowPort,
		classOther, got[classOther].Packets, got[classOther].Bytes, o.Packets, total, verdict(problems))
	r.area("classifier", len(problems) == 0, "class %d counted %d of %d packets (downlink to port %d), class %d %d of %d (the rest)",
		classFlow, got[classFlow].Packets, f.Packets, flowPort, classOther, got[classOther].Packets, o.Packets)
}

// associate plays the SMF: from the gnb namespace, it sets up a PFCP association with the
// daemon. A refused or unanswered association is a failed check, not an error; the client is
// nil then.
func (r *report) associate(ctx context.Context) (*pfcpclient.Client, error) {
	var c *pfcpclient.Client
	err := r.topo.Do(r.topo.GNBNS, func() error {
		var err error
		c, err = pfcpclient.Dial(testbed.PFCPAddr, pfcpclient.Options{NodeID: smfNodeID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("PFCP client in %s: %w", r.topo.GNBNS, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pfcpTimeout)
	defer cancel()
	fmt.Fprintf(r.w, "PFCP Association Setup from SMF %q (%s, in %s) to %s -> ", smfNodeID, testbed.GNBAddr, r.topo.GNBNS, testbed.PFCPAddr)
	a, err := c.Associate(pctx)
	if err != nil {
		c.Close()
		r.pfcpCheck("PFCP association setup", err.Error())
		r.area("PFCP", false, "association setup failed: %v", err)
		fmt.Fprintf(r.w, "FAILED: %v\n\n", err)
		return nil, nil
	}
	var problems []string
	if a.NodeID != testbed.N3Addr.String() {
		problems = append(problems, fmt.Sprintf("UPF node ID %q, want %s (the first GTP-U address)", a.NodeID, testbed.N3Addr))
	}
	if a.Recovery.IsZero() {
		problems = append(problems, "no Recovery Time Stamp")
	}
	r.pfcpCheck("PFCP association setup", problems...)
	fmt.Fprintf(r.w, "accepted: UPF node ID %s, recovery time stamp %s, UP function features % x: %s\n\n",
		a.NodeID, a.Recovery.UTC().Format(time.RFC3339), a.Features, verdict(problems))
	return c, nil
}

// checkAssociationListed checks that the daemon lists the SMF's association, in the API and
// in what xupfctl printed.
func (r *report) checkAssociationListed(ctx context.Context, smf *pfcpclient.Client, out string, cmdOK bool) {
	if smf == nil {
		return // the setup failed, and was reported
	}
	actx, cancel := r.apiCtx(ctx)
	defer cancel()
	var problems []string
	list, err := r.daemon.API().Associations(actx)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("API associations: %v", err))
	case len(list) != 1 || list[0].NodeID != smfNodeID || list[0].Address.Addr() != testbed.GNBAddr:
		problems = append(problems, fmt.Sprintf("API associations %+v, want exactly %s from %s", list, smfNodeID, testbed.GNBAddr))
	}
	if cmdOK && (!strings.Contains(out, smfNodeID) || !strings.Contains(out, testbed.GNBAddr.String())) {
		problems = append(problems, fmt.Sprintf("xupfctl pfcp associations does not list %s from %s", smfNodeID, testbed.GNBAddr))
	}
	r.pfcpCheck("PFCP association listed", problems...)
	fmt.Fprintf(r.w, "-> association of %s from %s listed by xupfctl and the API: %s\n", smfNodeID, testbed.GNBAddr, verdict(problems))
}

// release releases the SMF's association and checks that the daemon no longer has it.
func (r *report) release(ctx context.Context, smf *pfcpclient.Client) {
	if smf == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, pfcpTimeout)
	defer cancel()
	fmt.Fprintf(r.w, "\nPFCP Association Release from SMF %q -> ", smfNodeID)
	var problems []string
	if err := smf.Release(pctx); err != nil {
		problems = append(problems, err.Error())
	} else {
		fmt.Fprint(r.w, "accepted; ")
		list, err := r.daemon.API().Associations(pctx)
		st, serr := r.daemon.API().Status(pctx)
		switch {
		case err != nil || serr != nil:
			problems = append(problems, fmt.Sprintf("API after release: %v", errors.Join(err, serr)))
		case len(list) != 0 || st.PFCPAssociations != 0:
			problems = append(problems, fmt.Sprintf("after release: associations %+v, status says %d, want none", list, st.PFCPAssociations))
		default:
			fmt.Fprint(r.w, "the daemon has 0 associations left: ")
		}
	}
	r.pfcpCheck("PFCP association release", problems...)
	fmt.Fprintln(r.w, verdict(problems))
	r.area("PFCP", r.pfcpFails == 0, "SMF %s (%s) associated with UPF %s, listed by xupfctl and the API, released",
		smfNodeID, testbed.GNBAddr, testbed.N3Addr)
}

// pfcpCheck is check for the PFCP steps, which the summary reports together.
func (r *report) pfcpCheck(name string, problems ...string) {
	if !r.check(name, problems...) {
		r.pfcpFails++
	}
}

func (r *report) summary() {
	fmt.Fprintln(r.w, "\nSUMMARY")
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', 0)
	for _, a := range r.areas {
		mark := "OK"
		if !a.ok {
			mark = "FAILED"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.name, mark, a.text)
	}
	tw.Flush()
	passed := r.checks - len(r.failures)
	what := "GTP-U echo, traffic and QoS flow, classifier counters, PFCP association, xupfctl, xupfd stop"
	if r.ok() {
		fmt.Fprintf(r.w, "RESULT: PASS: %d of %d checks passed (%s); %d of %d packets delivered\n",
			passed, r.checks, what, r.received, r.sent)
		return
	}
	fmt.Fprintf(r.w, "RESULT: FAIL: %d of %d checks passed (%s); %d of %d packets delivered\n",
		passed, r.checks, what, r.received, r.sent)
	for _, f := range r.failures {
		fmt.Fprintf(r.w, "  - %s\n", f)
	}
}
