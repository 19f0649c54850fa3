/* Buffering (FAR BUFF). The datapath cannot hold packets, so a buffering FAR hands a copy of
 * each frame to xupfd over a ring buffer and drops the original; xupfd keeps the frames in
 * arrival order. When the FAR forwards again, xupfd runs each through this program once more
 * (BPF_PROG_TEST_RUN with live frames, BUFFER_REPLAY_MARK in the metadata), so that it gets the
 * new FAR's whole treatment (QERs, usage, the new tunnel) from the one implementation.
 *
 * Order: per PDR (by its counter slot, which survives modifications) xupf_buffer_in counts the
 * frames handed over and xupf_buffer_out, written by xupfd alone, those it is done with
 * (forwarded again or discarded). While in > out a FAR_DRAIN PDR buffers its live packets
 * too, behind the held ones; xupfd turns it into FAR_FORWARD once in == out has held for a
 * grace period (a packet that read in > out has been handed over by then). A packet from one
 * receive queue is handled to the end before the next, so none overtakes those held before.
 *
 * A FAR that drops with NOCP (FAR_DROP_NOTIFY) hands over its first packet only, for xupfd
 * to discard and notify the SMF of (the notification it makes for a buffering FAR's first).
 *
 * Nothing here runs for a FAR that forwards (FAR_FORWARD): only BUFF, DRAIN and DROP with
 * NOCP reach it. */
#ifndef XUPF_BUFFER_H
#define XUPF_BUFFER_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "drop_reasons.h"
#include "stats.h"

#ifndef XUPF_BUFFER_RINGBUF_SIZE
/* Frames in flight to xupfd, all sessions together: 5,000 of 1,500 bytes, or 15 ms of a
 * 1 Mpps burst of small ones, before xupfd's reader catches up. */
#define XUPF_BUFFER_RINGBUF_SIZE (8 * 1024 * 1024)
#endif
/* A page: an XDP program without frags support, as this one, never sees a longer frame. */
#ifndef XUPF_BUFFER_MAX_FRAME
#define XUPF_BUFFER_MAX_FRAME 4096
#endif

/* apply_pdr's answer for a packet its FAR buffers (buffer_packet takes it from there). */
#define PKT_BUFFER (-2)

/* How many frames one PDR may have handed over and not yet forwarded or discarded (xupfd's
 * buffer.max_packets_per_session): a flood toward an idle UE stops here, in the datapath,
 * without filling the ring the other sessions share. */
volatile const __u32 cfg_buffer_max_packets = 10000;

/* Pinned, so that a program swap keeps the ring xupfd reads and the counts. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, XUPF_BUFFER_RINGBUF_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_buffered SEC(".maps");

/* Per counter slot (sized like xupf_usage at load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_buffer_in SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_buffer_out SEC(".maps");

/* Per counter slot: the packets, and their IP bytes, dropped as DROP_BUFFER_FULL (the PDR holds
 * cfg_buffer_max_packets, or the ring is full). They never reach xupfd, which counts what it
 * discards itself; a URR's Dropped DL Traffic Threshold (DROTH) counts both. Per CPU: a flood
 * toward an idle UE, the case that fills it, comes in on every queue. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_buffer_full SEC(".maps");

/* buffer_full counts a packet of len IP bytes dropped as DROP_BUFFER_FULL for counter slot
 * counter, and returns that reason. */
static __always_inline int buffer_full(__u32 counter, __u32 len)
{
	struct counters *c = bpf_map_lookup_elem(&xupf_buffer_full, &counter);

	if (c) {
		c->packets += 1;
		c->bytes += len;
	}
	return DROP_BUFFER_FULL;
}

/* A frame and its header, assembled here before it goes into the ring in one piece. */
struct buffered_frame {
	struct buffered_hdr hdr;
	__u8 data[XUPF_BUFFER_MAX_FRAME];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct buffered_frame);
} xupf_buffer_scratch SEC(".maps");

/* replayed reports whether xupfd is running a buffered frame through again, and takes the
 * mark off, so that the frame carries none past this program (a redirect keeps metadata). */
static __always_inline int replayed(struct xdp_md *ctx)
{
	__u32 *meta = (void *)(long)ctx->data_meta;

	if ((void *)(meta + 1) > (void *)(long)ctx->data || *meta != BUFFER_REPLAY_MARK)
		return 0;
	*meta = 0;
	count_stat(STAT_REPLAYED);
	return 1;
}

/* held is the number of frames of the PDR with counter slot counter that xupfd holds or has
 * still to read, or -1 when the counts cannot be read. A count xupfd overshot (it released a
 * slot's frames after the slot went to another PDR) holds nothing. */
static __always_inline __s64 held(__u32 counter)
{
	__u64 *in = bpf_map_lookup_elem(&xupf_buffer_in, &counter);
	__u64 *out = bpf_map_lookup_elem(&xupf_buffer_out, &counter);
	__s64 n;

	if (!in || !out)
		return -1;
	/* Each read once: the datapath adds to in on other CPUs, xupfd writes out. */
	n = (__s64)(*(volatile __u64 *)in - *(volatile __u64 *)out);
	return n < 0 ? 0 : n;
}

/* notify_once reports whether this packet is the one a FAR_DROP_NOTIFY FAR hands over, and
 * makes the FAR FAR_DROP: a compare-and-exchange, so that of packets on several CPUs one
 * alone is. xupfd writes the FAR again (FAR_DROP_NOTIFY) when the SMF changes the session. */
static __always_inline int notify_once(const struct far *far)
{
	return __sync_val_compare_and_swap((__u32 *)&far->action, FAR_DROP_NOTIFY, FAR_DROP) ==
	       FAR_DROP_NOTIFY;
}

/* buffer_verdict is apply_pdr's verdict for a FAR that buffers or drains a packet of len IP
 * bytes: 0 to forward (a
 * draining FAR with nothing held, or a frame xupfd runs through again), PKT_BUFFER to hand
 * the frame over, or a drop reason. A frame run through again while the FAR buffers (the SMF
 * made it BUFF again meanwhile) is handed over again. A FAR that drops with NOCP hands over
 * its first packet (PKT_BUFFER) and drops the others. A subprogram, as buffer_packet. */
static __noinline int buffer_verdict(struct xdp_md *ctx, const struct far *far,
					  const struct pdr *pdr, __u32 len)
{
	__s64 n;

	if (replayed(ctx) && far->action == FAR_DRAIN)
		return 0;
	if (far->action == FAR_DROP_NOTIFY)
		return notify_once(far) ? PKT_BUFFER : DROP_FAR_DROP;
	n = held(pdr->counter);
	if (n < 0)
		return DROP_INTERNAL;
	if (far->action == FAR_DRAIN && n == 0)
		return 0;
	if (n >= cfg_buffer_max_packets)
		return buffer_full(pdr->counter, len);
	return PKT_BUFFER;
}

/* buffer_packet hands the frame in ctx, a packet of ip_len IP bytes, to xupfd as one of the
 * PDR with counter slot counter, and drops it here. A subprogram: only buffering FARs come here, and inlined in both
 * directions it lengthened the forwarding code (stats.h's drop says why that costs). */
static __noinline int buffer_packet(struct xdp_md *ctx, __u32 counter, __u32 ip_len)
{
	__u32 key = 0, len = bpf_xdp_get_buff_len(ctx);
	struct buffered_frame *f = bpf_map_lookup_elem(&xupf_buffer_scratch, &key);
	__u64 *in = bpf_map_lookup_elem(&xupf_buffer_in, &counter);

	if (!f || !in)
		return drop(DROP_INTERNAL);
	if (len == 0 || len > XUPF_BUFFER_MAX_FRAME)
		return drop(DROP_INTERNAL);  /* cannot happen (see XUPF_BUFFER_MAX_FRAME) */
	if (bpf_xdp_load_bytes(ctx, 0, f->data, len))
		return drop(DROP_INTERNAL);
	f->hdr.counter = counter;
	f->hdr.ifindex = ctx->ingress_ifindex;
	f->hdr.len = len;
	f->hdr.pad = 0;
	/* Counted before it is in the ring: xupfd, which may read it at once, must never count
	 * it done before it is counted in, or a draining FAR would see nothing held. */
	__sync_fetch_and_add(in, 1);
	if (bpf_ringbuf_output(&xupf_buffered, f, sizeof(f->hdr) + len, 0)) {
		__sync_fetch_and_add(in, -1);
		return drop(buffer_full(counter, ip_len));
	}
	count_stat(STAT_BUFFERED);
	return XDP_DROP;
}

#endif
