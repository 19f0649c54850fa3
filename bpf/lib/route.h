/* Routing: the kernel FIB picks the next hop and its MAC, a devmap redirects. Anything the
 * fast path cannot finish goes to the kernel (XDP_PASS), which knows how. */
#ifndef XUPF_ROUTE_H
#define XUPF_ROUTE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include "csum.h"
#include "stats.h"

#ifndef AF_INET
#define AF_INET 2
#endif

#ifndef XUPF_MAX_PORTS
#define XUPF_MAX_PORTS 64
#endif

/* Interfaces the datapath may redirect to (the ones it is attached to), keyed by ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, XUPF_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_tx_ports SEC(".maps");

/* route_ipv4 routes the IPv4 packet that follows the Ethernet header at the start of ctx.
 * When forwarding is set the packet is being forwarded (TTL checked and decremented);
 * otherwise it was built here (the outer header of an encapsulation) and keeps its TTL.
 * tx_stat counts a redirect, kernel_stat a hand-over to the kernel. Returns the XDP action. */
static __always_inline int route_ipv4(struct xdp_md *ctx, int forwarding,
				      enum stat tx_stat, enum stat kernel_stat)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup fib = {};
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	int rc;

	if ((void *)(ip + 1) > data_end)
		return drop(DROP_HEADROOM);  /* cannot happen: the caller wrote this header */
	if (forwarding && ip->ttl <= 1) {
		count_stat(STAT_FIB_TTL);
		count_stat(kernel_stat);
		return XDP_PASS;
	}

	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;

	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		break;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return drop(DROP_NO_ROUTE);
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		/* The kernel resolves the neighbour and sends this packet; later ones take the
		 * fast path. */
		count_stat(STAT_FIB_NO_NEIGH);
		count_stat(kernel_stat);
		return XDP_PASS;
	default:
		/* NOT_FWDED (local), FWD_DISABLED, UNSUPP_LWT, FRAG_NEEDED: the kernel's call. */
		count_stat(kernel_stat);
		return XDP_PASS;
	}

	/* Only interfaces we are attached to are in the devmap; for any other the kernel
	 * forwards, and the packet is left as it came so its TTL is not taken twice. */
	if (!bpf_map_lookup_elem(&xupf_tx_ports, &fib.ifindex)) {
		count_stat(kernel_stat);
		return XDP_PASS;
	}
	if (forwarding)
		ipv4_decrease_ttl(ip);
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	count_stat(tx_stat);
	return bpf_redirect_map(&xupf_tx_ports, fib.ifindex, 0);
}

#endif
