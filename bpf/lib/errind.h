/* Unknown-TEID events, for the GTP-U Error Indication (TS 29.281 7.3.1) a G-PDU to a TEID no
 * session has is answered with. xupfd builds and sends the Error Indication from its GTP-U
 * socket, not this program: it rate-limits per peer (a flood of unknown TEIDs must not turn
 * into a flood of answers), and the drop path stays a few instructions long. The datapath only
 * hands the sender's address and the TEID over a ring buffer, at most
 * XUPF_ERRIND_EVENTS_PER_SEC per CPU, so that the daemon wakes at a bounded rate whatever
 * arrives. Only the unknown_teid drop runs this. */
#ifndef XUPF_ERRIND_H
#define XUPF_ERRIND_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parse.h"
#include "types.h"

#ifndef XUPF_ERRIND_RINGBUF_SIZE
#define XUPF_ERRIND_RINGBUF_SIZE (64 * 1024)  /* 4096 events of 12 bytes and their headers */
#endif
#ifndef XUPF_ERRIND_EVENTS_PER_SEC
#define XUPF_ERRIND_EVENTS_PER_SEC 1000
#endif
#define NSEC_PER_SEC 1000000000ULL

/* Pinned, so that a program swap keeps the ring the daemon reads. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, XUPF_ERRIND_RINGBUF_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_errind_events SEC(".maps");

/* One-second window of events per CPU. */
struct errind_window {
	__u64 start;  /* ns, bpf_ktime_get_ns */
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct errind_window);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_errind_window SEC(".maps");

/* errind_event hands the daemon the unknown TEID of the G-PDU in ctx and its outer addresses,
 * unless this CPU's window is full or the ring is. A subprogram: rare, and kept out of the
 * uplink's forwarding code (stats.h's drop says why). */
static __noinline void errind_event(struct xdp_md *ctx, __be32 teid)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = parse_ipv4(data, data_end);
	struct unknown_teid_event *ev;
	struct errind_window *w;
	__u32 key = 0;
	__u64 now;

	w = bpf_map_lookup_elem(&xupf_errind_window, &key);
	if (!ip || !w)
		return;
	now = bpf_ktime_get_ns();
	if (now - w->start >= NSEC_PER_SEC) {
		w->start = now;
		w->count = 0;
	}
	if (w->count >= XUPF_ERRIND_EVENTS_PER_SEC)
		return;
	ev = bpf_ringbuf_reserve(&xupf_errind_events, sizeof(*ev), 0);
	if (!ev)
		return;
	w->count++;
	ev->peer = ip->saddr;
	ev->local = ip->daddr;
	ev->teid = teid;
	bpf_ringbuf_submit(ev, 0);
}

#endif
