// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The benchmark's sink: attached to the interface where the traffic arrives, it counts frames
 * and bytes per CPU, keeps the head of one frame in sample_every in a ring buffer for the
 * correctness check, and drops (or, with pass set, passes) every frame.
 *
 * With magic offsets set it takes only the generator's frames, those with the payload magic
 * at one of the offsets, and passes every other frame to the stack uncounted but in
 * "passed": the namespace's own traffic (ARP, the PFCP answers of a UPF under test) keeps
 * flowing and does not inflate the counts.
 *
 * With seq_bits set too, it checks the sequence numbers of a generator with seq_cpu: each
 * (generator CPU, number) sets one bit of sink_seen, and a bit already set counts a duplicate,
 * so that a test knows which frames were lost and which came twice without a packet reaching
 * user space. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "bench.h"

/* Set at load time. */
const volatile __u64 sample_every = 0; /* 0: no samples */
const volatile __u32 pass = 0;         /* 1: XDP_PASS instead of XDP_DROP */
const volatile __u16 magic_off[SINK_MAGIC_OFFS] = {}; /* 0: unused; all 0: take every frame */
const volatile __u32 seq_bits = 0;     /* log2 of the numbers checked per CPU; 0: no check */
const volatile __u32 seq_cpus = 0;     /* generator CPUs the bitmap has room for */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_counters);
} sink_stats SEC(".maps");

/* Keeps struct sink_sample in BTF for bpf2go: the ring buffer has no value type. */
const struct sink_sample *btf_sink_sample __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} sink_samples SEC(".maps");

/* One bit per (generator CPU, sequence number): seq_cpus << seq_bits bits, in words of 64. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set at load time */
	__type(key, __u32);
	__type(value, __u64);
} sink_seen SEC(".maps");

/* magic_at returns the offset of magic_off where the frame carries the generator's magic, or
 * 0. */
static __always_inline __u32 magic_at(struct xdp_md *ctx)
{
	__u32 m;

#pragma unroll
	for (int i = 0; i < SINK_MAGIC_OFFS; i++) {
		if (!magic_off[i])
			break;
		if (!bpf_xdp_load_bytes(ctx, magic_off[i], &m, sizeof(m)) && m == bpf_htonl(BENCH_MAGIC))
			return magic_off[i];
	}
	return 0;
}

/* check_seq marks the sequence number of the payload at off as seen, counting a number seen
 * before or out of the bitmap. The payload is magic, flow id, sequence number. */
static __always_inline void check_seq(struct xdp_md *ctx, __u32 off, struct sink_counters *c)
{
	__u32 seq, cpu, n, key;
	__u64 bit, *w;

	if (bpf_xdp_load_bytes(ctx, off + 8, &seq, sizeof(seq))) {
		c->seq_out++;
		return;
	}
	seq = bpf_ntohl(seq);
	cpu = seq >> GEN_SEQ_CPU_SHIFT;
	n = seq & GEN_SEQ_MASK;
	if (cpu >= seq_cpus || n >> seq_bits) {
		c->seq_out++;
		return;
	}
	key = (cpu << seq_bits | n) / 64;
	w = bpf_map_lookup_elem(&sink_seen, &key);
	if (!w) {
		c->seq_out++;
		return;
	}
	bit = 1ULL << (n % 64);
	/* Atomic: frames of one generator CPU may arrive on several CPUs. */
	if (__sync_fetch_and_or(w, bit) & bit)
		c->seq_dups++;
}

SEC("xdp")
int xupf_bench_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0, len = data_end - data, off = 0;
	struct sink_counters *c = bpf_map_lookup_elem(&sink_stats, &zero);

	if (!c)
		return XDP_ABORTED;
	if (magic_off[0]) {
		off = magic_at(ctx);
		if (!off) {
			c->passed++;
			return XDP_PASS;
		}
		if (seq_bits)
			check_seq(ctx, off, c);
	}
	c->packets++;
	c->bytes += len;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		c->non_ipv4++;

	if (sample_every) {
		if (c->countdown) {
			c->countdown--;
		} else {
			struct sink_sample *s;
			__u32 cap;

			c->countdown = sample_every - 1;
			s = bpf_ringbuf_reserve(&sink_samples, sizeof(*s), 0);
			if (!s) {
				c->sample_drops++;
			} else {
				s->len = len;
				s->cpu = bpf_get_smp_processor_id();
				s->pad = 0;
				s->ts = bpf_ktime_get_ns();
				/* Two calls, so that the verifier sees each length bounded. */
				if (len >= SINK_SAMPLE_LEN) {
					cap = SINK_SAMPLE_LEN;
					if (bpf_xdp_load_bytes(ctx, 0, s->data, SINK_SAMPLE_LEN))
						cap = 0;
				} else {
					cap = len & (SINK_SAMPLE_LEN - 1);
					if (cap > 0 && bpf_xdp_load_bytes(ctx, 0, s->data, cap))
						cap = 0;
				}
				s->cap = cap;
				bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
				c->samples++;
			}
		}
	}
	return pass ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "Dual BSD/GPL";
