package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/pfcpclient"
	"github.com/xupf/xupf/internal/testbed"
)

// benchUENet holds the UE addresses the benchmark gives its sessions (outside the testbed's
// pool and static sessions).
var benchUENet = netip.MustParsePrefix("10.64.0.0/12")

// BenchmarkPFCPEstablishment establishes sessions over PFCP from the gnb namespace into a
// fresh xupfd, Open5GS style (the UPF chooses the TEIDs), and reports the rate and each
// request's latency (median and p99) as the table fills: "pair" sessions have one uplink and
// one downlink PDR (with a QER and a URR), "flows" sessions 4 PDRs, 2 QERs and 2 URRs (a QoS
// flow selected by an SDF filter on top of the default one). With one request in flight the
// latency is the UPF's own; with 16, 64 or 256 (an SMF pipelines them, one per UE attaching)
// it includes queueing and the rate is the UPF's throughput: each answer waits for its session to be in the state file, and
// the more requests are in flight, the more sessions share one commit. Run with -benchtime 1x:
// each iteration is one full run from an empty daemon. It also reports the CPU time per
// session of xupfd and of this process (the SMF client), which share the machine's CPUs.
// XUPF_BENCH_STATE_DIR puts the state file in a directory of that name instead of the test's
// own, e.g. on a tmpfs (/dev/shm), whose fsync costs nothing: the same run without waiting for
// the disk.
func BenchmarkPFCPEstablishment(b *testing.B) {
	for _, p := range []struct {
		name  string
		flows []pfcpclient.Flow
	}{
		{"pair", nil},
		{"flows", []pfcpclient.Flow{{Filter: "permit out 17 from any to assigned 5060", Precedence: 100, QFI: 5}}},
	} {
		for _, n := range []int{1000, 10000, 100000} {
			for _, inflight := range []int{1, 16, 64, 256} {
				b.Run(fmt.Sprintf("%s/sessions=%d/inflight=%d", p.name, n, inflight), func(b *testing.B) {
					for range b.N {
						benchEstablish(b, n, inflight, p.flows)
					}
				})
			}
		}
	}
}

func benchEstablish(b *testing.B, n, inflight int, flows []pfcpclient.Flow) {
	e := newEnvConfig(b, func(c *config.Config) {
		c.Limits.MaxSessions = n + 64
		c.Limits.MaxRuleSets = 2*n + 64
		c.Limits.MaxSDFEntries = 16*n + 1024
		c.LogLevel = "warn"
		if parent := os.Getenv("XUPF_BENCH_STATE_DIR"); parent != "" {
			dir, err := os.MkdirTemp(parent, "xupf-bench-state-")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) }) // after the daemon's stop, registered later
			c.StateDir = dir
		}
	})
	c, _ := e.smfClient("smf.bench.test")
	// 100,000 establishments one at a time take longer than smfClient's context allows.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	base := binary.BigEndian.Uint32(benchUENet.Addr().AsSlice())
	latencies := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int)
	b.ResetTimer()
	upf0, client0 := processCPU(b, e.daemon.PID()), selfCPU(b)
	start := time.Now()
	for range inflight {
		wg.Go(func() {
			for i := range next {
				var ue [4]byte
				binary.BigEndian.PutUint32(ue[:], base+uint32(i)+1)
				spec := pfcpclient.SessionSpec{Style: pfcpclient.Open5GS, UE: netip.AddrFrom4(ue), QFI: 9,
					NetworkInstance: "internet", GNB: testbed.GNBAddr, GNBTEID: uint32(i) + 1, Flows: flows}
				t0 := time.Now()
				_, err := c.Establish(ctx, spec)
				latencies[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("session %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	upf, client := processCPU(b, e.daemon.PID())-upf0, selfCPU(b)-client0
	b.StopTimer()
	if firstErr != nil {
		b.Fatalf("%v\n%s", firstErr, e.daemon.LogTail())
	}
	st, err := e.api.Status(e.ctx())
	if err != nil || st.Sessions < n {
		b.Fatalf("status after the run: %+v, %v; want %d sessions", st, err, n)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "sessions/s")
	b.ReportMetric(float64(latencies[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(latencies[n*99/100].Microseconds()), "p99-µs")
	// The CPU time per session, of xupfd and of this process (the SMF client): both share the
	// machine's CPUs, so the rate alone does not tell the UPF's capacity.
	b.ReportMetric(float64(upf.Microseconds())/float64(n), "upf-cpu-µs/session")
	b.ReportMetric(float64(client.Microseconds())/float64(n), "smf-cpu-µs/session")
	b.ReportMetric(0, "ns/op") // one op is a whole run; its time is the rate above
}

// processCPU is the CPU time (user and system) process pid has used so far.
func processCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command (in parentheses, which may hold spaces): utime and stime
	// are the 12th and 13th, in clock ticks (USER_HZ, 100 on Linux).
	rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	var ticks int64
	for _, f := range rest[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// selfCPU is the CPU time (user and system) this process has used so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
