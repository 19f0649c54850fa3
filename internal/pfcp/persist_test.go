package pfcp

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/state"
)

var ue2, ue3 = netip.MustParseAddr("10.45.0.8"), netip.MustParseAddr("10.45.0.9")

func openStore(t *testing.T, dir string) *state.Store {
	t.Helper()
	st, err := state.Open(dir, nil, StoreBuckets...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// firstRun is a node's first run on a new state file, with one session established (basicSession,
// CP SEID 0x11): it returns the state file's directory and the session's SEID.
func firstRun(t *testing.T) (string, uint64) {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	p := newPFCPTest(t, func(o *Options) { o.Store = st })
	p.n.Restore()
	seid, _ := p.mustEstablish(0x11, basicSession(ue1)...)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, seid
}

// restarted is the node a restart with the state file in dir makes: a new datapath, the
// sessions restored into it.
func restarted(t *testing.T, dir string, opts ...func(*Options)) (*Node, *fakeDatapath, RestoreResult, error) {
	t.Helper()
	st := openStore(t, dir)
	t.Cleanup(func() { st.Close() })
	dp := newFakeDatapath()
	n := newSessionNode(dp, append([]func(*Options){func(o *Options) { o.Store = st }}, opts...)...)
	res, err := n.Restore()
	return n, dp, res, err
}

// TestRestoreSessions: a node restarted on the state file has the same Recovery Time Stamp,
// associations, sessions (rules, SEIDs, TEIDs, UE addresses) and datapath entries; it hands
// out neither a SEID nor a TEID again, and the restored sessions can be modified and
// deleted.
func TestRestoreSessions(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	p := newPFCPTest(t, func(o *Options) { o.Store = st })
	if res, err := p.n.Restore(); err != nil || res.Restored {
		t.Fatalf("Restore on a first start: %+v, %v; want nothing restored", res, err)
	}
	sdfPDR := chosenULPDR(3, 0, 0, 1, ie.NewSDFFilter("permit out 17 from 198.51.100.0/24 53 to assigned", "", "", "", 1))
	withSDF := append(basicSession(ue1), sdfPDR,
		ie.NewCreateBAR(ie.NewBARID(1), ie.NewDownlinkDataNotificationDelay(2)))
	seid1, _ := p.mustEstablish(0x11, withSDF...)
	seid2, _ := p.mustEstablish(0x12, basicSession(ue2)...)
	seid3, _ := p.mustEstablish(0x13, basicSession(ue3)...)
	p.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid3, seq, 0) })
	if c, _ := p.modify(seid2, ie.NewUpdateFAR(ie.NewFARID(2), ie.NewApplyAction(0x04))).Cause.Cause(); c != ie.CauseRequestAccepted {
		t.Fatalf("modification: cause %d", c)
	}
	want, wantAssocs, wantDP := p.n.Sessions(), p.n.Associations(), p.dp.sets
	recovery := p.n.recovery
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	n, dp, res, err := restarted(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restored || res.Sessions != 2 || res.Associations != 1 {
		t.Errorf("Restore = %+v, want 2 sessions and 1 association restored", res)
	}
	if !n.recovery.Equal(recovery) {
		t.Errorf("Recovery Time Stamp after restart %v, want the first run's %v", n.recovery, recovery)
	}
	if got := n.Sessions(); !reflect.DeepEqual(withoutClock(got), withoutClock(want)) {
		t.Errorf("sessions after restart:\n%+v\nwant\n%+v", got, want)
	}
	for i, s := range n.Sessions() {
		for id, f := range s.FARs {
			if f.hasDestination != want[i].FARs[id].hasDestination {
				t.Errorf("session 0x%x FAR %d: hasDestination lost", s.SEID, id)
			}
		}
	}
	if got := n.Associations(); len(got) != 1 || !got[0].Established.Equal(wantAssocs[0].Established) ||
		got[0].NodeID != wantAssocs[0].NodeID || got[0].Address != wantAssocs[0].Address ||
		!got[0].Recovery.Equal(wantAssocs[0].Recovery) {
		t.Errorf("associations after restart %+v, want %+v", got, wantAssocs)
	}
	if !reflect.DeepEqual(dp.sets, wantDP) {
		t.Errorf("datapath after restart:\n%+v\nwant\n%+v", dp.sets, wantDP)
	}
	// The SEID of the deleted session is not given again, nor are the TEIDs in use.
	q := &pfcpTest{t: t, n: n, dp: dp, seq: 500}
	seid4, r := q.mustEstablish(0x14, basicSession(ue3)...)
	if seid4 <= seid3 {
		t.Errorf("SEID after restart 0x%x, want one above 0x%x", seid4, seid3)
	}
	for _, teid := range createdTEIDs(t, r.CreatedPDR) {
		if owner := n.ss.alloc.teids[teid]; owner != seid4 {
			t.Errorf("TEID 0x%x given to 0x%x is the allocator's for 0x%x", teid, seid4, owner)
		}
	}
	if c, _ := q.modify(seid1, ie.NewRemovePDR(ie.NewPDRID(3))).Cause.Cause(); c != ie.CauseRequestAccepted {
		t.Errorf("modification of a restored session: cause %d", c)
	}
	del := q.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid2, seq, 0) })
	if c, _ := del.(*message.SessionDeletionResponse).Cause.Cause(); c != ie.CauseRequestAccepted {
		t.Errorf("deletion of a restored session: cause %d", c)
	}
}

// withoutClock is ss without what a restart may change and the SMF never sees: the
// monotonic clock reading and location of the establishment time, and the FARs' buffering epochs.
func withoutClock(ss []Session) []Session {
	for i := range ss {
		ss[i].Established = ss[i].Established.Round(0).UTC()
		for id, f := range ss[i].FARs {
			c := *f
			c.epoch = 0
			ss[i].FARs[id] = &c
		}
	}
	return ss
}

// TestRestoreRefusesWhatNoLongerFits: a restart whose configuration no longer allows a saved
// session (its network instance gone) fails, naming the session and the way out.
func TestRestoreRefusesWhatNoLongerFits(t *testing.T) {
	dir, seid := firstRun(t)
	_, _, _, err := restarted(t, dir, func(o *Options) { o.NetworkInstances = map[string]string{"ims": "n6"} })
	if err == nil || !strings.Contains(err.Error(), "internet") || !strings.Contains(err.Error(), "xupfd --stop") ||
		!strings.Contains(err.Error(), fmt.Sprintf("0x%x", seid)) {
		t.Fatalf("Restore with the network instance gone: %v", err)
	}
	t.Log(err)
}

// TestRestoreRefusesLocalUE: a saved session whose UE address the UPF chose and the host has
// taken since fails the restart, naming the session and the address.
func TestRestoreRefusesLocalUE(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	p := newPFCPTest(t, func(o *Options) { o.Store = st })
	p.n.Restore()
	seid, r := p.mustEstablish(0x11, chv4PDR(1), forwardFAR(1, ie.DstInterfaceAccess, ohc(9, gnb)))
	ue := chosenUE(t, r)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := restarted(t, dir, func(o *Options) { o.Datapath.(*fakeDatapath).local = map[netip.Addr]bool{ue: true} })
	if err == nil || !strings.Contains(err.Error(), ue.String()) || !strings.Contains(err.Error(), "address of this UPF") ||
		!strings.Contains(err.Error(), fmt.Sprintf("0x%x", seid)) {
		t.Fatalf("Restore with the chosen UE address the host's: %v", err)
	}
}

// TestAnswerAfterSave: over UDP, with a state file, every answer arrives after the change it
// reports is in the file, for requests sent back to back (which share commits).
func TestAnswerAfterSave(t *testing.T) {
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() }) // after serveLoopback's: Serve stops first
	client := serveLoopback(t, newSessionNode(newFakeDatapath(), func(o *Options) { o.Store = st }))
	client.SetDeadline(time.Now().Add(10 * time.Second))
	// In batches the socket buffers hold: the requests of a batch share commits.
	const sessions, batch = 200, 20
	client.Write(bytesOf(t, smfSetup(1)))
	buf := make([]byte, 4096)
	for first := 0; first < sessions; first += batch {
		for i := first; i < first+batch; i++ {
			ue := netip.AddrFrom4([4]byte{10, 45, 1, byte(i)})
			client.Write(bytesOf(t, establishment(uint32(10+i), uint64(0x100+i), basicSession(ue)...)))
		}
		for got := 0; got < batch; {
			size, err := client.Read(buf)
			if err != nil {
				t.Fatalf("read: %v after %d answers", err, first+got)
			}
			m, err := message.Parse(buf[:size])
			if err != nil {
				t.Fatal(err)
			}
			r, ok := m.(*message.SessionEstablishmentResponse)
			if !ok {
				continue
			}
			got++
			f, err := r.UPFSEID.FSEID()
			if err != nil {
				t.Fatalf("answer %d: %v", first+got, err)
			}
			if v, err := st.Get(bucketSessions, seidKey(f.SEID)); err != nil || v == nil {
				t.Fatalf("session 0x%x answered before it was saved (%v)", f.SEID, err)
			}
		}
	}
	t.Logf("%d commits for %d sessions", st.Commits(), sessions)
}

// TestRetransmissionAcrossRestart: an establishment whose answer was lost in a crash, sent
// again to the restarted node (whose response cache is empty), gets the answer the first
// would have had; another request naming the same CP SEID is still refused.
func TestRetransmissionAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	p := newPFCPTest(t, func(o *Options) { o.Store = st })
	p.n.Restore()
	req := bytesOf(t, establishment(77, 0x21, basicSession(ue1)...))
	first := p.n.Handle(smf, req)
	st.Close()

	n, _, _, err := restarted(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again := n.Handle(smf, req); string(again) != string(first) {
		t.Errorf("retransmission after the restart answered\n%x\nwant the first answer\n%x", again, first)
	}
	other := bytesOf(t, establishment(78, 0x21, basicSession(ue2)...))
	if _, c, _ := cause(t, n.Handle(smf, other)); c != ie.CauseRequestRejected {
		t.Errorf("another establishment with the same CP SEID: cause %d, want %d", c, ie.CauseRequestRejected)
	}
	if got := n.SessionCount(); got != 1 {
		t.Errorf("%d sessions after the retransmission, want 1", got)
	}
}

// TestRestoredCountersNotReportedAgain: the datapath carries a session's counters across a
// restart; what they held then is not reported again, only what they count afterwards.
func TestRestoredCountersNotReportedAgain(t *testing.T) {
	dir, seid := firstRun(t)
	st := openStore(t, dir)
	defer st.Close()
	dp := newFakeDatapath()
	dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 300}, {PDR: 2, Packets: 5, Bytes: 1000}}
	n := newSessionNode(dp, func(o *Options) { o.Store = st })
	if _, err := n.Restore(); err != nil {
		t.Fatal(err)
	}
	dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 4, Bytes: 400}, {PDR: 2, Packets: 5, Bytes: 1000}}
	q := &pfcpTest{t: t, n: n, dp: dp, seq: 500}
	d := q.send(func(seq uint32) message.Message { return message.NewSessionDeletionRequest(0, 0, seid, seq, 0) }).(*message.SessionDeletionResponse)
	if vol := deletionVolume(t, d); vol == nil || vol.TotalVolume != 100 || vol.TotalNumberOfPackets != 1 {
		t.Errorf("volume reported after the restart %+v, want only the packet counted since (1, 100 bytes)", vol)
	}
}

// TestUnsavableNodeIDRefused: an Association Setup whose Node ID could not be a state file key
// (an empty FQDN, or one too long) is refused with Mandatory IE Incorrect, and the node goes
// on answering: a normal setup and establishment after it get their answers.
func TestUnsavableNodeIDRefused(t *testing.T) {
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	client := serveLoopback(t, newSessionNode(newFakeDatapath(), func(o *Options) { o.Store = st }))
	client.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	answer := func(req message.Message) message.Message {
		t.Helper()
		client.Write(bytesOf(t, req))
		for {
			size, err := client.Read(buf)
			if err != nil {
				t.Fatalf("%s: no answer: %v", req.MessageTypeName(), err)
			}
			m, err := message.Parse(buf[:size])
			if err != nil {
				t.Fatal(err)
			}
			if m.MessageType() != message.MsgTypeHeartbeatRequest { // the node's own, to the SMF
				return m
			}
		}
	}
	long := append([]byte{2}, []byte(strings.Repeat("a", 300))...)
	for i, id := range [][]byte{{2, 0}, {2}, long} {
		m := answer(setupRequest(uint32(1+i), ie.New(ie.NodeID, id), ie.NewRecoveryTimeStamp(peerTS)))
		if c, _ := m.(*message.AssociationSetupResponse).Cause.Cause(); c != ie.CauseMandatoryIEIncorrect {
			t.Errorf("Node ID % x: cause %d, want %d", id[:min(len(id), 4)], c, ie.CauseMandatoryIEIncorrect)
		}
	}
	answer(smfSetup(10))
	m := answer(establishment(11, 0x11, basicSession(ue1)...))
	if c, _ := m.(*message.SessionEstablishmentResponse).Cause.Cause(); c != ie.CauseRequestAccepted {
		t.Errorf("establishment after the refused setups: cause %d", c)
	}
}

// TestRestoreRefusesNullRules: a saved session with a null rule (a damaged or edited state
// file) makes Restore fail with an error naming the session, not panic.
func TestRestoreRefusesNullRules(t *testing.T) {
	for _, rules := range []string{"pdrs", "fars", "qers", "urrs", "bars"} {
		t.Run(rules, func(t *testing.T) {
			dir, seid := firstRun(t)
			st := openStore(t, dir)
			v, err := st.Get(bucketSessions, seidKey(seid))
			if err != nil || v == nil {
				t.Fatalf("saved session: %q, %v", v, err)
			}
			saved, err := decodeStored(v)
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]any // as an earlier version wrote it, in JSON
			if err := json.Unmarshal(jsonRecord(saved), &rec); err != nil {
				t.Fatal(err)
			}
			rec[rules] = map[string]any{"1": nil}
			if err := st.Sync(state.Op{Bucket: bucketSessions, Key: seidKey(seid), Value: mustJSON(rec)}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			_, _, _, err = restarted(t, dir)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("session %x", seidKey(seid))) {
				t.Errorf("Restore with null %s: %v, want an error naming the session", rules, err)
			}
		})
	}
}

// quotaFirstRun is a first run with a session whose URR 1 has a 1000-byte volume quota (with
// quotaFAR, FAR 3, dropping, for quota action), sampled once after counting counted: it
// returns the state file's directory, the SEID and the reports of that sample.
func quotaFirstRun(t *testing.T, counted []rules.Usage, quotaFAR bool) (string, uint64, int) {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	p := newPFCPTest(t, func(o *Options) { o.Store = st })
	p.n.Restore()
	urr := []*ie.IE{ie.NewURRID(1), ie.NewMeasurementMethod(0, 1, 0), ie.NewReportingTriggers(0, 0x01),
		ie.NewVolumeQuota(0x01, 1000, 0, 0)}
	var extra []*ie.IE
	if quotaFAR {
		urr = append(urr, ie.NewFARID(3))
		extra = append(extra, ie.NewCreateFAR(ie.NewFARID(3), ie.NewApplyAction(ApplyDrop)))
	}
	seid := usageSession(p, ie.NewCreateURR(urr...), extra...)
	p.dp.usage[seid] = counted
	reports := len(p.due(seid, time.Now()))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, seid, reports
}

// TestUsedUpQuotaAfterRestart: a quota reported used up stays used up after a restart: the
// restored PDRs take the FAR for quota action and the quota is not reported again.
func TestUsedUpQuotaAfterRestart(t *testing.T) {
	dir, seid, reports := quotaFirstRun(t, []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600},
		{PDR: 2, Packets: 2, Bytes: 450}}, true)
	if reports != 1 {
		t.Fatalf("quota used up: %d reports", reports)
	}
	n, dp, _, err := restarted(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if pdr := dp.sets[seid][1].PDRs[0]; len(pdr.Quotas) != 0 || pdr.FAR.Action != rules.Drop {
		t.Errorf("restored: quotas %+v, FAR %v; want the FAR for quota action (drop)", pdr.Quotas, pdr.FAR.Action)
	}
	dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 13, Bytes: 2600}, {PDR: 2, Packets: 2, Bytes: 450}}
	q := &pfcpTest{t: t, n: n, dp: dp}
	if rs := q.due(seid, time.Now()); len(rs) != 0 {
		t.Errorf("quota reported again after the restart: %+v", rs)
	}
}

// TestPartlyUsedQuotaAfterRestart: what the datapath counted against a quota before a restart
// counts toward its report after it: the quota is reported when the grant is used up, not a
// whole grant later.
func TestPartlyUsedQuotaAfterRestart(t *testing.T) {
	dir, seid, reports := quotaFirstRun(t, []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}}, false)
	if reports != 0 {
		t.Fatalf("quota not used up yet: %d reports", reports)
	}
	n, dp, _, err := restarted(t, dir, func(o *Options) {
		f := o.Datapath.(*fakeDatapath)
		f.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}}
		f.quotaUsed = map[uint64][]rules.QuotaUse{seid: {{URR: 1, Grant: 1, Uplink: 600}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	dp.usage[seid] = []rules.Usage{{Uplink: true, PDR: 1, Packets: 3, Bytes: 600}, {PDR: 2, Packets: 2, Bytes: 450}}
	q := &pfcpTest{t: t, n: n, dp: dp}
	if rs := q.due(seid, time.Now()); len(rs) != 1 || rs[0].Trigger[1] != 0x01 {
		t.Errorf("after the restart, 1050 bytes of a 1000-byte quota: reports %+v; want the quota used up", rs)
	}
}
