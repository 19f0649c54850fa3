package datapath

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Packet builders for the datapath tests. GTP-U headers are written byte by byte so that
// malformed ones can be made as easily as good ones.

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	for _, l := range ls {
		if n, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			for _, m := range ls {
				if ip, ok := m.(*layers.IPv4); ok {
					_ = n.SetNetworkLayerForChecksum(ip)
				}
			}
		}
	}
	// gopacket pads a frame to Ethernet's 60-byte minimum; the datapath does not (veth and
	// the NIC do), so the Ethernet header is written here by hand.
	var head []byte
	if eth, ok := ls[0].(*layers.Ethernet); ok {
		head = concat(eth.DstMAC, eth.SrcMAC, binary.BigEndian.AppendUint16(nil, uint16(eth.EthernetType)))
		ls = ls[1:]
	}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return concat(head, buf.Bytes())
}

func ethernet(src, dst net.HardwareAddr, typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: typ}
}

func ipv4(src, dst netip.Addr, proto layers.IPProtocol, ttl uint8) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: ttl, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

// innerUDP is a UE's packet: IPv4/UDP with a payload, checksums valid.
func innerUDP(t testing.TB, src, dst netip.Addr, sport, dport uint16, ttl uint8, payload string) []byte {
	return innerUDPTOS(t, src, dst, sport, dport, ttl, 0x28, payload) // some DSCP, to see it copied to the outer header
}

// innerUDPTOS is innerUDP with the given ToS.
func innerUDPTOS(t testing.TB, src, dst netip.Addr, sport, dport uint16, ttl, tos uint8, payload string) []byte {
	ip := ipv4(src, dst, layers.IPProtocolUDP, ttl)
	ip.TOS = tos
	return serialize(t, ip, &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)},
		gopacket.Payload(payload))
}

var (
	ueAddr  = netip.MustParseAddr("10.45.0.2")
	payload = "hello from the UE, 32 bytes long"
)

// gtpHdr builds a GTP-U header (flags, type, TEID) followed by opt (optional fields and
// extension headers) and payload, with the length field computed.
func gtpHdr(flags, typ byte, teid uint32, opt, payload []byte) []byte {
	b := make([]byte, 8, 8+len(opt)+len(payload))
	b[0], b[1] = flags, typ
	binary.BigEndian.PutUint16(b[2:], uint16(len(opt)+len(payload)))
	binary.BigEndian.PutUint32(b[4:], teid)
	return append(append(b, opt...), payload...)
}

// withGTPLength sets the length field of the GTP-U header gtp to n, whatever follows it.
func withGTPLength(gtp []byte, n uint16) []byte {
	binary.BigEndian.PutUint16(gtp[2:], n)
	return gtp
}

// optPSC is the optional-fields word with next type 0x85 and an uplink PDU Session Container.
func optPSC(qfi byte) []byte { return []byte{0, 0, 0, 0x85, 1, 0x10, qfi, 0} }

// outerGTP wraps gtp in Ethernet/IPv4/UDP from the gNB to the N3 address.
func outerGTP(t testing.TB, gtp []byte, mod func(*layers.IPv4)) []byte {
	ip := ipv4(addrGNB, addrN3, layers.IPProtocolUDP, 64)
	if mod != nil {
		mod(ip)
	}
	return serialize(t, ethernet(macGNB, macN3, layers.EthernetTypeIPv4), ip,
		&layers.UDP{SrcPort: 2152, DstPort: 2152}, gopacket.Payload(gtp))
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func ethBytes(src, dst net.HardwareAddr) []byte {
	return concat(dst, src, []byte{0x08, 0x00})
}

func dump(b []byte) string {
	return gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default).Dump()
}
