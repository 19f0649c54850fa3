package testbed

import (
	"bytes"
	"net/netip"
	"testing"
)

// These run without root: they pin down the packet formats the e2e tests rely on.

func TestBuildEchoRequest(t *testing.T) {
	got, err := BuildEchoRequest(0x1234)
	if err != nil {
		t.Fatal(err)
	}
	// Version 1, PT, S; type 1; length 4 (the optional fields); TEID 0; seq; N-PDU; next 0.
	want := []byte{0x32, 0x01, 0x00, 0x04, 0, 0, 0, 0, 0x12, 0x34, 0, 0}
	if !bytes.Equal(got, want) {
		t.Errorf("echo request % x, want % x", got, want)
	}
}

func TestGPDURoundTrip(t *testing.T) {
	src := netip.MustParseAddrPort("10.45.0.2:40000")
	dst := netip.MustParseAddrPort("10.100.6.2:5001")
	inner, err := BuildIPv4UDP(src, dst, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	for _, qfi := range []uint8{0, 9} {
		pdu, err := BuildGPDU(0x100, qfi, inner)
		if err != nil {
			t.Fatal(err)
		}
		if qfi != 0 {
			// E flag; length covers 4 optional + 4 PSC + inner; next ext 0x85; PSC
			// [len 1, UL PDU type 1, QFI, next 0].
			wantHdr := []byte{0x34, 0xff, 0x00, byte(8 + len(inner)), 0, 0, 1, 0, 0, 0, 0, 0x85, 1, 0x10, qfi, 0}
			if !bytes.Equal(pdu[:16], wantHdr) {
				t.Errorf("qfi %d: header % x, want % x", qfi, pdu[:16], wantHdr)
			}
		}
		p, err := DecodeGTPU(Datagram{Data: pdu})
		if err != nil {
			t.Fatal(err)
		}
		if p.TEID != 0x100 || p.HasPSC != (qfi != 0) || p.QFI != qfi || p.InnerSrc != src || p.InnerDst != dst ||
			p.InnerTTL != InnerTTL || string(p.Payload) != "hello" || !p.IPChecksumOK || !p.UDPChecksumOK {
			t.Errorf("qfi %d: decoded %+v", qfi, p)
		}
		if qfi != 0 && p.PDUType != PDUTypeUL {
			t.Errorf("PDU type %d, want %d", p.PDUType, PDUTypeUL)
		}

		// A changed TTL without a checksum update, and a changed payload byte, must show.
		bad := append([]byte(nil), pdu...)
		off := len(pdu) - len(inner)
		bad[off+8]--            // TTL
		bad[len(bad)-1] ^= 0x20 // payload
		p, err = DecodeGTPU(Datagram{Data: bad})
		if err != nil {
			t.Fatal(err)
		}
		if p.IPChecksumOK || p.UDPChecksumOK {
			t.Errorf("qfi %d: corrupted packet verified: ip %v udp %v", qfi, p.IPChecksumOK, p.UDPChecksumOK)
		}
	}
}
