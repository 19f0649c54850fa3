package report

import (
	"fmt"
	"strings"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// transitSection is the flow cache's measurement: transit IPv4 traffic with no session, the
// bare forwarder, Linux forwarding and xupf's flow cache in the same run, each direction on
// its own, as rates against the forwarder's and the XDP program's cost per packet.
func transitSection(rs []*result.Result) section {
	tb, _ := forwarderTable(rs)
	text := `
Transit forwarding, no UPF session: plain IPv4 UDP frames between the gNB and the DN sides,
one direction at a time, as fast as the generator can, forwarded by the bare XDP forwarder
(the ceiling), by Linux (XDP_PASS, then the kernel's routing) and by xupf with its flow
cache (the kernel forwards each flow's first packets, the cache learns what it did and
forwards the rest in XDP). "× forwarder" is the rate against the forwarder's in the same
direction and run; "XDP ns/packet" the XDP program's time per packet in traffic less the
floor (for Linux the kernel's work is not in an XDP program: read its rate); "cache hits"
the share of the flow cache's lookups that hit, over the whole point (warmup included).`
	return section{title: "Transit forwarding: Linux and the flow cache", text: text, table: tb}
}

// datapathCost is one datapath's point in one direction: its rate and the XDP program's cost
// per packet, repetitions averaged, as costCell holds them.
type datapathCost struct{ datapath, dir string }

// forwarderTable is the table of the sections that set datapaths beside the bare forwarder
// in one run (transit, NAT): each point's rate, against the forwarder's in the same direction
// and frame size, the XDP program's cost per packet (none for Linux alone, whose work is not
// in an XDP program), the flow cache's hit share, loss and the samples checked. It also
// returns each datapath's figures by direction.
func forwarderTable(rs []*result.Result) (string, map[datapathCost]*costCell) {
	type key struct {
		dir  string
		size int
	}
	var tb strings.Builder
	tb.WriteString("| datapath | direction | frames | Mpps | × forwarder | XDP ns/packet | cache hits | loss | samples checked/wrong |\n")
	tb.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	var pts []agg
	forwarder := map[key]float64{}
	cells := map[datapathCost]*costCell{}
	for _, dir := range []string{scenario.Uplink, scenario.Downlink} {
		for _, a := range aggregate(rs, dirRate(dir)) {
			p := a.r.Point
			if p.Traffic.Direction != dir {
				continue
			}
			pts = append(pts, a)
			if p.Pipeline.Datapath == scenario.DatapathXDPForwarder {
				forwarder[key{dir, p.Traffic.PacketSize}] = a.mean
			}
		}
	}
	for _, a := range pts {
		p := a.r.Point
		dir := p.Traffic.Direction
		ratio := "–"
		if fw := forwarder[key{dir, p.Traffic.PacketSize}]; fw > 0 {
			ratio = fmt.Sprintf("%.2f", a.mean/fw)
		}
		ns := "–"
		if dp := p.Pipeline.Datapath; dp != scenario.DatapathKernel && dp != scenario.DatapathKernelNAT {
			c := &costCell{ns: a.avg(func(r *result.Result) float64 { c, _ := costOf(r, dir); return c }), rate: a.mean, reps: a.reps}
			cells[datapathCost{dp, dir}] = c
			ns = fmt.Sprintf("%.1f", c.ns)
		}
		fmt.Fprintf(&tb, "| %s | %s | %s | %s | %s | %s | %s | %.4f%% | %s |\n", datapathName[p.Pipeline.Datapath], dir,
			sizeLabel(p.Traffic.PacketSize), mpps(a.mean), ratio, ns, hitShare(a.reps), 100*a.avg(dirLoss(dir)), wrongCell(a.reps...))
	}
	return tb.String(), cells
}

// hitShare is the flow cache's hits over its lookups in rs, as a percentage; "–" when it
// made none (the other datapaths).
func hitShare(rs []*result.Result) string {
	var hit, miss uint64
	for _, r := range rs {
		if r.Datapath != nil {
			hit += r.Datapath.Counters["flow_hit"]
			miss += r.Datapath.Counters["flow_miss"]
		}
	}
	if hit+miss == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(hit)/float64(hit+miss))
}
