/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared by the benchmark's traffic generator and sink (internal/bench/gen). */
#ifndef XUPF_BENCH_H
#define XUPF_BENCH_H

#include <linux/types.h>

/* Bytes of a template the generator writes into each frame: everything that differs between
 * the frames of one layout (headers, flow id) must lie in this head. */
#define GEN_HEAD_MAX 256

/* Largest offset of the sequence number. */
#define GEN_SEQ_OFF_MAX 4095

/* With seq_cpu set, the generator puts its CPU's number in the top bits of each sequence
 * number and the CPU's count in the rest, so that a receiver tells the CPUs' sequences apart:
 * 256 CPUs, 2^24 frames each. */
#define GEN_SEQ_CPU_SHIFT 24
#define GEN_SEQ_MASK ((1u << GEN_SEQ_CPU_SHIFT) - 1)

/* Bytes of each frame the sink keeps in a sample. */
#define SINK_SAMPLE_LEN 128

/* One prepared frame. */
struct gen_tmpl {
	__u16 len;      /* frame length */
	__u16 head_len; /* bytes of head written at offset 0 (0..GEN_HEAD_MAX) */
	__u16 seq_off;  /* offset of the 32-bit big-endian sequence number; 0: none */
	__u16 pad;
	__u8 head[GEN_HEAD_MAX];
};

/* The state of the generator on one CPU. Only the thread pinned to that CPU runs the program
 * there and writes this slot between runs, so no atomics are needed. 128 bytes: two cache
 * lines of its own per CPU. */
struct gen_slot {
	__u64 budget;    /* frames still to send; at 0 the program drops */
	__u64 sent;      /* frames returned with XDP_TX or XDP_REDIRECT */
	__u64 over;      /* runs past the budget (dropped): the end of a call that reached its
			  * count, or a restart after an interrupted BPF_PROG_RUN */
	__u64 errors;    /* frames the program could not build (dropped) */
	__u32 seq;       /* next sequence number */
	__u32 next;      /* next template */
	/* Pacing, when period_ns is not 0: at most batch frames per period_ns; a run that finds
	 * the window's batch sent drops its frame (counted in idle). A window that starts more
	 * than a period late starts at the current time: no catch-up bursts. */
	__u64 period_ns;
	__u64 batch;
	__u64 win_start; /* start of the current window (bpf_ktime_get_ns) */
	__u64 win_sent;  /* frames sent in it */
	__u64 idle;      /* runs dropped by pacing */
	__u64 pad[6];
};

/* Payload offsets the sink looks for the generator's magic at. */
#define SINK_MAGIC_OFFS 4

/* The magic that starts every generated payload ("xuPB", internal/bench/pkt.Magic). */
#define BENCH_MAGIC 0x78755042

/* The sink's counters on one CPU. */
struct sink_counters {
	__u64 packets;
	__u64 bytes;
	__u64 non_ipv4;      /* frames that are not IPv4 (counted in packets too) */
	__u64 passed;        /* frames without the magic, passed to the stack (not in packets) */
	__u64 samples;       /* samples written */
	__u64 sample_drops;  /* samples lost because the ring was full */
	__u64 countdown;     /* frames until the next sample */
	/* The sequence check (seq_bits set): */
	__u64 seq_dups;      /* frames whose (CPU, sequence number) was seen before */
	__u64 seq_out;       /* frames beyond the bitmap: a CPU or number too large */
};

/* One sample: the head of a frame. */
struct sink_sample {
	__u32 len;  /* frame length */
	__u32 cap;  /* bytes of data filled: min(len, SINK_SAMPLE_LEN) */
	__u32 cpu;
	__u32 pad;
	__u64 ts;   /* bpf_ktime_get_ns() */
	__u8 data[SINK_SAMPLE_LEN];
};

#endif
