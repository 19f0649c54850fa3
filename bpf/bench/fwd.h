/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The egress of the evaluation suite's reference programs (fwd.bpf.c, gtpu.bpf.c): the next
 * hop's and the egress interface's MACs and one egress interface, written by the loader
 * (internal/bench/baseline) before attaching. */
#ifndef XUPF_BENCH_FWD_H
#define XUPF_BENCH_FWD_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

/* Where frames go: the next hop's MAC (dst), the egress interface's (src) and the egress
 * ifindex, also the one entry of fwd_ports. */
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

/* fwd_out gives eth the next hop's and the egress interface's MACs and redirects the frame
 * out of the egress interface. The caller has checked that eth lies within the frame. */
static __always_inline int fwd_out(struct ethhdr *eth)
{
	__u32 zero = 0;
	struct fwd_cfg *cfg = bpf_map_lookup_elem(&fwd_config, &zero);

	if (!cfg)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, cfg->dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src, ETH_ALEN);
	return bpf_redirect_map(&fwd_ports, 0, 0);
}

#endif
