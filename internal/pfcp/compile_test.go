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
