package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/xupf/xupf/internal/bench/modules"
	"github.com/xupf/xupf/internal/bench/plot"
	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// datapathName is how a datapath is named in legends.
var datapathName = map[string]string{
	scenario.DatapathXUPF:         "xupf",
	scenario.DatapathXDPForwarder: "bare XDP forwarder",
	scenario.DatapathKernel:       "Linux forwarding",
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
		if s := a.r.Point.Traffic.PacketSize; indexOf(sizes, s) < 0 {
			sizes = append(sizes, s)
		}
	}
	fig := &plot.Figure{Name: "throughput-" + dir, Title: "Throughput, " + dir, YLabel: "Mpps"}
	for _, s := range sizes {
		fig.Categories = append(fig.Categories, sizeLabel(s))
	}
	series := map[string]*plot.Series{}
	var order []string
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
		s, ok := series[name]
		if !ok {
			s = &plot.Series{Name: name}
			series[name] = s
			order = append(order, name)
		}
		s.Points = append(s.Points, plot.Point{X: float64(indexOf(sizes, p.Traffic.PacketSize)), Y: a.mean / 1e6, YErr: a.pm / 1e6})
		sum := a.r.Summary.Directions[dir]
		ratio := "–"
		if c := ceiling[[2]int{p.Traffic.PacketSize, p.Tester.GeneratorThreads}]; c > 0 {
			ratio = fmt.Sprintf("%.2f", a.mean/c)
		}
		fmt.Fprintf(&tb, "| %s | %s | %d | %s | %.3f | %s | %.2f | %s | %.4f%% | %s |\n",
			datapathName[p.Pipeline.Datapath], sizeLabel(p.Traffic.PacketSize), p.Tester.GeneratorThreads,
			mpps(a.mean), sum.Bits/1e9, ratio, sum.Softirq, mpps(a.r.GeneratorMax[dir]), 100*sum.Loss, wrongCell(a.r))
	}
	for _, n := range order {
		fig.Series = append(fig.Series, *series[n])
	}
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

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// usersSection is measurement 2: rate against the number of sessions, per direction.
func usersSection(rs []*result.Result) section {
	fig := &plot.Figure{Name: "users", Title: "Throughput against sessions", XLabel: "sessions (users)", YLabel: "Mpps", LogX: true}
	var tb strings.Builder
	tb.WriteString("| users | base stations | routes | flows replayed | direction | Mpps | Gbit/s | generator max (Mpps) | sessions set up per s | setup p50 / p99 (ms) | samples checked/wrong |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, dir := range []string{scenario.Uplink, scenario.Downlink} {
		var mine []*result.Result
		for _, r := range rs {
			if r.Point.Traffic.Direction == dir {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		s := plot.Series{Name: dir}
		for _, a := range aggregate(mine, dirRate(dir)) {
			p := a.r.Point
			s.Points = append(s.Points, plot.Point{X: float64(p.Pipeline.Users), Y: a.mean / 1e6, YErr: a.pm / 1e6})
			sum := a.r.Summary.Directions[dir]
			st := a.r.Setup
			fmt.Fprintf(&tb, "| %d | %d | %d | %d | %s | %s | %.3f | %s | %.0f | %.2f / %.2f | %s |\n",
				p.Pipeline.Users, p.Pipeline.BaseStations, p.Pipeline.Routes, p.Traffic.Flows, dir, mpps(a.mean), sum.Bits/1e9,
				mpps(a.r.GeneratorMax[dir]), st.Rate, ms(st.Latency.P50.Seconds()), ms(st.Latency.P99.Seconds()), wrongCell(a.r))
		}
		fig.Series = append(fig.Series, s)
	}
	text := `
Measurement 2: the rate as the number of sessions grows, with one base station per 100
users, one route (and server) per 10 users and 10 flows per user, as in the papers. The
sessions are established over PFCP before the trial (16 requests in flight; the rate and
latency of that are in the table). The generator replays at most 65,536 of the flows, spread
over all users, so that more sessions mean lookups spread over more of the tables.`
	return section{title: "Sessions", text: text, fig: fig, table: tb.String()}
}

func ms(seconds float64) float64 { return seconds * 1e3 }

// ipRate is the rate of inner IP bytes (what an MBR counts) a trial's sink saw in the middle
// of the trial, in bit/s: uplink frames arrive decapsulated, so the IP packet is the frame
// without its Ethernet header.
func ipRate(t result.Trial) float64 {
	w := t.Middle
	if w.Elapsed <= 0 || w.Bytes < 14*w.Packets {
		return 0
	}
	return 8 * float64(w.Bytes-14*w.Packets) / w.Elapsed.Seconds()
}

// policerSection is measurement 4: delivered against configured rate, per algorithm.
func policerSection(rs []*result.Result) section {
	fig := &plot.Figure{Name: "policer", Title: "QER MBR precision, uplink", XLabel: "MBR (bit/s)",
		YLabel: "delivered inner IP rate (bit/s)", LogX: true, LogY: true}
	series := map[string]*plot.Series{}
	var order []string
	ideal := plot.Series{Name: "MBR", Dashed: true}
	seen := map[uint64]bool{}
	var tb strings.Builder
	tb.WriteString("| MBR | algorithm | delivered | error | offered (Mpps) |\n|---|---|---|---|---|\n")
	for _, a := range aggregate(rs, func(r *result.Result) float64 { return ipRate(lastTrial(r)) }) {
		p := a.r.Point
		mbr := float64(p.Pipeline.MBRUplink)
		s, ok := series[p.Pipeline.Policer]
		if !ok {
			s = &plot.Series{Name: p.Pipeline.Policer}
			series[p.Pipeline.Policer] = s
			order = append(order, p.Pipeline.Policer)
		}
		if a.mean > 0 {
			s.Points = append(s.Points, plot.Point{X: mbr, Y: a.mean, YErr: a.pm})
		}
		if !seen[p.Pipeline.MBRUplink] {
			seen[p.Pipeline.MBRUplink] = true
			ideal.Points = append(ideal.Points, plot.Point{X: mbr, Y: mbr})
		}
		t := lastTrial(a.r)
		fmt.Fprintf(&tb, "| %s | %s | %s | %+.2f%% | %s |\n", bits(mbr), p.Pipeline.Policer, bits(a.mean),
			100*(a.mean-mbr)/mbr, mpps(float64(t.Sent)/t.Generator.Elapsed.Seconds()))
	}
	for _, n := range order {
		fig.Series = append(fig.Series, *series[n])
	}
	fig.Series = append(fig.Series, ideal)
	text := `
Measurement 4, precision: one session whose QER has an uplink MBR, offered 1518-byte frames
as fast as the generator can (far above every MBR but the highest). "delivered" is the inner
IP bytes per second (what the MBR counts, TS 29.244) that arrived in the middle half of the
trial, read from the sink while traffic flowed, so that neither the start (when a meter
spends the burst it saved while idle) nor the end is in it. The algorithms are described in
docs/qos.md; the meter's burst is 50 ms of the MBR (qos_mbr_burst).`
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
		i := indexOfString(fig.Categories, p.Pipeline.Policer)
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
		fmt.Fprintf(&tb, "| %s | %s | %s | %.2f |\n", p.Pipeline.Policer, mbr, mpps(a.mean), a.r.Summary.Directions[scenario.Uplink].Softirq)
	}
	fig.Series = []plot.Series{none, metered}
	text := `
Measurement 4, overhead: 100 sessions, uplink, 128-byte frames, with the QER's MBR at 1 Tbit/s
(every packet is metered, none is limited) against no MBR. Without an MBR the algorithm
setting changes nothing, so those bars measure the noise. internal/datapath's BenchmarkMeter
times the meters alone (docs/qos.md).`
	return section{title: "Policer overhead", text: text, fig: fig, table: tb.String()}
}

func indexOfString(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
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
	tb.WriteString("| requests/s asked | answered | achieved/s | p50 (ms) | p99 (ms) | max (ms) | failed | deletions (p50 ms) | lost uplink | lost downlink | samples checked/wrong |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range aggregate(rs, func(r *result.Result) float64 { return lat(r).P50.Seconds() }) {
		r := a.r
		l := lat(r)
		dur := r.Point.Tester.Duration.D().Seconds()
		if l.Count > 0 {
			p50.Points = append(p50.Points, plot.Point{X: rate(r), Y: ms(l.P50.Seconds())})
			p99.Points = append(p99.Points, plot.Point{X: rate(r), Y: ms(l.P99.Seconds())})
		}
		lost := map[string]uint64{}
		for _, t := range r.Trials {
			lost[t.Direction] += t.Sent - min(t.Sent, t.Received)
		}
		fmt.Fprintf(&tb, "| %g | %d | %.0f | %.2f | %.2f | %.2f | %d | %d (%.2f) | %d | %d | %s |\n",
			rate(r), l.Count, float64(l.Count)/dur, ms(l.P50.Seconds()), ms(l.P99.Seconds()), ms(l.Max.Seconds()),
			r.Events.Failed, r.Events.Deleted.Count, ms(r.Events.Deleted.P50.Seconds()),
			lost[scenario.Uplink], lost[scenario.Downlink], wrongCell(r))
	}
	fig.Series = []plot.Series{p50, p99}
	p0 := rs[0].Point
	text := fmt.Sprintf(`
Measurement 5, %s: %d users send %s frames in both directions at %.0f kpps each while the SMF
(in the gnb namespace, over N4) sends requests at the rate asked, each on its own (no
batching), for the trial's %v. The latency is from sending a request to its answer; a packet
counts as lost when it was sent and did not arrive during the trial, whatever the reason.
"answered" may exceed rate × duration by the requests of the last tick.`,
		what, p0.Pipeline.Users, sizeLabel(p0.Traffic.PacketSize), p0.Tester.Rate/1e3, p0.Tester.Duration)
	return section{title: "Adaptation: " + what, text: text, fig: fig, table: tb.String()}
}

// modulesSection is measurement 3: ns per packet as modules are added.
func modulesSection(rows []modules.Row) section {
	fig := &plot.Figure{Name: "modules", Title: "Per-module cost (BPF_PROG_TEST_RUN)", YLabel: "ns per packet",
		Categories: modules.Stages()}
	series := map[string]*plot.Series{}
	var order []string
	var tb strings.Builder
	tb.WriteString("| configuration | direction | stage | ns/packet |\n|---|---|---|---|\n")
	for _, r := range rows {
		name := r.Config + ", " + r.Direction
		s, ok := series[name]
		if !ok {
			s = &plot.Series{Name: name}
			series[name] = s
			order = append(order, name)
		}
		s.Points = append(s.Points, plot.Point{X: float64(indexOfString(fig.Categories, r.Stage)), Y: r.NsPerPacket})
		fmt.Fprintf(&tb, "| %s | %s | %s | %.1f |\n", r.Config, r.Direction, r.Stage, r.NsPerPacket)
	}
	for _, n := range order {
		fig.Series = append(fig.Series, *series[n])
	}
	text := `
Measurement 3, as in the paper's figure 5.11: the time of one packet through the datapath
with its modules added one by one (each stage includes the ones before it), from
BPF_PROG_TEST_RUN repeat runs, with the cost of the wrapper that restores the packet between
runs subtracted. The stages and the two configurations are described in
internal/bench/modules (package documentation).`
	return section{title: "Per-module overhead", text: text, fig: fig, table: tb.String()}
}
