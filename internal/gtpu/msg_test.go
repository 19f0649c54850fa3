package gtpu

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
)

// TestErrorIndicationWire: the bytes TS 29.281 7.3.1 gives an Error Indication, and back.
func TestErrorIndicationWire(t *testing.T) {
	e := ErrorIndication{TEID: 0x11223344, Peer: netip.MustParseAddr("10.100.1.1")}
	want, _ := hex.DecodeString("321a0010" + "00000000" + "00000000" + "1011223344" + "850004" + "0a640101")
	got := e.Marshal()
	if !bytes.Equal(got, want) {
		t.Fatalf("Error Indication\n got %x\nwant %x", got, want)
	}
	back, err := ParseErrorIndication(got)
	if err != nil || back != e {
		t.Errorf("parsed back %+v %v, want %+v", back, err, e)
	}
	// A sender's extension header (UDP Port) and Recovery IE are walked over.
	withExt, _ := hex.DecodeString("361a0016" + "00000000" + "00000040" + "01085600" + "0e00" + "1011223344" +
		"850004" + "0a640101" + "ff") // the trailing octet is padding after the message
	if back, err := ParseErrorIndication(withExt); err != nil || back != e {
		t.Errorf("with an extension header: %+v %v", back, err)
	}
}

func TestEndMarkerWire(t *testing.T) {
	if got := hex.EncodeToString(EndMarker(0x500)); got != "30fe000000000500" {
		t.Errorf("End Marker %s", got)
	}
}

// FuzzParseErrorIndication: any bytes give an Error Indication or an error, never a panic,
// and what parses encodes back to a message that parses the same.
func FuzzParseErrorIndication(f *testing.F) {
	f.Add(ErrorIndication{TEID: 7, Peer: netip.MustParseAddr("192.0.2.1")}.Marshal())
	f.Add(ErrorIndication{TEID: 7, Peer: netip.MustParseAddr("2001:db8::1")}.Marshal())
	f.Add(EndMarker(9))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseErrorIndication(b)
		if err != nil {
			return
		}
		if again, err := ParseErrorIndication(e.Marshal()); err != nil || again != e {
			t.Fatalf("%+v encodes to something that parses as %+v, %v", e, again, err)
		}
	})
}
