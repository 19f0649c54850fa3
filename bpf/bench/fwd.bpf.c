// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The bare XDP forwarder, the evaluation suite's ceiling: every frame gets the next hop's
 * MAC addresses and is redirected out of one interface, with no parsing beyond the Ethernet
 * header. Whatever the UPF does on top of this costs what the results show above it. */
#include "fwd.h"

SEC("xdp")
int xupf_bench_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	return fwd_out(eth);
}

char _license[] SEC("license") = "Dual BSD/GPL";
