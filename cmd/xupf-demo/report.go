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
// and no match fields, everything else, both ways (the handover's downlink too).
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
	// sessions are the demo's PFCP sessions, in the order of sessionSpecs.
	sessions []*pfcpSession

	sent     int
	received int
	rows     int // traffic rows sent
	skipped  int // traffic rows not sent: their session was not established
	checks   int // checks made, passed or not
	failures []string
	areas    []area
	// wantClass is what each traffic class should have counted for the traffic sent.
	wantClass map[uint32]session.Counters
	// ctlRuns and ctlFails count the xupfctl commands run and failed; pfcpFails the PFCP
	// association checks failed, sessionFails the PFCP session ones.
	ctlRuns, ctlFails, pfcpFails, sessionFails int
	// established, modified and deleted count the PFCP session requests the UPF accepted.
	established, modified, deleted int
}

// pfcpSession is one of the demo's PFCP sessions: what the SMF asks for and, once the UPF has
// accepted it, what it answered (nil until then, and after a failed establishment).
type pfcpSession struct {
	name string
	spec pfcpclient.SessionSpec
	s    *pfcpclient.Session
}

// newSessions returns the demo's sessions, none established yet.
func newSessions() []*pfcpSession {
	out := make([]*pfcpSession, len(sessionSpecs))
	for i, p := range sessionSpecs {
		out[i] = &p
	}
	return out
}

// view is the established session as the traffic helpers take it, with the downlink the SMF
// asked for at establishment.
func (p *pfcpSession) view() session.Session {
	return testbed.PFCPView(p.s, p.spec.GNB, p.spec.GNBTEID, p.spec.QFI)
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
	fmt.Fprintf(r.w, "  xupfd pid %d, API %s (inside %s), no static sessions, UE pool %s\n",
		r.daemon.PID(), r.daemon.BaseURL, t.UPFNS, testbed.UEPool)
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

// run associates the SMF, which establishes the sessions, adds the traffic classes, does the
// echo, then the traffic of every session both ways, of the QoS flow and after the handover,
// shows xupfctl's view, checks the class counters and the association, and has the SMF delete
// the sessions and release the association. An error means a step could not be carried out;
// lost packets and failed checks are only recorded.
func (r *report) run(ctx context.Context, o options) error {
	smf, err := r.associate(ctx)
	if err != nil {
		return err
	}
	if smf != nil {
		defer smf.Close()
	}
	if err := r.establish(ctx, smf); err != nil {
		return err
	}
	if err := r.addClasses(ctx); err != nil {
		return err
	}
	if err := r.echo(); err != nil {
		return err
	}
	if err := r.trafficTable(ctx, smf, o); err != nil {
		return err
	}
	cmds := [][]string{{"session", "list"}}
	if a := r.sessions[sessA]; a.s != nil {
		// Its PDRs, FARs, QERs and URRs with what each counted.
		cmds = append(cmds, []string{"session", "show", fmt.Sprint(a.s.UPSEID)})
	}
	cmds = append(cmds, []string{"stats"}, []string{"status"}, []string{"classifier", "list"}, []string{"pfcp", "associations"})
	for _, args := range cmds {
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
	r.deleteSessions(ctx, smf)
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
	dir  string // "uplink" or "downlink"
	name string // the session's name in the report, "A" or "B"
	// what tells the row from the session's default traffic: "QoS flow (port 7000)", "after
	// handover"; empty for the default traffic.
	what string
	// s is the session as the traffic helpers take it; s.GNB is where downlink packets must
	// arrive.
	s     session.Session
	n     int
	label string
	// want is, downlink, the UE port the packets go to and the TEID and QFI they must be
	// tunnelled with.
	want testbed.DownlinkExpect
	// class is the traffic class that must count the packets.
	class uint32
	// skip, when set, says why the row is not sent.
	skip string
}

// check is the name of the row's check.
func (row flowRow) check() string {
	return strings.TrimSpace(fmt.Sprintf("%s session %s %s", row.dir, row.name, row.what))
}

// notEstablished is why the rows of a session that the UPF did not accept are skipped.
const notEstablished = "the session was not established"

// trafficRows lists the traffic of the demo: both sessions both ways by their default rules,
// then the QoS flow of session A.
func (r *report) trafficRows(o options) []flowRow {
	var out []flowRow
	for _, dir := range []string{"uplink", "downlink"} {
		for _, p := range r.sessions {
			row := flowRow{dir: dir, name: p.name, n: o.packets, label: p.name, class: classOther, skip: notEstablished}
			if p.s != nil {
				v := p.view()
				row.s, row.label, row.skip = v, describe(p.name, v), ""
				row.want = testbed.DownlinkExpect{UEPort: testbed.UEPort, TEID: v.DownlinkTEID, QFI: v.QFI}
			}
			out = append(out, row)
		}
	}
	// With PFCP the flow's downlink PDR forwards by the session's downlink FAR, as the
	// default PDR does: its packets keep the session's TEID and differ by the QFI of the
	// flow's QER.
	a, f := r.sessions[sessA], r.sessions[sessA].spec.Flows[0]
	row := flowRow{dir: "downlink", name: a.name, what: fmt.Sprintf("QoS flow (port %d)", flowPort), n: flowPackets,
		label: a.name + " QoS flow", class: classFlow, skip: notEstablished}
	if a.s != nil {
		row.s, row.skip = a.view(), ""
		row.want = testbed.DownlinkExpect{UEPort: flowPort, TEID: a.spec.GNBTEID, QFI: f.QFI}
		row.label = fmt.Sprintf("%s QoS flow (UE %s port %d, DL TEID 0x%x, QFI %d)", a.name, a.s.UE, flowPort, row.want.TEID, f.QFI)
	}
	return append(out, row)
}

func (r *report) trafficTable(ctx context.Context, smf *pfcpclient.Client, o options) error {
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIRECTION\tSESSION\tSENT\tRECEIVED\tCHECKS")
	// The QoS flow works when its packets take its QFI while the rest of session A's
	// downlink keeps the default rule's.
	flowOK, defaultOK, flowGot := false, false, 0
	before := len(r.failures)
	for _, row := range r.trafficRows(o) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		got, ok, err := r.runRow(tw, row)
		if err != nil {
			return err
		}
		switch {
		case row.class == classFlow:
			flowOK, flowGot = ok, got
		case row.dir == "downlink" && row.name == r.sessions[sessA].name:
			defaultOK = ok
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := r.handover(ctx, smf, o); err != nil {
		return err
	}
	skipped := ""
	if r.skipped > 0 {
		skipped = fmt.Sprintf("; %d rows skipped", r.skipped)
	}
	r.area("traffic", len(r.failures) == before && r.skipped == 0,
		"%d of %d packets delivered over the %d rows above, every packet checked%s", r.received, r.sent, r.rows, skipped)

	a := r.sessions[sessA]
	if a.s == nil {
		r.area("QoS flow", false, "session %s was not established", a.name)
		return nil
	}
	f := a.spec.Flows[0]
	with, keeps := "with", "kept"
	if !flowOK || !defaultOK {
		with, keeps = "want", "must keep"
	}
	r.area("QoS flow", flowOK && defaultOK, "session %s, UE port %d: %d of %d packets, %s QFI %d (the flow's QER) and TEID 0x%x (the session's FAR); port %d %s QFI %d",
		a.name, flowPort, flowGot, flowPackets, with, f.QFI, a.spec.GNBTEID, testbed.UEPort, keeps, a.spec.QFI)
	return nil
}

// runRow sends the traffic of row, records its check and prints its line to tw. It returns
// how many packets arrived and whether all was well.
func (r *report) runRow(tw io.Writer, row flowRow) (int, bool, error) {
	if row.skip != "" {
		r.skipped++
		fmt.Fprintf(tw, "%s\t%s\t-\t-\tSKIPPED: %s\n", row.dir, row.label, row.skip)
		return 0, false, nil
	}
	got, problems, err := r.traffic(row)
	if err != nil {
		return 0, false, err
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
	ok := r.check(row.check(), problems...)
	if !ok {
		result = "FAILED: " + strings.Join(problems, "; ")
	}
	fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", row.dir, row.label, row.n, got, result)
	return got, ok, nil
}

// handover moves session B's downlink to the second gNB over PFCP, as an SMF does when the UE
// is handed over, and checks that downlink packets follow: to the new address, with the new
// TEID.
func (r *report) handover(ctx context.Context, smf *pfcpclient.Client, o options) error {
	b := r.sessions[sessB]
	fmt.Fprintf(r.w, "\nPFCP Session Modification: handover of session %s to gNB %s, DL TEID 0x%x -> ", b.name, testbed.GNB2Addr, handoverTEID)
	row := flowRow{dir: "downlink", name: b.name, what: "after handover", n: o.packets, class: classOther,
		label: b.name + " at gNB " + testbed.GNB2Addr.String(), skip: notEstablished}
	if b.s != nil {
		pctx, cancel := context.WithTimeout(ctx, pfcpTimeout)
		err := smf.SetDownlink(pctx, b.s, testbed.GNB2Addr, handoverTEID)
		cancel()
		if err != nil {
			r.sessionCheck("PFCP handover of session "+b.name, err.Error())
			fmt.Fprintf(r.w, "FAILED: %v\n", err)
			row.skip = "the handover was refused"
		} else {
			r.sessionCheck("PFCP handover of session " + b.name)
			r.modified++
			fmt.Fprintln(r.w, "accepted")
			row.s, row.skip = testbed.PFCPView(b.s, testbed.GNB2Addr, handoverTEID, b.spec.QFI), ""
			row.want = testbed.DownlinkExpect{UEPort: testbed.UEPort, TEID: handoverTEID, QFI: b.spec.QFI}
			row.label = describe(b.name, row.s) + " at gNB " + testbed.GNB2Addr.String()
		}
	} else {
		fmt.Fprintln(r.w, "skipped: "+notEstablished)
	}
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIRECTION\tSESSION\tSENT\tRECEIVED\tCHECKS")
	if _, _, err := r.runRow(tw, row); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// describe names a session's default rule the way the report shows it.
func describe(name string, s session.Session) string {
	qfi := "no QFI"
	if s.QFI != 0 {
		qfi = fmt.Sprintf("QFI %d", s.QFI)
	}
	return fmt.Sprintf("%s (UE %s, UL TEID 0x%x, DL TEID 0x%x, %s)", name, s.UE, s.UplinkTEID, s.DownlinkTEID, qfi)
}

// traffic sends the packets of row and checks what arrived; it returns how many arrived and
// the problems found. It also adds them to what row.class should count.
func (r *report) traffic(row flowRow) (int, []string, error) {
	s, n := row.s, row.n
	payload := testbed.Payload("demo " + row.check())
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
	// The first gNB shares its socket with uplink and echo; another one (after a handover)
	// has its own.
	var rx *testbed.Receiver
	var err error
	if s.GNB == testbed.GNBAddr {
		rx, err = r.topo.ListenGNB()
	} else {
		rx, err = r.topo.ListenGTPU(s.GNB)
	}
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

// establish plays the SMF setting up PDU sessions: it establishes the demo's sessions over
// PFCP and prints what the UPF answered. A refused or unanswered establishment is a failed
// check, not an error: the session's traffic is skipped then.
func (r *report) establish(ctx context.Context, smf *pfcpclient.Client) error {
	fmt.Fprintln(r.w, "PFCP Session Establishment from the SMF:")
	for _, p := range r.sessions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		name := "PFCP session " + p.name + " establishment"
		fmt.Fprintf(r.w, "  session %s, %s -> ", p.name, request(p.spec))
		if smf == nil {
			r.sessionCheck(name, "no PFCP association")
			fmt.Fprintln(r.w, "FAILED: no PFCP association")
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, pfcpTimeout)
		s, err := smf.Establish(pctx, p.spec)
		cancel()
		if err != nil {
			r.sessionCheck(name, err.Error())
			fmt.Fprintf(r.w, "FAILED: %v\n", err)
			continue
		}
		p.s = s
		r.established++
		problems := checkEstablished(p)
		r.sessionCheck(name, problems...)
		fmt.Fprintf(r.w, "accepted: UP SEID 0x%x (%d), uplink TEID 0x%x on %s, UE %s: %s\n",
			s.UPSEID, s.UPSEID, s.UplinkTEID, s.N3, s.UE, verdict(problems))
	}
	fmt.Fprintln(r.w)
	return nil
}

// styleNames are the SMFs' names as their projects spell them, for the report.
var styleNames = map[pfcpclient.Style]string{pfcpclient.Open5GS: "Open5GS", pfcpclient.Free5GC: "free5GC"}

// request describes what the SMF asks for in a session's establishment.
func request(spec pfcpclient.SessionSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s layout: ", styleNames[spec.Style])
	if spec.UE.IsValid() {
		fmt.Fprintf(&b, "UE %s and uplink TEID 0x%x given by the SMF", spec.UE, spec.UplinkTEID)
	} else {
		b.WriteString("UE and uplink TEID chosen by the UPF")
	}
	if spec.QFI != 0 {
		fmt.Fprintf(&b, ", QFI %d", spec.QFI)
	} else {
		b.WriteString(", no QFI")
	}
	fmt.Fprintf(&b, ", downlink to gNB %s TEID 0x%x", spec.GNB, spec.GNBTEID)
	for _, f := range spec.Flows {
		fmt.Fprintf(&b, ", QoS flow %q precedence %d QFI %d", f.Filter, f.Precedence, f.QFI)
	}
	return b.String()
}

// checkEstablished checks what the UPF answered to a session's establishment: the UE address
// and uplink F-TEID the SMF gave, or ones the UPF chose from its pool and on its N3 address;
// and, with a CHOOSE ID, one TEID for every uplink PDR of the session.
func checkEstablished(p *pfcpSession) []string {
	var problems []string
	s, spec := p.s, p.spec
	switch {
	case spec.UE.IsValid() && s.UE != spec.UE:
		problems = append(problems, fmt.Sprintf("UE %s, want the SMF's %s", s.UE, spec.UE))
	case !spec.UE.IsValid() && !testbed.UEPool.Contains(s.UE):
		problems = append(problems, fmt.Sprintf("UE %s is not from the pool %s", s.UE, testbed.UEPool))
	}
	if spec.Style == pfcpclient.Free5GC && s.UplinkTEID != spec.UplinkTEID {
		problems = append(problems, fmt.Sprintf("uplink TEID 0x%x, want the SMF's 0x%x", s.UplinkTEID, spec.UplinkTEID))
	}
	if s.N3 != testbed.N3Addr {
		problems = append(problems, fmt.Sprintf("uplink F-TEID on %s, want %s", s.N3, testbed.N3Addr))
	}
	for _, c := range s.CreatedPDRs {
		if c.TEID != 0 && c.TEID != s.UplinkTEID {
			problems = append(problems, fmt.Sprintf("PDR %d on TEID 0x%x, want the session's one 0x%x", c.ID, c.TEID, s.UplinkTEID))
		}
	}
	return problems
}

// deleteSessions has the SMF delete its sessions over PFCP and checks that the daemon has none
// left, neither in its status nor in its list of PFCP sessions.
func (r *report) deleteSessions(ctx context.Context, smf *pfcpclient.Client) {
	fmt.Fprintln(r.w, "\nPFCP Session Deletion from the SMF:")
	pctx, cancel := context.WithTimeout(ctx, pfcpTimeout)
	defer cancel()
	for _, p := range r.sessions {
		if p.s == nil {
			continue // not established, and reported
		}
		err := smf.Delete(pctx, p.s)
		problems := []string(nil)
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			r.deleted++
		}
		r.sessionCheck("PFCP session "+p.name+" deletion", problems...)
		fmt.Fprintf(r.w, "  session %s (UP SEID 0x%x) -> %s\n", p.name, p.s.UPSEID, verdict(problems))
	}
	var problems []string
	st, serr := r.daemon.API().Status(pctx)
	list, lerr := r.daemon.API().PFCPSessions(pctx)
	switch {
	case serr != nil || lerr != nil:
		problems = append(problems, fmt.Sprintf("API after deletion: %v", errors.Join(serr, lerr)))
	case st.Sessions != 0 || len(list) != 0:
		problems = append(problems, fmt.Sprintf("after deletion: status says %d sessions, %d PFCP sessions listed; want none", st.Sessions, len(list)))
	}
	r.sessionCheck("no session left", problems...)
	fmt.Fprintf(r.w, "-> the daemon has %d sessions left (status), %d PFCP sessions listed: %s\n", st.Sessions, len(list), verdict(problems))

	left := "none left"
	if len(problems) > 0 {
		left = "some left over"
	}
	r.area("PFCP sessions", r.sessionFails == 0,
		"established %d of %d (%s-style, UE and TEID chosen by the UPF; %s-style, chosen by the SMF), modified %d (handover of %s), deleted %d, %s",
		r.established, len(r.sessions), styleNames[pfcpclient.Open5GS], styleNames[pfcpclient.Free5GC], r.modified, r.sessions[sessB].name, r.deleted, left)
}

// sessionCheck is check for the PFCP session steps, which the summary reports together.
func (r *report) sessionCheck(name string, problems ...string) {
	if !r.check(name, problems...) {
		r.sessionFails++
	}
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
	what := "PFCP association, PFCP sessions (establishment, handover, deletion), GTP-U echo, traffic and QoS flow, classifier counters, xupfctl, xupfd stop"
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
