package testbed

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// The relay's hand-written G-PDU header must be what BuildGPDU (gopacket) produces, and its
// parser must find the inner packet behind any header the UPF may send.
func TestRelayGTPUHeader(t *testing.T) {
	inner, err := BuildIPv4UDP(netip.MustParseAddrPort("10.45.0.2:40000"), netip.MustParseAddrPort("10.100.6.2:5001"), []byte("relay"))
	if err != nil {
		t.Fatal(err)
	}
	for _, qfi := range []uint8{0, 9} {
		want, err := BuildGPDU(0x12345678, qfi, inner)
		if err != nil {
			t.Fatal(err)
		}
		h := gtpuHeaderLen(qfi)
		got := make([]byte, h+len(inner))
		copy(got[h:], inner)
		putGTPUHeader(got, 0x12345678, qfi, len(inner))
		if !bytes.Equal(got, want) {
			t.Errorf("qfi %d: relay G-PDU\n% x\nwant (BuildGPDU)\n% x", qfi, got, want)
		}
		teid, in, err := parseGPDU(want)
		if err != nil || teid != 0x12345678 || !bytes.Equal(in, inner) {
			t.Errorf("qfi %d: parse: TEID 0x%x, inner % x, %v", qfi, teid, in, err)
		}
	}
}

func TestParseGPDU(t *testing.T) {
	inner := []byte{0x45, 1, 2, 3}
	for _, tc := range []struct {
		name string
		pdu  []byte
		err  bool
	}{
		// Downlink PSC (type 0, QFI 5), as the UPF sends it, with a trailing byte past the
		// length field (ignored).
		{"dl psc", append([]byte{0x34, 0xff, 0, 12, 0, 0, 0, 7, 0, 0, 0, 0x85, 1, 0x00, 5, 0}, append(inner, 0xee)...), false},
		// S flag only: the optional fields without extensions.
		{"seq", append([]byte{0x32, 0xff, 0, 8, 0, 0, 0, 7, 0, 9, 0, 0}, inner...), false},
		// Two extension headers chained.
		{"two ext", append([]byte{0x34, 0xff, 0, 16, 0, 0, 0, 7, 0, 0, 0, 0x40, 1, 0xaa, 0xbb, 0x85, 1, 0x00, 5, 0}, inner...), false},
		{"length beyond", []byte{0x30, 0xff, 0, 10, 0, 0, 0, 7, 0x45}, true},
		{"empty ext", append([]byte{0x34, 0xff, 0, 8, 0, 0, 0, 7, 0, 0, 0, 0x85}, 0, 0, 0, 0), true},
		{"gtpv0", append([]byte{0x10, 0xff, 0, 4, 0, 0, 0, 7}, inner...), true},
	} {
		teid, got, err := parseGPDU(tc.pdu)
		switch {
		case tc.err && err == nil:
			t.Errorf("%s: parsed as TEID 0x%x, inner % x; want an error", tc.name, teid, got)
		case !tc.err && (err != nil || teid != 7 || !bytes.Equal(got, inner)):
			t.Errorf("%s: TEID 0x%x, inner % x, %v; want 0x7, % x", tc.name, teid, got, err, inner)
		}
	}
	echo, err := BuildEchoRequest(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseGPDU(echo); !errors.Is(err, errNotGPDU) {
		t.Errorf("echo request: %v, want errNotGPDU", err)
	}
}

func TestParseSNMP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snmp")
	data := "Ip: Forwarding DefaultTTL\nIp: 2 64\n" +
		"Tcp: RtoAlgorithm MaxConn InSegs InCsumErrors\nTcp: 1 -1 100 3\n" +
		"Udp: InDatagrams NoPorts InCsumErrors\nUdp: 10 2 7\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := parseSNMP(f)
	if err != nil {
		t.Fatal(err)
	}
	if m["Tcp"]["InCsumErrors"] != 3 || m["Udp"]["InCsumErrors"] != 7 || m["Ip"]["DefaultTTL"] != 64 {
		t.Errorf("parsed %v", m)
	}
}
