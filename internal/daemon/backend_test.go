package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/wmnsk/go-pfcp/ie"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/rules"
	"github.com/xupf/xupf/internal/session"
)

// pfcpDatapath is an in-memory pfcp.Datapath: it keeps the installed rule sets and serves
// the counters a test sets. Like the real one, Usage of an owner with nothing installed is
// datapath.ErrNotFound.
type pfcpDatapath struct {
	sets  map[uint64][]rules.RuleSet
	usage map[uint64][]rules.Usage
	fail  error // returned by Usage when set
	local map[netip.Addr]bool
}

func (f *pfcpDatapath) Install(owner uint64, sets []rules.RuleSet) error {
	f.sets[owner] = sets
	return nil
}

func (f *pfcpDatapath) Uninstall(owner uint64) ([]rules.Usage, error) {
	delete(f.sets, owner)
	return f.usage[owner], nil
}

func (f *pfcpDatapath) Usage(owner uint64) ([]rules.Usage, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	if _, ok := f.sets[owner]; !ok {
		return nil, fmt.Errorf("session %d: %w", owner, datapath.ErrNotFound)
	}
	return f.usage[owner], nil
}

func (f *pfcpDatapath) QuotaUsed(uint64) ([]rules.QuotaUse, error) { return nil, nil }

func (f *pfcpDatapath) IsLocal(a netip.Addr) bool { return f.local[a] }

func (f *pfcpDatapath) TEIDCacheable(uint32) bool { return true }

func (f *pfcpDatapath) KeyOwner(k rules.Key) (uint64, bool) {
	for owner, sets := range f.sets {
		for _, rs := range sets {
			if rs.LookupKey() == k {
				return owner, true
			}
		}
	}
	return 0, false
}

// pfcpExchange sends m to the node as the SMF at 127.0.0.1:8805 and returns the response.
func pfcpExchange(t *testing.T, d *Daemon, m message.Message) message.Message {
	t.Helper()
	b := make([]byte, m.MarshalLen())
	if err := m.MarshalTo(b); err != nil {
		t.Fatal(err)
	}
	resp, err := message.Parse(d.pfcpNode.Handle(netip.MustParseAddrPort("127.0.0.1:8805"), b))
	if err != nil {
		t.Fatalf("the node's response does not parse: %v", err)
	}
	return resp
}

// establishPFCPSession associates smf.example and has it establish a session of an uplink
// PDR 1 on a chosen TEID and a downlink PDR 2 on UE 10.45.0.7 toward gNB 192.0.2.10; it
// returns the UP SEID.
func establishPFCPSession(t *testing.T, d *Daemon) uint64 {
	t.Helper()
	node := ie.NewNodeID("", "", "smf.example")
	setup := pfcpExchange(t, d, message.NewAssociationSetupRequest(1, node,
		ie.NewRecoveryTimeStamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))))
	if c := causeOf(t, setup.(*message.AssociationSetupResponse).Cause); c != ie.CauseRequestAccepted {
		t.Fatalf("Association Setup cause %d", c)
	}
	resp := pfcpExchange(t, d, message.NewSessionEstablishmentRequest(0, 0, 0, 2, 0,
		node, ie.NewFSEID(0x77, net.IPv4(127, 0, 0, 1), nil), ie.NewPDNType(ie.PDNTypeIPv4),
		ie.NewCreatePDR(ie.NewPDRID(1), ie.NewPrecedence(255),
			ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceAccess), ie.NewFTEID(0x0c, 0, nil, nil, 1)),
			ie.NewOuterHeaderRemoval(6, 0), ie.NewFARID(1)),
		ie.NewCreatePDR(ie.NewPDRID(2), ie.NewPrecedence(65535),
			ie.NewPDI(ie.NewSourceInterface(ie.SrcInterfaceCore), ie.NewUEIPAddress(0x02, "10.45.0.7", "", 0, 0)),
			ie.NewFARID(2)),
		ie.NewCreateFAR(ie.NewFARID(1), ie.NewApplyAction(0x02),
			ie.NewForwardingParameters(ie.NewDestinationInterface(ie.DstInterfaceCore))),
		ie.NewCreateFAR(ie.NewFARID(2), ie.NewApplyAction(0x02),
			ie.NewForwardingParameters(ie.NewDestinationInterface(ie.DstInterfaceAccess),
				ie.NewOuterHeaderCreation(0x0100, 0x500, "192.0.2.10", "", 0, 0, 0))),
	)).(*message.SessionEstablishmentResponse)
	if c := causeOf(t, resp.Cause); c != ie.CauseRequestAccepted {
		t.Fatalf("Session Establishment cause %d", c)
	}
	f, err := resp.UPFSEID.FSEID()
	if err != nil {
		t.Fatalf("UP F-SEID: %v", err)
	}
	return f.SEID
}

func TestPFCPSessionsBackend(t *testing.T) {
	dp := &pfcpDatapath{sets: map[uint64][]rules.RuleSet{}, usage: map[uint64][]rules.Usage{}}
	cfg := testConfig(t, "")
	log := slog.New(slog.DiscardHandler)
	d := &Daemon{cfg: cfg, log: log, pfcpNode: newPFCPNode(cfg, dp, nil, nil, nil, log)}

	list, err := d.PFCPSessions()
	if err != nil || len(list) != 0 {
		t.Fatalf("PFCPSessions before any session = %v, %v; want none", list, err)
	}

	seid := establishPFCPSession(t, d)
	dp.usage[seid] = []rules.Usage{
		{Uplink: true, PDR: 1, Packets: 10, Bytes: 1000},
		{PDR: 2, Packets: 20, Bytes: 20000},
	}

	tests := []struct {
		name      string
		prepare   func()
		wantUsage []api.PDRUsage
		wantErr   string // "" for none
	}{
		{
			name:      "counters per PDR",
			prepare:   func() {},
			wantUsage: []api.PDRUsage{{PDR: 1, Packets: 10, Bytes: 1000}, {PDR: 2, Packets: 20, Bytes: 20000}},
		},
		{
			// Entries of several rule sets for one PDR add up; an entry of the other
			// direction is not the PDR's.
			name: "entries summed by PDR and direction",
			prepare: func() {
				dp.usage[seid] = append(dp.usage[seid],
					rules.Usage{Uplink: true, PDR: 1, Packets: 1, Bytes: 100},
					rules.Usage{Uplink: true, PDR: 2, Packets: 7, Bytes: 700})
			},
			wantUsage: []api.PDRUsage{{PDR: 1, Packets: 11, Bytes: 1100}, {PDR: 2, Packets: 20, Bytes: 20000}},
		},
		{
			name:    "counters unreadable",
			prepare: func() { dp.fail = errors.New("reading rule counters: operation not permitted") },
			wantErr: fmt.Sprintf("PFCP session %d: reading its counters: reading rule counters: operation not permitted", seid),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.prepare()
			list, listErr := d.PFCPSessions()
			one, oneErr := d.PFCPSession(seid)
			if tt.wantErr != "" {
				for _, err := range []error{listErr, oneErr} {
					if err == nil || err.Error() != tt.wantErr || errors.Is(err, api.ErrNotFound) {
						t.Errorf("error = %v, want %q (not ErrNotFound)", err, tt.wantErr)
					}
				}
				return
			}
			if listErr != nil || oneErr != nil {
				t.Fatalf("PFCPSessions: %v; PFCPSession: %v", listErr, oneErr)
			}
			if len(list) != 1 || !reflect.DeepEqual(list[0], one) {
				t.Fatalf("PFCPSessions = %+v, want only PFCPSession(%d) = %+v", list, seid, one)
			}
			if one.SEID != seid || one.CPSEID != 0x77 || one.Peer != "smf.example" || len(one.PDRs) != 2 || len(one.FARs) != 2 {
				t.Errorf("session = %+v, want SEID %d of smf.example, CP SEID 0x77, 2 PDRs and 2 FARs", one.Session, seid)
			}
			if !reflect.DeepEqual(one.Usage, tt.wantUsage) {
				t.Errorf("usage = %+v, want %+v", one.Usage, tt.wantUsage)
			}
		})
	}

	dp.fail = nil
	_, err = d.PFCPSession(seid + 1)
	if !errors.Is(err, api.ErrNotFound) {
		t.Errorf("PFCPSession of an unknown SEID: %v, want ErrNotFound", err)
	}
}

func TestPFCPRoom(t *testing.T) {
	for _, c := range []struct{ max, static, want int }{{10, 3, 7}, {10, 0, 10}, {10, 10, -1}} {
		cfg := testConfig(t, "")
		cfg.Limits.MaxSessions, cfg.Sessions = c.max, make([]session.Session, c.static)
		if got := pfcpRoom(cfg); got != c.want {
			t.Errorf("max_sessions %d with %d static sessions: room %d, want %d", c.max, c.static, got, c.want)
		}
	}
}
