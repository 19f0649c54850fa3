// Package apitest holds test doubles for the HTTP API in package api: a fake Backend that
// serves fixed data (and keeps the traffic classes added and deleted through it), a builder
// for sessions and a fixture with which tests of the server, the client and xupfctl agree.
package apitest

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/session"
)

// Backend is an api.Backend that serves fixed data. Err, when set, is what every fallible
// method returns. The zero value serves no sessions, no classes, no PFCP associations and
// empty status and stats.
//
// ClassesData is also changed by AddClass and DeleteClass, which check classes as the
// daemon does: classifier.Class.Parse for validity, and ids for duplicates. Read it once
// the requests that change it have returned.
type Backend struct {
	StatusData   api.Status
	SessionsData []api.SessionInfo
	StatsData    api.Stats
	ClassesData  []api.ClassInfo
	// AssociationsData is served as is; Err does not apply (Associations cannot fail).
	AssociationsData []pfcp.Association
	Err              error

	mu sync.Mutex // guards ClassesData against concurrent requests
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

func (b *Backend) classIndex(id uint32) int {
	return slices.IndexFunc(b.ClassesData, func(c api.ClassInfo) bool { return c.ID == id })
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

// NewBackend returns a fresh Backend with a status, two sessions, stats, the classes of
// Classes and the PFCP associations of Associations. The sessions are out of order on purpose (9, then 2): the server must sort them.
// Session 9 has QFI 0, meaning no PDU Session Container. Each call returns new values that a
// test may change.
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
			Sessions:         2,
			MaxSessions:      65536,
			BPFFSPath:        "/sys/fs/bpf/xupf",
		},
		SessionsData: []api.SessionInfo{
			Session(9, "10.45.0.9", 0x2000, 0x3000, 0, 5, 6),
			Session(2, "10.45.0.2", 0x1000, 0x1001, 9, 1042, 2088),
		},
		StatsData: api.Stats{
			Counters: map[string]uint64{"ul_rx": 1042, "dl_tx": 2088, "pass": 0},
			Drops:    map[string]uint64{"unknown_teid": 2, "malformed_gtp": 0},
		},
		ClassesData:      Classes(),
		AssociationsData: Associations(),
	}
}
