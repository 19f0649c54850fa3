package datapath

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xupf/xupf/internal/rules"
)

var meterClocks = map[string]Clock{"ktime": ClockKtime, "coarse": ClockCoarse, "user": ClockUser}

// meterBenchEnv is a datapath with one downlink rule per UE in ues, each with its own QER of
// 100 Gbit/s (every packet passes: the benchmarks time the meter, not drops), routed
// without a tunnel. qos false leaves the QER out: the baseline.
func meterBenchEnv(b *testing.B, algo MeterAlgo, clock Clock, qos bool, ues ...netip.Addr) *testEnv {
	e := newTestEnvOpts(b, Options{MaxSessions: 16, MeterAlgo: algo, Clock: clock, MBRBurst: time.Second})
	if err := e.dp.SetClock(1); err != nil {
		b.Fatal(err)
	}
	for i, ue := range ues {
		p := rules.PDR{ID: 1, FAR: rules.FAR{Action: rules.Forward}}
		if qos {
			p.QERs = []rules.QER{{ID: 1, MBRDL: 100_000_000}}
		}
		if err := e.dp.Install(uint64(1<<32+i), []rules.RuleSet{{UE: ue, PDRs: []rules.PDR{p}}}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

func meterBenchPacket(b *testing.B, ue netip.Addr) []byte {
	return concat(ethBytes(macDN, macN6), innerUDP(b, addrDN, ue, 5000, 6000, 64, payload))
}

// BenchmarkMeter: ns/packet of a downlink packet through a QER with an MBR, per algorithm and
// clock, and of the same packet without a QER ("pass"): the difference is the meter's cost.
// The ten programs are loaded side by side and run in turn, packet by packet, so that the
// machine's noise falls on all of them alike; each reports its own ns/pkt metric.
func BenchmarkMeter(b *testing.B) {
	ue := netip.MustParseAddr("10.45.0.9")
	pkt := meterBenchPacket(b, ue)
	type config struct {
		name  string
		e     *testEnv
		total time.Duration
	}
	configs := []*config{{name: "pass", e: meterBenchEnv(b, TokenBucket, ClockKtime, false, ue)}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, aname := range slices.Sorted(maps.Keys(meterAlgos)) {
		for _, cname := range slices.Sorted(maps.Keys(meterClocks)) {
			e := meterBenchEnv(b, meterAlgos[aname], meterClocks[cname], true, ue)
			if meterClocks[cname] == ClockUser {
				go e.dp.RunClock(ctx, UserClockPeriod) // as in the daemon
			}
			configs = append(configs, &config{name: strings.ReplaceAll(aname, " ", "-") + "/" + cname, e: e})
		}
	}
	b.ResetTimer()
	for range b.N {
		for _, c := range configs {
			err := c.e.do(func() error {
				ret, d, err := c.e.dp.Program().Benchmark(pkt, 1, nil)
				if err == nil && ret != xdpRedirect {
					err = fmt.Errorf("%s: verdict %s", c.name, verdictNames[ret])
				}
				c.total += d
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, c := range configs {
		b.ReportMetric(float64(c.total.Nanoseconds())/float64(b.N), c.name+"-ns/pkt")
	}
}

// BenchmarkMeterContention: both CPUs run packets at once through one meter (a shared
// session AMBR) against each CPU through its own meter, token bucket on bpf_ktime_get_ns.
// ns/pkt is the kernel's time per packet, averaged over both CPUs.
func BenchmarkMeterContention(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two CPUs")
	}
	ues := []netip.Addr{netip.MustParseAddr("10.45.0.9"), netip.MustParseAddr("10.45.0.10")}
	for _, c := range []struct {
		name string
		pkts [2][]byte
	}{
		{"one-meter-both-cpus", [2][]byte{meterBenchPacket(b, ues[0]), meterBenchPacket(b, ues[0])}},
		{"one-meter-per-cpu", [2][]byte{meterBenchPacket(b, ues[0]), meterBenchPacket(b, ues[1])}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := meterBenchEnv(b, TokenBucket, ClockKtime, true, ues...)
			var (
				wg    sync.WaitGroup
				total [2]time.Duration
				errs  [2]error
			)
			for cpu := range 2 {
				wg.Go(func() {
					errs[cpu] = e.do(func() error {
						var orig, set unix.CPUSet
						if err := unix.SchedGetaffinity(0, &orig); err != nil {
							return err
						}
						set.Set(cpu)
						if err := unix.SchedSetaffinity(0, &set); err != nil {
							return err
						}
						// The thread goes back to the runtime's pool afterwards.
						defer unix.SchedSetaffinity(0, &orig)
						for range b.N {
							ret, d, err := e.dp.Program().Benchmark(c.pkts[cpu], 1, nil)
							if err != nil {
								return err
							}
							if ret != xdpRedirect {
								return fmt.Errorf("verdict %s", verdictNames[ret])
							}
							total[cpu] += d
						}
						return nil
					})
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((total[0]+total[1]).Nanoseconds())/float64(2*b.N), "ns/pkt")
		})
	}
}
