// Package apitest holds test doubles for the HTTP API in package api: a fake Backend that
// serves fixed data, a builder for sessions and a fixture with which tests of the server,
// the client and xupfctl agree.
package apitest

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/session"
)

// Backend is an api.Backend that serves fixed data. Err, when set, is what every fallible
// method returns. The zero value serves no sessions and empty status and stats.
type Backend struct {
	StatusData   api.Status
	SessionsData []api.SessionInfo
	StatsData    api.Stats
	Err          error
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

// NewBackend returns a fresh Backend with a status, two sessions and stats. The sessions
// are out of order on purpose (9, then 2): the server must sort them. Session 9 has QFI 0,
// meaning no PDU Session Container. Each call returns new values that a test may change.
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
			GTPUAddresses: []string{"192.0.2.1"},
			PFCPAddress:   "192.0.2.1:8805",
			Sessions:      2,
			MaxSessions:   65536,
			BPFFSPath:     "/sys/fs/bpf/xupf",
		},
		SessionsData: []api.SessionInfo{
			Session(9, "10.45.0.9", 0x2000, 0x3000, 0, 5, 6),
			Session(2, "10.45.0.2", 0x1000, 0x1001, 9, 1042, 2088),
		},
		StatsData: api.Stats{
			Counters: map[string]uint64{"ul_rx": 1042, "dl_tx": 2088, "pass": 0},
			Drops:    map[string]uint64{"unknown_teid": 2, "malformed_gtp": 0},
		},
	}
}
