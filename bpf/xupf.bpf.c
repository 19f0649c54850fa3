// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* xupf XDP datapath: entry points only; the work is in lib/. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "lib/parse.h"
#include "lib/uplink.h"
#include "lib/downlink.h"
#include "lib/spread.h"
#include "lib/stats.h"
#include "lib/flowcache.h"
#include <linux/pkt_cls.h>

/* Types Go reads from BTF that no map or global mentions: these declarations keep them in the
 * object (bpf2go generates Go types from them; drop reason and stat names come from them). */
const enum drop_reason *btf_drop_reason __attribute__((unused));
const enum stat *btf_stat __attribute__((unused));
const enum far_action *btf_far_action __attribute__((unused));
const enum far_flag *btf_far_flag __attribute__((unused));
const enum direction *btf_direction __attribute__((unused));
const enum sdf_field *btf_sdf_field __attribute__((unused));
const enum cls_field *btf_cls_field __attribute__((unused));
const enum cls_layout *btf_cls_layout __attribute__((unused));
const enum meter_algo *btf_meter_algo __attribute__((unused));
const enum meter_clock *btf_meter_clock __attribute__((unused));
const enum police_action *btf_police_action __attribute__((unused));
const enum nexthop_kind *btf_nexthop_kind __attribute__((unused));
const enum pdr_usage *btf_pdr_usage __attribute__((unused));
const enum quota_volume *btf_quota_volume __attribute__((unused));
const struct unknown_teid_event *btf_unknown_teid_event __attribute__((unused));
const enum flowcache_mode *btf_flowcache_mode __attribute__((unused));
const enum n6_default *btf_n6_default __attribute__((unused));
const enum flow_vlan_action *btf_flow_vlan_action __attribute__((unused));
const enum flow_flag *btf_flow_flag __attribute__((unused));
const enum spread_mode *btf_spread_mode __attribute__((unused));
const struct buffered_hdr *btf_buffered_hdr __attribute__((unused));
const enum buffer_mark *btf_buffer_mark __attribute__((unused));

SEC("xdp")
int xupf_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const struct rule_ref *ref;
	struct iphdr *ip;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		goto pass;
	ip = parse_ipv4(eth, data_end);
	if (!ip)
		goto pass;

	if (ip->protocol == IPPROTO_UDP && is_gtpu_addr(ip->daddr, ctx->ingress_ifindex)) {
		if (cfg_spread != SPREAD_OFF && spread_gpdu(ip, data_end) == XDP_REDIRECT)
			return XDP_REDIRECT;
		return handle_gtpu(ctx, eth, ip, data_end);
	}

	/* With kernel_n6 a packet to the UPF's own address, no UE's, skips the UE lookup: the
	 * replies the cache translates back come there (flow_own_addr). */
	if (cfg_flowcache != FLOWCACHE_KERNEL_N6 || !flow_own_addr(ip->daddr)) {
		ref = dl_ref(ip->daddr);
		if (ref)
			return handle_downlink(ctx, eth, ip, ref, data_end, PKT_FROM_WIRE);
	}
	/* Off the fast paths: only here is a GTP-U address met on another interface looked for. */
	if (ip->protocol == IPPROTO_UDP && is_gtpu_addr(ip->daddr, GTPU_ANY_IFINDEX))
		return refuse_gtpu(ip, data_end);
pass:
	if (cfg_flowcache != FLOWCACHE_OFF) {
		int action = flowcache_xdp(ctx);

		if (action == FLOW_PASSED)
			return XDP_PASS;
		if (action != XDP_PASS)
			return action;
	}
	count_stat(STAT_PASS);
	return XDP_PASS;
}

/* The return device's peer (flow_cache.kernel_n6): what the kernel sends UEs. A program of its
 * own, so that no other packet pays for telling these apart; attached only with kernel_n6. */
SEC("xdp")
int xupf_xdp_return(struct xdp_md *ctx)
{
	if (cfg_flowcache != FLOWCACHE_KERNEL_N6)
		return XDP_DROP;
	return flow_return(ctx);
}

/* The flow cache's learner, on TC egress of the attached interfaces: it only watches. It
 * returns TCX_NEXT (TC_ACT_UNSPEC: the kernel headers here predate TCX), not a verdict: a
 * verdict would end the egress chain, and the TCX programs after it and the classic tc
 * filters of the interface would no longer see the packet. */
SEC("tc")
int xupf_flow_learn(struct __sk_buff *skb)
{
	if (cfg_flowcache != FLOWCACHE_OFF)
		flow_learn(skb);
	return TC_ACT_UNSPEC;
}

/* The kernel's report of a flush of packets xupf_xdp spread (spread.h); loaded and attached
 * only while uplink spreading is on. TP_PROTO(int map_id, unsigned int processed, unsigned int drops,
 * int to_cpu). */
SEC("tp_btf/xdp_cpumap_enqueue")
int xupf_spread_drops(__u64 *ctx)
{
	count_spread_drops(ctx[0], ctx[2]);
	return 0;
}

char _license[] SEC("license") = "Dual BSD/GPL";
