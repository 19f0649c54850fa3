package report

import (
	"fmt"
	"strings"

	"github.com/xupf/xupf/internal/bench/result"
	"github.com/xupf/xupf/internal/bench/scenario"
)

// natHitBudget is the target of a flow cache hit on a NAT flow: at most this many ns per
// packet over the same packet without NAT (xupf routing it itself).
const natHitBudget = 15

// natSection is the NAT measurement: UE traffic masqueraded by nftables, uplink and its
// replies downlink, Linux forwarding and xupf with kernel NAT without and with the flow
// cache, beside the bare forwarder and the same packets without NAT in the same run, and the
// cache hit's cost judged against its budget in each direction.
func natSection(rs []*result.Result) section {
	tb, cells := forwarderTable(rs)
	var verdicts strings.Builder
	for _, dir := range []string{scenario.Uplink, scenario.Downlink} {
		fmt.Fprintf(&verdicts, "\n- %s: %s", dir, natVerdict(cells[datapathCost{scenario.DatapathXUPFNATCache, dir}],
			cells[datapathCost{scenario.DatapathXUPF, dir}]))
	}
	text := fmt.Sprintf(`
NAT of the UEs' traffic: the UE addresses masqueraded to n6's address by nftables, each
flow to a server of its own (so that masquerade keeps the UE's port, which the sink checks
with the address), as fast as the generator can. Uplink, the UEs' packets; downlink, the
servers' replies to n6's address and the UE's port, which the kernel or the cache
translates back to the UE (the bench first sends each flow's uplink packets a few times,
which set the translation up: the conntrack entry, and the cache's entries both ways).
"Linux forwarding" and "+ NAT" are given the flows' plain IPv4 packets; "xupf" routes the
packets itself (no NAT: the same packets without it, downlink sent to the UE's address);
"xupf + kernel NAT, no cache" hands every decapsulated packet to the kernel, and the kernel
sends every reply, translated back, through the return device into the session's downlink
(flow_cache.kernel_n6 with a one-entry table, which never holds a flow's pair of entries);
"xupf + NAT flow cache" has the kernel translate each flow's first packets and the cache
the rest, both ways. "× forwarder" is the rate against the bare forwarder's in the same run
and direction; "XDP ns/packet" the time per packet of the XDP program on the interface the
traffic arrives by, less the floor, which for the rows that hand packets to the kernel
leaves the kernel's work out, and downlink the return device's program too (read their
rate).

Cache hit against the same packet without NAT (budget +%d ns):%s

Not measured: the kernel's own flowtable as a second mode: xupf does not have it, and the
development VM's kernel is built without CONFIG_NF_FLOW_TABLE.`, natHitBudget, verdicts.String())
	return section{title: "NAT: Linux, xupf with kernel NAT, and the flow cache", text: text, table: tb}
}

// natVerdict judges a cache hit's cost against the same packet's without NAT.
func natVerdict(hit, plain *costCell) string {
	if hit == nil || plain == nil {
		return "not judged: the run lacks the xupf or xupf_nat_cache point"
	}
	budget, margin, over, _ := costRow{budget: plusNs, limit: natHitBudget}.judge(hit, plain)
	verdict := "within"
	if over {
		verdict = "**OVER**"
	}
	return fmt.Sprintf("%.1f ns against %.1f without NAT (%+.1f ns); budget %s, margin %s: %s",
		hit.ns, plain.ns, hit.ns-plain.ns, budget, margin, verdict)
}
