/* Routing: one lookup in the route table (xupf_route_dir), whose entries hold their next hop
 * resolved down to the MACs (internal/router keeps it from the kernel's tables or from the
 * configuration), then a devmap redirect. Anything the fast path cannot finish goes to the
 * kernel (XDP_PASS), which knows how. */
#ifndef XUPF_ROUTE_H
#define XUPF_ROUTE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include "csum.h"
#include "eth.h"
#include "parse.h"
#include "types.h"
#include "stats.h"

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

/* The route table: DIR-16-8-8, compiled by the daemon (internal/routedir) from the routes and,
 * for on-link destinations, a /32 per known neighbour. The first ROUTE_L1_ENTRIES words are
 * indexed by the destination's top 16 bits; a word is a slot of xupf_nexthops (0: no entry)
 * or, with ROUTE_CHUNK, the number of a chunk of ROUTE_CHUNK_ENTRIES words indexed by the
 * next 8 bits, whose words are the same again for the last 8. A lookup reads at most three
 * words (inlined array lookups) where an LPM trie walks node by node. The daemon writes the
 * words through an mmap of the map, each with one atomic store, and fills a chunk before it
 * points a word at it: a packet sees every word before or after a change. */
#define ROUTE_L1_ENTRIES (1 << 16)
#define ROUTE_CHUNK_ENTRIES (1 << 8)
#define ROUTE_CHUNK 0x80000000u

/* The map's value is a block of one chunk's words (an array pads a smaller value to 8
 * bytes): the first ROUTE_L1_BLOCKS blocks are the first level, chunk c is block
 * ROUTE_L1_BLOCKS + c. */
#define ROUTE_L1_BLOCKS (ROUTE_L1_ENTRIES / ROUTE_CHUNK_ENTRIES)

struct route_block {
	__u32 word[ROUTE_CHUNK_ENTRIES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ROUTE_L1_BLOCKS);  /* Load adds the chunks (router.max_route_chunks) */
	__type(key, __u32);
	__type(value, struct route_block);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_route_dir SEC(".maps");

/* The next hops the words point at (struct nexthop), resolved down to the frame to send. A
 * slot is written only while no word points at it (a changed next hop gets a fresh slot), so
 * a packet never meets half a next hop. Slot 0 stays zero: NH_KERNEL, as no entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);  /* Load sets its own (router.max_nexthops) */
	__type(key, __u32);
	__type(value, struct nexthop);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_nexthops SEC(".maps");

/* route_word returns word i of block b of xupf_route_dir, 0 (no entry) past its end. */
static __always_inline __u32 route_word(__u32 b, __u32 i)
{
	const struct route_block *block = bpf_map_lookup_elem(&xupf_route_dir, &b);

	return block ? *(volatile const __u32 *)&block->word[i & (ROUTE_CHUNK_ENTRIES - 1)] : 0;
}

/* route_lookup returns the next hop of the longest prefix holding daddr (NULL only past the
 * end of xupf_nexthops: slot 0 is no entry, NH_KERNEL). */
static __always_inline struct nexthop *route_lookup(__be32 daddr)
{
	__u32 a = bpf_ntohl(daddr);
	__u32 w = route_word(a >> 24, a >> 16);

	if (w & ROUTE_CHUNK) {
		w = route_word(ROUTE_L1_BLOCKS + (w & ~ROUTE_CHUNK), a >> 8);
		if (w & ROUTE_CHUNK)
			w = route_word(ROUTE_L1_BLOCKS + (w & ~ROUTE_CHUNK), a);
	}
	return bpf_map_lookup_elem(&xupf_nexthops, &w);
}

/* Pins (internal/routedir): the next hops of tunnel peers, kept by the daemon as it changes
 * the route table, so that a FAR's packets read one cache line instead of the table's words
 * and the next-hop slot. An entry's word is the pinned address (as on the wire) in its low
 * half and, in its high half, the xupf_nexthops slot of its longest prefix above the index
 * of the copy that holds that slot's next hop; 0 is no pin. The daemon writes a changed next
 * hop into the copy the word does not name, and only once no packet can still be reading it,
 * then names it with one atomic store of the word, through an mmap. A FAR names its peer's
 * entry (far.nh_pin), which is used only while it holds that peer: an entry unpinned and given
 * to another address, or cleared by a restarted daemon, sends the FAR's packets back to the
 * route table, never to another next hop. */
#ifndef XUPF_MAX_NH_PINS
#define XUPF_MAX_NH_PINS 4096
#endif

struct nh_pin {
	__u64 word;
	struct nexthop copy[2];
	__u64 pad;  /* to 64 bytes: in the mmapable array (values from a page) one cache line */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, XUPF_MAX_NH_PINS);
	__type(key, __u32);
	__type(value, struct nh_pin);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_nh_pins SEC(".maps");

/* pinned_nexthop returns the next hop of far's peer from its pin, NULL when the FAR has no
 * pin or its entry holds another address (the caller then walks the route table). */
static __always_inline const struct nexthop *pinned_nexthop(const struct far *far)
{
	__u32 i = far->nh_pin;
	const struct nh_pin *pin;
	__u64 w;

	if (!i)
		return NULL;
	pin = bpf_map_lookup_elem(&xupf_nh_pins, &i);
	if (!pin)
		return NULL;
	w = *(volatile const __u64 *)&pin->word;  /* one load: the address and copy of one store */
	if ((__u32)w != far->peer_addr)
		return NULL;
	return &pin->copy[(w >> 32) & 1];
}

/* Every IPv4 address of every interface in the UPF's namespace, and their broadcast
 * addresses: the daemon keeps it up to date from netlink. Read only when no route forwards an
 * uplink packet, to name the drop (ue_to_upf rather than no_route). */
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

/* What route_ipv4 is given. */
enum route_kind {
	ROUTE_BUILT,    /* an outer header built here: its TTL is its own */
	ROUTE_FORWARD,  /* a packet forwarded as it came: TTL checked and decremented */
	ROUTE_FROM_UE,  /* the same, decapsulated from a UE's tunnel: never for the UPF itself */
};

/* not_forwarded decides on a packet from a UE that no route forwards (NH_KERNEL: local,
 * broadcast, multicast, or no route at all): the kernel could only deliver it locally.
 * Handed to the kernel it would reach the UPF's own sockets (PFCP, the API, SSH…), so it is
 * dropped: ue_to_upf when the destination is the UPF's (a local or broadcast address,
 * loopback, multicast), no_route otherwise; only a service in xupf_ue_allowed goes to the
 * kernel. Off the fast path: a forwarded packet never gets here, so a subprogram, out of
 * route_ipv4's inlined code (stats.h's drop says why). */
static __noinline int not_forwarded(struct iphdr *ip, void *data_end, struct stats *st,
					 enum stat kernel_stat)
{
	struct ue_allowed_key key = { .addr = ip->daddr, .proto = ip->protocol };
	__be32 d = ip->daddr;

	key.port = l4_ports(ip, ip->ihl * 4, data_end) & 0xffff;
	if (bpf_map_lookup_elem(&xupf_ue_allowed, &key)) {
		stats_add(st, kernel_stat);
		return XDP_PASS;
	}
	if ((d & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000) || /* 127.0.0.0/8 */
	    (d & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) || /* multicast */
	    d == bpf_htonl(0xffffffff) || bpf_map_lookup_elem(&xupf_local_addrs, &d))
		return drop(DROP_UE_TO_UPF);
	return drop(DROP_NO_ROUTE);
}

/* route_ipv4 routes the IPv4 packet that follows the Ethernet header at the start of ctx, of
 * the given kind. tunnel is the FAR whose outer header (ROUTE_BUILT) the packet has, whose
 * peer's pin gives the next hop; NULL: the route table does. tx_stat counts a redirect,
 * kernel_stat a hand-over to the kernel, in st (the packet's stats_here, looked up once for
 * all its counts). Returns the XDP action. */
static __always_inline int route_ipv4(struct xdp_md *ctx, enum route_kind kind,
				      const struct far *tunnel, struct stats *st,
				      enum stat tx_stat, enum stat kernel_stat)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	int forwarding = kind != ROUTE_BUILT;
	const struct nexthop *nh;
	__u8 nh_kind = NH_KERNEL;

	if ((void *)(ip + 1) > data_end)
		return drop(DROP_INTERNAL);  /* the caller wrote this header */

	/* The route comes before the TTL check: a UE's expiring packet to the UPF itself would be
	 * delivered, not expired, by the kernel. */
	nh = tunnel ? pinned_nexthop(tunnel) : NULL;
	if (!nh)
		nh = route_lookup(ip->daddr);
	if (nh)
		nh_kind = nh->kind;
	if (nh_kind == NH_NO_ROUTE)
		return drop(DROP_NO_ROUTE);
	if (nh_kind == NH_KERNEL && kind == ROUTE_FROM_UE)
		return not_forwarded(ip, data_end, st, kernel_stat);
	if (forwarding && ip->ttl <= 1) {
		stats_add(st, STAT_FIB_TTL);
		stats_add(st, kernel_stat);
		return XDP_PASS;
	}
	/* Local (not from a UE), or over the MTU: the kernel delivers, or fragments or answers
	 * ICMP Fragmentation Needed. The MTU comes before the neighbour, as in the kernel. */
	if (!nh || nh_kind == NH_KERNEL || bpf_ntohs(ip->tot_len) > nh->mtu) {
		stats_add(st, kernel_stat);
		return XDP_PASS;
	}
	if (nh_kind != NH_FORWARD) {
		/* The kernel resolves the neighbour and sends this packet; later ones take the
		 * fast path once the router has the neighbour. */
		stats_add(st, STAT_FIB_NO_NEIGH);
		stats_add(st, kernel_stat);
		return XDP_PASS;
	}
	/* Only interfaces we are attached to are in the devmap; for any other the kernel
	 * forwards, and the packet is left as it came so its TTL is not taken twice. The helper
	 * only picks the target (the redirect happens when the program returns), and its flags
	 * are what it returns without one: so this one devmap lookup is also the check. */
	if (bpf_redirect_map(&xupf_tx_ports, nh->ifindex, XDP_PASS) != XDP_REDIRECT) {
		stats_add(st, kernel_stat);
		return XDP_PASS;
	}
	if (forwarding)
		ipv4_decrease_ttl(ip);
	eth_set_macs(eth, nh->dmac, nh->smac);
	stats_add(st, tx_stat);
	return XDP_REDIRECT;
}

#endif
