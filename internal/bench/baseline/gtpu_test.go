package baseline

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/bench/pkt"
)

// TestGTPU: the minimal GTP-U datapath turns each frame into exactly the frame
// internal/bench/pkt builds for the other side, whole (the checksum of the outer IPv4
// header included), or leaves what it does not handle to the kernel.
func TestGTPU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF programs")
	}
	lo, err := net.InterfaceByName("lo") // any interface of this namespace will do: nothing is sent
	if err != nil {
		t.Fatal(err)
	}
	gnbMAC, n3MAC := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	n6MAC, dnMAC := net.HardwareAddr{2, 0, 0, 0, 0, 3}, net.HardwareAddr{2, 0, 0, 0, 0, 4}
	gnb, n3 := netip.MustParseAddr("10.112.0.1"), netip.MustParseAddr("10.100.3.1")
	ue, srv := netip.MustParseAddrPort("10.64.0.7:40001"), netip.MustParseAddrPort("10.192.0.9:5001")
	tunnel := Tunnel{Src: n3, Dst: gnb, TEID: 0x10000007, QFI: 9}
	inner := func(src, dst net.HardwareAddr, from, to netip.AddrPort) pkt.Flow {
		return pkt.Flow{ID: 3, SrcMAC: src, DstMAC: dst, Src: from, Dst: to}
	}
	uplink := func(psc bool) pkt.Flow {
		f := inner(gnbMAC, n3MAC, ue, srv)
		f.Tunnel = &pkt.Tunnel{Src: gnb, Dst: n3, TEID: 0x1234, PSC: psc, QFI: 9, PDUType: pkt.PDUTypeUplink}
		return f
	}
	downlink := inner(n3MAC, gnbMAC, srv, ue)
	downlink.Tunnel = &pkt.Tunnel{Src: n3, Dst: gnb, TEID: tunnel.TEID, PSC: true, QFI: 9, PDUType: pkt.PDUTypeDownlink}
	const redirect, pass = 4, 2
	tests := []struct {
		name    string
		encap   *Tunnel
		in      pkt.Flow
		size    int
		want    pkt.Flow // the frame that goes out, of the same payload
		verdict uint32
	}{
		{"decap, PDU Session Container", nil, uplink(true), 128, inner(n6MAC, dnMAC, ue, srv), redirect},
		{"decap, no extension", nil, uplink(false), 128, inner(n6MAC, dnMAC, ue, srv), redirect},
		{"decap, largest frame", nil, uplink(true), pkt.MaxFrameSize, inner(n6MAC, dnMAC, ue, srv), redirect},
		{"decap leaves plain IPv4 to the kernel", nil, inner(gnbMAC, n3MAC, ue, srv), 128, inner(gnbMAC, n3MAC, ue, srv), pass},
		{"encap, smallest frame", &tunnel, inner(dnMAC, n6MAC, srv, ue), 64, downlink, redirect},
		{"encap, 1,000-byte frame", &tunnel, inner(dnMAC, n6MAC, srv, ue), 1000, downlink, redirect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, next := n6MAC, dnMAC
			if tt.encap != nil {
				out, next = n3MAC, gnbMAC
			}
			f, err := LoadGTPU(GTPUOptions{ForwardOptions: ForwardOptions{Out: lo.Index, OutMAC: out, NextHop: next}, Encap: tt.encap})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			in, err := pkt.Build(tt.in, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			// The same payload: the frame size changes by what the program adds or removes.
			wantSize := tt.size
			if tt.verdict == redirect {
				wantSize += len(payloadless(t, tt.want)) - len(payloadless(t, tt.in))
			}
			want, err := pkt.Build(tt.want, wantSize)
			if err != nil {
				t.Fatal(err)
			}
			// Room for more than the frame: a longer or shorter output must show.
			run := &ebpf.RunOptions{Data: in.Data, DataOut: make([]byte, len(want.Data)+64)}
			ret, err := f.Program().Run(run)
			if err != nil {
				t.Fatal(err)
			}
			got := run.DataOut
			if ret != tt.verdict {
				t.Errorf("verdict %d, want %d", ret, tt.verdict)
			}
			if !bytes.Equal(got, want.Data) {
				t.Errorf("out\n% x\nwant\n% x", got, want.Data)
			}
		})
	}
}

// payloadless is f's headers: its smallest frame without the payload header.
func payloadless(t *testing.T, f pkt.Flow) []byte {
	t.Helper()
	fr, err := pkt.Build(f, pkt.MaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	return fr.Data[:fr.PayloadOffset]
}
