package datapath

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
)

var (
	clsMACs   = []string{"02:00:00:00:01:02", "02:00:00:00:02:02", "02:00:00:00:09:09"}
	clsRemote = []string{"", "", "100.64.0.0/24", "100.64.0.0/25", "100.64.0.128/26", "100.64.0.7", "203.0.113.0/24"}
	clsLocal  = []string{"", "", "10.45.0.2", "10.45.0.0/16"}
	clsPorts  = []string{"", "", "80", "1000-2000", "1500-1600", "5060", "40000-65535"}
)

func pick(rng *rand.Rand, pool []string) string { return pool[rng.IntN(len(pool))] }

// randClass draws a class over a small value space, so that classes overlap and nest.
func randClass(rng *rand.Rand, id uint32) classifier.Class {
	c := classifier.Class{ID: id, Priority: uint32(rng.IntN(5))}
	c.Direction = []string{"", "ingress", "egress", "both"}[rng.IntN(4)]
	if rng.IntN(6) == 0 {
		c.SrcMAC = pick(rng, clsMACs)
	}
	if rng.IntN(6) == 0 {
		c.DstMAC = pick(rng, clsMACs)
	}
	if rng.IntN(10) == 0 {
		c.EtherType = []string{"0x0800", "0x86dd"}[rng.IntN(2)]
	}
	c.Protocol = []string{"", "", "udp", "tcp", "icmp", "17"}[rng.IntN(6)]
	// Addresses from the UE's side or the far side, in either direction.
	if rng.IntN(2) == 0 {
		c.SrcIP, c.DstIP = pick(rng, clsLocal), pick(rng, clsRemote)
	} else {
		c.SrcIP, c.DstIP = pick(rng, clsRemote), pick(rng, clsLocal)
	}
	if c.Protocol == "udp" || c.Protocol == "tcp" || c.Protocol == "17" {
		c.SrcPort, c.DstPort = pick(rng, clsPorts), pick(rng, clsPorts)
	}
	return c
}

func macValue(s string) uint64 {
	hw, _ := net.ParseMAC(s)
	return uint64(hw[0])<<40 | uint64(hw[1])<<32 | uint64(hw[2])<<24 | uint64(hw[3])<<16 | uint64(hw[4])<<8 | uint64(hw[5])
}

// clsPacket is a random packet of the sessPlain session in one direction, as bytes and as
// the classifier's reference sees it.
func clsPacket(t testing.TB, rng *rand.Rand, uplink bool) ([]byte, classifier.Packet) {
	p := diffPkt{}
	p.Protocol = []uint8{6, 17, 1}[rng.IntN(3)]
	p.Remote = diffRemotes[rng.IntN(len(diffRemotes))]
	p.Local = sessPlain.UE
	if uplink && rng.IntN(3) == 0 {
		p.Local = netip.MustParseAddr("10.45.7.1") // a source the UE should not use
	}
	p.RemotePort = diffPorts[rng.IntN(len(diffPorts))]
	p.LocalPort = diffPorts[rng.IntN(len(diffPorts))]
	p.fragment = rng.IntN(12) == 0
	p.HasPorts = !p.fragment && p.Protocol != 1
	srcMAC, dstMAC := pick(rng, clsMACs), pick(rng, clsMACs)
	hwSrc, _ := net.ParseMAC(srcMAC)
	hwDst, _ := net.ParseMAC(dstMAC)
	cp := classifier.Packet{SrcMAC: macValue(srcMAC), DstMAC: macValue(dstMAC), EtherType: 0x0800,
		Protocol: p.Protocol, HasPorts: p.HasPorts}
	var pkt []byte
	if uplink {
		cp.Direction = classifier.DirUplink
		cp.SrcIP, cp.DstIP, cp.SrcPort, cp.DstPort = p.Local, p.Remote, p.LocalPort, p.RemotePort
		outer := outerGTP(t, gtpHdr(0x30, 255, sessPlain.UplinkTEID, nil, p.inner(t, true)), nil)
		pkt = concat(hwDst, hwSrc, outer[12:])
	} else {
		cp.Direction = classifier.DirDownlink
		cp.SrcIP, cp.DstIP, cp.SrcPort, cp.DstPort = p.Remote, p.Local, p.RemotePort, p.LocalPort
		pkt = concat(ethBytes(hwSrc, hwDst), p.inner(t, false))
	}
	return pkt, cp
}

// compileClasses parses and compiles classes, failing t on an invalid one.
func compileClasses(t testing.TB, classes ...classifier.Class) ([]classifier.Rule, classifier.Compiled) {
	t.Helper()
	rules := make([]classifier.Rule, 0, len(classes))
	for _, c := range classes {
		r, err := c.Parse()
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	compiled, err := classifier.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	return rules, compiled
}

// setClasses makes classes the datapath's.
func (e *testEnv) setClasses(t testing.TB, classes ...classifier.Class) {
	t.Helper()
	_, compiled := compileClasses(t, classes...)
	if err := e.dp.SetClasses(compiled); err != nil {
		t.Fatalf("set %d classes: %v", len(classes), err)
	}
}

func describeClasses(cs []classifier.Class) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %+v\n", c)
	}
	return b.String()
}

// TestClassifierDifferential applies random class sets (up to 700 classes, so vectors span
// several words) and checks the class the datapath counts for
// random packets, both directions, against the one-by-one reference.
func TestClassifierDifferential(t *testing.T) {
	e := newTestEnv(t, 4)
	// Some uplink packets come from another source than the UE's, to be classified by it:
	// anti-spoofing must let them through.
	anySource := sessPlain
	anySource.AllowAnySource = true
	if err := e.addSession(anySource); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	checked := 0
	for iter := range 30 {
		n := []int{1, 3, 10, 64, 65, 130, 700}[iter%7]
		var classes []classifier.Class
		for i := range n {
			classes = append(classes, randClass(rng, uint32(i+1)))
		}
		rules, compiled := compileClasses(t, classes...)
		if err := e.dp.SetClasses(compiled); err != nil {
			t.Fatalf("set %d classes: %v", n, err)
		}
		for range 60 {
			uplink := rng.IntN(2) == 0
			pkt, cp := clsPacket(t, rng, uplink)
			want, ok := classifier.Match(rules, cp)
			var before session.Counters
			if ok {
				before, _ = e.dp.ClassCounters(want)
			}
			st0, _ := e.dp.Stats()
			ifindex := e.n6
			if uplink {
				ifindex = e.n3
			}
			if ret, _ := e.run(t, pkt, ifindex); ret != xdpRedirect {
				t.Fatalf("verdict %s", verdictNames[ret])
			}
			st1, _ := e.dp.Stats()
			hit := st1.Counters["cls_hit"] - st0.Counters["cls_hit"]
			miss := st1.Counters["cls_miss"] - st0.Counters["cls_miss"]
			good := ok && hit == 1 && miss == 0 || !ok && hit == 0 && miss == 1
			if ok && good {
				after, _ := e.dp.ClassCounters(want)
				good = after.Packets == before.Packets+1
			}
			if !good {
				t.Fatalf("iteration %d (%d classes): packet %+v\nclasses:\n%sreference: class %d (matched %v); datapath: hit %d miss %d",
					iter, n, cp, describeClasses(classes), want, ok, hit, miss)
			}
			checked++
		}
	}
	t.Logf("%d packets checked", checked)
}
