package datapath

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/session"
)

// Benchmarks: ns/packet from BPF_PROG_TEST_RUN, plus the size of the loaded program.
//
// Each run takes one syscall with repeat=1 and the time is the kernel's own measurement
// around the program (not the syscall), averaged over b.N runs. Repeat>1 cannot be used: the
// kernel runs the program again on the packet it has just rewritten (decapsulated, say), and
// live-frame mode recycles rewritten pages too. The kernel's timer adds a constant to every
// run; the "not-ours-baseline" row (an ARP frame, passed at once) shows its size. `make bench` runs these. The table holds `sessions` sessions and the
// packet belongs to the last one, so a lookup cost that grew with the table would show.
func BenchmarkDatapath(b *testing.B) {
	for _, sessions := range []int{1, 100000} {
		e := newTestEnv(b, max(sessions, 2))
		var last session.Session
		for i := range sessions {
			last = session.Session{
				ID: uint64(i + 1), UE: netip.AddrFrom4([4]byte{10, 60 + byte(i>>16), byte(i >> 8), byte(i)}),
				UplinkTEID: uint32(0x10000 + i), GNB: addrGNB, DownlinkTEID: uint32(i + 1), QFI: 9, GTPUAddr: addrN3,
			}
			if err := e.addSession(last); err != nil {
				b.Fatal(err)
			}
		}
		insns, jited := programSize(b, e.dp.Program())
		ul := outerGTP(b, gtpHdr(0x34, 255, last.UplinkTEID, optPSC(9),
			innerUDP(b, last.UE, addrDN, 1000, 2000, 64, payload)), nil)
		dl := concat(ethBytes(macDN, macN6), innerUDP(b, addrDN, last.UE, 5000, 6000, 64, payload))
		echo := outerGTP(b, gtpHdr(0x32, 1, 0, []byte{0x12, 0x34, 0, 0}, nil), nil)
		arp := notOursCases(b)[0].in
		for _, c := range []struct {
			name    string
			pkt     []byte
			verdict uint32
		}{
			{"uplink", ul, xdpRedirect},
			{"downlink", dl, xdpRedirect},
			{"echo", echo, xdpTX},
			{"not-ours-baseline", arp, xdpPass},
		} {
			b.Run(fmt.Sprintf("%s/sessions=%d", c.name, sessions), func(b *testing.B) {
				benchPacket(b, e, c.pkt, c.verdict)
				b.ReportMetric(float64(insns), "insns")
				b.ReportMetric(float64(jited), "jited-bytes")
			})
		}
	}
}

// programSize returns the loaded program's instruction count after verification and its
// JITed size in bytes.
func programSize(b testing.TB, prog *ebpf.Program) (int, uint32) {
	info, err := prog.Info()
	if err != nil {
		b.Fatal(err)
	}
	insns, err := info.Instructions()
	if err != nil {
		b.Fatal(err)
	}
	jited, err := info.JitedSize()
	if err != nil {
		b.Fatal(err)
	}
	return len(insns), jited
}

// benchPacket runs pkt b.N times and reports the kernel-measured ns per packet. Without a
// context the packet arrives "on" the namespace's loopback device: routing does not depend
// on the ingress device.
func benchPacket(b *testing.B, e *testEnv, pkt []byte, verdict uint32) {
	var total time.Duration
	err := e.do(func() error {
		for range b.N {
			ret, d, err := e.dp.Program().Benchmark(pkt, 1, nil)
			if err != nil {
				return err
			}
			if ret != verdict {
				return fmt.Errorf("verdict %s, want %s", verdictNames[ret], verdictNames[verdict])
			}
			total += d
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/pkt")
}

// BenchmarkPDRSelection: ns/packet of the rule lookup with 1, 8 and 64 PDRs in the packet's
// rule set (each flow has a UDP port filter; the packet matches none, so every lookup runs
// and the default PDR wins) while 1, 10,000 or 1,000,000 other sessions are installed.
func BenchmarkPDRSelection(b *testing.B) {
	for _, others := range []int{1, 10000, 1000000} {
		e := newTestEnv(b, others+3)
		for i := range others {
			s := session.Session{
				ID: uint64(i + 1000), UE: netip.AddrFrom4([4]byte{10, 100 + byte(i>>16), byte(i >> 8), byte(i)}),
				UplinkTEID: uint32(0x100000 + i), GNB: addrGNB, DownlinkTEID: uint32(i + 1), GTPUAddr: addrN3,
			}
			if err := e.addSession(s); err != nil {
				b.Fatal(err)
			}
		}
		for n, pdrs := range []int{1, 8, 64} {
			s := session.Session{
				ID: uint64(n + 1), UE: netip.AddrFrom4([4]byte{10, 45, 1, byte(n)}), UplinkTEID: uint32(0x10 + n),
				GNB: addrGNB, DownlinkTEID: 0x99, QFI: 9, GTPUAddr: addrN3,
			}
			for f := range pdrs - 1 {
				s.Flows = append(s.Flows, session.Flow{Precedence: uint32(f), QFI: 9,
					SDF: []string{fmt.Sprintf("permit out 17 from any %d-%d to assigned", 10000+f*10, 10005+f*10)}})
			}
			if err := e.addSession(s); err != nil {
				b.Fatal(err)
			}
			ul := outerGTP(b, gtpHdr(0x34, 255, s.UplinkTEID, optPSC(9), innerUDP(b, s.UE, addrDN, 1000, 2000, 64, payload)), nil)
			dl := concat(ethBytes(macDN, macN6), innerUDP(b, addrDN, s.UE, 5000, 6000, 64, payload))
			for _, c := range []struct {
				name string
				pkt  []byte
			}{{"uplink", ul}, {"downlink", dl}} {
				b.Run(fmt.Sprintf("%s/pdrs=%d/sessions=%d", c.name, pdrs, others), func(b *testing.B) {
					benchPacket(b, e, c.pkt, xdpRedirect)
				})
			}
		}
	}
}

// benchClasses are n classes, each UDP to its own /32 and port range; the benchmark packet
// matches the last (lowest priority) one, so every vector word is looked at.
func benchClasses(n int) []classifier.Rule {
	rules := make([]classifier.Rule, 0, n)
	for i := range n {
		c := classifier.Class{ID: uint32(i + 1), Priority: uint32(n - i), Protocol: "udp",
			DstIP:   netip.AddrFrom4([4]byte{10, 45, byte(i >> 8), byte(i)}).String(),
			DstPort: fmt.Sprintf("%d-%d", 1000+i%1000, 2000+i%1000)}
		r, err := c.Parse()
		if err != nil {
			panic(err)
		}
		rules = append(rules, r)
	}
	return rules
}

// BenchmarkClassifier: ns/packet of a downlink packet through the traffic classifier with
// 1, 100, 1,000 and 10,000 classes, and the time to apply one class change (compile the whole
// set, fill the idle buffer, load the specialised program, swap it in).
func BenchmarkClassifier(b *testing.B) {
	e := newTestEnv(b, 4)
	if err := e.addSession(sessPlain); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 100, 1000, 10000} {
		rules := benchClasses(n)
		last := rules[n-1]
		dst := last.DstIP.Addr()
		if err := e.addSession(sessionFor(dst)); err != nil && dst != sessPlain.UE {
			b.Fatal(err)
		}
		compiled, err := classifier.Compile(rules)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.dp.SetClasses(compiled); err != nil {
			b.Fatal(err)
		}
		pkt := concat(ethBytes(macDN, macN6), innerUDP(b, addrDN, dst, 5000, last.DstPort.First, 64, payload))
		b.Run(fmt.Sprintf("packet/classes=%d", n), func(b *testing.B) {
			benchPacket(b, e, pkt, xdpRedirect)
		})
		b.Run(fmt.Sprintf("change/classes=%d", n), func(b *testing.B) {
			extra := benchClasses(n + 1)
			for i := range b.N {
				b.StopTimer()
				time.Sleep(grace) // a change right after another waits out the grace: not measured here
				set := rules
				if i%2 == 0 {
					set = extra
				}
				b.StartTimer()
				c, err := classifier.Compile(set)
				if err == nil {
					err = e.dp.SetClasses(c)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		if _, err := e.dp.Uninstall(99); err != nil {
			b.Fatal(err)
		}
	}
}

// sessionFor is a plain session (id 99) for UE ue.
func sessionFor(ue netip.Addr) session.Session {
	return session.Session{ID: 99, UE: ue, UplinkTEID: 0x99, GNB: addrGNB, DownlinkTEID: 0x99, GTPUAddr: addrN3}
}
