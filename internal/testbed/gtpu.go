package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// GTP-U constants (TS 29.281, TS 38.415).
const (
	GTPUEchoRequest  = 1
	GTPUEchoResponse = 2
	GTPUGPDU         = 255

	ExtPDUSessionContainer = 0x85
	// PDU types of the PDU Session Container (high nibble of its first octet).
	PDUTypeDL = 0
	PDUTypeUL = 1

	RecoveryIE = 14
	// InnerTTL is the TTL of every inner packet the helpers send.
	InnerTTL = 64
)

var serializeOpts = gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}

// BuildIPv4UDP builds an IPv4/UDP packet from src to dst with TTL InnerTTL, both checksums
// computed: the T-PDU of a G-PDU as a UE would send it.
func BuildIPv4UDP(src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	ip := &layers.IPv4{
		Version:  4,
		TTL:      InnerTTL,
		Protocol: layers.IPProtocolUDP,
		Flags:    layers.IPv4DontFragment,
		SrcIP:    src.Addr().AsSlice(),
		DstIP:    dst.Addr().AsSlice(),
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		return nil, fmt.Errorf("testbed: udp checksum layer: %w", err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, ip, udp, gopacket.Payload(payload)); err != nil {
		return nil, fmt.Errorf("testbed: serialize inner packet: %w", err)
	}
	return buf.Bytes(), nil
}

// BuildGPDU wraps the T-PDU inner in a G-PDU with teid. A qfi other than 0 adds an uplink PDU
// Session Container (E flag, next extension 0x85, [len 1, UL PDU type 1, qfi, next 0]).
func BuildGPDU(teid uint32, qfi uint8, inner []byte) ([]byte, error) {
	gtp := &layers.GTPv1U{Version: 1, ProtocolType: 1, MessageType: GTPUGPDU, TEID: teid}
	if qfi != 0 {
		gtp.GTPExtensionHeaders = []layers.GTPExtensionHeader{{
			Type:    ExtPDUSessionContainer,
			Content: []byte{PDUTypeUL << 4, qfi & 0x3f},
		}}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, gtp, gopacket.Payload(inner)); err != nil {
		return nil, fmt.Errorf("testbed: serialize G-PDU: %w", err)
	}
	return buf.Bytes(), nil
}

// BuildEchoRequest builds a GTP-U Echo Request: S flag, sequence number seq, TEID 0, no IE.
func BuildEchoRequest(seq uint16) ([]byte, error) {
	gtp := &layers.GTPv1U{
		Version: 1, ProtocolType: 1, MessageType: GTPUEchoRequest,
		SequenceNumberFlag: true, SequenceNumber: seq,
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gtp.SerializeTo(buf, serializeOpts); err != nil {
		return nil, fmt.Errorf("testbed: serialize echo request: %w", err)
	}
	return buf.Bytes(), nil
}

// GTPUPacket is a received GTP-U datagram, decoded.
type GTPUPacket struct {
	OuterSrc netip.AddrPort
	OuterDst netip.Addr
	OuterTTL uint8

	MsgType uint8
	TEID    uint32
	Flags   uint8 // first octet: version, PT, E, S, PN
	Seq     uint16
	// HasPSC is set when a PDU Session Container is present; then PDUType and QFI hold its
	// fields.
	HasPSC  bool
	PDUType uint8
	QFI     uint8
	// IEs are the information elements of a signalling message (Echo Response).
	IEs []byte

	// Inner packet of a G-PDU.
	InnerSrc, InnerDst netip.AddrPort
	InnerTTL           uint8
	Payload            []byte
	// IPChecksumOK and UDPChecksumOK say whether the inner checksums verify. Our senders
	// always fill in the UDP checksum, so 0 (none) counts as not OK.
	IPChecksumOK, UDPChecksumOK bool
}

// DecodeGTPU decodes a datagram received on the gNB's GTP-U socket.
func DecodeGTPU(d Datagram) (GTPUPacket, error) {
	p := GTPUPacket{OuterSrc: d.Src, OuterDst: d.Dst, OuterTTL: d.TTL}
	pkt := gopacket.NewPacket(d.Data, layers.LayerTypeGTPv1U, gopacket.Default)
	gl, ok := pkt.Layer(layers.LayerTypeGTPv1U).(*layers.GTPv1U)
	if !ok {
		return p, fmt.Errorf("testbed: not GTP-U: %w", decodeErr(pkt))
	}
	if len(d.Data) > 0 {
		p.Flags = d.Data[0]
	}
	p.MsgType, p.TEID, p.Seq = gl.MessageType, gl.TEID, gl.SequenceNumber
	for _, ext := range gl.GTPExtensionHeaders {
		if ext.Type == ExtPDUSessionContainer && len(ext.Content) >= 2 {
			// Content starts after the length octet: [PDU type<<4 | flags, .. QFI(6)].
			p.HasPSC, p.PDUType, p.QFI = true, ext.Content[0]>>4, ext.Content[1]&0x3f
		}
	}
	if gl.MessageType != GTPUGPDU {
		p.IEs = append([]byte(nil), gl.Payload...)
		return p, nil
	}

	ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		return p, fmt.Errorf("testbed: G-PDU without inner IPv4: %w", decodeErr(pkt))
	}
	udp, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if !ok {
		return p, fmt.Errorf("testbed: G-PDU inner packet is not UDP: %w", decodeErr(pkt))
	}
	src, _ := netip.AddrFromSlice(ip.SrcIP)
	dst, _ := netip.AddrFromSlice(ip.DstIP)
	p.InnerSrc = netip.AddrPortFrom(src.Unmap(), uint16(udp.SrcPort))
	p.InnerDst = netip.AddrPortFrom(dst.Unmap(), uint16(udp.DstPort))
	p.InnerTTL = ip.TTL
	p.Payload = append([]byte(nil), udp.Payload...)
	p.IPChecksumOK = checksum(ip.Contents, 0) == 0
	p.UDPChecksumOK = udp.Checksum != 0 && udpChecksumOK(src.Unmap(), dst.Unmap(), ip.Payload)
	return p, nil
}

func decodeErr(pkt gopacket.Packet) error {
	if e := pkt.ErrorLayer(); e != nil {
		return e.Error()
	}
	return errors.New("layer missing")
}

// udpChecksumOK verifies the checksum of the UDP segment seg (header and data) over the IPv4
// pseudo-header.
func udpChecksumOK(src, dst netip.Addr, seg []byte) bool {
	s4, d4 := src.As4(), dst.As4()
	pseudo := make([]byte, 0, 12)
	pseudo = append(pseudo, s4[:]...)
	pseudo = append(pseudo, d4[:]...)
	pseudo = append(pseudo, 0, byte(layers.IPProtocolUDP))
	pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(len(seg)))
	return checksum(seg, sum16(pseudo)) == 0
}

// checksum returns the Internet checksum of b added to the partial sum initial; over data
// that includes a correct checksum field it is 0.
func checksum(b []byte, initial uint32) uint16 {
	s := initial + sum16(b)
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func sum16(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}
