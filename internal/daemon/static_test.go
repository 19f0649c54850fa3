package daemon

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/session"
)

// Static sessions reach the datapath as the rule sets of their ids, and are listed with the
// usage the datapath counted for them, per direction.
func TestStaticSessions(t *testing.T) {
	gtpu := netip.MustParseAddr("192.0.2.1")
	a := session.Session{ID: 7, UE: netip.MustParseAddr("10.45.0.7"), UplinkTEID: 0x70,
		GNB: netip.MustParseAddr("198.51.100.1"), DownlinkTEID: 0x71, GTPUAddr: gtpu}
	b := a
	b.ID, b.UE, b.UplinkTEID = 3, netip.MustParseAddr("10.45.0.3"), 0x30
	dp := &pfcpDatapath{sets: map[uint64][]rules.RuleSet{}, usage: map[uint64][]rules.Usage{
		7: {{PDR: 1, Uplink: true, Packets: 2, Bytes: 200}, {PDR: 2, Packets: 1, Bytes: 50}, {PDR: 3, Uplink: true, Packets: 1, Bytes: 10}},
	}}
	st, err := installStatic(dp, []session.Session{a, b})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []session.Session{a, b} {
		want, err := s.RuleSets()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dp.sets[s.ID], want) {
			t.Errorf("session %d installed %+v, want %+v", s.ID, dp.sets[s.ID], want)
		}
	}

	list, err := st.list()
	if err != nil || len(list) != 2 || list[0].Session.ID != 3 || list[1].Session.ID != 7 {
		t.Fatalf("list = %+v, %v; want sessions 3 and 7", list, err)
	}
	want := session.Usage{Uplink: session.Counters{Packets: 3, Bytes: 210}, Downlink: session.Counters{Packets: 1, Bytes: 50}}
	if list[1].Usage != want || list[0].Usage != (session.Usage{}) {
		t.Errorf("usage %+v and %+v, want %+v and none", list[1].Usage, list[0].Usage, want)
	}
	if _, err := st.get(99); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown session: %v, want api.ErrNotFound", err)
	}

	// A session the datapath refuses fails the start-up, naming the session.
	bad := a
	bad.UplinkTEID = 0
	if _, err := installStatic(dp, []session.Session{bad}); err == nil {
		t.Error("a session without an uplink TEID was installed")
	}

	// So does one at an address of the UPF: its downlink would be the host's.
	dp.local = map[netip.Addr]bool{a.UE: true}
	delete(dp.sets, a.ID)
	if _, err := installStatic(dp, []session.Session{a}); err == nil || !strings.Contains(err.Error(), a.UE.String()) {
		t.Errorf("a session at an address of the UPF: %v, want an error naming the address", err)
	} else if _, ok := dp.sets[a.ID]; ok {
		t.Error("a session at an address of the UPF was installed")
	}
}
