package e2e

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/session"
	"github.com/xupf/xupf/internal/testbed"
)

// The UE port that the QoS flow of sessFlows selects, both ways: the destination of downlink
// packets and the source of uplink ones.
const flowPort = 7000

// sessFlows has, besides its default rule (QFI 9, downlink TEID 0x300), a QoS flow for UDP to
// and from the UE's port 7000 (QFI 5, downlink TEID 0x301): two PDRs per direction, with
// different FARs downlink.
var sessFlows = session.Session{ID: 3, UE: netip.MustParseAddr("10.45.0.9"), UplinkTEID: 0x102,
	DownlinkTEID: 0x300, QFI: 9, GNB: testbed.GNBAddr,
	Flows: []session.Flow{{Precedence: 10, QFI: 5, SDF: []string{"permit out 17 from any to assigned 7000"},
		DownlinkTEID: 0x301}}}

// TestFlows sends traffic of sessFlows that its flow's SDF filter selects and traffic that it
// does not, both ways, and checks which PDR each took: downlink by the TEID and QFI it is
// tunnelled with, uplink by whether the QFI it carries is the one that PDR requires.
func TestFlows(t *testing.T) {
	e := newEnvWith(t, sessQFI, sessNoQFI, sessFlows)
	s, flow := sessFlows, sessFlows.Flows[0]

	// The flow must have reached the daemon, or the rest tests only the default rule.
	info, err := e.api.Session(e.ctx(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info.Flows, s.Flows) {
		t.Fatalf("API session %d flows %+v, want %+v", s.ID, info.Flows, s.Flows)
	}

	var wantUsage session.Usage
	count := func(c *session.Counters, n int, payload func(int) []byte) {
		c.Packets += uint64(n)
		c.Bytes += innerBytes(n, payload)
	}

	// Different counts per case, so that traffic counted to the wrong direction shows.
	for _, tc := range []struct {
		name string
		n    int
		want testbed.DownlinkExpect
	}{
		{"flow", packets, testbed.DownlinkExpect{UEPort: flowPort, TEID: flow.DownlinkTEID, QFI: flow.QFI}},
		{"default", 60, testbed.DownlinkExpect{UEPort: testbed.UEPort, TEID: s.DownlinkTEID, QFI: s.QFI}},
	} {
		payload := testbed.Payload(fmt.Sprintf("flows dl %s port %d", tc.name, tc.want.UEPort))
		t.Run("downlink_"+tc.name, func(t *testing.T) {
			got := e.downlinkTo(s, tc.want.UEPort, tc.n, payload)
			if len(got) != tc.n {
				t.Errorf("gNB received %d of %d downlink packets to port %d", len(got), tc.n, tc.want.UEPort)
			}
			reportProblems(t, fmt.Sprintf("downlink to port %d", tc.want.UEPort),
				testbed.CheckDownlinkTo(s, tc.want, tc.n, payload, got))
		})
		count(&wantUsage.Downlink, tc.n, payload)
	}

	for _, tc := range []struct {
		name   string
		uePort uint16
		qfi    uint8
		n      int
	}{
		{"flow", flowPort, flow.QFI, packets},
		{"default", testbed.UESrcPort, s.QFI, 70},
		// The flow's filter matches but its QFI does not; the default PDR (QFI 9, no filter)
		// takes it.
		{"flow_port_default_qfi", flowPort, s.QFI, 40},
	} {
		payload := testbed.Payload(fmt.Sprintf("flows ul %s port %d qfi %d", tc.name, tc.uePort, tc.qfi))
		t.Run("uplink_"+tc.name, func(t *testing.T) {
			got := e.uplinkFrom(s, tc.uePort, tc.qfi, tc.n, payload, recvTimeout)
			if len(got) != tc.n {
				t.Errorf("DN received %d of %d uplink packets from port %d with QFI %d", len(got), tc.n, tc.uePort, tc.qfi)
			}
			reportProblems(t, fmt.Sprintf("uplink from port %d QFI %d", tc.uePort, tc.qfi),
				testbed.CheckUplinkFrom(s, tc.uePort, tc.n, payload, got))
		})
		count(&wantUsage.Uplink, tc.n, payload)
	}

	// The flow's QFI on a packet its filter does not match: neither PDR takes it (the
	// default one requires QFI 9), so it is dropped.
	const dropped = 10
	t.Run("uplink_default_port_flow_qfi", func(t *testing.T) {
		payload := testbed.Payload("flows ul no pdr")
		// Short wait: nothing should arrive, and what would arrive comes within milliseconds.
		if got := e.uplinkFrom(s, testbed.UESrcPort, flow.QFI, dropped, payload, time.Second); len(got) != 0 {
			t.Errorf("DN received %d of %d uplink packets from port %d with QFI %d, want none",
				len(got), dropped, testbed.UESrcPort, flow.QFI)
		}
	})

	totalUL, totalDL := wantUsage.Uplink.Packets, wantUsage.Downlink.Packets
	t.Run("api", func(t *testing.T) {
		list, err := e.api.Sessions(e.ctx())
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range list {
			want := session.Usage{} // the other sessions had no traffic
			if info.ID == s.ID {
				want = wantUsage
			}
			if info.Usage != want {
				t.Errorf("API session %d usage %+v, want %+v", info.ID, info.Usage, want)
			}
		}
		expectFlowStats(t, "API", e.stats(), totalUL, totalDL, dropped)
	})
	t.Run("xupfctl", func(t *testing.T) {
		var st api.Stats
		e.xupfctlJSON(&st, "stats")
		expectFlowStats(t, "xupfctl", st, totalUL, totalDL, dropped)
		out, err := e.daemon.Xupfctl(e.ctx(), xupfctlBin, "stats")
		if err != nil {
			t.Fatal(err)
		}
		if line := fmt.Sprintf("no_pdr_match %d", dropped); !strings.Contains(strings.Join(strings.Fields(out), " "), line) {
			t.Errorf("xupfctl stats lacks %q:\n%s", line, out)
		}
	})
}

// expectFlowStats checks the global counters after totalUL forwarded and noPDR dropped uplink
// packets and totalDL forwarded downlink packets: no_pdr_match is the only drop.
func expectFlowStats(t *testing.T, via string, st api.Stats, totalUL, totalDL, noPDR uint64) {
	t.Helper()
	c := st.Counters
	if c["ul_rx"] != totalUL+noPDR || c["ul_tx"]+c["ul_kernel"] != totalUL {
		t.Errorf("%s: ul_rx %d, ul_tx %d + ul_kernel %d; want %d received and %d forwarded",
			via, c["ul_rx"], c["ul_tx"], c["ul_kernel"], totalUL+noPDR, totalUL)
	}
	if c["dl_rx"] != totalDL || c["dl_tx"]+c["dl_kernel"] != totalDL {
		t.Errorf("%s: dl_rx %d, dl_tx %d + dl_kernel %d; want %d", via, c["dl_rx"], c["dl_tx"], c["dl_kernel"], totalDL)
	}
	if _, ok := st.Drops["no_pdr_match"]; !ok {
		t.Errorf("%s: stats have no drop reason no_pdr_match", via)
	}
	for reason, n := range st.Drops {
		want := uint64(0)
		if reason == "no_pdr_match" {
			want = noPDR
		}
		if n != want {
			t.Errorf("%s: drops %s = %d, want %d", via, reason, n, want)
		}
	}
}
