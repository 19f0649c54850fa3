package pfcp

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/xupf/xupf/internal/rules"
)

// TestFARRule checks how a FAR's apply action, destination and tunnel become the datapath's
// FAR; above all that FORW toward Access without a tunnel never becomes plain forwarding,
// which would route the UE's downlink packets back into the data network.
func TestFARRule(t *testing.T) {
	local := netip.MustParseAddr("10.0.1.1")
	peer := netip.MustParseAddr("10.0.1.2")
	tlm := uint16(0xb8fc)
	oh := &rules.OuterHeader{TEID: 7, Peer: peer, Local: local}
	cases := []struct {
		name string
		far  FAR
		want rules.FAR
	}{
		{"FORW toward Access with a tunnel", FAR{Apply: ApplyForward, DestinationInterface: destAccess, OHC: &OHC{TEID: 7, Peer: peer}},
			rules.FAR{Action: rules.Forward, OHC: oh}},
		{"FORW toward Access without a tunnel (free5GC at establishment)", FAR{Apply: ApplyForward, DestinationInterface: destAccess},
			rules.FAR{Action: rules.AccessNoTunnel}},
		{"the same with a marking", FAR{Apply: ApplyForward, DestinationInterface: destAccess, TLM: &tlm},
			rules.FAR{Action: rules.AccessNoTunnel, TOS: 0xb8, HasTOS: true}},
		{"FORW toward Core without a tunnel", FAR{Apply: ApplyForward, DestinationInterface: 1},
			rules.FAR{Action: rules.Forward}},
		{"FORW toward the CP function with a tunnel", FAR{Apply: ApplyForward, DestinationInterface: 3, OHC: &OHC{TEID: 7, Peer: peer}},
			rules.FAR{Action: rules.Forward, OHC: oh}},
		{"BUFF toward Access", FAR{Apply: ApplyBuffer | ApplyNotifyCP, DestinationInterface: destAccess},
			rules.FAR{Action: rules.Buffer}},
		{"DROP toward Access", FAR{Apply: ApplyDrop, DestinationInterface: destAccess}, rules.FAR{Action: rules.Drop}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := farRule(&c.far, local); !reflect.DeepEqual(got, c.want) {
				t.Errorf("farRule = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestUplinkSource: an uplink rule set whose PDRs all come from Access takes the session's UE
// address as the only source its packets may have (anti-spoofing); GTP-U from the core or the
// CP function, a session without one UE address, and AllowAnySource leave the source open.
func TestUplinkSource(t *testing.T) {
	ue, ue2 := netip.MustParseAddr("10.45.0.2"), netip.MustParseAddr("10.45.0.3")
	fteid := func(teid uint32) *FTEID { return &FTEID{TEID: teid, Addr: netip.MustParseAddr("10.0.1.1")} }
	far := map[uint32]*FAR{1: {ID: 1, Apply: ApplyForward, DestinationInterface: 1}}
	session := func(pdrs ...*PDR) *Session {
		s := &Session{PDRs: map[uint16]*PDR{}, FARs: far}
		for i, p := range pdrs {
			p.ID, p.FAR = uint16(i+1), 1
			s.PDRs[p.ID] = p
		}
		return s
	}
	open5gs := session(&PDR{FTEID: fteid(1)}, &PDR{SourceInterface: 1, UE: ue})
	cases := []struct {
		name  string
		s     *Session
		allow bool
		want  map[uint32]netip.Addr // uplink TEID -> source
	}{
		{"UE on the downlink PDR (Open5GS)", open5gs, false, map[uint32]netip.Addr{1: ue}},
		{"UE on the uplink PDR (free5GC)", session(&PDR{FTEID: fteid(1), UE: ue}), false, map[uint32]netip.Addr{1: ue}},
		{"anti-spoofing off", open5gs, true, map[uint32]netip.Addr{1: {}}},
		{"GTP-U from the core (N9 toward an I-UPF)", session(&PDR{FTEID: fteid(1), SourceInterface: 1}, &PDR{SourceInterface: 1, UE: ue}),
			false, map[uint32]netip.Addr{1: {}}},
		{"a TEID shared with a CP-function PDR", session(&PDR{FTEID: fteid(1)}, &PDR{FTEID: fteid(1), SourceInterface: 3},
			&PDR{SourceInterface: 1, UE: ue}), false, map[uint32]netip.Addr{1: {}}},
		{"no UE address", session(&PDR{FTEID: fteid(1)}), false, map[uint32]netip.Addr{1: {}}},
		{"two UE addresses", session(&PDR{FTEID: fteid(1)}, &PDR{SourceInterface: 1, UE: ue}, &PDR{SourceInterface: 1, UE: ue2}),
			false, map[uint32]netip.Addr{1: {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := &Node{opts: Options{AllowAnySource: c.allow, GTPUAddrs: []netip.Addr{netip.MustParseAddr("10.0.1.1")}}}
			got := map[uint32]netip.Addr{}
			for _, rs := range n.ruleSets(c.s) {
				if rs.Uplink {
					got[rs.TEID] = rs.Source
				} else if rs.Source.IsValid() {
					t.Errorf("downlink rule set %s has source %s", rs.Key(), rs.Source)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("uplink sources %v, want %v", got, c.want)
			}
		})
	}
}
