package modules

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// requireBPF skips when the kernel or the privileges for XDP programs are missing.
func requireBPF(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: BPF programs, XDP and network namespaces")
	}
	if err := features.HaveProgramType(ebpf.XDP); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("the kernel has no XDP programs: %v", err)
	}
}

// testOptions are small enough for CI yet keep the complex configuration's shape (flows
// with SDF filters, several gNBs and routes, many classes).
var testOptions = Options{Repeat: 5000, Rounds: 3, Sessions: 300, Classes: 40}

// TestStageFrames: for every configuration and stage, one frame each way comes out of the
// datapath exactly as expected, whole, both alone and through the restoring wrapper; and
// the stage's modules saw the packets (class, contract and usage counters), so that a
// stage whose module the packet skips is caught.
func TestStageFrames(t *testing.T) {
	requireBPF(t)
	for _, c := range configs(testOptions.withDefaults()) {
		for stage := range numStages {
			t.Run(c.name+"/"+stageNames[stage], func(t *testing.T) {
				b, err := newBench(c, stage)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := b.close(); err != nil {
						t.Error(err)
					}
				})
				for _, pc := range b.cases {
					if err := b.check(pc); err != nil {
						t.Errorf("%s: %v", pc.name, err)
					}
				}
				checkCounters(t, b)
			})
		}
	}
}

// runsPerCase is how often check runs the datapath on a frame: alone, then twice through
// the wrapper.
const runsPerCase = 3

// checkCounters checks what the modules of b's stage counted after check ran each frame.
func checkCounters(t *testing.T, b *bench) {
	t.Helper()
	c := b.cfg
	// The class each direction's packet falls in: the one class, or the last pair.
	classes := map[uint32]uint64{1: 2 * runsPerCase}
	if c.classes > 1 {
		classes = map[uint32]uint64{uint32(c.classes - 1): runsPerCase, uint32(c.classes): runsPerCase}
	}
	for id, want := range classes {
		var got, passed uint64
		if cc, err := b.dp.ClassCounters(id); err == nil {
			got = cc.Packets
		}
		if ci, err := b.dp.Contract(id); err == nil {
			passed = ci.Counters.PassedPackets
		}
		if wantCls := want * boolInt(b.stage >= stageClassifier); got != wantCls {
			t.Errorf("class %d counted %d packets, want %d", id, got, wantCls)
		}
		if wantPol := want * boolInt(b.stage >= stagePolicer); passed != wantPol {
			t.Errorf("contract of class %d passed %d packets, want %d", id, passed, wantPol)
		}
	}
	owners := []uint64{routeOwner, routeOwner + 1}
	if b.stage > stageRouting {
		owners = []uint64{uint64(c.measured() + 1)}
	}
	var counted uint64
	for _, o := range owners {
		usage, err := b.dp.Usage(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range usage {
			counted += u.Packets
		}
	}
	if want := 2 * runsPerCase * boolInt(b.stage >= stageUsage); counted != want {
		t.Errorf("usage counters counted %d packets, want %d", counted, want)
	}
}

func boolInt(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestExpectedFrames reads the expected frames with gopacket, not with the code that wrote
// them: the headers, lengths and checksums must be what a receiver sees, so the comparison
// above cannot pass on a mistake the datapath and the builders would share.
func TestExpectedFrames(t *testing.T) {
	c := configs(testOptions.withDefaults())[0] // simple: session 0
	ue, server, gnb := "10.45.0.1", "172.16.0.10", "10.0.1.10"
	cases := frames(c, stageGTPU)
	ul := decode(t, cases[0].want)
	checkIPv4(t, ul[0], ue, server, 63)
	dl := decode(t, cases[1].want)
	checkIPv4(t, dl[0], "10.0.1.1", gnb, 64)
	if dl[0].Flags != layers.IPv4DontFragment {
		t.Errorf("outer flags %v, want DF", dl[0].Flags)
	}
	checkIPv4(t, dl[1], server, ue, 63)
	p := gopacket.NewPacket(cases[1].want, layers.LayerTypeEthernet, gopacket.Default)
	g, ok := p.Layer(layers.LayerTypeGTPv1U).(*layers.GTPv1U)
	if !ok {
		t.Fatalf("downlink: no GTP-U header:\n%s", p.Dump())
	}
	if g.TEID != downlinkTEID(0) || len(g.GTPExtensionHeaders) != 1 || g.GTPExtensionHeaders[0].Type != 0x85 ||
		!bytes.Equal(g.GTPExtensionHeaders[0].Content, []byte{0, sessionQFI}) {
		t.Errorf("downlink GTP-U header: %+v", g)
	}
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth.DstMAC.String() != "02:00:00:01:00:00" || eth.SrcMAC.String() != "02:00:00:00:01:01" {
		t.Errorf("downlink Ethernet %s -> %s, want 02:00:00:00:01:01 -> 02:00:00:01:00:00", eth.SrcMAC, eth.DstMAC)
	}
	if len(cases[1].in) != 60 {
		t.Errorf("downlink input is %d bytes, want the 60 of a minimum Ethernet frame", len(cases[1].in))
	}
}

// decode returns the IPv4 headers of frame, outer first, after checking their checksums.
func decode(t *testing.T, frame []byte) []*layers.IPv4 {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("decode: %v\n%s", el.Error(), p.Dump())
	}
	var ips []*layers.IPv4
	for _, l := range p.Layers() {
		if ip, ok := l.(*layers.IPv4); ok {
			if checksum(ip.Contents) != 0 {
				t.Errorf("IPv4 %s -> %s: bad checksum %#04x", ip.SrcIP, ip.DstIP, ip.Checksum)
			}
			if int(ip.Length) != len(ip.Contents)+len(ip.Payload) {
				t.Errorf("IPv4 %s -> %s: total length %d, carries %d", ip.SrcIP, ip.DstIP, ip.Length, len(ip.Contents)+len(ip.Payload))
			}
			ips = append(ips, ip)
		}
	}
	return ips
}

func checkIPv4(t *testing.T, ip *layers.IPv4, src, dst string, ttl uint8) {
	t.Helper()
	if netip.MustParseAddr(src) != addrOf(ip.SrcIP) || netip.MustParseAddr(dst) != addrOf(ip.DstIP) || ip.TTL != ttl {
		t.Errorf("IPv4 %s -> %s TTL %d, want %s -> %s TTL %d", ip.SrcIP, ip.DstIP, ip.TTL, src, dst, ttl)
	}
}

func addrOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap()
}

// TestMeasure: a row for every configuration, direction and stage, in order, each timed.
func TestMeasure(t *testing.T) {
	requireBPF(t)
	rows, err := Measure(context.Background(), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range []string{"simple", "complex"} {
		for _, d := range []string{Uplink, Downlink} {
			for _, s := range Stages() {
				want = append(want, c+"/"+d+"/"+s)
			}
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, r := range rows {
		if got := r.Config + "/" + r.Direction + "/" + r.Stage; got != want[i] {
			t.Errorf("row %d is %s, want %s", i, got, want[i])
		}
		if r.NsPerPacket <= 0 || r.Packets != uint64(testOptions.Repeat*testOptions.Rounds) {
			t.Errorf("row %d: %+v: want ns/packet above 0 and %d packets", i, r, testOptions.Repeat*testOptions.Rounds)
		}
	}
}

// BenchmarkModules reports the median ns/packet of every row of Measure with the default
// options; run it once: go test -run '^$' -bench Modules -benchtime 1x ./internal/bench/modules/
func BenchmarkModules(b *testing.B) {
	requireBPF(b)
	rows, err := Measure(context.Background(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range rows {
		b.Run(fmt.Sprintf("%s/%s/%s", r.Config, r.Direction, r.Stage), func(b *testing.B) {
			b.ReportMetric(r.NsPerPacket, "ns/pkt")
		})
	}
}
