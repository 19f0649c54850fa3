/* Multi-core uplink: the first stage of uplink spreading. Every G-PDU from one gNB has the same
 * outer 5-tuple unless the gNB varies its source port, so the NIC's receive-side scaling puts
 * them all on one CPU. With cfg_spread on, the program attached to the interface reads only
 * the outer headers and the TEID (by flow, the inner addresses and ports too) of a G-PDU to a
 * local GTP-U address, picks one of the configured CPUs from them and redirects the packet
 * through a CPU map to it, where the same program loaded with cfg_spread off (attach type
 * BPF_XDP_CPUMAP) processes it whole. Anything else (downlink, Echo, other UDP, malformed
 * GTP-U, which is counted where it is dropped) is processed where it arrived.
 *
 * Order: the CPU is a function of the TEID (or of the inner flow), so all the packets of a
 * flow that arrive on one CPU go to one CPU, and a CPU map hands them over in the order they
 * were enqueued. */
#ifndef XUPF_SPREAD_H
#define XUPF_SPREAD_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parse.h"
#include "gtpu.h"
#include "encap.h"
#include "stats.h"

/* How uplink G-PDUs are spread over CPUs (the daemon's uplink_spread). */
enum spread_mode {
	SPREAD_OFF = 0,  /* processed where they arrive: RSS spreads them already */
	SPREAD_TEID,     /* by TEID: each session's uplink on one CPU */
	SPREAD_FLOW,     /* by the inner flow (addresses, protocol, ports): spreads one busy TEID too */
};

/* The most CPUs a CPU map may be keyed by, and the most uplink packets may be spread over. */
#ifndef XUPF_MAX_CPUS
#define XUPF_MAX_CPUS 1024
#endif
#ifndef XUPF_MAX_SPREAD_CPUS
#define XUPF_MAX_SPREAD_CPUS 256
#endif

/* Load-time settings: the mode, and the CPUs to spread over (cfg_spread_cpus[0] to
 * [cfg_spread_ncpus - 1]). Off, the verifier drops the stage: no cost. */
volatile const __u32 cfg_spread = SPREAD_OFF;
volatile const __u32 cfg_spread_ncpus = 0;
volatile const __u32 cfg_spread_cpus[XUPF_MAX_SPREAD_CPUS] = {};

/* Keyed by CPU: each configured CPU's entry holds the queue size and the program (this one,
 * spreading off) its kthread runs on the packets redirected to it. The daemon sizes it to the
 * machine's possible CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, XUPF_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cpus SEC(".maps");

/* The id of xupf_cpus, set when the tracepoint program is loaded (after the map exists): the
 * tracepoint reports every CPU map's enqueues, other programs' too. */
volatile const __u32 cfg_spread_map_id = 0;

/* A G-PDU the stage redirected is enqueued after xupf_xdp returned, a few at a time; when the
 * chosen CPU's queue is full the kernel drops it there, out of the program's sight.
 * count_spread_drops takes the kernel's report of one such flush (the xdp_cpumap_enqueue
 * tracepoint) and counts its drops as DROP_SPREAD_QUEUE_FULL on the CPU that spread them, so
 * every packet is still counted once. */
static __always_inline void count_spread_drops(__u32 map_id, __u32 drops)
{
	__u32 key = DROP_SPREAD_QUEUE_FULL;
	__u64 *v;

	if (map_id != cfg_spread_map_id || !drops)
		return;
	v = bpf_map_lookup_elem(&xupf_drops, &key);
	if (v)
		*v += drops;
}

/* spread_hash returns the hash that chooses the CPU of the G-PDU at gtp, or -1 when the
 * packet is processed where it is (its inner packet cannot be read). */
static __always_inline __s64 spread_hash(struct gtpu_hdr *gtp, void *data_end)
{
	struct gtpu_gpdu g;
	struct iphdr *inner;

	if (cfg_spread == SPREAD_TEID)
		return flow_hash(gtp->teid, 0, 0, 0);
	if (gtpu_parse_gpdu(gtp, data_end, &g))
		return -1;
	inner = g.payload;
	if ((void *)(inner + 1) > data_end || inner->version != 4)
		return -1;
	return flow_hash(inner->saddr, inner->daddr, inner->protocol,
			 l4_ports(inner, inner->ihl * 4, data_end));
}

/* spread_gpdu takes an IPv4/UDP packet to a local GTP-U address. A G-PDU whose CPU is another
 * one is redirected there: it returns XDP_REDIRECT, counted as ul_spread (and as ul_rx where
 * it is processed). Otherwise it returns -1, and the caller processes the packet here. */
static __always_inline int spread_gpdu(struct iphdr *ip, void *data_end)
{
	struct gtpu_hdr *gtp;
	__u32 ihl_len, idx, cpu;
	__s64 hash;

	if (gtpu_header(ip, data_end, &ihl_len, &gtp) || gtp->type != GTPU_G_PDU)
		return -1;
	hash = spread_hash(gtp, data_end);
	if (hash < 0)
		return -1;
	/* Multiply and shift: an index below cfg_spread_ncpus without a division. */
	idx = ((__u64)(__u32)hash * cfg_spread_ncpus) >> 32;
	if (idx >= XUPF_MAX_SPREAD_CPUS)
		return -1;  /* cfg_spread_ncpus is at most this; the verifier wants it checked */
	cpu = cfg_spread_cpus[idx];
	/* The CPU's own share skips the CPU map's queue and kthread: order holds, since a flow
	 * arriving here is always either kept here or sent to the same other CPU. */
	if (cpu == bpf_get_smp_processor_id())
		return -1;
	/* Without an entry for cpu (flags 0: XDP_ABORTED), the packet is processed here. */
	if (bpf_redirect_map(&xupf_cpus, cpu, 0) != XDP_REDIRECT)
		return -1;
	count_stat(STAT_UL_SPREAD);
	return XDP_REDIRECT;
}

#endif
