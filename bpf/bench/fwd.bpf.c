// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The bare XDP forwarder, the evaluation suite's ceiling: every frame gets the next hop's
 * MAC addresses and is redirected out of one interface, with no parsing beyond the Ethernet
 * header. Whatever the UPF does on top of this costs what the results show above it. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

/* Where frames go: the next hop's MAC (dst), the egress interface's (src) and the egress
 * ifindex, also the one entry of fwd_ports. Written by the loader before attaching. */
struct fwd_cfg {
	__u8 dst[ETH_ALEN];
	__u8 src[ETH_ALEN];
	__u32 ifindex;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fwd_cfg);
} fwd_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fwd_ports SEC(".maps");

SEC("xdp")
int xupf_bench_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;
	struct fwd_cfg *cfg;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	cfg = bpf_map_lookup_elem(&fwd_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, cfg->dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src, ETH_ALEN);
	return bpf_redirect_map(&fwd_ports, 0, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";
