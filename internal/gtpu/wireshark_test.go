package gtpu

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/tshark"
)

// TestWiresharkDecodesGTPUSignalling: the GTP-U messages xupf sends itself, an Error
// Indication (IPv4 and IPv6 peer) and an End Marker, decode cleanly in Wireshark's GTP
// dissector, with their IEs.
func TestWiresharkDecodesGTPUSignalling(t *testing.T) {
	sent := [][]byte{
		ErrorIndication{TEID: 0x11223344, Peer: netip.MustParseAddr("10.100.1.1")}.Marshal(),
		ErrorIndication{TEID: 7, Peer: netip.MustParseAddr("2001:db8::1")}.Marshal(),
		EndMarker(0x500),
	}
	text := tshark.Decode(t, Port, sent)
	for _, want := range []string{"Message Type: Error indication (0x1a)", "Message Type: End Marker (0xfe)",
		"TEID Data I: 0x11223344", "GSN address IPv4: 10.100.1.1", "GSN address IPv6: 2001:db8::1"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in Wireshark's decoding:\n%s", want, text)
		}
	}
	if c := strings.Count(text, "GPRS Tunneling Protocol"); c != len(sent) {
		t.Errorf("Wireshark saw %d GTP-U messages, want %d", c, len(sent))
	}
}
