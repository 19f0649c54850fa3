package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/xupf/xupf/internal/session"
)

// rawSession mirrors session.Session's YAML keys.
type rawSession struct {
	ID           yaml.Node `yaml:"id"`
	UE           string    `yaml:"ue_ipv4"`
	UplinkTEID   yaml.Node `yaml:"uplink_teid"`
	GNB          string    `yaml:"gnb_ipv4"`
	DownlinkTEID yaml.Node `yaml:"downlink_teid"`
	QFI          yaml.Node `yaml:"qfi"`
	GTPUAddr     string    `yaml:"gtpu_address"`
	Flows        []rawFlow `yaml:"flows"`
	AllowAny     bool      `yaml:"allow_any_source"`
}

// rawFlow mirrors session.Flow's YAML keys.
type rawFlow struct {
	Precedence   yaml.Node `yaml:"precedence"`
	QFI          yaml.Node `yaml:"qfi"`
	SDF          []string  `yaml:"sdf"`
	DownlinkTEID yaml.Node `yaml:"downlink_teid"`
}

func (v *validator) sessions(raws []rawSession) {
	if limit := v.cfg.Limits.MaxSessions; limit > 0 && len(raws) > limit {
		v.addf("sessions: %d sessions exceed limits.max_sessions (%d); raise limits.max_sessions or remove sessions", len(raws), limit)
	}
	var (
		ids    = make(map[uint64]int, len(raws))
		ues    = make(map[netip.Addr]int, len(raws))
		teids  = make(map[uint32]int, len(raws))
		result = make([]session.Session, 0, len(raws))
	)
	for i := range raws {
		s, ok := v.session(i, &raws[i])
		if !ok {
			continue
		}
		path := fmt.Sprintf("sessions[%d]", i)
		if j, dup := ids[s.ID]; dup {
			v.addf("%s.id: %d is already used by sessions[%d]; give each session its own id", path, s.ID, j)
		} else {
			ids[s.ID] = i
		}
		if j, dup := ues[s.UE]; dup {
			v.addf("%s.ue_ipv4: %s is already used by sessions[%d]; give each session its own UE address", path, s.UE, j)
		} else {
			ues[s.UE] = i
		}
		if j, dup := teids[s.UplinkTEID]; dup {
			v.addf("%s.uplink_teid: %d is already used by sessions[%d]; give each session its own uplink TEID", path, s.UplinkTEID, j)
		} else {
			teids[s.UplinkTEID] = i
		}
		result = append(result, s)
	}
	if len(raws) > 0 {
		v.cfg.Sessions = result
	}
}

// session converts and checks sessions[i]; ok is false when it has a problem (already
// recorded).
func (v *validator) session(i int, raw *rawSession) (s session.Session, ok bool) {
	path := fmt.Sprintf("sessions[%d]", i)
	nerrs := len(v.errs)

	const teidRange = "use 1 to 4294967295 (decimal, or hex such as 0x100)"
	if id, present, err := intNode(&raw.ID, 1, MaxStaticSessionID); err != nil {
		v.addf("%s.id: %w; give each session a unique id from 1 to %d (higher ids are PFCP sessions')", path, err, uint64(MaxStaticSessionID))
	} else if !present {
		v.addf("%s.id: missing; give each session a unique id from 1 to %d", path, uint64(MaxStaticSessionID))
	} else {
		s.ID = id
	}
	// A TEID of 0 is left to session.Validate, which explains why it is reserved.
	if teid, present, err := intNode(&raw.UplinkTEID, 0, 1<<32-1); err != nil {
		v.addf("%s.uplink_teid: %w; %s", path, err, teidRange)
	} else if !present {
		v.addf("%s.uplink_teid: missing; give the TEID the gNB puts on this session's uplink packets, %s", path, teidRange)
	} else {
		s.UplinkTEID = uint32(teid)
	}
	if teid, present, err := intNode(&raw.DownlinkTEID, 0, 1<<32-1); err != nil {
		v.addf("%s.downlink_teid: %w; %s", path, err, teidRange)
	} else if !present {
		v.addf("%s.downlink_teid: missing; give the TEID the gNB assigned to this session's downlink, %s", path, teidRange)
	} else {
		s.DownlinkTEID = uint32(teid)
	}
	if qfi, _, err := intNode(&raw.QFI, 0, session.MaxQFI); err != nil {
		v.addf("%s.qfi: %w; use 1 to %d, or 0 for no PDU Session Container", path, err, session.MaxQFI)
	} else {
		s.QFI = uint8(qfi)
	}
	var err error
	if s.UE, err = parseAddr(raw.UE, "the UE's IPv4 address"); err != nil {
		v.addf("%s.ue_ipv4: %w", path, err)
	}
	if s.GNB, err = parseAddr(raw.GNB, "the gNB's N3 IPv4 address"); err != nil {
		v.addf("%s.gnb_ipv4: %w", path, err)
	}

	for j := range raw.Flows {
		if f, ok := v.flow(fmt.Sprintf("%s.flows[%d]", path, j), &raw.Flows[j]); ok {
			s.Flows = append(s.Flows, f)
		}
	}

	gtpuPath := path + ".gtpu_address"
	if raw.GTPUAddr == "" {
		if len(v.cfg.GTPUAddresses) > 0 {
			s.GTPUAddr = v.cfg.GTPUAddresses[0]
		}
	} else if s.GTPUAddr, err = parseAddr(raw.GTPUAddr, "one of gtpu_addresses"); err != nil {
		v.addf("%s: %w", gtpuPath, err)
	}
	s.AllowAnySource = raw.AllowAny
	if len(v.errs) > nerrs {
		return s, false
	}

	check := s
	if !check.GTPUAddr.IsValid() {
		// gtpu_address defaults to gtpu_addresses[0], which is missing or invalid and already
		// reported; do not report it again for every session.
		check.GTPUAddr = netip.IPv4Unspecified()
	}
	if err := check.Validate(); err != nil {
		v.addf("%s.%w", path, err)
		return s, false
	}
	if v.gtpuOK && !slices.Contains(v.cfg.GTPUAddresses, s.GTPUAddr) {
		v.addf("%s: %s is not in gtpu_addresses; use one of %s, or add it to gtpu_addresses", gtpuPath, s.GTPUAddr, joinAddrs(v.cfg.GTPUAddresses))
		return s, false
	}
	return s, true
}

func joinAddrs(list []netip.Addr) string {
	s := make([]string, len(list))
	for i, a := range list {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// flow decodes one QoS flow of a session; session.Validate checks the rest (QFI range, SDF
// syntax) with messages relative to the session.
func (v *validator) flow(path string, raw *rawFlow) (f session.Flow, ok bool) {
	nerrs := len(v.errs)
	if p, present, err := intNode(&raw.Precedence, 0, session.DefaultPrecedence-1); err != nil || !present {
		if err == nil {
			err = errors.New("missing")
		}
		v.addf("%s.precedence: %w; give the flow's precedence, 0 to %d (lower wins)", path, err,
			uint64(session.DefaultPrecedence-1))
	} else {
		f.Precedence = uint32(p)
	}
	if qfi, present, err := intNode(&raw.QFI, 1, session.MaxQFI); err != nil || !present {
		if err == nil {
			err = errors.New("missing")
		}
		v.addf("%s.qfi: %w; give the flow's QFI, 1 to %d", path, err, session.MaxQFI)
	} else {
		f.QFI = uint8(qfi)
	}
	if teid, _, err := intNode(&raw.DownlinkTEID, 0, 1<<32-1); err != nil {
		v.addf("%s.downlink_teid: %w; use 1 to 4294967295, or leave it out to use the session's", path, err)
	} else {
		f.DownlinkTEID = uint32(teid)
	}
	f.SDF = raw.SDF
	return f, len(v.errs) == nerrs
}
