package modules

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Frames are written byte by byte, so that the expected output says exactly what the
// datapath must write (checksums, DF, TTLs, the outer source port) and nothing is left to a
// library's defaults.

// frames are the measured uplink and downlink frames of cfg at stage and what the datapath
// must make of them.
func frames(c config, stage int) []packetCase {
	ue, server, gnb := ueAddr(c.measured()), c.server(), gnbAddr(c.measuredGNB())
	toDN := ethernet(hopMAC(c.serverHop()), macN6)
	toGNB := ethernet(gnbMAC(c.measuredGNB()), macN3)
	ulIn := ipUDP(ue, server, c.uePort(), serverPort, 64, payload)
	dlIn := ipUDP(server, ue, serverPort, c.uePort(), 64, payload)
	ulOut := ipUDP(ue, server, c.uePort(), serverPort, 63, payload)
	dlOut := ipUDP(server, ue, serverPort, c.uePort(), 63, payload)

	// Downlink arrives from the data network's next hop either way.
	dl := packetCase{name: Downlink, in: concat(ethernet(macN6, hopMAC(c.serverHop())), dlIn)}
	ul := packetCase{name: Uplink}
	if stage == stageRouting {
		// The UE's packet as it would leave the tunnel, from the gNB's side.
		ul.in = concat(ethernet(macN3, gnbMAC(c.measuredGNB())), ulIn)
		dl.want = concat(toGNB, dlOut)
	} else {
		gtp := gtpu(uplinkTEID(c.measured()), pscUplink, c.measuredQFI(), ulIn)
		ul.in = concat(ethernet(macN3, gnbMAC(c.measuredGNB())), ipv4(gnb, addrN3, 64, false, udp(gtpuPort, gtpuPort, gtp)))
		gtp = gtpu(downlinkTEID(c.measured()), pscDownlink, c.measuredQFI(), dlOut)
		outer := ipv4(addrN3, gnb, 64, true, udp(outerSourcePort(dlOut), gtpuPort, gtp))
		dl.want = concat(toGNB, outer)
	}
	ul.want = concat(toDN, ulOut)
	return []packetCase{ul, dl}
}

const (
	gtpuPort    = 2152
	pscUplink   = 1 << 4 // PDU type 1 (UL PDU SESSION INFORMATION), TS 38.415
	pscDownlink = 0      // PDU type 0 (DL PDU SESSION INFORMATION)
)

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func ethernet(dst, src net.HardwareAddr) []byte {
	return concat(dst, src, []byte{0x08, 0x00})
}

// ipv4 is an IPv4 header of ToS 0, id 0 and no options before payload, a UDP datagram
// (every packet here is one), with its checksum.
func ipv4(src, dst netip.Addr, ttl byte, df bool, payload []byte) []byte {
	h := make([]byte, 20, 20+len(payload))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	if df {
		h[6] = 0x40
	}
	h[8], h[9] = ttl, 17
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], checksum(h))
	return append(h, payload...)
}

// udp is a UDP header before payload, without a checksum (allowed over IPv4; the datapath
// neither checks nor writes one).
func udp(sport, dport uint16, payload []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, sport)
	h = binary.BigEndian.AppendUint16(h, dport)
	h = binary.BigEndian.AppendUint16(h, uint16(8+len(payload)))
	h = append(h, 0, 0)
	return append(h, payload...)
}

// ipUDP is a UE's or a server's packet.
func ipUDP(src, dst netip.Addr, sport, dport uint16, ttl byte, payload []byte) []byte {
	return ipv4(src, dst, ttl, false, udp(sport, dport, payload))
}

// gtpu is a G-PDU carrying inner with a PDU Session Container (the sequence number and
// N-PDU fields present but unused, as every gNB and the datapath write them).
func gtpu(teid uint32, pduType, qfi byte, inner []byte) []byte {
	ext := []byte{0, 0, 0, 0x85, 1, pduType, qfi, 0}
	h := []byte{0x34, 0xff} // version 1, PT, E; G-PDU
	h = binary.BigEndian.AppendUint16(h, uint16(len(ext)+len(inner)))
	h = binary.BigEndian.AppendUint32(h, teid)
	return concat(h, ext, inner)
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// outerSourcePort is the outer UDP source port the datapath gives inner, an IPv4/UDP
// packet: bpf/lib/encap.h's flow hash of the inner addresses, protocol and ports, in the
// dynamic range. The datapath reads those fields as native-endian words, and so does this.
func outerSourcePort(inner []byte) uint16 {
	saddr := binary.NativeEndian.Uint32(inner[12:])
	daddr := binary.NativeEndian.Uint32(inner[16:])
	ports := uint32(binary.NativeEndian.Uint16(inner[20:]))<<16 | uint32(binary.NativeEndian.Uint16(inner[22:]))
	h := saddr ^ daddr*0x9E3779B1 ^ ports*0x85EBCA6B ^ uint32(inner[9])
	h ^= h >> 16
	h *= 0x85EBCA6B
	h ^= h >> 13
	h *= 0xC2B2AE35
	h ^= h >> 16
	return uint16(0xC000 | h&0x3FFF)
}
