package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xupf/xupf/internal/bench/pkt"
	"github.com/xupf/xupf/internal/bench/plot"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// datapathName is how a datapath is named in legends.
var datapathName = map[string]string{
	scenario.DatapathXUPF:          "xupf",
	scenario.DatapathXDPForwarder:  "bare XDP forwarder",
	scenario.DatapathGTPU:          "minimal GTP-U",
	scenario.DatapathKernel:        "Linux forwarding",
	scenario.DatapathFlowCache:     "xupf flow cache",
	scenario.DatapathKernelNAT:     "Linux forwarding + NAT",
	scenario.DatapathXUPFKernelNAT: "xupf + kernel NAT, no cache",
	scenario.DatapathXUPFNATCache:  "xupf + NAT flow cache",
}

// seriesSet collects points into series by name, the series in the order first named.
type seriesSet struct{ list []plot.Series }

func (s *seriesSet) add(name string, p plot.Point) {
	for i := range s.list {
		if s.list[i].Name == name {
			s.list[i].Points = append(s.list[i].Points, p)
			return
		}
	}
	s.list = append(s.list, plot.Series{Name: name, Points: []plot.Point{p}})
}

// cpus is "1 CPU" or "N CPUs".
func cpus(n int) string {
	if n == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%d CPUs", n)
}

// throughputSection is measurement 1 for one direction: bars per frame size, one per
// datapath and generator CPU count, and a table with the ratio to the forwarder.
func throughputSection(dir string, rs []*result.Result) section {
	pts := aggregate(rs, dirRate(dir))
	var sizes []int
	for _, a := range pts {
		if s := a.r.Point.Traffic.PacketSize; slices.Index(sizes, s) < 0 {
			sizes = append(sizes, s)
		}
	}
	fig := &plot.Figure{Name: "throughput-" + dir, Title: "Throughput, " + dir, YLabel: "Mpps"}
	for _, s := range sizes {
		fig.Categories = append(fig.Categories, sizeLabel(s))
	}
	var series seriesSet
	// The forwarder's rate per (size, CPUs), for the ratios.
	ceiling := map[[2]int]float64{}
	for _, a := range pts {
		p := a.r.Point
		if p.Pipeline.Datapath == scenario.DatapathXDPForwarder {
			ceiling[[2]int{p.Traffic.PacketSize, p.Tester.GeneratorThreads}] = a.mean
		}
	}
	var tb strings.Builder
	tb.WriteString("| datapath | frames | generator CPUs | Mpps | Gbit/s | × forwarder | softirq (CPUs) | generator max (Mpps) | loss | samples checked/wrong |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range pts {
		p := a.r.Point
		name := fmt.Sprintf("%s, %s", datapathName[p.Pipeline.Datapath], cpus(p.Tester.GeneratorThreads))
		series.add(name, plot.Point{X: float64(slices.Index(sizes, p.Traffic.PacketSize)), Y: a.mean / 1e6, YErr: a.pm / 1e6})
		ratio := "–"
		if c := ceiling[[2]int{p.Traffic.PacketSize, p.Tester.GeneratorThreads}]; c > 0 {
			ratio = fmt.Sprintf("%.2f", a.mean/c)
		}
		fmt.Fprintf(&tb, "| %s | %s | %d | %s | %.3f | %s | %.2f | %s | %.4f%% | %s |\n",
			datapathName[p.Pipeline.Datapath], sizeLabel(p.Traffic.PacketSize), p.Tester.GeneratorThreads,
			mpps(a.mean), a.avg(dirBits(dir))/1e9, ratio, a.avg(dirSoftirq(dir)), mpps(a.avg(genMax(dir))), 100*a.avg(dirLoss(dir)), wrongCell(a.reps...))
	}
	fig.Series = series.list
	p0 := rs[0].Point
	text := fmt.Sprintf(`
Measurement 1, %s: frames per second that arrive at the far side, offered as fast as the
generator can for %v trials, for xupf and the two baselines in the same topology with the
same frames (xupf with %d sessions, %d flows each). Gbit/s counts the received frames' bytes
(without FCS). "softirq" is the CPU time spent in softirq during the trial, summed over CPUs
(1 = one CPU's full time): where XDP, the veths' NAPI and the kernel's forwarding run. With
several generator CPUs the veths have a queue per CPU, so that many chains run in parallel.`,
		dir, p0.Tester.Duration, p0.Pipeline.Users, p0.Pipeline.FlowsPerUser)
	return section{title: "Throughput, " + dir, text: text, fig: fig, table: tb.String()}
}

// usersSection is measurement 2: rate against the number of sessions, per direction and,
// when the scenario sweeps it, per number of flows replayed.
func usersSection(rs []*result.Result) section {
	fig := &plot.Figure{Name: "users", Title: "Throughput against sessions", XLabel: "sessions (users)", YLabel: "Mpps", LogX: true}
	var tb strings.Builder
	tb.WriteString("| users | base stations | routes | flows replayed | direction | Mpps | Gbit/s | generator max (Mpps) | sessions set up per s | setup p50 / p99 (ms) | samples checked/wrong |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	groups := map[string][]*result.Result{}
	var order []string
	for _, dir := range []string{scenario.Uplink, scenario.Downlink} {
		for _, r := range rs {
			if r.Point.Traffic.Direction != dir {
				continue
			}
			name := dir
			if f := sweepValue(r.Point, "traffic.flows"); f != "" {
				name += ", at most " + f + " flows"
			}
			if _, ok := groups[name]; !ok {
				order = append(order, name)
			}
			groups[name] = append(groups[name], r)
		}
	}
	for _, name := range order {
		s := plot.Series{Name: name}
		dir := groups[name][0].Point.Traffic.Direction
		for _, a := range aggregate(groups[name], dirRate(dir)) {
			p := a.r.Point
			s.Points = append(s.Points, plot.Point{X: float64(p.Pipeline.Users), Y: a.mean / 1e6, YErr: a.pm / 1e6})
			fmt.Fprintf(&tb, "| %d | %d | %d | %d | %s | %s | %.3f | %s | %.0f | %.2f / %.2f | %s |\n",
				p.Pipeline.Users, p.Pipeline.BaseStations, p.Pipeline.Routes, p.Traffic.Flows, dir, mpps(a.mean), a.avg(dirBits(dir))/1e9,
				mpps(a.avg(genMax(dir))), a.avg(func(r *result.Result) float64 { return r.Setup.Rate }),
				a.avg(func(r *result.Result) float64 { return ms(r.Setup.Latency.P50.Seconds()) }),
				a.avg(func(r *result.Result) float64 { return ms(r.Setup.Latency.P99.Seconds()) }), wrongCell(a.reps...))
		}
		fig.Series = append(fig.Series, s)
	}
	text := `
Measurement 2: the rate as the number of sessions grows, with one base station per 100
users, one route (and server) per 10 users and 10 flows per user, as in the papers. The
sessions are established over PFCP before the trial (16 requests in flight; the rate and
latency of that are in the table). The generator replays a set of the flows chosen over all
users: with few flows (1,000) only as many sessions carry traffic whatever the number
installed, which shows whether the lookups slow down as tables grow; with many (65,536)
every packet may touch another session, so the rate also pays for the memory the active
sessions' entries take (caches), as a real UPF with that many active users would.`
	return section{title: "Sessions", text: text, fig: fig, table: tb.String()}
}

// sweepValue is the value of the swept parameter key (e.g. "traffic.flows") at p, or "" when
// the scenario does not sweep it.
func sweepValue(p scenario.Point, key string) string {
	for _, s := range p.Sweep {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

func ms(seconds float64) float64 { return seconds * 1e3 }

// ipRate is the rate of inner IP bytes (what an MBR counts) a trial's sink saw in the middle
// of the trial, in bit/s: uplink frames arrive decapsulated, so the IP packet is the frame
// without its Ethernet header.
func ipRate(t result.Trial) float64 {
	w := t.Middle
	if w.Elapsed <= 0 || w.Bytes < pkt.EthLen*w.Packets {
		return 0
	}
	return 8 * float64(w.Bytes-pkt.EthLen*w.Packets) / w.Elapsed.Seconds()
}

// innerBits is the mean inner IP packet of an uplink trial's frames, in bits: the frames
// the generator sent without Ethernet and the GTP-U encapsulation.
func innerBits(t result.Trial, psc bool) float64 {
	if t.Generator.Sent == 0 {
		return 0
	}
	frame := float64(t.Generator.Bytes) / float64(t.Generator.Sent)
	return 8 * (frame - float64(pkt.EthLen+pkt.EncapOverhead(psc)))
}

// mbrReading is one policer point as the report reads it.
type mbrReading struct {
	// a.mean is the inner IP rate delivered in the middle of the trial (bit/s).
	a agg
	// offered is the inner IP rate the generator offered (bit/s).
	offered float64
	// resolution is one packet in the reading's window, as a fraction of the MBR: the
	// smallest error the reading can show.
	resolution float64
}

// limited is whether the offered rate exceeds the MBR enough for the meter to bind: a
// reading below that measures the generator, not the meter.
func (m mbrReading) limited(mbr float64) bool { return m.offered >= 1.2*mbr }

// policerSection is measurement 4: delivered against configured rate, per algorithm. Each
// (algorithm, MBR) is plotted from the frame size that reads it best: the finest resolution
// among the sizes whose offered rate exceeds the MBR.
func policerSection(rs []*result.Result) section {
	fig := &plot.Figure{Name: "policer", Title: "QER MBR precision, uplink", XLabel: "MBR (bit/s)",
		YLabel: "delivered inner IP rate (bit/s)", LogX: true, LogY: true}
	type key struct {
		alg string
		mbr uint64
	}
	best := map[key]mbrReading{}
	var keys []key
	var tb strings.Builder
	tb.WriteString("| MBR | algorithm | frames | offered | delivered | error | resolution (1 packet) |\n|---|---|---|---|---|---|---|\n")
	for _, a := range aggregate(rs, func(r *result.Result) float64 { return ipRate(lastTrial(r)) }) {
		p := a.r.Point
		t := lastTrial(a.r)
		m := mbrReading{a: a}
		packet := innerBits(t, p.Traffic.PDUSessionContainer)
		if e := t.Generator.Elapsed.Seconds(); e > 0 {
			m.offered = float64(t.Generator.Sent) * packet / e
		}
		mbr := float64(p.Pipeline.MBRUplink)
		if w := t.Middle.Elapsed.Seconds(); w > 0 {
			m.resolution = packet / w / mbr
		}
		errCell := fmt.Sprintf("%+.2f%%", 100*(a.mean-mbr)/mbr)
		if !m.limited(mbr) {
			errCell = "not limited: offered below 1.2 × MBR"
		} else if a.mean > 0 {
			k := key{p.Pipeline.Policer, p.Pipeline.MBRUplink}
			if b, ok := best[k]; !ok {
				keys = append(keys, k)
				best[k] = m
			} else if m.resolution < b.resolution {
				best[k] = m
			}
		}
		fmt.Fprintf(&tb, "| %s | %s | %s | %s | %s | %s | %.2f%% |\n", bits(mbr), p.Pipeline.Policer,
			sizeLabel(p.Traffic.PacketSize), bits(m.offered), bits(a.mean), errCell, 100*m.resolution)
	}
	var series seriesSet
	ideal := plot.Series{Name: "MBR", Dashed: true}
	seen := map[uint64]bool{}
	for _, k := range keys {
		b := best[k]
		series.add(k.alg, plot.Point{X: float64(k.mbr), Y: b.a.mean, YErr: b.a.pm})
		if !seen[k.mbr] {
			seen[k.mbr] = true
			ideal.Points = append(ideal.Points, plot.Point{X: float64(k.mbr), Y: float64(k.mbr)})
		}
	}
	fig.Series = append(series.list, ideal)
	text := `
Measurement 4, precision: one session whose QER has an uplink MBR, offered frames as fast
as the generator can. "delivered" is the inner IP bytes per second (what the MBR counts,
TS 29.244) that arrived in the middle half of the trial, read from the sink while traffic
flowed, so that neither the start (when a meter spends the burst it saved while idle) nor
the end is in it; "offered" is the same for what the generator sent. A reading counts whole
packets, so it cannot be closer than one packet in its window ("resolution"): small frames
read low MBRs finely, and only large frames offer more than the highest MBRs. The figure
shows, for each MBR and algorithm, the frame size with the finest resolution among those
that offered more than the MBR. The fixed window admits its burst once per window of
burst/MBR (the burst is 50 ms of the MBR, qos_mbr_burst, and at least 3000 bytes: 240 ms at
100 kbit/s), so a reading of a few windows also depends on where the windows fall. The
algorithms are described in docs/qos.md.`
	return section{title: "Policer precision", text: text, fig: fig, table: tb.String()}
}

// lastTrial is a result's last trial (the one of max_rate and fixed_rate).
func lastTrial(r *result.Result) result.Trial {
	if len(r.Trials) == 0 {
		return result.Trial{}
	}
	return r.Trials[len(r.Trials)-1]
}

// bits formats bit/s with a unit.
func bits(x float64) string {
	switch {
	case x >= 1e9:
		return strconv.FormatFloat(x/1e9, 'f', 3, 64) + " Gbit/s"
	case x >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 3, 64) + " Mbit/s"
	default:
		return strconv.FormatFloat(x/1e3, 'f', 3, 64) + " kbit/s"
	}
}

// policerOverheadSection is measurement 4's overhead: rate with an MBR that never limits.
func policerOverheadSection(rs []*result.Result) section {
	fig := &plot.Figure{Name: "policer-overhead", Title: "Cost of metering, uplink", YLabel: "Mpps"}
	none := plot.Series{Name: "no MBR"}
	metered := plot.Series{Name: "MBR 1 Tbit/s (never reached)"}
	var tb strings.Builder
	tb.WriteString("| algorithm | MBR | Mpps | softirq (CPUs) |\n|---|---|---|---|\n")
	for _, a := range aggregate(rs, dirRate(scenario.Uplink)) {
		p := a.r.Point
		i := slices.Index(fig.Categories, p.Pipeline.Policer)
		if i < 0 {
			fig.Categories = append(fig.Categories, p.Pipeline.Policer)
			i = len(fig.Categories) - 1
		}
		pt := plot.Point{X: float64(i), Y: a.mean / 1e6, YErr: a.pm / 1e6}
		mbr := "none"
		if p.Pipeline.MBRUplink == 0 {
			none.Points = append(none.Points, pt)
		} else {
			metered.Points = append(metered.Points, pt)
			mbr = bits(float64(p.Pipeline.MBRUplink))
		}
		fmt.Fprintf(&tb, "| %s | %s | %s | %.2f |\n", p.Pipeline.Policer, mbr, mpps(a.mean), a.avg(dirSoftirq(scenario.Uplink)))
	}
	fig.Series = []plot.Series{none, metered}
	text := `
Measurement 4, overhead: 100 sessions, uplink, 128-byte frames, with the QER's MBR at 1 Tbit/s
(every packet is metered, none is limited) against no MBR. Without an MBR the algorithm
setting changes nothing, so those bars measure the noise. internal/datapath's BenchmarkMeter
times the meters alone (docs/qos.md).`
	return section{title: "Policer overhead", text: text, fig: fig, table: tb.String()}
}

// eventsSection is measurement 5: request latency against the event rate, and the loss.
func eventsSection(name string, rs []*result.Result) section {
	handover := name == "events-handover"
	rate := func(r *result.Result) float64 {
		if handover {
			return r.Point.Events.Handover
		}
		return r.Point.Events.SessionAdd
	}
	lat := func(r *result.Result) result.Latency {
		if handover {
			return r.Events.Handovers
		}
		return r.Events.Added
	}
	what := "establishment"
	if handover {
		what = "modification (handover)"
	}
	fig := &plot.Figure{Name: name, Title: "PFCP " + what + " latency under traffic", XLabel: "requests per second",
		YLabel: "latency (ms)", LogX: true, LogY: true}
	p50 := plot.Series{Name: "p50"}
	p99 := plot.Series{Name: "p99"}
	var tb strings.Builder
	tb.WriteString("| requests/s asked | answered | achieved/s | p50 (ms) | p99 (ms) | max (ms) | failed | deletions (p50 ms) | received kpps up / down | lost uplink | lost downlink | samples checked/wrong |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range aggregate(rs, func(r *result.Result) float64 { return ms(lat(r).P50.Seconds()) }) {
		// Counts are summed over the repetitions, latencies averaged (max: the largest).
		var answered, failed, deleted int
		var maxLat time.Duration
		lost := map[string]uint64{}
		for _, r := range a.reps {
			answered += lat(r).Count
			failed += r.Events.Failed
			deleted += r.Events.Deleted.Count
			maxLat = max(maxLat, lat(r).Max)
			for _, t := range r.Trials {
				lost[t.Direction] += t.Sent - min(t.Sent, t.Received)
			}
		}
		p99ms := a.avg(func(r *result.Result) float64 { return ms(lat(r).P99.Seconds()) })
		x := rate(a.r)
		if answered > 0 {
			p50.Points = append(p50.Points, plot.Point{X: x, Y: a.mean, YErr: a.pm})
			p99.Points = append(p99.Points, plot.Point{X: x, Y: p99ms})
		}
		seconds := a.r.Point.Tester.Duration.D().Seconds() * float64(len(a.reps))
		fmt.Fprintf(&tb, "| %g | %d | %.0f | %.2f | %.2f | %.2f | %d | %d (%.2f) | %.0f / %.0f | %d | %d | %s |\n",
			x, answered, float64(answered)/seconds, a.mean, p99ms, ms(maxLat.Seconds()), failed, deleted,
			a.avg(func(r *result.Result) float64 { return ms(r.Events.Deleted.P50.Seconds()) }),
			a.avg(dirRate(scenario.Uplink))/1e3, a.avg(dirRate(scenario.Downlink))/1e3,
			lost[scenario.Uplink], lost[scenario.Downlink], wrongCell(a.reps...))
	}
	fig.Series = []plot.Series{p50, p99}
	p0 := rs[0].Point
	text := fmt.Sprintf(`
Measurement 5, %s: %d users send %s frames in both directions, %.0f kpps offered each
way (what arrived is in the table: the generator skips the pacing intervals it misses while
the control plane has the CPUs), while the SMF (in the gnb namespace, over N4) sends
requests at the rate asked, each on its own (no batching), for the trial's %v. The latency
is from sending a request to its answer; a packet counts as lost when it was sent and did
not arrive during the trial, whatever the reason. "answered" counts the requests answered,
those of the trial's last moments included, whose answers may come after it.`,
		what, p0.Pipeline.Users, sizeLabel(p0.Traffic.PacketSize), p0.Tester.Rate/1e3, p0.Tester.Duration)
	return section{title: "Adaptation: " + what, text: text, fig: fig, table: tb.String()}
}
