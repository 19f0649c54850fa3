package report

import (
	"fmt"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// natHitBudget is the target of a flow cache hit on a NAT flow: at most this many ns per
// packet over the same packet without NAT (xupf routing it itself).
const natHitBudget = 15

// natSection is the NAT measurement: uplink UE traffic masqueraded by nftables, Linux
// forwarding and xupf with kernel NAT without and with the flow cache, beside the bare
// forwarder and the same packets without NAT in the same run, and the cache hit's cost
// judged against its budget.
func natSection(rs []*result.Result) section {
	tb, cells := forwarderTable(rs)
	hit, plain := cells[datapathCost{scenario.DatapathXUPFNATCache, scenario.Uplink}], cells[datapathCost{scenario.DatapathXUPF, scenario.Uplink}]
	verdict := "not judged: the run lacks the xupf or xupf_nat_cache point"
	if hit != nil && plain != nil {
		budget, margin, over, _ := costRow{budget: plusNs, limit: natHitBudget}.judge(hit, plain)
		verdict = "within"
		if over {
			verdict = "**OVER**"
		}
		verdict = fmt.Sprintf("%.1f ns against %.1f without NAT (%+.1f ns); budget %s, margin %s: %s",
			hit.ns, plain.ns, hit.ns-plain.ns, budget, margin, verdict)
	}
	text := fmt.Sprintf(`
NAT of the UEs' uplink traffic: the UE addresses masqueraded to n6's address by nftables,
each flow to a server of its own (so that masquerade keeps the UE's port, which the sink
checks with the address), as fast as the generator can. "Linux forwarding" and "+ NAT" are
given the flows' plain IPv4 packets; "xupf" routes the decapsulated packets itself (no
NAT: the same packets without it); "xupf + kernel NAT, no cache" hands every decapsulated
packet to the kernel (flow_cache.kernel_n6 with a one-entry table, which never holds a
flow's pair of entries); "xupf + NAT flow cache" has the kernel translate each flow's first
packets and the cache the rest. "× forwarder" is the rate against the bare forwarder's in
the same run; "XDP ns/packet" the XDP program's time per packet less the floor, which for
the rows that hand packets to the kernel leaves the kernel's work out (read their rate).

Cache hit against the same packet without NAT (budget +%d ns): %s.

Not measured: the downlink (a masqueraded flow's replies go to n6's address and port, which
only the flow's uplink packets set up; and the bench's UE addresses, 10.64.0.0/10, lie
outside xupfd's ue_pools and are routed toward the gNB, so the replies the kernel translates
back would leave that way rather than through the return device into their sessions), and
the kernel's own flowtable as a second mode: xupf does not have it, and the development VM's
kernel is built without CONFIG_NF_FLOW_TABLE.`, natHitBudget, verdict)
	return section{title: "NAT: Linux, xupf with kernel NAT, and the flow cache", text: text, table: tb}
}
