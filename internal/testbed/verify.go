package testbed

import (
	"fmt"
	"net/netip"

	"github.com/xupf/xupf/internal/session"
)

// Payload returns a payload generator whose payloads are tagged with tag and numbered, so
// every packet of a run is distinguishable and a receiver can tell which ones arrived.
func Payload(tag string) func(i int) []byte {
	return func(i int) []byte { return fmt.Appendf(nil, "xupf testbed %s #%04d", tag, i) }
}

// problems collects check failures, counting repeats, so a systematic fault reads as one line
// ("TEID 0x5, want 0x200: 100 packets") rather than a hundred.
type problems struct {
	order []string
	count map[string]int
}

func (p *problems) addf(format string, args ...any) {
	if p.count == nil {
		p.count = make(map[string]int)
	}
	msg := fmt.Sprintf(format, args...)
	if p.count[msg] == 0 {
		p.order = append(p.order, msg)
	}
	p.count[msg]++
}

func (p *problems) list() []string {
	out := make([]string, 0, len(p.order))
	for _, msg := range p.order {
		if n := p.count[msg]; n > 1 {
			msg = fmt.Sprintf("%s (%d packets)", msg, n)
		}
		out = append(out, msg)
	}
	return out
}

// payloadTracker checks that every expected payload arrives exactly once and nothing else.
type payloadTracker struct {
	want map[string]int // payload -> index
	seen map[int]bool
}

func newPayloadTracker(n int, payload func(int) []byte) *payloadTracker {
	pt := &payloadTracker{want: make(map[string]int, n), seen: make(map[int]bool, n)}
	for i := range n {
		pt.want[string(payload(i))] = i
	}
	return pt
}

func (pt *payloadTracker) check(p *problems, got []byte) {
	i, ok := pt.want[string(got)]
	switch {
	case !ok:
		p.addf("payload not one that was sent (altered or foreign): %q", truncate(got, 48))
	case pt.seen[i]:
		p.addf("duplicate of packet #%d", i)
	default:
		pt.seen[i] = true
	}
}

func (pt *payloadTracker) missing(p *problems) {
	var first []int
	n := 0
	for i := range len(pt.want) {
		if !pt.seen[i] {
			n++
			if len(first) < 10 {
				first = append(first, i)
			}
		}
	}
	if n > 0 {
		p.addf("%d of %d packets missing (first: %v)", n, len(pt.want), first)
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// CheckUplink checks what the DN host received after SendUplink(s, n, payload, ...): n
// packets from s.UE:40000 to 10.100.6.2:5001 with the TTL decremented once and the payloads
// intact. It returns one line per kind of problem; none means all is well.
func CheckUplink(s session.Session, n int, payload func(int) []byte, got []Datagram) []string {
	return CheckUplinkFrom(s, UESrcPort, n, payload, got)
}

// CheckUplinkFrom is CheckUplink after SendUplinkFrom(s, uePort, ...): the packets come from
// s.UE:uePort.
func CheckUplinkFrom(s session.Session, uePort uint16, n int, payload func(int) []byte, got []Datagram) []string {
	var p problems
	pt := newPayloadTracker(n, payload)
	wantSrc := netip.AddrPortFrom(s.UE, uePort)
	for _, d := range got {
		if d.Src != wantSrc {
			p.addf("source %s, want the UE's %s", d.Src, wantSrc)
		}
		if d.Dst != DNAddr {
			p.addf("destination %s, want %s", d.Dst, DNAddr)
		}
		if d.TTL != InnerTTL-1 {
			p.addf("TTL %d, want %d (sent %d, one hop through the UPF)", d.TTL, InnerTTL-1, InnerTTL)
		}
		pt.check(&p, d.Data)
	}
	pt.missing(&p)
	return p.list()
}

// CheckDownlink checks the G-PDUs the gNB received after SendDownlink(s, n, payload): n
// packets from the session's GTP-U address to s.GNB:2152 with s.DownlinkTEID, a downlink PDU
// Session Container with s.QFI exactly when s.QFI is not 0, an outer source port from the
// dynamic range that is the same for the whole flow, and the inner packet from the DN host to
// s.UE:6000 with its TTL decremented once, valid checksums and the payload intact.
func CheckDownlink(s session.Session, n int, payload func(int) []byte, got []GTPUPacket) []string {
	return CheckDownlinkTo(s, DownlinkExpect{UEPort: UEPort, TEID: s.DownlinkTEID, QFI: s.QFI}, n, payload, got)
}

// DownlinkExpect is what distinguishes the downlink packets of one QoS flow of a session: the
// UE port they were sent to (SendDownlinkTo) and the TEID and QFI (0: no PDU Session
// Container) they must be tunnelled with.
type DownlinkExpect struct {
	UEPort uint16
	TEID   uint32
	QFI    uint8
}

// CheckDownlinkTo is CheckDownlink after SendDownlinkTo(s, want.UEPort, ...), with want's TEID
// and QFI in place of the session's: the checks of a packet that a flow of s, or its default
// rule, tunnels.
func CheckDownlinkTo(s session.Session, want DownlinkExpect, n int, payload func(int) []byte, got []GTPUPacket) []string {
	var p problems
	pt := newPayloadTracker(n, payload)
	local := s.GTPUAddr
	if !local.IsValid() {
		local = N3Addr // the configuration's default: the first GTP-U address
	}
	wantInnerSrc := netip.AddrPortFrom(DNAddr, DNSrcPort)
	wantInnerDst := netip.AddrPortFrom(s.UE, want.UEPort)
	ports := make(map[uint16]int)
	for _, g := range got {
		if g.MsgType != GTPUGPDU {
			p.addf("GTP-U message type %d, want G-PDU (255)", g.MsgType)
			continue
		}
		if g.TEID != want.TEID {
			p.addf("TEID 0x%x, want 0x%x", g.TEID, want.TEID)
		}
		switch {
		case want.QFI == 0 && g.HasPSC:
			p.addf("PDU Session Container present (QFI %d), want none: the session has no QFI", g.QFI)
		case want.QFI != 0 && !g.HasPSC:
			p.addf("no PDU Session Container, want one with QFI %d", want.QFI)
		case want.QFI != 0 && (g.QFI != want.QFI || g.PDUType != PDUTypeDL):
			p.addf("PDU Session Container type %d QFI %d, want type %d QFI %d", g.PDUType, g.QFI, PDUTypeDL, want.QFI)
		}
		if g.OuterSrc.Addr() != local {
			p.addf("outer source %s, want the GTP-U address %s", g.OuterSrc.Addr(), local)
		}
		if g.OuterSrc.Port() < 0xC000 {
			p.addf("outer source port %d, want one from the dynamic range 49152-65535", g.OuterSrc.Port())
		}
		ports[g.OuterSrc.Port()]++
		if g.OuterDst != s.GNB {
			p.addf("outer destination %s, want the gNB %s", g.OuterDst, s.GNB)
		}
		if g.InnerSrc != wantInnerSrc || g.InnerDst != wantInnerDst {
			p.addf("inner %s -> %s, want %s -> %s", g.InnerSrc, g.InnerDst, wantInnerSrc, wantInnerDst)
		}
		if g.InnerTTL != InnerTTL-1 {
			p.addf("inner TTL %d, want %d (sent %d, one hop through the UPF)", g.InnerTTL, InnerTTL-1, InnerTTL)
		}
		if !g.IPChecksumOK {
			p.addf("inner IPv4 header checksum invalid")
		}
		if !g.UDPChecksumOK {
			p.addf("inner UDP checksum invalid or missing")
		}
		pt.check(&p, g.Payload)
	}
	if len(ports) > 1 {
		p.addf("outer source ports %v differ within one inner flow, want one (hashed from the flow)", ports)
	}
	pt.missing(&p)
	return p.list()
}

// CheckEchoResponse checks an Echo Response to a request with sequence number seq: type 2, S
// flag, the same sequence number, TEID 0, a Recovery IE (14) with restart counter 0, from the
// UPF's GTP-U address and port.
func CheckEchoResponse(seq uint16, r GTPUPacket) []string {
	var p problems
	if r.MsgType != GTPUEchoResponse {
		p.addf("message type %d, want Echo Response (2)", r.MsgType)
	}
	if r.Flags&0x02 == 0 {
		p.addf("S flag not set (flags 0x%02x)", r.Flags)
	}
	if r.Seq != seq {
		p.addf("sequence number 0x%04x, want 0x%04x (copied from the request)", r.Seq, seq)
	}
	if r.TEID != 0 {
		p.addf("TEID 0x%x, want 0", r.TEID)
	}
	if len(r.IEs) != 2 || r.IEs[0] != RecoveryIE || r.IEs[1] != 0 {
		p.addf("IEs % x, want exactly a Recovery IE (0e 00)", r.IEs)
	}
	if want := netip.AddrPortFrom(N3Addr, GTPUPort); r.OuterSrc != want {
		p.addf("from %s, want %s", r.OuterSrc, want)
	}
	return p.list()
}
