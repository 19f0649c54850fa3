// Package apitest holds test doubles for the HTTP API in package api: a fake Backend that
// serves fixed data (and keeps the traffic classes added and deleted through it), a builder
// for static and PFCP sessions and a fixture with which tests of the server, the client and xupfctl agree.
package apitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/session"
)

// Backend is an api.Backend that serves fixed data. Err, when set, is what every fallible
// method returns. The zero value serves no sessions (static or PFCP), no classes, no PFCP
// associations and empty status and stats.
//
// ClassesData is also changed by AddClass and DeleteClass, which check classes as the
// daemon does: classifier.Class.Parse for validity, and ids for duplicates. ContractsData is
// changed by SetContract (which checks contracts with api.Contract.Check, as the daemon
// does) and DeleteContract. Read them once the requests that change them have returned.
type Backend struct {
	StatusData   api.Status
	SessionsData []api.SessionInfo
	// PFCPSessionsData is served as is, unsorted, by PFCPSessions and PFCPSession.
	PFCPSessionsData []api.PFCPSessionInfo
	StatsData        api.Stats
	ClassesData      []api.ClassInfo
	// ContractsData is served unsorted, as Contracts of the daemon may be.
	ContractsData []api.ContractInfo
	// AssociationsData is served as is; Err does not apply (Associations cannot fail).
	AssociationsData []pfcp.Association
	// RoutesData and NeighboursData are served unsorted; AddRoute, DeleteRoute,
	// AddNeighbour and DeleteNeighbour change them (replacing by prefix, and by interface and
	// address), checking nothing.
	RoutesData     []api.Route
	NeighboursData []api.Neighbour
	// ConfigData is the running configuration's YAML.
	ConfigData []byte
	// FlowsData is served unsorted; FlushFlows removes from it. FlowCacheOff has both
	// answer api.ErrConflict, as with the cache off.
	FlowsData    []api.CachedFlow
	FlowCacheOff bool
	Err          error

	mu sync.Mutex // guards ClassesData, ContractsData, RoutesData, NeighboursData and FlowsData against concurrent requests
}

var _ api.Backend = (*Backend)(nil)

// Status returns StatusData.
func (b *Backend) Status() api.Status { return b.StatusData }

// Sessions returns SessionsData as it is, unsorted, or Err.
func (b *Backend) Sessions() ([]api.SessionInfo, error) {
	if b.Err != nil {
		return nil, b.Err
	}
	return b.SessionsData, nil
}

// Session returns the session in SessionsData with the given id, or Err. For an unknown
// id it returns an error that wraps api.ErrNotFound, as the daemon may do, so that callers
// are checked to use errors.Is.
func (b *Backend) Session(id uint64) (api.SessionInfo, error) {
	if b.Err != nil {
		return api.SessionInfo{}, b.Err
	}
	for _, s := range b.SessionsData {
		if s.ID == id {
			return s, nil
		}
	}
	return api.SessionInfo{}, fmt.Errorf("session table: %w", api.ErrNotFound)
}

// PFCPSessions returns PFCPSessionsData as it is, unsorted, or Err.
func (b *Backend) PFCPSessions() ([]api.PFCPSessionInfo, error) {
	if b.Err != nil {
		return nil, b.Err
	}
	return b.PFCPSessionsData, nil
}

// PFCPSession returns the session in PFCPSessionsData with the given SEID, or Err, or an
// error that wraps api.ErrNotFound.
func (b *Backend) PFCPSession(seid uint64) (api.PFCPSessionInfo, error) {
	if b.Err != nil {
		return api.PFCPSessionInfo{}, b.Err
	}
	for _, s := range b.PFCPSessionsData {
		if s.SEID == seid {
			return s, nil
		}
	}
	return api.PFCPSessionInfo{}, fmt.Errorf("pfcp node: session 0x%x: %w", seid, api.ErrNotFound)
}

// Stats returns StatsData or Err.
func (b *Backend) Stats() (api.Stats, error) {
	if b.Err != nil {
		return api.Stats{}, b.Err
	}
	return b.StatsData, nil
}

// Classes returns ClassesData as it is, unsorted, or Err.
func (b *Backend) Classes() ([]api.ClassInfo, error) {
	if b.Err != nil {
		return nil, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ClassesData), nil
}

// Class returns the class in ClassesData with the given id, or Err, or an error that wraps
// api.ErrNotFound.
func (b *Backend) Class(id uint32) (api.ClassInfo, error) {
	if b.Err != nil {
		return api.ClassInfo{}, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := b.classIndex(id); i >= 0 {
		return b.ClassesData[i], nil
	}
	return api.ClassInfo{}, fmt.Errorf("class table: class %d: %w", id, api.ErrNotFound)
}

// AddClass appends c, with zero counters, to ClassesData. It returns Err; or an error
// marked api.ErrConflict when the id is taken; or one marked api.ErrInvalid with
// classifier's own message when c does not parse.
func (b *Backend) AddClass(c classifier.Class) (api.ClassInfo, error) {
	if b.Err != nil {
		return api.ClassInfo{}, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.classIndex(c.ID) >= 0 {
		return api.ClassInfo{}, api.WithKind(api.ErrConflict, fmt.Errorf("class %d already exists", c.ID))
	}
	if _, err := c.Parse(); err != nil {
		return api.ClassInfo{}, api.WithKind(api.ErrInvalid, err)
	}
	info := api.ClassInfo{Class: c}
	b.ClassesData = append(b.ClassesData, info)
	return info, nil
}

// DeleteClass removes the class with the given id from ClassesData, or returns Err, or an
// error that wraps api.ErrNotFound.
func (b *Backend) DeleteClass(id uint32) error {
	if b.Err != nil {
		return b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.classIndex(id)
	if i < 0 {
		return fmt.Errorf("class table: class %d: %w", id, api.ErrNotFound)
	}
	b.ClassesData = slices.Delete(b.ClassesData, i, i+1)
	return nil
}

// Associations returns AssociationsData as it is, unsorted.
func (b *Backend) Associations() []pfcp.Association { return b.AssociationsData }

// RunningConfig returns ConfigData, or Err.
func (b *Backend) RunningConfig() ([]byte, error) {
	if b.Err != nil {
		return nil, b.Err
	}
	return b.ConfigData, nil
}

func (b *Backend) classIndex(id uint32) int {
	return slices.IndexFunc(b.ClassesData, func(c api.ClassInfo) bool { return c.ID == id })
}

// Contracts returns ContractsData as it is, unsorted, or Err.
func (b *Backend) Contracts() ([]api.ContractInfo, error) {
	if b.Err != nil {
		return nil, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ContractsData), nil
}

// Contract returns the contract in ContractsData of the given class, or Err, or an error that
// wraps api.ErrNotFound.
func (b *Backend) Contract(class uint32) (api.ContractInfo, error) {
	if b.Err != nil {
		return api.ContractInfo{}, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := b.contractIndex(class); i >= 0 {
		return b.ContractsData[i], nil
	}
	return api.ContractInfo{}, fmt.Errorf("contracts: class %d: %w", class, api.ErrNotFound)
}

// SetContract replaces the contract of the class in ContractsData, keeping its counters, or
// appends it with zero counters. It returns Err; or an error marked api.ErrInvalid with the
// message of c.Check when c is not valid.
func (b *Backend) SetContract(class uint32, c api.Contract) (api.ContractInfo, error) {
	if b.Err != nil {
		return api.ContractInfo{}, b.Err
	}
	if err := c.Check(class); err != nil {
		return api.ContractInfo{}, api.WithKind(api.ErrInvalid, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := b.contractIndex(class); i >= 0 {
		b.ContractsData[i].Contract = c
		return b.ContractsData[i], nil
	}
	info := api.ContractInfo{Class: class, Contract: c}
	b.ContractsData = append(b.ContractsData, info)
	return info, nil
}

// DeleteContract removes the contract of the class from ContractsData, or returns Err, or an
// error that wraps api.ErrNotFound.
func (b *Backend) DeleteContract(class uint32) error {
	if b.Err != nil {
		return b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.contractIndex(class)
	if i < 0 {
		return fmt.Errorf("contracts: class %d: %w", class, api.ErrNotFound)
	}
	b.ContractsData = slices.Delete(b.ContractsData, i, i+1)
	return nil
}

func (b *Backend) contractIndex(class uint32) int {
	return slices.IndexFunc(b.ContractsData, func(c api.ContractInfo) bool { return c.Class == class })
}

// Contracts returns three policer contracts, out of class order on purpose (20, 3, 0) so that
// the server must sort them:
//
//   - 20: pass; 7 packets of 1300 bytes passed.
//   - 3: limit at 10 Mbit/s with a burst of 65536 bytes; 900 packets of 1300 bytes passed,
//     100 dropped.
//   - 0, the default contract: drop; 12 packets of 60 bytes dropped.
func Contracts() []api.ContractInfo {
	return []api.ContractInfo{
		{
			Class:    20,
			Contract: api.Contract{Action: api.ActionPass},
			Counters: api.PoliceCounters{PassedPackets: 7, PassedBytes: 7 * 1300},
		},
		{
			Class:    3,
			Contract: api.Contract{Action: api.ActionLimit, RateBPS: 10_000_000, BurstBytes: 65536},
			Counters: api.PoliceCounters{PassedPackets: 900, PassedBytes: 900 * 1300,
				DroppedPackets: 100, DroppedBytes: 100 * 1300},
		},
		{
			Class:    0,
			Contract: api.Contract{Action: api.ActionDrop},
			Counters: api.PoliceCounters{DroppedPackets: 12, DroppedBytes: 12 * 60},
		},
	}
}

// Classes returns three classes, out of id order on purpose (20, 3, 5) so that the server
// must sort them:
//
//   - 3: priority 100, ingress, udp from 10.0.0.0/8 ports 1000-2000 to port 5060; 1042
//     packets of 200 bytes.
//   - 5: priority 0, no direction (both), source MAC 02:00:00:00:00:01 and ethertype
//     0x0806; nothing counted.
//   - 20: priority 10, egress, tcp from 198.51.100.0/24 port 443; 7 packets of 1300 bytes.
func Classes() []api.ClassInfo {
	return []api.ClassInfo{
		{
			Class: classifier.Class{ID: 20, Priority: 10, Direction: "egress",
				SrcIP: "198.51.100.0/24", Protocol: "tcp", SrcPort: "443"},
			Counters: session.Counters{Packets: 7, Bytes: 7 * 1300},
		},
		{
			Class: classifier.Class{ID: 3, Priority: 100, Direction: "ingress",
				SrcIP: "10.0.0.0/8", Protocol: "udp", SrcPort: "1000-2000", DstPort: "5060"},
			Counters: session.Counters{Packets: 1042, Bytes: 1042 * 200},
		},
		{
			Class: classifier.Class{ID: 5, SrcMAC: "02:00:00:00:00:01", EtherType: "0x0806"},
		},
	}
}

// Associations returns two PFCP associations, out of Node ID order on purpose
// ("smf1.5gc.example", then "198.51.100.5") so that the server must sort them:
//
//   - smf1.5gc.example from 198.51.100.7:8805, recovery 2025-01-02T02:00:00Z, established
//     2025-01-02T03:04:10Z, no missed heartbeat.
//   - 198.51.100.5 from 198.51.100.5:8805, recovery 2025-01-01T00:00:00Z, established
//     2025-01-02T03:05:00Z, 2 missed heartbeats.
func Associations() []pfcp.Association {
	return []pfcp.Association{
		{
			NodeID:      "smf1.5gc.example",
			Address:     netip.MustParseAddrPort("198.51.100.7:8805"),
			Recovery:    time.Date(2025, 1, 2, 2, 0, 0, 0, time.UTC),
			Established: time.Date(2025, 1, 2, 3, 4, 10, 0, time.UTC),
		},
		{
			NodeID:      "198.51.100.5",
			Address:     netip.MustParseAddrPort("198.51.100.5:8805"),
			Recovery:    time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			Established: time.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC),
			Missed:      2,
		},
	}
}

// Session builds a session with gNB 192.0.2.10 and GTP-U address 192.0.2.1 whose usage is
// ulPkts uplink packets of 100 bytes and dlPkts downlink packets of 1000 bytes.
func Session(id uint64, ue string, ulTEID, dlTEID uint32, qfi uint8, ulPkts, dlPkts uint64) api.SessionInfo {
	return api.SessionInfo{
		Session: session.Session{
			ID:           id,
			UE:           netip.MustParseAddr(ue),
			UplinkTEID:   ulTEID,
			GNB:          netip.MustParseAddr("192.0.2.10"),
			DownlinkTEID: dlTEID,
			QFI:          qfi,
			GTPUAddr:     netip.MustParseAddr("192.0.2.1"),
		},
		Usage: session.Usage{
			Uplink:   session.Counters{Packets: ulPkts, Bytes: ulPkts * 100},
			Downlink: session.Counters{Packets: dlPkts, Bytes: dlPkts * 1000},
		},
	}
}

// PFCPSession builds a PFCP session of SMF smf1.5gc.example, its F-SEID cpSEID at
// 198.51.100.7, established 2025-01-02T03:05:00Z, for UE ue:
//
//   - PDR 1, uplink: precedence 255, from access on TEID ulTEID at 192.0.2.1 (chosen, CHOOSE
//     ID 1), network instance "internet", QFI 9, outer header removal 6, FAR 1, QER 1,
//     URR 1; counted ulPkts packets of 100 bytes.
//   - PDR 2, downlink: precedence 65535, from core to the UE, FAR 2, QER 1, URR 1; counted
//     dlPkts packets of 1000 bytes.
//   - PDR 3, downlink: precedence 10, from core to the UE, SDF filter "permit out 17 from
//     any to assigned 5060", FAR 2, QER 2; counted 2 packets of 200 bytes.
//   - FAR 1: forward to core, network instance "internet".
//   - FAR 2: with dlTEID, forward to access with outer header TEID dlTEID toward the gNB
//     192.0.2.10, marked DSCP 46 (TLM 0xb8fc); with dlTEID 0 (the UE is idle), buffer and
//     notify the CP, BAR 1.
//   - QER 1: gates open, MBR 100000/200000 kbit/s, QFI 9. QER 2: uplink gate closed, MBR
//     5000/10000 kbit/s, GBR 1000/2000 kbit/s, QFI 5.
//   - URR 1: volume and duration, periodic reporting, volume threshold 1000000 bytes and
//     quota 10000000 bytes, time threshold 60 s and quota 3600 s.
//   - BAR 1, only with dlTEID 0: notification delay 2 (100 ms), 10 suggested packets.
func PFCPSession(seid, cpSEID uint64, ue string, ulTEID, dlTEID uint32, ulPkts, dlPkts uint64) api.PFCPSessionInfo {
	ueAddr := netip.MustParseAddr(ue)
	far2 := &pfcp.FAR{ID: 2, Apply: pfcp.ApplyForward, DestinationInterface: 0,
		OHC: &pfcp.OHC{Description: 0x0100, TEID: dlTEID, Peer: netip.MustParseAddr("192.0.2.10")}, TLM: new(uint16(0xb8fc))}
	var bars map[uint8]*pfcp.BAR
	if dlTEID == 0 {
		far2 = &pfcp.FAR{ID: 2, Apply: pfcp.ApplyBuffer | pfcp.ApplyNotifyCP, DestinationInterface: 0, BARID: new(uint8(1))}
		bars = map[uint8]*pfcp.BAR{1: {ID: 1, NotificationDelay: 2, SuggestedPackets: 10}}
	}
	return api.PFCPSessionInfo{
		Session: pfcp.Session{
			SEID:        seid,
			CPSEID:      cpSEID,
			CPAddress:   netip.MustParseAddr("198.51.100.7"),
			Peer:        "smf1.5gc.example",
			Established: time.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC),
			PDRs: map[uint16]*pfcp.PDR{
				1: {ID: 1, Precedence: 255, SourceInterface: 0,
					FTEID:           &pfcp.FTEID{TEID: ulTEID, Addr: netip.MustParseAddr("192.0.2.1"), Chosen: true, ChooseID: 1},
					NetworkInstance: "internet", QFI: 9, OuterHeaderRemoval: new(uint8(6)),
					FAR: 1, QERs: []uint32{1}, URRs: []uint32{1}},
				2: {ID: 2, Precedence: 65535, SourceInterface: 1, UE: ueAddr,
					FAR: 2, QERs: []uint32{1}, URRs: []uint32{1}},
				3: {ID: 3, Precedence: 10, SourceInterface: 1, UE: ueAddr,
					SDF: []pfcp.SDF{{FlowDescription: "permit out 17 from any to assigned 5060"}},
					FAR: 2, QERs: []uint32{2}},
			},
			FARs: map[uint32]*pfcp.FAR{
				1: {ID: 1, Apply: pfcp.ApplyForward, DestinationInterface: 1, NetworkInstance: "internet"},
				2: far2,
			},
			QERs: map[uint32]*pfcp.QER{
				1: {ID: 1, MBRUL: 100000, MBRDL: 200000, QFI: 9},
				2: {ID: 2, GateUL: 1, MBRUL: 5000, MBRDL: 10000, GBRUL: 1000, GBRDL: 2000, QFI: 5},
			},
			URRs: map[uint32]*pfcp.URR{
				1: {ID: 1, Method: 0x03, Triggers: []byte{0x01, 0x00}, VolumeThreshold: 1000000,
					VolumeQuota: 10000000, TimeThreshold: 60, TimeQuota: 3600},
			},
			BARs: bars,
		},
		Usage: []api.PDRUsage{
			{PDR: 1, Packets: ulPkts, Bytes: ulPkts * 100},
			{PDR: 2, Packets: dlPkts, Bytes: dlPkts * 1000},
			{PDR: 3, Packets: 2, Bytes: 400},
		},
	}
}

// NewBackend returns a fresh Backend with a status, two static sessions, two PFCP sessions,
// stats, the classes of Classes, the policer contracts of Contracts and the PFCP associations
// of Associations. The sessions are out of order on purpose (static 9, then 2; PFCP
// 0x100000002, then 0x100000001): the server must sort them. Static session 9 has QFI 0,
// meaning no PDU Session Container. PFCP session 0x100000002 buffers its downlink
// (PFCPSession with dlTEID 0). Each call returns new values that a test may change.
func NewBackend() *Backend {
	return &Backend{
		StatusData: api.Status{
			Version:       "v0.1.0",
			StartedAt:     time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
			UptimeSeconds: 3725.5,
			Interfaces: []api.Interface{
				{Name: "eth0", Ifindex: 2, Roles: []string{"n3"}, XDPMode: "native"},
				{Name: "eth1", Ifindex: 3, Roles: []string{"n6"}, XDPMode: "generic"},
			},
			GTPUAddresses:    []string{"192.0.2.1"},
			PFCPAddress:      "192.0.2.1:8805",
			PFCPAssociations: 2,
			Sessions:         4,
			MaxSessions:      65536,
			BPFFSPath:        "/sys/fs/bpf/xupf",
			QoSAlgorithm:     "token_bucket",
			QoSClock:         "ktime",
		},
		SessionsData: []api.SessionInfo{
			Session(9, "10.45.0.9", 0x2000, 0x3000, 0, 5, 6),
			Session(2, "10.45.0.2", 0x1000, 0x1001, 9, 1042, 2088),
		},
		PFCPSessionsData: []api.PFCPSessionInfo{
			PFCPSession(pfcp.FirstSEID+2, 0x21, "10.45.0.21", 0x4002, 0, 3, 0),
			PFCPSession(pfcp.FirstSEID+1, 0x20, "10.45.0.20", 0x4001, 0x5001, 10, 20),
		},
		StatsData: api.Stats{
			Counters:    map[string]uint64{"ul_rx": 1042, "dl_tx": 2088, "pass": 0},
			Drops:       map[string]uint64{"unknown_teid": 2, "malformed_gtp": 0},
			PFCPDrops:   map[string]uint64{"undecodable_header": 0, "amplification_limit": 12, "unhandled_type": 0},
			PFCPReports: map[string]uint64{"sent": 3, "accepted": 2, "timed_out": 1},
			GTPU:        map[string]uint64{"error_indication_reported": 1, "end_marker_sent": 4},
			Buffer:      map[string]uint64{"buffered": 12, "flushed": 10, "discarded_overflow": 2},
		},
		ClassesData:      Classes(),
		ContractsData:    Contracts(),
		AssociationsData: Associations(),
		FlowsData:        Flows(),
	}
}

// Flows returns three cached flows, not in the order of their bytes: a UDP flow from eth1 to
// eth0 (2,000 bytes), the two directions of a TCP connection (500 bytes toward eth1, with a
// VLAN pushed and the DSCP set; 9,000 bytes back).
func Flows() []api.CachedFlow {
	seen := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	dscp := 46
	flow := func(proto, src, dst, in, out string, bytes uint64) api.CachedFlow {
		return api.CachedFlow{Proto: proto, Src: src, Dst: dst, InInterface: in, OutInterface: out,
			SrcMAC: "02:00:00:00:00:01", DstMAC: "02:00:00:00:00:02", VLAN: "none", TTLDecrement: true, MTU: 1500,
			Packets: bytes / 100, Bytes: bytes, FirstSeen: seen, LastSeen: seen.Add(time.Minute)}
	}
	up := flow("tcp", "10.0.0.1:40000", "198.51.100.9:443", "eth0", "eth1", 500)
	up.VLAN, up.OutVLAN, up.DSCP = "push", 20, &dscp
	return []api.CachedFlow{
		flow("udp", "198.51.100.9:53", "10.0.0.2:5353", "eth1", "eth0", 2000),
		up,
		flow("tcp", "198.51.100.9:443", "10.0.0.1:40000", "eth1", "eth0", 9000),
	}
}

// TokenFile creates an API token file in a temporary directory of t, as xupfd does, and
// returns its path and token.
func TokenFile(t testing.TB) (path, token string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "api-token")
	token, _, err := api.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, token
}

// Guarded returns b's API behind api.Guard with a new token file (see TokenFile), as the
// daemon serves it with the default settings, and that file's path.
func Guarded(t testing.TB, b api.Backend) (http.Handler, string) {
	t.Helper()
	path, token := TokenFile(t)
	return api.Guard(api.NewHandler(b, nil), api.Access{Token: token, OpenMetrics: true}, nil), path
}

// SelfSignedCert writes a self-signed certificate for 127.0.0.1, ::1 and localhost, valid
// for an hour, and its key (PEM) to a temporary directory of t; it returns both paths. The
// certificate is its own CA, so clients trust it with the certificate file itself.
func SelfSignedCert(t testing.TB) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "xupfd test"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	for path, block := range map[string]*pem.Block{
		certPath: {Type: "CERTIFICATE", Bytes: der},
		keyPath:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// ErrFlowCacheOff is what Flows and FlushFlows return with FlowCacheOff.
var ErrFlowCacheOff = api.WithKind(api.ErrConflict, errors.New("the flow cache is off (flow_cache.max_flows is 0)"))

// Flows returns FlowsData, or Err, or ErrFlowCacheOff.
func (b *Backend) Flows() ([]api.CachedFlow, error) {
	if b.FlowCacheOff {
		return nil, ErrFlowCacheOff
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.FlowsData), b.Err
}

// FlushFlows removes the flows match selects from FlowsData, or returns Err or
// ErrFlowCacheOff.
func (b *Backend) FlushFlows(match func(api.CachedFlow) bool) (int, error) {
	if b.FlowCacheOff {
		return 0, ErrFlowCacheOff
	}
	if b.Err != nil {
		return 0, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.FlowsData)
	b.FlowsData = slices.DeleteFunc(b.FlowsData, match)
	return n - len(b.FlowsData), nil
}

// Routes returns RoutesData, or Err.
func (b *Backend) Routes() ([]api.Route, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.RoutesData), b.Err
}

// AddRoute replaces the route of r's prefix in RoutesData or appends r, or returns Err.
func (b *Backend) AddRoute(r api.Route) (api.Route, error) {
	if b.Err != nil {
		return api.Route{}, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.RoutesData = put(b.RoutesData, r, func(o api.Route) bool { return o.Prefix == r.Prefix })
	return r, nil
}

// DeleteRoute removes the route to prefix from RoutesData, or returns Err or api.ErrNotFound.
func (b *Backend) DeleteRoute(prefix string) error {
	return remove(b, &b.RoutesData, func(o api.Route) bool { return o.Prefix == prefix }, "route "+prefix)
}

// Neighbours returns NeighboursData, or Err.
func (b *Backend) Neighbours() ([]api.Neighbour, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.NeighboursData), b.Err
}

// AddNeighbour replaces the neighbour of n's interface and address or appends n, or returns Err.
func (b *Backend) AddNeighbour(n api.Neighbour) (api.Neighbour, error) {
	if b.Err != nil {
		return api.Neighbour{}, b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.NeighboursData = put(b.NeighboursData, n, func(o api.Neighbour) bool {
		return o.Interface == n.Interface && o.Address == n.Address
	})
	return n, nil
}

// DeleteNeighbour removes a neighbour from NeighboursData, or returns Err or api.ErrNotFound.
func (b *Backend) DeleteNeighbour(iface, address string) error {
	return remove(b, &b.NeighboursData, func(o api.Neighbour) bool { return o.Interface == iface && o.Address == address },
		"neighbour "+address+" on "+iface)
}

// put replaces the element of list same finds by v, or appends v.
func put[T any](list []T, v T, same func(T) bool) []T {
	if i := slices.IndexFunc(list, same); i >= 0 {
		list[i] = v
		return list
	}
	return append(list, v)
}

func remove[T any](b *Backend, list *[]T, same func(T) bool, what string) error {
	if b.Err != nil {
		return b.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.IndexFunc(*list, same)
	if i < 0 {
		return fmt.Errorf("%s: %w", what, api.ErrNotFound)
	}
	*list = slices.Delete(*list, i, i+1)
	return nil
}
