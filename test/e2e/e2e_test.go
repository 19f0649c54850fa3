package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/gtpu"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// TestDownlinkBeforeUplink sends downlink before any uplink: the UPF has no neighbour entry
// for the gNB yet, so the first packets take the kernel path (XDP_PASS after encapsulation)
// while ARP resolves, and the rest the XDP redirect. Every packet must still arrive, intact.
func TestDownlinkBeforeUplink(t *testing.T) {
	e := newEnv(t)
	if st := e.stats(); st.Counters["ul_rx"] != 0 || st.Counters["dl_rx"] != 0 {
		t.Fatalf("traffic before the test: %v", st.Counters)
	}
	for _, tc := range []struct {
		name string
		s    session.Session
	}{{"with_qfi", sessQFI}, {"without_qfi", sessNoQFI}} {
		t.Run(tc.name, func(t *testing.T) {
			payload := testbed.Payload("dl " + tc.name)
			got := e.downlink(tc.s, packets, payload)
			if len(got) != packets {
				t.Errorf("gNB received %d of %d downlink packets", len(got), packets)
			}
			reportProblems(t, "downlink", testbed.CheckDownlink(tc.s, packets, payload, got))
		})
	}

	st := e.stats()
	c := st.Counters
	t.Logf("dl_rx %d: dl_tx %d (XDP redirect), dl_kernel %d (fib_no_neigh %d)", c["dl_rx"], c["dl_tx"], c["dl_kernel"], c["fib_no_neigh"])
	if c["dl_rx"] != 2*packets || c["dl_tx"]+c["dl_kernel"] != 2*packets {
		t.Errorf("counters dl_rx %d, dl_tx %d + dl_kernel %d; want %d received and as many forwarded",
			c["dl_rx"], c["dl_tx"], c["dl_kernel"], 2*packets)
	}
	// Proof that the test covered what it is for: the first packet found no neighbour.
	if c["fib_no_neigh"] == 0 || c["dl_kernel"] == 0 {
		t.Errorf("fib_no_neigh %d, dl_kernel %d: the kernel path for an unresolved gNB was not exercised",
			c["fib_no_neigh"], c["dl_kernel"])
	}
	expectNoDrops(t, st)
}

// TestUplink sends G-PDUs with a PDU Session Container (to the session with a QFI) and without
// (to the session without) and checks the decapsulated packets on the DN host.
func TestUplink(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		s    session.Session
	}{{"with_qfi", sessQFI}, {"without_qfi", sessNoQFI}} {
		t.Run(tc.name, func(t *testing.T) {
			payload := testbed.Payload("ul " + tc.name)
			got := e.uplink(tc.s, packets, payload, recvTimeout)
			if len(got) != packets {
				t.Errorf("DN received %d of %d uplink packets", len(got), packets)
			}
			reportProblems(t, "uplink", testbed.CheckUplink(tc.s, packets, payload, got))
		})
	}
	st := e.stats()
	c := st.Counters
	if c["ul_rx"] != 2*packets || c["ul_tx"]+c["ul_kernel"] != 2*packets {
		t.Errorf("counters ul_rx %d, ul_tx %d + ul_kernel %d; want %d received and as many forwarded",
			c["ul_rx"], c["ul_tx"], c["ul_kernel"], 2*packets)
	}
	expectNoDrops(t, st)
}

// TestEcho sends a GTP-U Echo Request; the datapath answers it itself.
func TestEcho(t *testing.T) {
	e := newEnv(t)
	const seq = 0x1234
	resp, err := e.topo.Echo(seq, recvTimeout)
	if err != nil {
		t.Fatal(err)
	}
	reportProblems(t, "echo response", testbed.CheckEchoResponse(seq, resp))
	if got := e.stats().Counters["echo_replied"]; got != 1 {
		t.Errorf("echo_replied %d, want 1", got)
	}
}

// TestUnknownTEID sends uplink on a TEID no session has: nothing reaches the DN and the drops
// are counted as unknown_teid.
func TestUnknownTEID(t *testing.T) {
	e := newEnv(t)
	const n = 30
	stranger := session.Session{ID: 99, UE: netip.MustParseAddr("10.45.0.99"), UplinkTEID: 0x999}
	rx, err := e.topo.ListenGNB()
	if err != nil {
		t.Fatal(err)
	}
	// Short wait: nothing should arrive, and what would arrive comes within milliseconds.
	if got := e.uplink(stranger, n, testbed.Payload("unknown teid"), time.Second); len(got) != 0 {
		t.Errorf("DN received %d packets sent on unknown TEID 0x%x, want none", len(got), stranger.UplinkTEID)
	}
	st := e.stats()
	if st.Drops["unknown_teid"] != n {
		t.Errorf("API: drops unknown_teid %d, want %d", st.Drops["unknown_teid"], n)
	}
	if st.Counters["ul_rx"] != n || st.Counters["ul_tx"]+st.Counters["ul_kernel"] != 0 {
		t.Errorf("API: ul_rx %d, ul_tx %d, ul_kernel %d; want %d received and none forwarded",
			st.Counters["ul_rx"], st.Counters["ul_tx"], st.Counters["ul_kernel"], n)
	}
	var cli api.Stats
	e.xupfctlJSON(&cli, "stats")
	if cli.Drops["unknown_teid"] != n {
		t.Errorf("xupfctl: drops unknown_teid %d, want %d", cli.Drops["unknown_teid"], n)
	}
	checkErrorIndications(t, rx, stranger.UplinkTEID, n)
	if st := e.stats(); st.GTPU["error_indication_sent"] != config.DefaultGTPUErrorIndicationRate ||
		st.GTPU["error_indication_rate_limited"] != n-config.DefaultGTPUErrorIndicationRate {
		t.Errorf("gtpu signalling %v: want %d sent and the rest rate-limited", st.GTPU, config.DefaultGTPUErrorIndicationRate)
	}
}

// checkErrorIndications checks that the gNB got, for the n G-PDUs it sent to unknown TEID
// teid at once, as many Error Indications as gtpu_error_indication_rate allows in a burst
// (its default), each naming the TEID and the UPF's GTP-U address, from that address.
func checkErrorIndications(t *testing.T, rx *testbed.Receiver, teid uint32, n int) {
	t.Helper()
	ds, err := rx.Collect(n, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		ei, err := gtpu.ParseErrorIndication(d.Data)
		if err != nil || ei.TEID != teid || ei.Peer != testbed.N3Addr || d.Src != netip.AddrPortFrom(testbed.N3Addr, gtpu.Port) {
			t.Errorf("datagram %d from %s: %+v %v, want an Error Indication about 0x%x from %s:%d", i, d.Src, ei, err,
				teid, testbed.N3Addr, gtpu.Port)
		}
	}
	if len(ds) != config.DefaultGTPUErrorIndicationRate {
		t.Errorf("the gNB got %d Error Indications for %d G-PDUs at once, want %d (gtpu_error_indication_rate)",
			len(ds), n, config.DefaultGTPUErrorIndicationRate)
	}
}

// TestUsageCounters sends different numbers of packets per session and direction, so a
// swapped counter shows, and checks the per-session usage and the global counters through the
// API client and through xupfctl.
func TestUsageCounters(t *testing.T) {
	e := newEnv(t)
	type traffic struct {
		s      session.Session
		ul, dl int
	}
	plan := []traffic{{sessQFI, 30, 20}, {sessNoQFI, 7, 11}}
	want := make(map[uint64]session.Usage)
	var totalUL, totalDL uint64
	for _, p := range plan {
		ulPayload := testbed.Payload(fmt.Sprintf("usage ul s%d", p.s.ID))
		dlPayload := testbed.Payload(fmt.Sprintf("usage dl s%d", p.s.ID))
		if got := e.uplink(p.s, p.ul, ulPayload, recvTimeout); len(got) != p.ul {
			t.Fatalf("session %d: DN received %d of %d uplink packets", p.s.ID, len(got), p.ul)
		}
		if got := e.downlink(p.s, p.dl, dlPayload); len(got) != p.dl {
			t.Fatalf("session %d: gNB received %d of %d downlink packets", p.s.ID, len(got), p.dl)
		}
		want[p.s.ID] = session.Usage{
			Uplink:   session.Counters{Packets: uint64(p.ul), Bytes: innerBytes(p.ul, ulPayload)},
			Downlink: session.Counters{Packets: uint64(p.dl), Bytes: innerBytes(p.dl, dlPayload)},
		}
		totalUL += uint64(p.ul)
		totalDL += uint64(p.dl)
	}

	t.Run("api", func(t *testing.T) {
		list, err := e.api.Sessions(e.ctx())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != len(plan) {
			t.Errorf("API lists %d sessions, want %d", len(list), len(plan))
		}
		for _, info := range list {
			if info.Usage != want[info.ID] {
				t.Errorf("API session list: session %d usage %+v, want %+v", info.ID, info.Usage, want[info.ID])
			}
		}
		for _, p := range plan {
			info, err := e.api.Session(e.ctx(), p.s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Usage != want[p.s.ID] {
				t.Errorf("API session %d: usage %+v, want %+v", p.s.ID, info.Usage, want[p.s.ID])
			}
		}
		expectTotals(t, "API", e.stats(), totalUL, totalDL)
	})

	t.Run("xupfctl", func(t *testing.T) {
		for _, p := range plan {
			var info api.SessionInfo
			e.xupfctlJSON(&info, "session", "show", fmt.Sprint(p.s.ID))
			if info.Usage != want[p.s.ID] || info.UplinkTEID != p.s.UplinkTEID || info.UE != p.s.UE {
				t.Errorf("xupfctl session show %d: %+v, want usage %+v", p.s.ID, info, want[p.s.ID])
			}
		}
		var st api.Stats
		e.xupfctlJSON(&st, "stats")
		expectTotals(t, "xupfctl", st, totalUL, totalDL)

		// The table form, as an operator reads it.
		out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "stats")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{fmt.Sprintf("ul_rx %d", totalUL), fmt.Sprintf("dl_rx %d", totalDL), "unknown_teid 0"} {
			if !strings.Contains(strings.Join(strings.Fields(out), " "), line) {
				t.Errorf("xupfctl stats lacks %q:\n%s", line, out)
			}
		}
	})
}

// expectTotals checks the global counters after totalUL uplink and totalDL downlink packets
// that all arrived.
func expectTotals(t *testing.T, via string, st api.Stats, totalUL, totalDL uint64) {
	t.Helper()
	c := st.Counters
	if c["ul_rx"] != totalUL || c["ul_tx"]+c["ul_kernel"] != totalUL {
		t.Errorf("%s: ul_rx %d, ul_tx %d + ul_kernel %d; want %d", via, c["ul_rx"], c["ul_tx"], c["ul_kernel"], totalUL)
	}
	if c["dl_rx"] != totalDL || c["dl_tx"]+c["dl_kernel"] != totalDL {
		t.Errorf("%s: dl_rx %d, dl_tx %d + dl_kernel %d; want %d", via, c["dl_rx"], c["dl_tx"], c["dl_kernel"], totalDL)
	}
	expectNoDrops(t, st)
}

func expectNoDrops(t *testing.T, st api.Stats) {
	t.Helper()
	if len(st.Drops) == 0 {
		t.Errorf("stats have no drop reasons at all; every known reason should be listed")
	}
	for reason, n := range st.Drops {
		if n != 0 {
			t.Errorf("drops %s = %d, want 0", reason, n)
		}
	}
}
