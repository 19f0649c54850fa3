package pkt

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

func flow(tunnel *Tunnel) Flow {
	return Flow{
		ID: 42, SrcMAC: macA, DstMAC: macB,
		Src:    netip.MustParseAddrPort("10.45.0.7:40000"),
		Dst:    netip.MustParseAddrPort("10.100.6.2:5001"),
		Tunnel: tunnel,
	}
}

func TestBuildDecodeRoundTrip(t *testing.T) {
	ul := &Tunnel{Src: netip.MustParseAddr("10.100.3.2"), Dst: netip.MustParseAddr("10.100.3.1"), TEID: 0x1234, PSC: true, QFI: 9, PDUType: PDUTypeUplink}
	noPSC := &Tunnel{Src: ul.Src, Dst: ul.Dst, TEID: 7}
	for _, c := range []struct {
		name string
		t    *Tunnel
	}{{"plain", nil}, {"gtpu-psc", ul}, {"gtpu", noPSC}} {
		for _, size := range []int{MinFrameSize(c.t != nil, c.t != nil && c.t.PSC), 128, 512, MaxFrameSize} {
			f := flow(c.t)
			fr, err := Build(f, size)
			if err != nil {
				t.Fatalf("%s/%d: %v", c.name, size, err)
			}
			if len(fr.Data) != size-FCSLen {
				t.Fatalf("%s/%d: %d bytes", c.name, size, len(fr.Data))
			}
			binary.BigEndian.PutUint32(fr.Data[fr.SeqOffset:], 99)
			d, err := Decode(fr.Data)
			if err != nil {
				t.Fatalf("%s/%d: %v", c.name, size, err)
			}
			if err := Check(f, d); err != nil {
				t.Errorf("%s/%d: %v", c.name, size, err)
			}
			if d.Seq != 99 || d.Len != len(fr.Data) || d.Captured != len(fr.Data)-fr.PayloadOffset-PayloadHeaderLen {
				t.Errorf("%s/%d: %+v", c.name, size, d)
			}
			// A 128-byte sample of the frame decodes too.
			if _, err := Decode(fr.Data[:min(len(fr.Data), 128)]); err != nil {
				t.Errorf("%s/%d sample: %v", c.name, size, err)
			}
		}
	}
}

func TestMinFrameSize(t *testing.T) {
	if got := MinFrameSize(false, false); got != 64 {
		t.Errorf("plain: %d", got)
	}
	// 14 + 20+8+8+4+4 + 20+8 + 12 + 4
	if got := MinFrameSize(true, true); got != 102 {
		t.Errorf("gtpu+psc: %d", got)
	}
	if _, err := Build(flow(&Tunnel{Src: netip.MustParseAddr("1.1.1.1"), Dst: netip.MustParseAddr("2.2.2.2"), PSC: true}), 101); err == nil {
		t.Error("101-byte GTP-U frame built")
	}
}

func TestDecodeRejects(t *testing.T) {
	f := flow(&Tunnel{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TEID: 5, PSC: true, QFI: 1})
	fr, err := Build(f, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		mutate func(b []byte)
		want   string
	}{
		{"ethertype", func(b []byte) { b[12] = 0x86 }, "EtherType"},
		{"ip checksum", func(b []byte) { b[EthLen+8]-- }, "checksum"},
		{"magic", func(b []byte) { b[fr.PayloadOffset]++ }, "magic"},
		{"filler", func(b []byte) { b[len(b)-1]++ }, "payload byte"},
		{"psc", func(b []byte) { b[EthLen+IPv4Len+UDPLen+GTPULen+3] = 0x40 }, "PDU Session Container"},
	} {
		b := append([]byte(nil), fr.Data...)
		c.mutate(b)
		if _, err := Decode(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	want := flow(&Tunnel{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TEID: 5, PSC: true, QFI: 1})
	fr, _ := Build(want, 200)
	d, err := Decode(fr.Data)
	if err != nil {
		t.Fatal(err)
	}
	other := want
	tun := *want.Tunnel
	tun.TEID, tun.QFI = 6, 2
	other.Tunnel = &tun
	other.ID = 1
	err = Check(other, d)
	for _, s := range []string{"TEID 0x5, want 0x6", "QFI 1", "flow id 42, want 1"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Check: %v, want %q", err, s)
		}
	}
	other = want
	other.Tunnel = nil
	if err := Check(other, d); err == nil || !strings.Contains(err.Error(), "want plain IPv4") {
		t.Errorf("Check plain: %v", err)
	}
}

// TestLayoutSharesTail: frames of one layout differ only before the payload filler, which is
// what the generator relies on.
func TestLayoutSharesTail(t *testing.T) {
	a, _ := Build(flow(nil), 300)
	g := flow(nil)
	g.ID, g.Src = 7, netip.MustParseAddrPort("10.45.9.9:1234")
	b, _ := Build(g, 300)
	for i := a.PayloadOffset + PayloadHeaderLen; i < len(a.Data); i++ {
		if a.Data[i] != b.Data[i] {
			t.Fatalf("byte %d differs", i)
		}
	}
}
