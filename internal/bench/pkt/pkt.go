// Package pkt builds the frames the benchmark generator sends and decodes the frames its sink
// samples, so that a run can check what arrived: addresses, ports, GTP-U TEID and QFI, and the
// payload.
//
// Every frame is Ethernet + IPv4 + UDP, optionally GTP-U encapsulated (outer IPv4 + UDP to
// port 2152 + GTP-U G-PDU, optionally with a PDU Session Container carrying the QFI, TS
// 38.415), around an inner IPv4 + UDP packet. The inner UDP payload starts with a 12-byte
// header — Magic, the flow id and a sequence number, big endian — and is filled up to the
// frame size with Filler bytes that depend only on their offset in the payload. Frames of
// one layout therefore differ only in their headers, flow id and sequence number, which is
// what lets the generator rewrite just the head of each frame (see internal/bench/gen).
//
// UDP checksums are 0 (IPv4 allows it): the generator rewrites the sequence number of every
// frame it sends and does not update a checksum. IPv4 header checksums are correct.
//
// Sizes follow RFC 2544: a frame size counts the Ethernet header and the 4-byte FCS, so a
// 64-byte frame is 60 bytes handed to the NIC.
package pkt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Header sizes.
const (
	EthLen     = 14
	IPv4Len    = 20
	UDPLen     = 8
	GTPULen    = 8 // the mandatory GTP-U header
	GTPUOptLen = 4 // sequence number, N-PDU number, next extension type: present with E
	PSCLen     = 4 // a PDU Session Container of length 1
	FCSLen     = 4
	// PayloadHeaderLen is Magic, flow id and sequence number.
	PayloadHeaderLen = 12
	// MaxFrameSize is the largest frame (with FCS) on a 1500-byte MTU link.
	MaxFrameSize = EthLen + 1500 + FCSLen
	// GTPUPort is GTP-U's UDP port.
	GTPUPort = 2152
)

// Magic starts every generated payload ("xuPB").
const Magic uint32 = 0x78755042

// PDU types of the PDU Session Container (TS 38.415).
const (
	PDUTypeDownlink = 0
	PDUTypeUplink   = 1
)

// Filler is the payload byte at offset i (counted from the payload start, header included).
func Filler(i int) byte { return byte(i*7 + 3) }

// EncapOverhead is what GTP-U encapsulation adds to an inner IPv4 packet: outer IPv4, UDP,
// GTP-U, and with psc the optional fields and the PDU Session Container.
func EncapOverhead(psc bool) int {
	n := IPv4Len + UDPLen + GTPULen
	if psc {
		n += GTPUOptLen + PSCLen
	}
	return n
}

// MinFrameSize is the smallest frame (with FCS) that holds the headers and the payload header:
// GTP-U encapsulated when encap, with a PDU Session Container when psc.
func MinFrameSize(encap, psc bool) int {
	n := EthLen + IPv4Len + UDPLen + PayloadHeaderLen + FCSLen
	if encap {
		n += EncapOverhead(psc)
	}
	return max(n, 64)
}

// Tunnel is a GTP-U encapsulation.
type Tunnel struct {
	Src, Dst netip.Addr // outer IPv4 addresses
	TEID     uint32
	// PSC adds a PDU Session Container with QFI and PDUType.
	PSC     bool
	QFI     uint8
	PDUType uint8
}

// Flow is what one generated frame carries.
type Flow struct {
	ID             uint32
	SrcMAC, DstMAC net.HardwareAddr
	// Src and Dst are the inner (end to end) IPv4 addresses and UDP ports.
	Src, Dst netip.AddrPort
	// Tunnel, when set, encapsulates the inner packet in GTP-U.
	Tunnel *Tunnel
}

// Frame is a built frame.
type Frame struct {
	// Data is the frame without FCS: FrameSize-4 bytes.
	Data []byte
	// SeqOffset is where the 32-bit big-endian sequence number sits in Data.
	SeqOffset int
	// PayloadOffset is where the inner UDP payload (Magic) starts in Data.
	PayloadOffset int
}

// Build returns the frame of f that is frameSize bytes long with its FCS.
func Build(f Flow, frameSize int) (Frame, error) {
	encap := f.Tunnel != nil
	psc := encap && f.Tunnel.PSC
	if minSize := MinFrameSize(encap, psc); frameSize < minSize || frameSize > MaxFrameSize {
		return Frame{}, fmt.Errorf("pkt: frame size %d is outside %d..%d for this layout", frameSize, minSize, MaxFrameSize)
	}
	if len(f.SrcMAC) != 6 || len(f.DstMAC) != 6 {
		return Frame{}, errors.New("pkt: source and destination MAC addresses must be 6 bytes")
	}
	if !f.Src.Addr().Is4() || !f.Dst.Addr().Is4() || encap && (!f.Tunnel.Src.Is4() || !f.Tunnel.Dst.Is4()) {
		return Frame{}, errors.New("pkt: addresses must be IPv4")
	}
	if encap && f.Tunnel.QFI > 63 {
		return Frame{}, fmt.Errorf("pkt: QFI %d is above 63", f.Tunnel.QFI)
	}
	b := make([]byte, frameSize-FCSLen)
	copy(b[0:6], f.DstMAC)
	copy(b[6:12], f.SrcMAC)
	binary.BigEndian.PutUint16(b[12:14], 0x0800)
	off := EthLen
	if encap {
		t := f.Tunnel
		ipv4(b[off:], len(b)-off, t.Src, t.Dst)
		off += IPv4Len
		udp(b[off:], len(b)-off, GTPUPort, GTPUPort)
		off += UDPLen
		gtpLen := len(b) - off - GTPULen
		flags := byte(0x30) // version 1, PT 1
		if psc {
			flags |= 0x04 // E
		}
		b[off], b[off+1] = flags, 0xff // G-PDU
		binary.BigEndian.PutUint16(b[off+2:], uint16(gtpLen))
		binary.BigEndian.PutUint32(b[off+4:], t.TEID)
		off += GTPULen
		if psc {
			b[off+3] = 0x85 // next: PDU Session Container
			off += GTPUOptLen
			b[off] = 1 // length in 4-octet units
			b[off+1] = t.PDUType << 4
			b[off+2] = t.QFI & 0x3f
			b[off+3] = 0 // no further extension
			off += PSCLen
		}
	}
	ipv4(b[off:], len(b)-off, f.Src.Addr(), f.Dst.Addr())
	off += IPv4Len
	udp(b[off:], len(b)-off, f.Src.Port(), f.Dst.Port())
	off += UDPLen
	pay := off
	binary.BigEndian.PutUint32(b[off:], Magic)
	binary.BigEndian.PutUint32(b[off+4:], f.ID)
	for i := PayloadHeaderLen; i < len(b)-pay; i++ {
		b[pay+i] = Filler(i)
	}
	return Frame{Data: b, SeqOffset: pay + 8, PayloadOffset: pay}, nil
}

func ipv4(b []byte, total int, src, dst netip.Addr) {
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(total))
	b[6] = 0x40 // DF
	b[8] = 64
	b[9] = 17 // UDP
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:], Checksum(b[:IPv4Len]))
}

func udp(b []byte, length int, sport, dport uint16) {
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(length))
}

// Checksum is the Internet checksum of b.
func Checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Decoded is what Decode read from a frame.
type Decoded struct {
	SrcMAC, DstMAC net.HardwareAddr
	// Tunnel is set when the frame is GTP-U (UDP to port 2152) G-PDU; QFI and PDUType are
	// set when it has a PDU Session Container.
	Tunnel   *Tunnel
	Src, Dst netip.AddrPort // inner
	// Len is the frame length without FCS as the IPv4 header declares it.
	Len    int
	FlowID uint32
	Seq    uint32
	// Captured is how many payload bytes (after the payload header) were present and checked
	// against Filler.
	Captured int
}

// Decode reads a frame, or its first bytes (a sample): everything up to and including the
// payload header must be present; the payload after it is checked as far as it is present.
// It fails on anything Build would not produce: another EtherType, IPv4 options, a bad IPv4
// header checksum, not UDP, a G-PDU with options other than one PDU Session Container, a
// wrong Magic, a Filler byte out of place.
func Decode(b []byte) (Decoded, error) {
	var d Decoded
	if len(b) < EthLen {
		return d, errors.New("pkt: shorter than an Ethernet header")
	}
	d.DstMAC = net.HardwareAddr(append([]byte(nil), b[0:6]...))
	d.SrcMAC = net.HardwareAddr(append([]byte(nil), b[6:12]...))
	if et := binary.BigEndian.Uint16(b[12:]); et != 0x0800 {
		return d, fmt.Errorf("pkt: EtherType %#04x, want IPv4", et)
	}
	off := EthLen
	src, dst, total, err := readIPv4UDP(b, off)
	if err != nil {
		return d, err
	}
	d.Len = EthLen + total
	off += IPv4Len + UDPLen
	if dst.Port() == GTPUPort {
		t := &Tunnel{Src: src.Addr(), Dst: dst.Addr()}
		if len(b) < off+GTPULen {
			return d, errors.New("pkt: GTP-U header cut off")
		}
		flags, typ := b[off], b[off+1]
		if flags&0xf0 != 0x30 || typ != 0xff {
			return d, fmt.Errorf("pkt: GTP-U flags %#02x type %d, want version 1 G-PDU", flags, typ)
		}
		if flags&0x03 != 0 {
			return d, fmt.Errorf("pkt: GTP-U flags %#02x: sequence or N-PDU number present", flags)
		}
		t.TEID = binary.BigEndian.Uint32(b[off+4:])
		gtpLen := int(binary.BigEndian.Uint16(b[off+2:]))
		if want := total - IPv4Len - UDPLen - GTPULen; gtpLen != want {
			return d, fmt.Errorf("pkt: GTP-U length %d, want %d", gtpLen, want)
		}
		off += GTPULen
		if flags&0x04 != 0 {
			if len(b) < off+GTPUOptLen+PSCLen {
				return d, errors.New("pkt: GTP-U extension header cut off")
			}
			if b[off+3] != 0x85 || b[off+4] != 1 || b[off+7] != 0 {
				return d, errors.New("pkt: GTP-U extension is not one PDU Session Container of length 1")
			}
			t.PSC = true
			t.PDUType = b[off+5] >> 4
			t.QFI = b[off+6] & 0x3f
			off += GTPUOptLen + PSCLen
		}
		d.Tunnel = t
		if src, dst, _, err = readIPv4UDP(b, off); err != nil {
			return d, fmt.Errorf("inner: %w", err)
		}
		off += IPv4Len + UDPLen
	}
	d.Src, d.Dst = src, dst
	if len(b) < off+PayloadHeaderLen {
		return d, errors.New("pkt: payload header cut off")
	}
	if m := binary.BigEndian.Uint32(b[off:]); m != Magic {
		return d, fmt.Errorf("pkt: payload magic %#08x, want %#08x", m, Magic)
	}
	d.FlowID = binary.BigEndian.Uint32(b[off+4:])
	d.Seq = binary.BigEndian.Uint32(b[off+8:])
	end := min(len(b), d.Len)
	for i := off + PayloadHeaderLen; i < end; i++ {
		if want := Filler(i - off); b[i] != want {
			return d, fmt.Errorf("pkt: payload byte %d is %#02x, want %#02x", i-off, b[i], want)
		}
	}
	d.Captured = max(0, end-off-PayloadHeaderLen)
	return d, nil
}

// readIPv4UDP reads the IPv4 and UDP headers at off: addresses with ports, and the IPv4
// total length.
func readIPv4UDP(b []byte, off int) (src, dst netip.AddrPort, total int, err error) {
	if len(b) < off+IPv4Len+UDPLen {
		return src, dst, 0, errors.New("pkt: IPv4 or UDP header cut off")
	}
	ip := b[off : off+IPv4Len]
	if ip[0] != 0x45 {
		return src, dst, 0, fmt.Errorf("pkt: IPv4 version/IHL %#02x, want 0x45", ip[0])
	}
	if Checksum(ip) != 0 {
		return src, dst, 0, errors.New("pkt: bad IPv4 header checksum")
	}
	if ip[9] != 17 {
		return src, dst, 0, fmt.Errorf("pkt: IP protocol %d, want UDP", ip[9])
	}
	total = int(binary.BigEndian.Uint16(ip[2:]))
	u := b[off+IPv4Len:]
	if ul := int(binary.BigEndian.Uint16(u[4:])); ul != total-IPv4Len {
		return src, dst, 0, fmt.Errorf("pkt: UDP length %d, want %d", ul, total-IPv4Len)
	}
	sa, da := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	src = netip.AddrPortFrom(sa, binary.BigEndian.Uint16(u[0:]))
	dst = netip.AddrPortFrom(da, binary.BigEndian.Uint16(u[2:]))
	return src, dst, total, nil
}

// Check compares a decoded frame with the flow it should carry: inner addresses and ports,
// flow id, and the tunnel (TEID, outer addresses, QFI and PDU type when there is a PDU
// Session Container) when want has one; a frame with a tunnel when want has none, or the
// reverse, is wrong. MAC addresses are not compared: forwarding rewrites them.
func Check(want Flow, got Decoded) error {
	var errs []error
	if got.FlowID != want.ID {
		errs = append(errs, fmt.Errorf("flow id %d, want %d", got.FlowID, want.ID))
	}
	if got.Src != want.Src || got.Dst != want.Dst {
		errs = append(errs, fmt.Errorf("inner %v → %v, want %v → %v", got.Src, got.Dst, want.Src, want.Dst))
	}
	switch w, g := want.Tunnel, got.Tunnel; {
	case w == nil && g != nil:
		errs = append(errs, fmt.Errorf("GTP-U encapsulated (TEID %#x), want plain IPv4", g.TEID))
	case w != nil && g == nil:
		errs = append(errs, fmt.Errorf("plain IPv4, want GTP-U with TEID %#x", w.TEID))
	case w != nil:
		if g.TEID != w.TEID {
			errs = append(errs, fmt.Errorf("TEID %#x, want %#x", g.TEID, w.TEID))
		}
		if g.Src != w.Src || g.Dst != w.Dst {
			errs = append(errs, fmt.Errorf("outer %v → %v, want %v → %v", g.Src, g.Dst, w.Src, w.Dst))
		}
		if g.PSC != w.PSC {
			errs = append(errs, fmt.Errorf("PDU Session Container present %v, want %v", g.PSC, w.PSC))
		} else if w.PSC && (g.QFI != w.QFI || g.PDUType != w.PDUType) {
			errs = append(errs, fmt.Errorf("QFI %d PDU type %d, want QFI %d PDU type %d", g.QFI, g.PDUType, w.QFI, w.PDUType))
		}
	}
	return errors.Join(errs...)
}
