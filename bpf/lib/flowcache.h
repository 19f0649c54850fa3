/* Flow cache (the accelerator of paper 003): the kernel forwards the first packets of a transit
 * flow as it would without xupf; a TC-egress program on the attached interfaces records what
 * the kernel did to such a packet (out interface, MACs, VLAN tag, DSCP, TTL) in xupf_flows,
 * keyed by the 5-tuple and where the packet came in; the XDP program then does the same to the
 * flow's later packets and redirects them. The kernel keeps deciding (routes, firewall, tc);
 * the cache repeats its decision. Only IPv4 TCP and UDP are cached: ICMP, fragments, TCP FIN
 * and RST and anything else stay with the kernel.
 *
 * The learner learns only from packets the XDP program handed to the kernel: on a miss, XDP
 * notes what the packet looked like on arrival in xupf_flow_seen, and the learner learns a
 * flow only if it finds that note (and consumes it). Packets the host sends itself, or that
 * arrive on interfaces xupf is not attached to, never leave a note.
 *
 * A note also carries the generation (xupf_flow_gen) it was taken in: xupfd bumps the
 * generation at each kernel change that voids flows, and the learner drops a note of an
 * earlier generation. A packet the kernel forwarded by its old decision just before a change
 * therefore cannot be learnt after it. The generation's high half is the epoch: a change
 * that may alter any decision (routes, rules, links, the ruleset) starts a new epoch, and a
 * cached flow of an earlier epoch than the current one is void: the hit path treats it as a
 * miss and removes it (flow_void), so the change takes effect at the next packet, whatever
 * the table's size. Narrower changes (a neighbour, a conntrack entry) add one to the low half,
 * without carrying into the epoch, and remove their flows by a scan or by key; aging reclaims
 * the void flows no packet came for.
 *
 * With FLOWCACHE_KERNEL_N6 the kernel also treats the UEs' traffic on N6 (NAT, filtering,
 * routing): a UE's uplink packet, decapsulated and charged to its session, goes to the kernel
 * unless its flow is cached; the learner reads the translation the kernel applied from the
 * flow's conntrack entry and caches both directions. A later uplink packet is translated and
 * forwarded here (flow_from_ue); a later downlink packet to the translated address and port
 * is translated back, then goes through the UE session's downlink rules (flow_to_ue). Its
 * notes and what is learnt from them follow the generation as the transit flows' do, both
 * directions together. */
#ifndef XUPF_FLOWCACHE_H
#define XUPF_FLOWCACHE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parse.h"
#include "csum.h"
#include "downlink.h"
#include "eth.h"
#include "route.h"
#include "rules.h"
#include "stats.h"
#include "flowtable.h"

/* What the flow cache does (cfg_flowcache): a load-time setting, so with FLOWCACHE_OFF the
 * verifier drops every line of it and the module costs nothing. */
enum flowcache_mode {
	FLOWCACHE_OFF = 0,
	FLOWCACHE_LEARN = 1, /* learn at TC egress, forward hits in XDP */
	FLOWCACHE_KERNEL_N6 = 2, /* as LEARN, and UE traffic without a tunnel goes through the
				  * kernel once decapsulated; its translation is learnt */
};

volatile const __u32 cfg_flowcache = FLOWCACHE_OFF;

/* Who treats a UE's uplink without a tunnel, with FLOWCACHE_KERNEL_N6, in the network
 * instances whose FARs carry no override (FAR_F_KERNEL_N6, FAR_F_ROUTED_N6): a load-time
 * setting rather than a bit every FAR carries, so that the FARs an earlier build pinned, which
 * have no such bits, keep the treatment they had until xupfd writes them again. */
enum n6_default {
	ROUTED_N6 = 0, /* the datapath routes it */
	KERNEL_N6 = 1, /* the kernel: flow_from_ue */
};

volatile const __u32 cfg_n6_default = ROUTED_N6;

/* far_kernel_n6 is non-zero when the kernel treats the uplink far forwards on N6: the FAR's
 * override, else the default. */
static __always_inline int far_kernel_n6(const struct far *far)
{
	if (cfg_n6_default == KERNEL_N6)
		return !(far->flags & FAR_F_ROUTED_N6);
	return far->flags & FAR_F_KERNEL_N6;
}

#ifndef XUPF_MAX_OWN_ADDRS
#define XUPF_MAX_OWN_ADDRS 7  /* internal/datapath maxOwnAddrs: with the count, one 32-byte read */
#endif

/* Addresses of the UPF itself (the namespace's, loopback's and broadcast ones left out), at
 * most XUPF_MAX_OWN_ADDRS of them; xupfd keeps the array in step with the addresses as it does
 * xupf_local_addrs. With FLOWCACHE_KERNEL_N6 the replies the kernel's NAT translates back
 * arrive to such an address (masquerade's, the N6 interface's), which xupfd gives no session
 * (unusableUE, the pools' allocator, static sessions). So xupf_xdp does not look them up among the
 * UEs' addresses, a miss that reads both buckets of the key table (about 10 ns of a NAT reply's
 * hit): an array of a few words read from one line, compared against the count it holds,
 * costs a packet to a UE less. An address beyond the array's room is looked up as before,
 * and misses. */
struct own_addrs {
	__u32 n;
	__be32 addr[XUPF_MAX_OWN_ADDRS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);  /* for its page-aligned value: never across two lines */
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct own_addrs);
} xupf_own_addrs SEC(".maps");

/* flow_own_addr tells whether addr is one of xupf_own_addrs. A packet may meet the array being
 * written: the map update copies the value plainly, so the count and the addresses read may be
 * of two updates, and an address may be read half old, half new. A whole address is the UPF's
 * either way: one being added, or one being removed, which no session can hold before the
 * update is done (syncLocalAddrs writes the array before IsLocal's copy). A half-written one is
 * no address in particular: a packet to exactly that value, at that instant, skips its UE
 * lookup and goes to the kernel as the UPF's packets do, once. */
static __always_inline int flow_own_addr(__be32 addr)
{
	__u32 zero = 0, n;
	const struct own_addrs *own = bpf_map_lookup_elem(&xupf_own_addrs, &zero);
	int i;

	if (!own)
		return 0;
	n = *(volatile const __u32 *)&own->n;
	for (i = 0; i < XUPF_MAX_OWN_ADDRS; i++) {
		if (i >= n)
			return 0;
		if (addr == own->addr[i])
			return 1;
	}
	return 0;
}

#ifndef XUPF_MAX_FLOW_SEEN
#define XUPF_MAX_FLOW_SEEN 16384  /* flows waiting for the learner; the least recent go first */
#endif

#define VLAN_VID_MASK 0x0fff

/* An 802.1Q or 802.1ad tag, after the MAC addresses. */
struct vlan_tag {
	__be16 tci;
	__be16 encap_proto;
};

/* flow_key.ifindex (and flow_seen.ifindex) of a packet a UE sent, decapsulated: no interface
 * has index 0. */
#define FLOW_FROM_UE 0

/* What becomes of a flow's VLAN tag between arrival and departure. */
enum flow_vlan_action {
	FLOW_VLAN_NONE = 0,    /* untagged in, untagged out */
	FLOW_VLAN_PUSH = 1,    /* untagged in, tagged out (vlan_proto, vlan_tci) */
	FLOW_VLAN_POP = 2,     /* tagged in, untagged out */
	FLOW_VLAN_REWRITE = 3, /* tagged in, tagged out: the tag becomes (vlan_proto, vlan_tci) */
};

/* Bits of flow.flags: the IP header changes the kernel made. */
enum flow_flag {
	FLOW_F_TTL = 1 << 0,  /* decrement the TTL (forwarded, not bridged) */
	FLOW_F_DSCP = 1 << 1, /* set the DSCP to tos's (a tc or nftables rule changed it) */
	FLOW_F_SNAT = 1 << 2, /* from a UE: the source becomes nat_addr:nat_port */
	FLOW_F_TO_UE = 1 << 3, /* to a UE's translated address: the destination becomes
				* nat_addr:nat_port (the UE's), then the session's downlink rules
				* apply; the out interface, MACs and MTU are unused */
};

/* What the XDP program saw of a packet it handed to the kernel, for the learner to compare. */
struct flow_seen {
	__u32 ifindex;  /* arrival interface; FLOW_FROM_UE */
	__u16 vlan_id;  /* arrival VLAN ID, 0 untagged */
	__u8 tos;
	__u8 ttl;
	__u32 gen;      /* xupf_flow_gen when the packet was handed over */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, XUPF_MAX_FLOW_SEEN);
	__type(key, struct flow_key);
	__type(value, struct flow_seen);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_flow_seen SEC(".maps");

/* The generation of the kernel's decisions: xupfd moves it on (atomically, through an mmap of
 * the map) before each removal of flows a kernel change voids, and before a flush. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_flow_gen SEC(".maps");

/* flow_gen returns the current generation (0 only if the map were empty). */
static __always_inline __u32 flow_gen(void)
{
	__u32 zero = 0;
	__u32 *gen = bpf_map_lookup_elem(&xupf_flow_gen, &zero);

	return gen ? *(volatile __u32 *)gen : 0;
}

/* The epoch is the generation's high half (flowEpochShift in flows.go). */
#define FLOW_EPOCH_SHIFT 16

static __always_inline __u16 flow_epoch(__u32 gen)
{
	return gen >> FLOW_EPOCH_SHIFT;
}

/* flow_current tells whether f was learnt in the current epoch: one load of the generation,
 * a line every packet reads and no writer but xupfd touches between changes. */
static __always_inline int flow_current(const struct flow *f)
{
	return f->epoch == flow_epoch(flow_gen());
}

/* flow_note leaves the learner seen, the note of a packet handed to the kernel, under key
 * (its 5-tuple, vlan_id and ifindex 0), in the current generation. A note the learner has not
 * consumed keeps its generation: the packet it was taken for may still be in the kernel,
 * decided on before a change, and must not be learnt on this newer packet's note. The learner
 * consumes a stale note, so the flow's next packet starts afresh. */
static __always_inline void flow_note(const struct flow_key *key, struct flow_seen *seen)
{
	struct flow_seen *prev = bpf_map_lookup_elem(&xupf_flow_seen, key);

	seen->gen = prev ? prev->gen : flow_gen();
	bpf_map_update_elem(&xupf_flow_seen, key, seen, BPF_ANY);
}

/* The flow clock: CLOCK_MONOTONIC nanoseconds, as of the daemon's last tick (flowClockPeriod
 * in flows.go), which it stores through an mmap of the map as it does the generation. A
 * forwarded packet stamps its flow's last_seen from it with one inlined array lookup:
 * bpf_ktime_get_coarse_ns, a helper call, cost some 45 ns a packet on the test VM, and aging
 * needs no finer time than a tick. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_flow_clock SEC(".maps");

/* flow_parse fills key with the 5-tuple of the IPv4 TCP or UDP packet at ip, and returns its
 * TCP flags byte (0 for UDP), or -1 when the packet is not one the cache takes: another
 * protocol, a fragment, or headers cut short. */
static __always_inline int flow_parse(struct iphdr *ip, void *data_end, struct flow_key *key)
{
	__u32 ihl_len = ipv4_hdr_len(ip, data_end);
	struct tcphdr *tcp;
	__be16 *ports;

	if (!ihl_len || ipv4_is_fragment(ip))
		return -1;
	ports = (void *)ip + ihl_len;
	if (ip->protocol == IPPROTO_TCP) {
		tcp = (void *)ports;
		if ((void *)(tcp + 1) > data_end)
			return -1;
	} else if (ip->protocol != IPPROTO_UDP || (void *)(ports + 2) > data_end) {
		return -1;
	}
	key->saddr = ip->saddr;
	key->daddr = ip->daddr;
	key->sport = ports[0];
	key->dport = ports[1];
	key->proto = ip->protocol;
	return ip->protocol == IPPROTO_TCP ? ((__u8 *)ports)[13] : 0;
}

/* Conntrack's lookup for TC programs (kfunc, net/netfilter/nf_conntrack_bpf.c). Weak: a kernel
 * without conntrack loads the program all the same, and then nothing is tracked. */
struct nf_conn {
	int opaque;  /* never read here; a definition (not a declaration) for the loader's type check */
};
struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u16 ct_zone_id;
	__u8 ct_zone_dir;
	__u8 reserved[3];
};
extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *skb, struct bpf_sock_tuple *tuple, __u32 tuple_size,
					 struct bpf_ct_opts *opts, __u32 opts_size) __ksym __weak;
extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *ctx, struct bpf_sock_tuple *tuple, __u32 tuple_size,
					 struct bpf_ct_opts *opts, __u32 opts_size) __ksym __weak;
extern void bpf_ct_release(struct nf_conn *ct) __ksym __weak;

#define BPF_F_CURRENT_NETNS_ID (-1)

/* flow_tracked reports whether conntrack has an entry for the flow of key (either direction).
 * Such a flow stays with the kernel: conntrack must see its packets, or it would let the
 * entry expire under a live flow and judge the flow's FIN, far past the TCP window it last
 * saw, invalid (and a stateful ruleset drops invalid packets). */
static __always_inline int flow_tracked(struct __sk_buff *skb, const struct flow_key *key)
{
	struct bpf_sock_tuple tuple = {};
	struct bpf_ct_opts opts = { .netns_id = BPF_F_CURRENT_NETNS_ID, .l4proto = key->proto };
	struct nf_conn *ct;

	if (!bpf_skb_ct_lookup)
		return 0;
	tuple.ipv4.saddr = key->saddr;
	tuple.ipv4.daddr = key->daddr;
	tuple.ipv4.sport = key->sport;
	tuple.ipv4.dport = key->dport;
	ct = bpf_skb_ct_lookup(skb, &tuple, sizeof(tuple.ipv4), &opts, sizeof(opts));
	if (!ct)
		return 0;
	bpf_ct_release(ct);
	return 1;
}

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_RST 0x04

/* csum_replace16 patches an Internet checksum for one 16-bit word changing from old to new
 * (RFC 1624, eqn. 3). */
static __always_inline void csum_replace16(__sum16 *check, __be16 old, __be16 new)
{
	__u32 sum = (__u16)~*check + (__u16)~old + (__u16)new;

	sum = (sum & 0xffff) + (sum >> 16);
	*check = ~(__u16)((sum & 0xffff) + (sum >> 16));
}

/* flow_rewrite_l2 writes the cached frame header in front of the IP header: MACs, and the
 * VLAN tag pushed, popped or rewritten. Returns 0, or -1 when the head could not move (the
 * packet is then dropped: it was changed already). */
static __always_inline int flow_rewrite_l2(struct xdp_md *ctx, const struct flow *f)
{
	int delta = 0;
	struct ethhdr *eth;
	struct vlan_tag *tag;
	void *data, *data_end;

	if (f->vlan_action == FLOW_VLAN_PUSH)
		delta = -(int)sizeof(struct vlan_tag);
	else if (f->vlan_action == FLOW_VLAN_POP)
		delta = sizeof(struct vlan_tag);
	if (delta && bpf_xdp_adjust_head(ctx, delta))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	tag = (void *)(eth + 1);
	if ((void *)(tag + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, f->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, f->smac, ETH_ALEN);
	switch (f->vlan_action) {
	case FLOW_VLAN_PUSH:
		tag->encap_proto = bpf_htons(ETH_P_IP);
		/* fall through */
	case FLOW_VLAN_REWRITE:
		eth->h_proto = f->vlan_proto;
		tag->tci = f->vlan_tci;
		break;
	case FLOW_VLAN_POP:
		eth->h_proto = bpf_htons(ETH_P_IP);
		break;
	}
	return 0;
}

#define CSUM_MANGLED_0 0xffff  /* a UDP checksum that works out at 0 is sent as this (RFC 768) */

/* flow_nat writes f's address and port into the TCP or UDP packet at ip, the source's with
 * FLOW_F_SNAT and the destination's with FLOW_F_TO_UE, and patches the checksums by the
 * changes the learner worked out: nothing is summed per packet. A UDP checksum of 0 (none)
 * stays 0. flow_parse has checked the headers; the verifier wants them checked again. */
static __always_inline void flow_nat(struct iphdr *ip, void *data_end, const struct flow *f)
{
	void *l4 = (void *)ip + ip->ihl * 4;
	__be16 *port = l4;
	__sum16 *check;

	if (ip->protocol == IPPROTO_TCP) {
		if (l4 + sizeof(struct tcphdr) > data_end)
			return;
		check = &((struct tcphdr *)l4)->check;
	} else {
		if (l4 + sizeof(struct udphdr) > data_end)
			return;
		check = &((struct udphdr *)l4)->check;
	}
	if (f->flags & FLOW_F_SNAT) {
		ip->saddr = f->nat_addr;
	} else {
		ip->daddr = f->nat_addr;
		port++;
	}
	*port = f->nat_port;
	ip->check = csum_add_delta(ip->check, f->csum_l3);
	if (ip->protocol == IPPROTO_TCP) {
		*check = csum_add_delta(*check, f->csum_l4);
	} else if (*check) {
		*check = csum_add_delta(*check, f->csum_l4);
		if (!*check)
			*check = CSUM_MANGLED_0;
	}
}

/* flow_count adds a packet of len bytes to f's statistics. last_seen only moves forward: the
 * learner stamped first_seen with the exact time, which the clock may not have reached. */
static __always_inline void flow_count(struct flow *f, __u32 len)
{
	__u32 key = 0;
	__u64 *clock = bpf_map_lookup_elem(&xupf_flow_clock, &key);
	/* Read once: xupfd stores it through its mapping meanwhile. */
	__u64 now = clock ? *(volatile __u64 *)clock : 0;

	__sync_fetch_and_add(&f->packets, 1);
	__sync_fetch_and_add(&f->bytes, len);
	if (now > f->last_seen)
		f->last_seen = now;
}

/* flow_forward does to the IPv4 packet at ip what the kernel did to its flow's first packet
 * (DSCP, translation, TTL, frame header: f, the action flow_lookup copied) and counts it in
 * stats (its slot's); the caller has picked the redirect. Returns 0, or -1 when the frame
 * could not be rebuilt (the packet was changed already). */
static __always_inline int flow_forward(struct xdp_md *ctx, struct iphdr *ip, void *data_end,
					const struct flow *f, struct flow *stats)
{
	__be16 old;

	flow_count(stats, bpf_ntohs(ip->tot_len));
	if (f->flags & FLOW_F_DSCP) {
		old = *(__be16 *)ip;
		ip->tos = (ip->tos & 0x03) | f->tos;
		csum_replace16(&ip->check, old, *(__be16 *)ip);
	}
	if (f->flags & FLOW_F_SNAT)
		flow_nat(ip, data_end, f);
	if (f->flags & FLOW_F_TTL)
		ipv4_decrease_ttl(ip);
	return flow_rewrite_l2(ctx, f);
}

/* flowcache_xdp's answer for a packet it handed to the kernel having counted it (the
 * session's downlink rules did): the caller returns XDP_PASS without counting pass. */
#define FLOW_PASSED (-1)

/* flow_to_ue takes a packet of a FLOW_F_TO_UE flow (f its action, stats its slot's
 * statistics), sent to a UE's translated address: translated back, it is the UE's downlink
 * packet and takes the session's rules (which may hand it to the kernel, counted:
 * FLOW_PASSED). One the kernel must answer (TTL running out), or whose session is gone, goes
 * to the kernel as it came (XDP_PASS). */
static __always_inline int flow_to_ue(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip,
				      void *data_end, const struct flow *f, struct flow *stats)
{
	const struct rule_ref *ref = dl_ref(f->nat_addr);
	int action;

	if (!ref || ip->ttl <= 1)
		return XDP_PASS;
	flow_count(stats, bpf_ntohs(ip->tot_len));
	flow_nat(ip, data_end, f);
	count_stat(STAT_FLOW_HIT);
	action = handle_downlink(ctx, eth, ip, ref, data_end, PKT_FROM_WIRE);
	return action == XDP_PASS ? FLOW_PASSED : action;
}

/* flow_end deletes the entry of key, counted as a FIN or RST's (the entry count subtracts
 * flow_ended). */
static __always_inline void flow_end(const struct flow_key *key)
{
	if (!flow_delete(key))
		count_stat(STAT_FLOW_ENDED);
}

/* flow_pair_key sets pair to the key of the other entry of a translated UE flow, which
 * flow_learn_ue caches as a pair (flowPair in flows.go): for the UE's entry (key, f;
 * FLOW_F_SNAT) the replies' to the translated address and port, arriving where the UE's
 * packets leave; for the replies' entry (FLOW_F_TO_UE) the UE's, its tuple reversed and
 * untranslated. Returns 0 for an entry of no pair. */
static __always_inline int flow_pair_key(const struct flow_key *key, const struct flow *f,
					 struct flow_key *pair)
{
	if (key->ifindex == FLOW_FROM_UE && (f->flags & FLOW_F_SNAT)) {
		*pair = (struct flow_key){ .saddr = key->daddr, .daddr = f->nat_addr, .sport = key->dport,
					   .dport = f->nat_port, .proto = key->proto, .ifindex = f->ifindex };
		return 1;
	}
	if (f->flags & FLOW_F_TO_UE) {
		*pair = (struct flow_key){ .saddr = f->nat_addr, .daddr = key->saddr, .sport = f->nat_port,
					   .dport = key->sport, .proto = key->proto, .ifindex = FLOW_FROM_UE };
		return 1;
	}
	return 0;
}

/* flow_remove_void deletes the void entry of key, counted as flow_voided (the entry count
 * subtracts it). */
static __always_inline void flow_remove_void(const struct flow_key *key)
{
	if (!flow_delete(key))
		count_stat(STAT_FLOW_VOIDED);
}

/* flow_void removes f, the entry of key, learnt in an earlier epoch (flow_current), and the
 * other entry of its pair, learnt with it: the packet that found it goes the way of a miss,
 * and its flow is learnt afresh from the kernel's new decision (an insert would not replace
 * the void entry). The UE's entry goes first: a UE's entry is never cached without its replies'. */
static __always_inline void flow_void(const struct flow_key *key, const struct flow *f)
{
	struct flow_key pair;
	int paired = flow_pair_key(key, f, &pair);

	if (paired && key->ifindex != FLOW_FROM_UE)
		flow_remove_void(&pair);
	flow_remove_void(key);
	if (paired && key->ifindex == FLOW_FROM_UE)
		flow_remove_void(&pair);
}

/* flow_find looks key's flow up, copying its action into act, and returns the action; NULL
 * when key has no flow, or a void one, which it removes. *slot and *state are the flow's
 * slot and the state word its action was read under (for flow_free). */
static __always_inline const struct flow *flow_find(const struct flow_key *key, struct flow_act_buf *act,
						    struct flow_slot **slot, __u32 *state)
{
	const struct flow *f;

	*slot = flow_lookup(key, act, state);
	if (!*slot)
		return NULL;
	f = flow_act(act);
	if (!flow_current(f)) {
		flow_void(key, f);
		return NULL;
	}
	return f;
}

/* flow_reply takes a packet of the FLOW_F_TO_UE flow f (keyed key; its action, and stats its
 * slot's statistics) to the UE: only this path
 * can deliver it, the kernel has no route to a UE. A FIN or RST goes the same way, the UE's
 * stack judging it (a blind RST with a wrong sequence number is ignored there), and then ends
 * both entries of the pair, this one and the UE's: the closing connection's later packets are
 * the kernel's to see, and the UE's next packet learns the pair again. Returns flow_to_ue's
 * answer. */
static __always_inline int flow_reply(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip,
				      void *data_end, const struct flow_key *key, const struct flow *f,
				      struct flow *stats, int tcp_flags)
{
	struct flow_key ue;
	int action;

	flow_pair_key(key, f, &ue);
	action = flow_to_ue(ctx, eth, ip, data_end, f, stats);

	if (tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) {
		flow_end(key);
		flow_end(&ue);
	}
	return action;
}

/* flowcache_xdp forwards a packet of a cached flow and returns XDP_REDIRECT (or XDP_DROP if
 * it was changed and could not be finished), or FLOW_PASSED; XDP_PASS hands the packet to the
 * kernel as it came, uncounted. Called on the path that would otherwise hand every packet to
 * the kernel. */
static __always_inline int flowcache_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct vlan_tag *tag = NULL;
	struct flow_key key = {};
	struct flow_seen seen;
	struct flow_slot *slot;
	struct flow_act_buf act;
	const struct flow *f;
	struct iphdr *ip;
	__be16 proto;
	__u32 state;
	int tcp_flags;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	proto = eth->h_proto;
	ip = (void *)(eth + 1);
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		tag = (void *)(eth + 1);
		if ((void *)(tag + 1) > data_end)
			return XDP_PASS;
		proto = tag->encap_proto;
		key.vlan_id = bpf_ntohs(tag->tci) & VLAN_VID_MASK;
		/* A priority tag (VLAN ID 0) could not be told from no tag in the key. */
		if (!key.vlan_id)
			return XDP_PASS;
		ip = (void *)(tag + 1);
	}
	if (proto != bpf_htons(ETH_P_IP) || (void *)(ip + 1) > data_end || ip->version != 4)
		return XDP_PASS;
	tcp_flags = flow_parse(ip, data_end, &key);
	if (tcp_flags < 0)
		return XDP_PASS;
	key.ifindex = ctx->ingress_ifindex;

	f = flow_find(&key, &act, &slot, &state);
	if (f && cfg_flowcache == FLOWCACHE_KERNEL_N6 && (f->flags & FLOW_F_TO_UE))
		return flow_reply(ctx, eth, ip, data_end, &key, f, &slot->flow, tcp_flags);
	if (tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) {
		/* The end of a connection is the kernel's to see (conntrack); the flow is no longer
		 * one to cache, and not learnt again from this packet. */
		if (f && !flow_free(slot, state))
			count_stat(STAT_FLOW_ENDED);
		return XDP_PASS;
	}
	if (!f) {
		count_stat(STAT_FLOW_MISS);
		seen = (struct flow_seen){ .ifindex = key.ifindex, .vlan_id = key.vlan_id,
					   .tos = ip->tos, .ttl = ip->ttl };
		key.vlan_id = 0;
		key.ifindex = 0;
		flow_note(&key, &seen);
		return XDP_PASS;
	}
	/* What the kernel would not forward as it did the first packet: an expiring TTL (ICMP
	 * Time Exceeded) and a packet over the out MTU (fragmentation or ICMP). */
	if (((f->flags & FLOW_F_TTL) && ip->ttl <= 1) || bpf_ntohs(ip->tot_len) > f->mtu)
		return XDP_PASS;
	/* The devmap lookup is also the check that the out interface is still attached. */
	if (bpf_redirect_map(&xupf_tx_ports, f->ifindex, XDP_PASS) != XDP_REDIRECT)
		return XDP_PASS;
	if (flow_forward(ctx, ip, data_end, f, &slot->flow))
		return drop(DROP_INTERNAL);
	count_stat(STAT_FLOW_HIT);
	return XDP_REDIRECT;
}

/* flow_return takes a packet arriving on the return device's peer (xupf_xdp_return): a veth
 * pair xupfd makes with FLOWCACHE_KERNEL_N6, the kernel's routes for the UE pools pointing into
 * one end. So it is a packet the kernel sends a UE (a reply it translated back before the cache
 * carries the flow: a TCP handshake, a UDP reply after an invalidation, whose flow's replies'
 * entry it learns once the rules forward it: flow_learn_reply), and it takes the UE's
 * session's downlink rules like any other. The kernel forwarded it, taking the UPF's hop off
 * the TTL (it forwards only a TTL above 1), and the downlink takes it again: it is given back
 * first, so the packet crosses the UPF as one hop whichever path it took (one the host itself
 * sent, not forwarded, gains one; 255 stays). Charged here, once: the kernel charged nothing.
 * But not one whose FAR forwards without a tunnel: the kernel would route it back here, and
 * it may be one the downlink handed the kernel at N6, charged there; its rules drop it,
 * no_route, before they charge it (PKT_FROM_KERNEL). What the rules hand to the kernel goes
 * there, unless it is still to a UE, which the kernel would route back here: that, a packet
 * to no session and anything but IPv4 are dropped, no_route. Returns the XDP action. */
static __always_inline void flow_learn_reply(struct xdp_md *ctx, const struct flow_key *key, __u32 len);

static __always_inline int flow_return(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const struct rule_ref *ref;
	struct flow_key key = {};
	struct iphdr *ip;
	__be16 old;
	__u32 len;
	int action, udp;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return drop(DROP_NO_ROUTE);
	ip = parse_ipv4(eth, data_end);
	if (!ip)
		return drop(DROP_NO_ROUTE);
	ref = dl_ref(ip->daddr);
	if (!ref)
		return drop(DROP_NO_ROUTE);
	/* Its 5-tuple before the rules encapsulate it, for flow_learn_reply. */
	udp = ip->protocol == IPPROTO_UDP && !flow_parse(ip, data_end, &key);
	len = bpf_ntohs(ip->tot_len);
	if (ip->ttl < 255) {
		old = *(__be16 *)&ip->ttl;
		ip->ttl++;
		csum_replace16(&ip->check, old, *(__be16 *)&ip->ttl);
	}
	action = handle_downlink(ctx, eth, ip, ref, data_end, PKT_FROM_KERNEL);
	if (action == XDP_REDIRECT && udp)
		flow_learn_reply(ctx, &key, len);
	if (action != XDP_PASS)
		return action;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return drop(DROP_INTERNAL);  /* handle_downlink left a frame */
	ip = parse_ipv4(eth, data_end);
	if (ip && dl_ref(ip->daddr))
		return drop(DROP_NO_ROUTE);
	return XDP_PASS;
}

/* ue_to_kernel hands a UE's packet, decapsulated, to the kernel for its N6 treatment: but
 * only one the kernel would forward. One it would deliver to the UPF itself is
 * not_forwarded's to judge, as on the fast path (the UPF's own sockets are not the UEs'). st
 * and the counts are route_ipv4's. */
static __always_inline int ue_to_kernel(struct iphdr *ip, void *data_end, struct stats *st)
{
	struct nexthop *nh = route_lookup(ip->daddr);
	__u8 kind = nh ? nh->kind : NH_KERNEL;

	if (kind == NH_NO_ROUTE)
		return drop(DROP_NO_ROUTE);
	if (kind == NH_KERNEL)
		return not_forwarded(ip, data_end, st, STAT_UL_KERNEL);
	stats_add(st, STAT_UL_KERNEL);
	return XDP_PASS;
}

/* flow_from_ue takes a UE's uplink packet, charged to its session and decapsulated (the
 * Ethernet header kept), when the kernel treats UE traffic on N6: a cached flow's packet is
 * translated and forwarded as the kernel did the flow's first; any other goes to the kernel,
 * noted for the learner. The caller has checked that the TTL is above 1. st is route_ipv4's.
 * Returns the XDP action. */
static __always_inline int flow_from_ue(struct xdp_md *ctx, struct stats *st)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct flow_key key = {}, pair;
	struct flow_seen seen;
	struct flow_slot *slot;
	struct flow_act_buf act;
	const struct flow *f;
	__u32 state;
	int tcp_flags;

	if ((void *)(ip + 1) > data_end)
		return drop(DROP_INTERNAL);  /* the caller checked this header */
	tcp_flags = flow_parse(ip, data_end, &key);
	if (tcp_flags < 0)
		return ue_to_kernel(ip, data_end, st);
	key.ifindex = FLOW_FROM_UE;
	f = flow_find(&key, &act, &slot, &state);
	if (tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)) {
		/* Both entries of the pair end, the UE's first, as on a FIN or RST from N6
		 * (flow_reply): the closing connection's replies are the kernel's to see, and
		 * reach the UE through the return device. A replies' entry left behind would
		 * outlive the connection, kept by the replies, and once conntrack gave the
		 * translated address and port to another UE's connection, deliver that
		 * connection's replies here. */
		if (f) {
			int paired = flow_pair_key(&key, f, &pair);

			if (!flow_free(slot, state))
				count_stat(STAT_FLOW_ENDED);
			if (paired)
				flow_end(&pair);
		}
		return ue_to_kernel(ip, data_end, st);
	}
	if (!f) {
		stats_add(st, STAT_FLOW_MISS);
		seen = (struct flow_seen){ .ifindex = FLOW_FROM_UE, .tos = ip->tos, .ttl = ip->ttl };
		flow_note(&key, &seen);
		return ue_to_kernel(ip, data_end, st);
	}
	if (bpf_ntohs(ip->tot_len) > f->mtu ||
	    bpf_redirect_map(&xupf_tx_ports, f->ifindex, XDP_PASS) != XDP_REDIRECT)
		return ue_to_kernel(ip, data_end, st);
	if (flow_forward(ctx, ip, data_end, f, &slot->flow))
		return drop(DROP_INTERNAL);
	stats_add(st, STAT_FLOW_HIT);
	stats_add(st, STAT_UL_TX);
	return XDP_REDIRECT;
}

/* Conntrack's entry as far as the learner reads it: CO-RE relocates each field to where this
 * kernel has it (the names are the kernel's; the ___xupf suffix keeps these apart from the
 * opaque struct nf_conn the kfuncs are declared with). */
union nf_inet_addr___xupf {
	__u32 all[4];
	__be32 ip;
} __attribute__((preserve_access_index));

union nf_conntrack_man_proto___xupf {
	__be16 all;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple___xupf {
	struct {
		union nf_inet_addr___xupf u3;
		union nf_conntrack_man_proto___xupf u;
	} src;
	struct {
		union nf_inet_addr___xupf u3;
		union {
			__be16 all;
		} u;
	} dst;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple_hash___xupf {
	struct nf_conntrack_tuple___xupf tuple;
} __attribute__((preserve_access_index));

struct nf_conn___xupf {
	unsigned long status;
	struct nf_conntrack_tuple_hash___xupf tuplehash[2];
} __attribute__((preserve_access_index));

#define CT_DIR_ORIGINAL 0
#define CT_DIR_REPLY 1
#define CT_SEEN_REPLY (1 << 1)  /* IPS_SEEN_REPLY: conntrack has seen a packet each way */

/* ct_tuple_reversed sets tuple to key's 5-tuple reversed: what a lookup of the entry whose
 * other direction key's packet is takes (the learners look a packet up as its reply). */
static __always_inline void ct_tuple_reversed(struct bpf_sock_tuple *tuple, const struct flow_key *key)
{
	tuple->ipv4.saddr = key->daddr;
	tuple->ipv4.daddr = key->saddr;
	tuple->ipv4.sport = key->dport;
	tuple->ipv4.dport = key->sport;
}

/* ct_tuple sets key's addresses and ports to those of h, one direction's tuple of a
 * conntrack entry (&ct->tuplehash[CT_DIR_*]: a constant index, which CO-RE relocates). */
static __always_inline void ct_tuple(const struct nf_conntrack_tuple_hash___xupf *h, struct flow_key *key)
{
	key->saddr = h->tuple.src.u3.ip;
	key->sport = h->tuple.src.u.all;
	key->daddr = h->tuple.dst.u3.ip;
	key->dport = h->tuple.dst.u.all;
}

/* flow_stats_start starts f's statistics with one packet of len bytes (its IP length), now. */
static __always_inline void flow_stats_start(struct flow *f, __u32 len)
{
	__u64 now = bpf_ktime_get_coarse_ns();

	f->first_seen = now;
	f->last_seen = now;
	f->packets = 1;
	f->bytes = len;
}

/* flow_learn_l3 sets in f the IP header changes the kernel made to a packet that arrived as
 * seen and leaves as ip. Returns -1 for a change the cache does not repeat (the TTL set). */
static __always_inline int flow_learn_l3(const struct flow_seen *seen, const struct iphdr *ip,
					 struct flow *f)
{
	if (seen->ttl == ip->ttl + 1)
		f->flags |= FLOW_F_TTL;
	else if (seen->ttl != ip->ttl)
		return -1;
	if ((seen->tos ^ ip->tos) & ~0x03) {
		f->flags |= FLOW_F_DSCP;
		f->tos = ip->tos & ~0x03;
	}
	return 0;
}

/* flow_learn_out sets in f where the packet at ip leaves (skb's interface, its MTU, the
 * frame's MACs) and starts its statistics with it. */
static __always_inline void flow_learn_out(struct __sk_buff *skb, const struct ethhdr *eth,
					   const struct iphdr *ip, struct flow *f)
{
	__u32 mtu = 0;

	f->ifindex = skb->ifindex;
	bpf_check_mtu(skb, 0, &mtu, 0, 0);  /* sets mtu to the interface's whatever it returns */
	f->mtu = mtu;
	__builtin_memcpy(f->dmac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(f->smac, eth->h_source, ETH_ALEN);
	flow_stats_start(f, bpf_ntohs(ip->tot_len));
}

/* flow_note_stale tells whether seen, a note the learner found, was taken in an earlier
 * generation than the current one, and counts it: the kernel decided on its packet before a
 * change xupfd processed, and the learner drops it. */
static __always_inline int flow_note_stale(const struct flow_seen *seen)
{
	if (seen->gen == flow_gen())
		return 0;
	count_stat(STAT_FLOW_STALE);
	return 1;
}

/* flow_insert adds the flow, counting flow_full when the table is full; returns the update's
 * error. The caller counts an added flow (flow_learnt) once it has added all it learnt. */
static __always_inline long flow_insert(const struct flow_key *key, const struct flow *f)
{
	long err = flow_table_insert(key, f);

	if (err == -FLOW_E2BIG)
		count_stat(STAT_FLOW_FULL);  /* the flow stays with the kernel */
	return err;
}

/* flow_learnt counts the flow the learner just added under key from a note of generation gen,
 * unless xupfd bumped the generation meanwhile: its scan may have read the flow's bucket
 * before the insert, so the learner takes the entry back itself. now is the generation read
 * after the insert, which published the entry with a locked instruction, as xupfd moves the
 * generation on with one before its scan: either the scan sees the entry or that read sees
 * the new generation. The learner reads it
 * once for all the entries it added from one note (a UE's flow and its replies'), so that they
 * stay or go together. An entry someone else removed first (the scan, a FIN) counts as learnt,
 * since its remover counted it gone: xupfd's count of the entries (learnt less ended less
 * removed) stays exact. */
static __always_inline void flow_learnt(const struct flow_key *key, __u32 gen, __u32 now)
{
	if (gen != now && !flow_delete(key)) {
		count_stat(STAT_FLOW_STALE);
		return;
	}
	count_stat(STAT_FLOW_LEARNED);
}

/* flow_set_nat makes f write addr and port where the packet had old_addr and old_port. */
static __always_inline void flow_set_nat(struct flow *f, __be32 old_addr, __be16 old_port,
					 __be32 addr, __be16 port)
{
	__u32 l3 = csum_delta32(old_addr, addr);

	f->nat_addr = addr;
	f->nat_port = port;
	f->csum_l3 = csum_fold_delta(l3);
	f->csum_l4 = csum_fold_delta(l3 + csum_delta16(old_port, port));
}

/* What a learner finds under a key its insert met taken (flow_held). */
enum flow_holder {
	FLOW_HELD_NONE,   /* nothing now: a void entry, removed (flow_find), or one gone meanwhile */
	FLOW_HELD_PAIR,   /* a current entry whose pair is the learner's other entry */
	FLOW_HELD_OTHER,  /* another current entry */
};

/* flow_held tells what holds key, whose insert failed -FLOW_EEXIST, for a learner that adds
 * pair beside it: the entry another learner of the same flow cached (flow_learn_reply's
 * replies' entry, or another CPU's learner of the same note), translated as the learner's
 * own would be, is its pair's (FLOW_HELD_PAIR); a void one is removed, with its pair, so
 * that the learner can insert afresh rather than leave it for the next packet to void
 * together with what the learner adds. */
static __always_inline enum flow_holder flow_held(const struct flow_key *key, const struct flow_key *pair)
{
	struct flow_act_buf act;
	struct flow_slot *slot;
	struct flow_key other;
	const struct flow *f;
	__u32 state;

	f = flow_find(key, &act, &slot, &state);
	if (!f)
		return FLOW_HELD_NONE;
	if (flow_pair_key(key, f, &other) && flow_key_equal(&other, pair))
		return FLOW_HELD_PAIR;
	return FLOW_HELD_OTHER;
}

/* flow_learn_reply learns the replies' entry of a translated UDP flow from a reply, key its
 * 5-tuple as the kernel sent it to the UE (translated back) through the return device, len
 * its IP length, once the session's rules forwarded it. After an invalidation a flow may
 * carry replies alone (a download), which went through the kernel until the UE sent again.
 * The reply as it arrived is conntrack's reply tuple, under which flowcache_xdp noted it,
 * with where it arrived; the UE's address and port are where the kernel sent it. Only the
 * replies' entry is learnt: the UE's needs where the kernel sends the UE's packets, which
 * only such a packet shows, and its next one learns it beside this one (flow_learn_ue).
 * Not TCP: conntrack would then meet the UE's acknowledgements of data it never saw (they
 * go through the kernel until the UE's entry is learnt), judge them out of its window,
 * invalid, and leave them untranslated; the UE's next acknowledgement learns the pair
 * anyway. Not a destination translated, nor a reply that arrived VLAN-tagged (the
 * replies' entry of flow_learn_ue is keyed untagged). */
static __always_inline void flow_learn_reply(struct xdp_md *ctx, const struct flow_key *key, __u32 len)
{
	struct bpf_sock_tuple tuple = {};
	struct bpf_ct_opts opts = { .netns_id = BPF_F_CURRENT_NETNS_ID, .l4proto = key->proto };
	struct nf_conn___xupf *ct;
	struct flow_key note = { .proto = key->proto }, reply;
	struct flow_seen *seen;
	struct flow r = { .flags = FLOW_F_TO_UE };
	__u64 *entries;
	int dir;

	/* Only where the UE's entry can follow: in a table this entry would fill, the pair could
	 * never be whole, and the lone entry, kept by its replies, would hold the room a pair
	 * needs. A table of one entry, which holds no pair, caches nothing of a UE's flow. Checked
	 * first: in a full table every reply through the kernel would otherwise pay the conntrack
	 * lookup and the note's for nothing. Not counted flow_full: without them the reply is not
	 * known to be one the cache would take, and its note stays for a later reply. */
	entries = flow_entries();
	if (!entries || *(volatile __u64 *)entries + 2 > cfg_max_flows || !bpf_xdp_ct_lookup)
		return;
	/* The reply reversed, untranslated, is the entry's original tuple: the UE's. */
	ct_tuple_reversed(&tuple, key);
	ct = (void *)bpf_xdp_ct_lookup(ctx, &tuple, sizeof(tuple.ipv4), &opts, sizeof(opts));
	if (!ct)
		return;
	dir = opts.dir;
	ct_tuple(&ct->tuplehash[CT_DIR_REPLY], &note);
	bpf_ct_release((struct nf_conn *)ct);
	if (dir != CT_DIR_ORIGINAL || note.saddr != key->saddr || note.sport != key->sport ||
	    (note.daddr == key->daddr && note.dport == key->dport))
		return;
	seen = bpf_map_lookup_elem(&xupf_flow_seen, &note);
	if (!seen || seen->ifindex == FLOW_FROM_UE)
		return;
	if (flow_note_stale(seen) || seen->vlan_id)
		goto done;
	flow_set_nat(&r, note.daddr, note.dport, key->daddr, key->dport);
	flow_stats_start(&r, len);
	r.epoch = flow_epoch(seen->gen);
	reply = note;
	reply.ifindex = seen->ifindex;
	if (!flow_insert(&reply, &r))
		flow_learnt(&reply, seen->gen, flow_gen());
done:
	bpf_map_delete_elem(&xupf_flow_seen, &note);
}

/* flow_learn_ue learns a UE's flow from its packet leaving as ip after the kernel's N6
 * treatment, key its 5-tuple as it leaves. The translation is conntrack's: the packet's
 * tuple reversed is the entry's reply tuple, and the entry's original tuple is the packet as
 * the UE sent it, which XDP must have noted (FLOW_FROM_UE). Both directions are cached: the
 * UE's flow, and (when translated) the replies to the translated address and port, arriving
 * where the UE's packets leave. A UDP flow is learnt from its first packet; a TCP flow once
 * conntrack has seen its reply, so that it follows the handshake. Destination translation,
 * VLAN-tagged departures and other changes stay with the kernel. */
static __always_inline void flow_learn_ue(struct __sk_buff *skb, const struct ethhdr *eth,
					  const struct iphdr *ip, const struct flow_key *key,
					  int tagged)
{
	struct bpf_sock_tuple tuple = {};
	struct bpf_ct_opts opts = { .netns_id = BPF_F_CURRENT_NETNS_ID, .l4proto = key->proto };
	struct nf_conn___xupf *ct = NULL;
	struct flow_key ue = *key, reply;
	struct flow_seen *seen;
	struct flow f = {}, r = {};
	unsigned long status = CT_SEEN_REPLY;  /* untracked: nothing to follow */
	int dir = CT_DIR_REPLY, ours = 1;
	enum flow_holder held;
	__u32 gen, now;
	long err;

	ct_tuple_reversed(&tuple, key);
	if (bpf_skb_ct_lookup)
		ct = (void *)bpf_skb_ct_lookup(skb, &tuple, sizeof(tuple.ipv4), &opts, sizeof(opts));
	if (ct) {
		dir = opts.dir;
		status = ct->status;
		ct_tuple(&ct->tuplehash[CT_DIR_ORIGINAL], &ue);
		bpf_ct_release((struct nf_conn *)ct);
	}
	/* A packet of the entry's reply direction was not sent by a UE. */
	if (dir != CT_DIR_REPLY)
		return;
	seen = bpf_map_lookup_elem(&xupf_flow_seen, &ue);
	if (!seen || seen->ifindex != FLOW_FROM_UE)
		return;
	if (flow_note_stale(seen))
		goto done;
	gen = seen->gen;
	if ((ue.proto == IPPROTO_TCP && !(status & CT_SEEN_REPLY)) || tagged ||
	    ue.daddr != key->daddr || ue.dport != key->dport || flow_learn_l3(seen, ip, &f))
		goto done;
	flow_learn_out(skb, eth, ip, &f);
	f.epoch = flow_epoch(gen);
	if (ue.saddr != key->saddr || ue.sport != key->sport) {
		f.flags |= FLOW_F_SNAT;
		flow_set_nat(&f, ue.saddr, ue.sport, key->saddr, key->sport);
		r.flags = FLOW_F_TO_UE;
		flow_set_nat(&r, key->saddr, key->sport, ue.saddr, ue.sport);
		r.first_seen = f.first_seen;
		r.last_seen = f.last_seen;
		r.epoch = f.epoch;
		reply = (struct flow_key){ .saddr = key->daddr, .daddr = key->saddr, .sport = key->dport,
					   .dport = key->sport, .proto = key->proto, .ifindex = skb->ifindex };
		/* The replies' entry first: once the UE's flow is cached, its replies must be. One
		 * the replies learnt alone (flow_learn_reply), or another learner of this note,
		 * cached is this one when it translates to this UE's address and port: it stays,
		 * and is not this learner's to count. */
		err = flow_insert(&reply, &r);
		if (err == -FLOW_EEXIST) {
			held = flow_held(&reply, &ue);
			if (held == FLOW_HELD_NONE)
				err = flow_insert(&reply, &r);
			else if (held == FLOW_HELD_PAIR)
				err = ours = 0;
		}
		if (err)
			goto done;
		if (flow_insert(&ue, &f)) {
			/* Another learner that found this replies' entry may have cached the UE's
			 * entry first: the pair is whole, and the replies' entry counts as learnt.
			 * Otherwise it is taken back uncounted; one removed first counts as learnt
			 * (flow_learnt). */
			if (ours && flow_held(&ue, &reply) == FLOW_HELD_PAIR)
				flow_learnt(&reply, gen, flow_gen());
			else if (ours && flow_delete(&reply))
				count_stat(STAT_FLOW_LEARNED);
			goto done;
		}
		now = flow_gen();
		if (ours)
			flow_learnt(&reply, gen, now);
		flow_learnt(&ue, gen, now);
		goto done;
	}
	if (!flow_insert(&ue, &f))
		flow_learnt(&ue, gen, flow_gen());
done:
	bpf_map_delete_elem(&xupf_flow_seen, &ue);
}

/* flow_learn records what the kernel did to a packet the XDP program handed it, as it leaves
 * through skb's interface. */
static __always_inline void flow_learn(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct flow_key key = {};
	struct flow f = {};
	struct flow_seen *seen;
	struct vlan_tag *tag;
	struct iphdr *ip;
	__be16 proto;
	int tagged = 0;

	if ((void *)(eth + 1) > data_end)
		return;
	proto = eth->h_proto;
	ip = (void *)(eth + 1);
	if (skb->vlan_present) {
		/* The tag is in the skb's metadata, for the driver (or veth) to insert. */
		tagged = 1;
		f.vlan_proto = skb->vlan_proto;
		f.vlan_tci = bpf_htons(skb->vlan_tci);
	} else if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		tag = (void *)(eth + 1);
		if ((void *)(tag + 1) > data_end)
			return;
		tagged = 1;
		f.vlan_proto = proto;
		f.vlan_tci = tag->tci;
		proto = tag->encap_proto;
		ip = (void *)(tag + 1);
	}
	if (proto != bpf_htons(ETH_P_IP) || (void *)(ip + 1) > data_end || ip->version != 4)
		return;
	if (flow_parse(ip, data_end, &key) < 0)
		return;
	seen = bpf_map_lookup_elem(&xupf_flow_seen, &key);
	/* A UE's packet: noted as it left its tunnel, under its tuple before any translation. */
	if (cfg_flowcache == FLOWCACHE_KERNEL_N6 && (!seen || seen->ifindex == FLOW_FROM_UE)) {
		flow_learn_ue(skb, eth, ip, &key, tagged);
		return;
	}
	if (!seen)
		return;  /* not handed over by XDP, or its addresses or ports were translated */

	if (flow_note_stale(seen))
		goto done;
	if (flow_tracked(skb, &key)) {
		count_stat(STAT_FLOW_TRACKED);
		goto done;
	}
	if (flow_learn_l3(seen, ip, &f))
		goto done;  /* the TTL was set, not decremented: not something the cache repeats */
	if (tagged)
		f.vlan_action = seen->vlan_id ? FLOW_VLAN_REWRITE : FLOW_VLAN_PUSH;
	else if (seen->vlan_id)
		f.vlan_action = FLOW_VLAN_POP;
	flow_learn_out(skb, eth, ip, &f);
	f.epoch = flow_epoch(seen->gen);
	{
		struct flow_key fkey = key;

		fkey.vlan_id = seen->vlan_id;
		fkey.ifindex = seen->ifindex;
		if (!flow_insert(&fkey, &f))
			flow_learnt(&fkey, seen->gen, flow_gen());
	}
done:
	bpf_map_delete_elem(&xupf_flow_seen, &key);
}

#endif
