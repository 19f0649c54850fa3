package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// The restart tests' scale: the issue asks for 10,000 PFCP sessions at 100 kpps each way;
// on the 2-vCPU VM, where the traffic generator, the receivers and xupfd share the CPUs, the
// tests use 1,000 sessions at 2 kpps each way, which is enough for a lost or duplicated
// packet, a missing key or a restarted counter to show.
const (
	restartSessions = 1000
	restartPPS      = 2000
)

// restartUENet holds the UE addresses of the restart tests' PFCP sessions: in testbed.UENet,
// which the DN host routes toward the UPF, outside its pool and the static sessions' addresses.
var restartUENet = netip.MustParsePrefix("10.45.16.0/20")

// restartEnv is an xupfd with the two static sessions and restartSessions PFCP sessions of
// one SMF.
type restartEnv struct {
	*env
	smf      *pfcpclient.Client
	ctx      context.Context
	pfcp     []*pfcpclient.Session
	sessions []session.Session // static, then PFCP, as the traffic helpers take them
}

func newRestartEnv(t testing.TB, sessions int, smfOpts pfcpclient.Options) *restartEnv {
	e := newEnvConfig(t, func(c *config.Config) {
		c.Limits.MaxSessions = sessions + 64
		c.LogLevel = "warn"
	}, sessQFI, sessNoQFI)
	smfOpts.NodeID = "smf.restart.test"
	c, _ := e.smfClientWith(smfOpts)
	// Longer than smfClient's: the sessions are set up, restarted and changed with it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return &restartEnv{env: e, smf: c, ctx: ctx, sessions: []session.Session{sessQFI, sessNoQFI}}
}

// establish sets up n PFCP sessions, inflight at a time, and adds them to r; it fails when
// one is not answered. It may run beside the test's goroutine (it does not fail t).
func (r *restartEnv) establish(n, inflight int) error {
	return r.establishIn(restartUENet, n, inflight)
}

// establishIn is establish with UE addresses from ues.
func (r *restartEnv) establishIn(ues netip.Prefix, n, inflight int) error {
	base := binary.BigEndian.Uint32(ues.Addr().AsSlice())
	out := make([]*pfcpclient.Session, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			for i := range next {
				var ue [4]byte
				binary.BigEndian.PutUint32(ue[:], base+uint32(len(r.pfcp)+i)+1)
				out[i], errs[i] = r.smf.Establish(r.ctx, pfcpclient.SessionSpec{Style: pfcpclient.Open5GS,
					UE: netip.AddrFrom4(ue), NetworkInstance: "internet", GNB: testbed.GNBAddr,
					GNBTEID: 0x10000 + uint32(len(r.pfcp)+i)})
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, s := range out {
		if errs[i] != nil {
			return fmt.Errorf("establish session %d: %w", i, errs[i])
		}
		r.pfcp = append(r.pfcp, s)
		r.sessions = append(r.sessions, testbed.PFCPView(s, testbed.GNBAddr, s.Spec.GNBTEID, 0))
	}
	return nil
}

// restart runs stop (SIGTERM or SIGKILL of the running xupfd) and starts xupfd again on the
// same configuration (and state file), returning how long the new one took from its start to serving its API
// (and PFCP: both are bound before the datapath is touched, and served once New returns).
func (e *env) restart(t testing.TB, stop func() error) time.Duration {
	return e.restartWith(t, xupfdBin, stop)
}

// restartWith is restart with the xupfd binary bin: another build.
func (e *env) restartWith(t testing.TB, bin string, stop func() error) time.Duration {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatalf("stop xupfd: %v\n%s", err, e.daemon.LogTail())
	}
	start := time.Now()
	d, err := e.topo.StartDaemon(bin, e.daemon.ConfigPath, nil)
	if err != nil {
		t.Fatalf("restart xupfd: %v", err)
	}
	took := time.Since(start)
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stop the restarted xupfd: %v\n%s", err, d.LogTail())
		}
	})
	e.daemon, e.api = d, d.API()
	return took
}

// trafficResult is what trafficDuring sent and what arrived, by sequence number.
type trafficResult struct {
	sentUL, sentDL int
	gotUL, gotDL   map[int]int // sequence number -> copies received
}

// trafficDuring sends sequence-numbered packets through every session of r, round robin,
// restartPPS a second each way, from before fn runs until after it returns, and collects
// what arrives at the DN host (uplink) and the gNB (downlink).
func (r *restartEnv) trafficDuring(t *testing.T, fn func()) trafficResult {
	t.Helper()
	dn, err := r.topo.ListenDN()
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()
	gnb, err := r.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	dl, err := r.topo.DownlinkConn()
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	res := trafficResult{gotUL: map[int]int{}, gotDL: map[int]int{}}
	stop := make(chan struct{})
	var recv, send sync.WaitGroup
	// The receivers stop once the senders have and nothing more comes for a while.
	var sendersDone atomic.Bool
	collect := func(rx *testbed.Receiver, got map[int]int, decode func(testbed.Datagram) ([]byte, bool)) {
		recv.Go(func() {
			for {
				ds, err := rx.Collect(1<<20, time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				for _, d := range ds {
					var seq int
					if p, ok := decode(d); ok {
						if _, err := fmt.Sscanf(string(p), "restart %d", &seq); err == nil {
							got[seq]++
						}
					}
				}
				if len(ds) == 0 && sendersDone.Load() {
					return
				}
			}
		})
	}
	collect(dn, res.gotUL, func(d testbed.Datagram) ([]byte, bool) { return d.Data, true })
	collect(gnb, res.gotDL, func(d testbed.Datagram) ([]byte, bool) {
		p, err := testbed.DecodeGTPU(d)
		return p.Payload, err == nil
	})
	send.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		perTick := max(restartPPS/1000, 1)
		for seq := 0; ; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range perTick {
				s := r.sessions[seq%len(r.sessions)]
				payload := fmt.Appendf(nil, "restart %d", seq)
				if err := r.topo.SendUplink(s, 1, func(int) []byte { return payload }, s.QFI); err != nil {
					t.Error(err)
					return
				}
				res.sentUL++
				if _, err := dl.WriteToUDP(payload, net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.UE, testbed.UEPort))); err != nil {
					t.Error(err)
					return
				}
				res.sentDL++
				seq++
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	fn()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	send.Wait()
	sendersDone.Store(true)
	recv.Wait()
	return res
}

// check fails t unless every packet sent arrived exactly once, each way.
func (res trafficResult) check(t *testing.T) {
	t.Helper()
	for _, dir := range []struct {
		name string
		sent int
		got  map[int]int
	}{{"uplink", res.sentUL, res.gotUL}, {"downlink", res.sentDL, res.gotDL}} {
		var lost, dup []int
		for seq := range dir.sent {
			switch n := dir.got[seq]; {
			case n == 0:
				lost = append(lost, seq)
			case n > 1:
				dup = append(dup, seq)
			}
		}
		t.Logf("%s: %d sent, %d lost, %d duplicated", dir.name, dir.sent, len(lost), len(dup))
		if len(lost) > 0 {
			t.Errorf("%s: %d of %d packets lost, first %v", dir.name, len(lost), dir.sent, lost[:min(len(lost), 10)])
		}
		if len(dup) > 0 {
			t.Errorf("%s: %d packets duplicated, first %v", dir.name, len(dup), dup[:min(len(dup), 10)])
		}
	}
}

// listed returns the daemon's PFCP sessions by SEID.
func (r *restartEnv) listed(t *testing.T) map[uint64]api.PFCPSessionInfo {
	t.Helper()
	l, err := r.api.PFCPSessions(r.env.ctx())
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]api.PFCPSessionInfo{}
	for _, s := range l {
		out[s.SEID] = s
	}
	return out
}

// checkSameSessions fails t unless after lists the sessions of before with the same SEIDs,
// SMF SEIDs, TEIDs and UE addresses, and counters no smaller.
func checkSameSessions(t *testing.T, before, after map[uint64]api.PFCPSessionInfo) {
	t.Helper()
	if len(after) != len(before) {
		t.Errorf("%d PFCP sessions after the restart, %d before", len(after), len(before))
	}
	shrunk := 0
	for seid, b := range before {
		a, ok := after[seid]
		if !ok {
			t.Errorf("session 0x%x is gone after the restart", seid)
			continue
		}
		if a.CPSEID != b.CPSEID || a.Peer != b.Peer {
			t.Errorf("session 0x%x: SMF %s/0x%x after the restart, %s/0x%x before", seid, a.Peer, a.CPSEID, b.Peer, b.CPSEID)
		}
		for id, p := range b.PDRs {
			q := a.PDRs[id]
			if q == nil || (p.FTEID == nil) != (q.FTEID == nil) || (p.FTEID != nil && *p.FTEID != *q.FTEID) || p.UE != q.UE {
				t.Errorf("session 0x%x PDR %d: %+v after the restart, %+v before", seid, id, q, p)
			}
		}
		for i, u := range b.Usage {
			if i >= len(a.Usage) || a.Usage[i].Packets < u.Packets || a.Usage[i].Bytes < u.Bytes {
				shrunk++
			}
		}
	}
	if shrunk > 0 {
		t.Errorf("%d PDR counters went down across the restart", shrunk)
	}
}

// TestRestartWithoutLoss restarts xupfd under traffic through the static sessions and
// restartSessions PFCP sessions, after SIGTERM and after SIGKILL (checkRestartWithoutLoss).
func TestRestartWithoutLoss(t *testing.T) {
	for _, c := range []struct {
		name string
		stop func(*testbed.Daemon) error
	}{
		{"SIGTERM", (*testbed.Daemon).Stop},
		{"SIGKILL", (*testbed.Daemon).Kill},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkRestartWithoutLoss(t, func(r *restartEnv) time.Duration {
				return r.restart(t, func() error { return c.stop(r.daemon) })
			})
		})
	}
}

// checkRestartWithoutLoss sets up restartSessions PFCP sessions beside the static ones and
// runs restart (which stops xupfd and starts another) under traffic through them all: no
// packet may be lost or duplicated, the sessions must be listed again with the same SEIDs,
// TEIDs and counters (only growing), the SMF must see the same Recovery Time Stamp in
// heartbeats, and the sessions must be modifiable and deletable at once. It returns the
// environment, whose sessions are those still set up.
func checkRestartWithoutLoss(t *testing.T, restart func(*restartEnv) time.Duration) *restartEnv {
	r := newRestartEnv(t, restartSessions, pfcpclient.Options{})
	if err := r.establish(restartSessions, 16); err != nil {
		t.Fatalf("%v\n%s", err, r.daemon.LogTail())
	}
	recovery, err := r.smf.Heartbeat(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every session has counted a packet each way before the restart.
	r.trafficDuring(t, func() { time.Sleep(time.Duration(len(r.sessions)) * time.Second / restartPPS) }).check(t)
	before := r.listed(t)
	var took time.Duration
	r.trafficDuring(t, func() { took = restart(r) }).check(t)
	t.Logf("the new xupfd served its API and N4 %v after it started, with %d PFCP sessions", took, len(before))
	if t.Failed() {
		st := r.stats()
		t.Logf("drops %v\ncounters %v", st.Drops, st.Counters)
	}
	checkSameSessions(t, before, r.listed(t))
	if got, err := r.smf.Heartbeat(r.ctx); err != nil || !got.Equal(recovery) {
		t.Errorf("Recovery Time Stamp in a heartbeat after the restart: %v, %v; want the first run's %v", got, err, recovery)
	}
	if l := r.daemon.LogTail(); strings.Contains(l, "level=ERROR") {
		t.Errorf("the restarted xupfd logged errors:\n%s", l)
	}
	// Modify one (handover to the gNB's other TEID) and delete another, at once. r.sessions
	// holds the static sessions, then r.pfcp's.
	static := len(r.sessions) - len(r.pfcp)
	s := r.pfcp[0]
	if err := r.smf.SetDownlink(r.ctx, s, testbed.GNBAddr, 0x7777); err != nil {
		t.Errorf("modify a restored session: %v", err)
	} else {
		view := testbed.PFCPView(s, testbed.GNBAddr, 0x7777, 0)
		r.expectForwarding(t, view, "after the restart and a modification")
		r.sessions[static] = view
	}
	if err := r.smf.Delete(r.ctx, r.pfcp[1]); err != nil {
		t.Errorf("delete a restored session: %v", err)
	} else {
		r.pfcp = slices.Delete(r.pfcp, 1, 2)
		r.sessions = slices.Delete(r.sessions, static+1, static+2)
	}
	r.expectForwarding(t, sessQFI, "static session after the restart")
	return r
}

// TestKillDuringEstablishment kills xupfd while an SMF pipelines establishments and starts
// it again: each request the SMF retransmits gets one answer, consistent with what the
// restarted xupfd holds: every session the SMF was answered for is listed with the SEID and
// TEID it was given, and there is no other.
func TestKillDuringEstablishment(t *testing.T) {
	// Retransmissions that outlast the restart.
	r := newRestartEnv(t, restartSessions, pfcpclient.Options{Timeout: 500 * time.Millisecond, Tries: 40})
	done := make(chan error, 1)
	go func() { done <- r.establish(restartSessions/2, 16) }()
	// Kill it once some sessions are in.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := r.api.Status(r.env.ctx())
		if err == nil && st.Sessions > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sessions established: %v, %v", st, err)
		}
	}
	r.restart(t, r.daemon.Kill)
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, r.daemon.LogTail())
	}
	listed := r.listed(t)
	if len(listed) != len(r.pfcp) {
		t.Errorf("%d PFCP sessions listed, the SMF was answered for %d", len(listed), len(r.pfcp))
	}
	for _, s := range r.pfcp {
		l, ok := listed[s.UPSEID]
		if !ok {
			t.Errorf("session 0x%x the SMF was answered for is not listed", s.UPSEID)
			continue
		}
		teids := []uint32{}
		for _, p := range l.PDRs {
			if p.FTEID != nil {
				teids = append(teids, p.FTEID.TEID)
			}
		}
		if l.CPSEID != s.CPSEID || !slices.Contains(teids, s.UplinkTEID) {
			t.Errorf("session 0x%x: listed with CP SEID 0x%x and TEIDs %v, the SMF was answered 0x%x and TEID 0x%x",
				s.UPSEID, l.CPSEID, teids, s.CPSEID, s.UplinkTEID)
		}
	}
	r.trafficDuring(t, func() {}).check(t)
}

// BenchmarkRestart measures a restart (SIGTERM, then a new xupfd on the same pins and state
// file) with 10,000 and 100,000 PFCP sessions: the time from the new process's start to its
// API answering (N4 is served from the same moment). Run with -benchtime 1x.
func BenchmarkRestart(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			for range b.N {
				// Patient: on the loaded test VM an answer has taken over 3 s at times.
				r := newRestartEnv(b, n, pfcpclient.Options{Timeout: 2 * time.Second, Tries: 10})
				if err := r.establishIn(benchUENet, n, 64); err != nil {
					b.Fatalf("%v\n%s", err, r.daemon.LogTail())
				}
				b.ResetTimer()
				took := r.restart(b, r.daemon.Stop)
				b.StopTimer()
				if st, err := r.api.Status(r.env.ctx()); err != nil || st.Sessions < n {
					b.Fatalf("after the restart: %+v, %v; want %d sessions", st, err, n)
				}
				b.ReportMetric(float64(took.Milliseconds()), "ms-to-serve")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// TestRestartWithChangedConfig restarts xupfd with a configuration that no longer fits what
// runs: an interface it attached to removed, smaller limits. Each start must be refused with
// a message saying what differs and what to do, and leave the running pins forwarding; the
// original configuration then restarts with the sessions.
func TestRestartWithChangedConfig(t *testing.T) {
	r := newRestartEnv(t, restartSessions, pfcpclient.Options{})
	if err := r.establish(10, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.daemon.Stop(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(r.daemon.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*config.Config)
		want []string
	}{
		{"interface removed", func(c *config.Config) {
			c.Interfaces = []config.Interface{{Name: testbed.N3If, Roles: []config.Role{config.RoleN3, config.RoleN6}}}
		}, []string{`interface "n6" is attached by the earlier run`, "xupfd --stop"}},
		{"smaller limits", func(c *config.Config) { c.Limits.MaxSessions = restartSessions / 2 },
			[]string{"were made with other sizes", "xupfd --stop"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := *cfg
			c.edit(&changed)
			out := startFails(t, r.topo, &changed)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the refused start does not say %q:\n%s", w, out)
				}
			}
			r.expectIntact(t, r.sessions[len(r.sessions)-1], "after the refused start")
		})
	}
	r.restart(t, func() error { return nil })
	if got := len(r.listed(t)); got != 10 {
		t.Errorf("%d PFCP sessions after restarting with the original configuration, want 10", got)
	}
}
