// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The minimal GTP-U datapath, the evaluation suite's second reference: what a UPF cannot do
 * without, and nothing else. Uplink (xupf_bench_decap) checks that a frame is a G-PDU to the
 * GTP-U port, removes the outer IPv4, UDP and GTP-U headers (with their optional fields and
 * extension headers) and forwards the inner packet; downlink (xupf_bench_encap) puts every
 * frame in one prebuilt tunnel (outer IPv4, UDP, GTP-U with a PDU Session Container) and
 * forwards it. No session, rule or route lookup, no TTL, no counters: what xupf costs above
 * this is what its lookups and rules cost. */
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include "fwd.h"

#define GTPU_PORT 2152
#define GTPU_GPDU 0xff
#define GTPU_FLAGS_OPT 0x07 /* E, S, PN: the 4 optional bytes are present */
#define GTPU_FLAG_E 0x04
/* At most this many extension headers are skipped (a PDU Session Container is one). */
#define GTPU_MAX_EXT 2

struct gtpuhdr {
	__u8 flags;
	__u8 type;
	__be16 length;
	__be32 teid;
};

/* The outer headers the encapsulation writes: IPv4 (no options), UDP, GTP-U with its
 * optional fields and a PDU Session Container of length 1. */
#define ENCAP_LEN 44

/* The tunnel of xupf_bench_encap: the outer headers as they go out, except the three
 * lengths, which are 0 and which the program fills in; the IPv4 checksum is the header's
 * with total length 0, so that adding the length updates it. Written by the loader. */
struct gtpu_cfg {
	__u8 hdr[ENCAP_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gtpu_cfg);
} gtpu_config SEC(".maps");

SEC("xdp")
int xupf_bench_decap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;
	struct gtpuhdr *gtp;
	__u8 *opt;
	int off, i;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	gtp = (void *)(udp + 1);
	if ((void *)(gtp + 1) > data_end || udp->dest != bpf_htons(GTPU_PORT) ||
	    (gtp->flags & 0xf0) != 0x30 || gtp->type != GTPU_GPDU)
		return XDP_PASS;
	off = sizeof(*ip) + sizeof(*udp) + sizeof(*gtp);
	if (gtp->flags & GTPU_FLAGS_OPT) {
		opt = (void *)(gtp + 1);
		if ((void *)(opt + 4) > data_end)
			return XDP_DROP;
		off += 4;
		/* Each extension header: its length in 4-byte units, then its contents, whose
		 * last byte is the next extension's type. */
		for (i = 0; i < GTPU_MAX_EXT && (gtp->flags & GTPU_FLAG_E) && opt[3]; i++) {
			opt = data + sizeof(*eth) + off;
			if ((void *)(opt + 4) > data_end || opt[0] == 0)
				return XDP_DROP;
			off += opt[0] * 4;
			opt += opt[0] * 4 - 4;
			if ((void *)(opt + 4) > data_end)
				return XDP_DROP;
		}
		if (i == GTPU_MAX_EXT && (gtp->flags & GTPU_FLAG_E) && opt[3])
			return XDP_DROP;
	}
	if (bpf_xdp_adjust_head(ctx, off))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	eth->h_proto = bpf_htons(ETH_P_IP);
	return fwd_out(eth);
}

SEC("xdp")
int xupf_bench_encap(struct xdp_md *ctx)
{
	void *data, *data_end;
	struct ethhdr *eth;
	struct iphdr *ip;
	struct udphdr *udp;
	struct gtpuhdr *gtp;
	struct gtpu_cfg *cfg;
	__u32 zero = 0, sum;
	__u16 len;

	cfg = bpf_map_lookup_elem(&gtpu_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	if (bpf_xdp_adjust_head(ctx, -ENCAP_LEN))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	if ((void *)ip + ENCAP_LEN + sizeof(struct iphdr) > data_end)
		return XDP_DROP;
	__builtin_memcpy(ip, cfg->hdr, ENCAP_LEN);
	udp = (void *)(ip + 1);
	gtp = (void *)(udp + 1);
	len = data_end - (void *)ip;
	ip->tot_len = bpf_htons(len);
	/* One's complement sums do not depend on byte order: add the length as it is stored. */
	sum = (__u16)~ip->check + (__u32)bpf_htons(len);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~((sum & 0xffff) + (sum >> 16));
	udp->len = bpf_htons(len - sizeof(*ip));
	gtp->length = bpf_htons(len - sizeof(*ip) - sizeof(*udp) - sizeof(*gtp));
	eth->h_proto = bpf_htons(ETH_P_IP);
	return fwd_out(eth);
}

char _license[] SEC("license") = "Dual BSD/GPL";
