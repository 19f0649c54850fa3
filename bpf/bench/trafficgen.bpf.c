// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The benchmark's traffic generator, run with BPF_PROG_RUN in XDP live-frames mode
 * (BPF_F_TEST_XDP_LIVE_FRAMES): every run turns one frame of the kernel's page pool into the
 * next prepared frame and transmits it (XDP_TX out of the context's ingress interface, or
 * XDP_REDIRECT to redirect_ifindex). With pacing set in its slot, it sends at most a batch of
 * frames per period and drops the runs in between.
 *
 * Pages are recycled without being reset: the kernel restores the frame's pointers but not
 * its bytes, so each run sees what an earlier run wrote. The program therefore rewrites the
 * whole head of every frame (headers, flow id, sequence number) and never moves headers; the
 * rest of a frame (the payload filler) is the same for every template and was written when
 * the page was first set up from the input frame. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "bench.h"

/* Set at load time. */
const volatile __u32 n_templates = 1;
const volatile __u32 redirect_ifindex = 0; /* 0: XDP_TX */
/* 1: the sequence number carries the CPU (GEN_SEQ_CPU_SHIFT), for the sink's check */
const volatile __u32 seq_cpu = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of templates at load time */
	__type(key, __u32);
	__type(value, struct gen_tmpl);
} gen_templates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of possible CPUs at load time */
	__type(key, __u32);
	__type(value, struct gen_slot);
} gen_slots SEC(".maps");

SEC("xdp")
int xupf_bench_gen(struct xdp_md *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct gen_slot *s = bpf_map_lookup_elem(&gen_slots, &cpu);
	struct gen_tmpl *t;
	__u32 idx, hl;
	int delta;

	if (!s)
		return XDP_ABORTED;
	if (s->budget == 0) {
		s->over++;
		return XDP_DROP;
	}
	if (s->period_ns) {
		__u64 now = bpf_ktime_get_ns();

		if (now - s->win_start >= s->period_ns) {
			s->win_start += s->period_ns;
			if (now - s->win_start >= s->period_ns)
				s->win_start = now;
			s->win_sent = 0;
		}
		if (s->win_sent >= s->batch) {
			s->idle++;
			return XDP_DROP;
		}
		s->win_sent++;
	}
	idx = s->next;
	t = bpf_map_lookup_elem(&gen_templates, &idx);
	if (!t)
		goto err;
	idx++;
	s->next = idx < n_templates ? idx : 0;

	delta = (int)t->len - (int)(ctx->data_end - ctx->data);
	if (delta && bpf_xdp_adjust_tail(ctx, delta))
		goto err;
	hl = t->head_len;
	if (hl > GEN_HEAD_MAX)
		goto err;
	/* 0 when every template is the same: the pages already hold the frame. */
	if (hl > 0 && bpf_xdp_store_bytes(ctx, 0, t->head, hl))
		goto err;
	if (t->seq_off) {
		/* Direct packet access: cheaper than a helper call. */
		void *data = (void *)(long)ctx->data;
		void *data_end = (void *)(long)ctx->data_end;
		__u32 off = t->seq_off;
		__be32 *p;

		if (off > GEN_SEQ_OFF_MAX)
			goto err;
		p = data + off;
		if ((void *)(p + 1) > data_end)
			goto err;
		if (seq_cpu)
			*p = bpf_htonl(cpu << GEN_SEQ_CPU_SHIFT | (s->seq & GEN_SEQ_MASK));
		else
			*p = bpf_htonl(s->seq);
	}
	s->seq++;
	s->budget--;
	s->sent++;
	if (redirect_ifindex)
		return bpf_redirect(redirect_ifindex, 0);
	return XDP_TX;
err:
	s->errors++;
	return XDP_DROP;
}

char _license[] SEC("license") = "Dual BSD/GPL";
