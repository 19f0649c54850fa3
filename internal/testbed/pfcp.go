package testbed

import (
	"net/netip"

	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/session"
)

// PFCPView describes a PFCP session the way the traffic helpers and checks take it: the
// uplink TEID xupfd chose (or was given), the UE address, and where downlink packets should
// go: the gNB gnb with TEID teid, and qfi in the PDU Session Container (0: none). gnb and teid
// are parameters, not s.GNB and s.GNBTEID, so that a check can state what it expects
// independently of what the client last asked for. The ID is the UP SEID.
func PFCPView(s *pfcpclient.Session, gnb netip.Addr, teid uint32, qfi uint8) session.Session {
	return session.Session{ID: s.UPSEID, UE: s.UE, UplinkTEID: s.UplinkTEID, GNB: gnb, DownlinkTEID: teid,
		QFI: qfi, GTPUAddr: N3Addr}
}
