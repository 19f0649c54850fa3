// Package tshark has Wireshark's dissectors read what xupf sends, for the tests that check
// every message it puts on the wire decodes cleanly.
package tshark

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Decode writes each payload as a UDP datagram to and from port into a capture, has tshark
// dissect it (-V) and returns what it printed. It fails t when tshark is missing or fails,
// and reports (t.Errorf) any malformed packet or error-level expert note.
func Decode(t testing.TB, port uint16, payloads [][]byte) string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatal("tshark is not installed: run `make deps` (Debian package tshark)")
	}
	path := filepath.Join(t.TempDir(), "capture.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, b := range payloads {
		frame := udpFrame(t, port, b)
		ci := gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-r", path, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	text := string(out)
	for _, bad := range []string{"Malformed", "[Expert Info (Error", "Exception occurred"} {
		if i := strings.Index(text, bad); i >= 0 {
			t.Errorf("Wireshark reports %q:\n%s", bad, text[max(0, i-1500):min(len(text), i+300)])
		}
	}
	return text
}

// udpFrame is payload in an Ethernet frame, IPv4 and UDP from and to port.
func udpFrame(t testing.TB, port uint16, payload []byte) []byte {
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 100, 3, 1), DstIP: net.IPv4(192, 0, 2, 10)}
	udp := &layers.UDP{SrcPort: layers.UDPPort(port), DstPort: layers.UDPPort(port)}
	udp.SetNetworkLayerForChecksum(ip)
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
			EthernetType: layers.EthernetTypeIPv4}, ip, udp, gopacket.Payload(payload))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}
