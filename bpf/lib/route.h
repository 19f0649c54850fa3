/* Routing: the kernel FIB picks the next hop and its MAC, a devmap redirects. Anything the
 * fast path cannot finish goes to the kernel (XDP_PASS), which knows how. */
#ifndef XUPF_ROUTE_H
#define XUPF_ROUTE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include "csum.h"
#include "parse.h"
#include "types.h"
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

#ifndef XUPF_MAX_LOCAL_ADDRS
#define XUPF_MAX_LOCAL_ADDRS 1024
#endif
#ifndef XUPF_MAX_UE_ALLOWED
#define XUPF_MAX_UE_ALLOWED 64
#endif

/* Every IPv4 address of every interface in the UPF's namespace, and their broadcast
 * addresses: the daemon keeps it up to date from netlink. Read only when the FIB will not
 * forward an uplink packet, to name the drop (ue_to_upf rather than no_route). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_LOCAL_ADDRS);
	__type(key, __be32);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_local_addrs SEC(".maps");

/* The UPF's own services UEs may reach (ue_to_upf_allowed). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_UE_ALLOWED);
	__type(key, struct ue_allowed_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_ue_allowed SEC(".maps");

/* bpf_fib_lookup without BPF_FIB_LOOKUP_* flags: policy rules, the tables and the
 * neighbours, as the kernel would forward the packet. */
#define FIB_LOOKUP_AS_FORWARDED 0

/* What route_ipv4 is given. */
enum route_kind {
	ROUTE_BUILT,    /* an outer header built here: its TTL is its own */
	ROUTE_FORWARD,  /* a packet forwarded as it came: TTL checked and decremented */
	ROUTE_FROM_UE,  /* the same, decapsulated from a UE's tunnel: never for the UPF itself */
};

/* not_forwarded decides on a packet from a UE that the FIB will not forward (NOT_FWDED:
 * local, broadcast or no route; FWD_DISABLED: the kernel could only deliver it locally).
 * Handed to the kernel it would reach the UPF's own sockets (PFCP, the API, SSH…), so it is
 * dropped: ue_to_upf when the destination is the UPF's (a local or broadcast address,
 * loopback, multicast), no_route otherwise; only a service in xupf_ue_allowed goes to the
 * kernel. Off the fast path: a forwarded packet never gets here. */
static __always_inline int not_forwarded(struct iphdr *ip, void *data_end, enum stat kernel_stat)
{
	struct ue_allowed_key key = { .addr = ip->daddr, .proto = ip->protocol };
	__be32 d = ip->daddr;

	key.port = l4_ports(ip, ip->ihl * 4, data_end) & 0xffff;
	if (bpf_map_lookup_elem(&xupf_ue_allowed, &key)) {
		count_stat(kernel_stat);
		return XDP_PASS;
	}
	if ((d & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000) || /* 127.0.0.0/8 */
	    (d & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) || /* multicast */
	    d == bpf_htonl(0xffffffff) || bpf_map_lookup_elem(&xupf_local_addrs, &d))
		return drop(DROP_UE_TO_UPF);
	return drop(DROP_NO_ROUTE);
}

/* route_ipv4 routes the IPv4 packet that follows the Ethernet header at the start of ctx, of
 * the given kind. tx_stat counts a redirect, kernel_stat a hand-over to the kernel. Returns
 * the XDP action. */
static __always_inline int route_ipv4(struct xdp_md *ctx, enum route_kind kind,
				      enum stat tx_stat, enum stat kernel_stat)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup fib = {};
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	int forwarding = kind != ROUTE_BUILT;
	int rc;

	if ((void *)(ip + 1) > data_end)
		return drop(DROP_INTERNAL);  /* the caller wrote this header */

	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;

	/* The FIB comes before the TTL check: a UE's expiring packet to the UPF itself would be
	 * delivered, not expired, by the kernel. */
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), FIB_LOOKUP_AS_FORWARDED);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		break;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return drop(DROP_NO_ROUTE);
	case BPF_FIB_LKUP_RET_NOT_FWDED:
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
		if (kind == ROUTE_FROM_UE)
			return not_forwarded(ip, data_end, kernel_stat);
		break;
	}
	if (forwarding && ip->ttl <= 1) {
		count_stat(STAT_FIB_TTL);
		count_stat(kernel_stat);
		return XDP_PASS;
	}
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		break;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		/* The kernel resolves the neighbour and sends this packet; later ones take the
		 * fast path. */
		count_stat(STAT_FIB_NO_NEIGH);
		count_stat(kernel_stat);
		return XDP_PASS;
	default:
		/* NOT_FWDED (local), FWD_DISABLED (not from a UE), UNSUPP_LWT, FRAG_NEEDED: the
		 * kernel's call. */
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
	/* The flags are the action should the port have gone since the lookup above. */
	return bpf_redirect_map(&xupf_tx_ports, fib.ifindex, XDP_ABORTED);
}

#endif
