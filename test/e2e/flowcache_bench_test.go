package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/testbed"
)

// BenchmarkFlowCacheFirstPacket: one-way latency, gnb host to DN host through the box, of a
// new flow's first datagram and of its second, sent once the first arrived; with the flow
// cache off (Linux forwards both) and on (Linux forwards the first while the learner records
// it, the cache the second). Each iteration is a new flow (a new source port); the sockets
// are made in the timing too, but outside each datagram's: first-µs and next-µs are per datagram.
func BenchmarkFlowCacheFirstPacket(b *testing.B) {
	for _, c := range []struct {
		name     string
		maxFlows int
	}{{"cache=off", 0}, {"cache=on", 1 << 16}} {
		b.Run(c.name, func(b *testing.B) {
			if b.N > 40000 {
				b.Skip("one source port an iteration: at most 40,000")
			}
			e := newEnvConfig(b, func(cfg *config.Config) { cfg.FlowCache.MaxFlows = c.maxFlows })
			if err := e.topo.AddTransitRoutes(); err != nil {
				b.Fatal(err)
			}
			dn := netip.AddrPortFrom(testbed.DNAddr, testbed.DNPort)
			rx, err := e.topo.ListenUDP(e.topo.DNNS, dn)
			if err != nil {
				b.Fatal(err)
			}
			defer rx.Close()
			before := e.stats().Counters
			oneWay := func(send func() error) time.Duration {
				start := time.Now()
				if err := send(); err != nil {
					b.Fatal(err)
				}
				if got, err := rx.Collect(1, recvTimeout); err != nil || len(got) != 1 {
					b.Fatalf("%d datagrams arrived (err %v), want 1", len(got), err)
				}
				return time.Since(start)
			}
			payload := []byte("first packet")
			// flow sends two datagrams of a new flow from port and returns each one's time.
			flow := func(port uint16) (first, next time.Duration) {
				conn, err := e.topo.UDPConn(e.topo.GNBNS, netip.AddrPortFrom(testbed.GNBAddr, port))
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				send := func() error { _, err := conn.WriteToUDPAddrPort(payload, dn); return err }
				return oneWay(send), oneWay(send)
			}
			// The daemon's start-up (the first route listing and its invalidation) and the
			// neighbours' first resolution are not what is measured.
			for i := range 50 {
				flow(uint16(19000 + i))
			}
			before = e.stats().Counters
			var first, next time.Duration
			b.ResetTimer()
			for i := range b.N {
				f, n := flow(uint16(20000 + i))
				first, next = first+f, next+n
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(first.Microseconds())/n, "first-µs")
			b.ReportMetric(float64(next.Microseconds())/n, "next-µs")
			after := e.stats().Counters
			if hits, learnt := after["flow_hit"]-before["flow_hit"], after["flow_learned"]-before["flow_learned"]; c.maxFlows > 0 &&
				(hits != uint64(b.N) || learnt != uint64(b.N)) {
				b.Errorf("%d flows learnt and %d hits for %d flows, want one each", learnt, hits, b.N)
			}
		})
	}
}
