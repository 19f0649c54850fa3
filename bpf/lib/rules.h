/* Rule lookup: TEID (uplink) or UE address (downlink) -> PDR slot -> FAR slot. One hash
 * lookup per packet whatever the number of sessions; PDR and FAR slots are array indexes
 * that the daemon allocates per session. */
#ifndef XUPF_RULES_H
#define XUPF_RULES_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "drop_reasons.h"

/* Default table sizes; the daemon sets the real ones from its configuration at load time. */
#ifndef XUPF_MAX_SESSIONS
#define XUPF_MAX_SESSIONS 100000
#endif
#ifndef XUPF_MAX_PDRS
#define XUPF_MAX_PDRS (2 * XUPF_MAX_SESSIONS)
#endif
#ifndef XUPF_MAX_GTPU_ADDRS
#define XUPF_MAX_GTPU_ADDRS 16
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_SESSIONS);
	__type(key, struct ul_key);
	__type(value, struct rule_ref);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_ul_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_SESSIONS);
	__type(key, struct dl_key);
	__type(value, struct rule_ref);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_dl_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_PDRS);
	__type(key, __u32);
	__type(value, struct pdr);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_pdrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_PDRS);
	__type(key, __u32);
	__type(value, struct far);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_fars SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XUPF_MAX_PDRS);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_usage SEC(".maps");

#ifndef XUPF_MAX_N3_PORTS
#define XUPF_MAX_N3_PORTS 16
#endif

/* Local GTP-U addresses, each with ifindex 0 and with every n3 interface: uplink packets must be
 * addressed to one of them and arrive on an n3 interface. The interface is part of the key of
 * the one lookup the dispatch makes anyway, so checking it costs nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_GTPU_ADDRS * (XUPF_MAX_N3_PORTS + 1));
	__type(key, struct gtpu_addr_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_gtpu_addrs SEC(".maps");

/* is_gtpu_addr reports whether addr is a local GTP-U address accepting GTP-U on ifindex; with
 * ifindex 0, whether it is one at all. */
static __always_inline int is_gtpu_addr(__be32 addr, __u32 ifindex)
{
	struct gtpu_addr_key key = { .addr = addr, .ifindex = ifindex };

	return bpf_map_lookup_elem(&xupf_gtpu_addrs, &key) != NULL;
}

static __always_inline struct pdr *pdr_at(__u32 slot)
{
	return bpf_map_lookup_elem(&xupf_pdrs, &slot);
}

static __always_inline struct far *far_of(const struct pdr *pdr)
{
	__u32 slot = pdr->far;

	return bpf_map_lookup_elem(&xupf_fars, &slot);
}

/* far_drop_reason returns 0 when far forwards, else the reason to drop: a missing FAR, DROP
 * or an action this datapath does not know drops; BUFF and a FAR toward Access without a
 * tunnel have their own reasons, so that packets the control plane meant to hold, or has no
 * tunnel for yet, are told apart from those it meant to drop. */
static __always_inline int far_drop_reason(const struct far *far)
{
	if (far && far->action == FAR_FORWARD)
		return 0;
	if (far && far->action == FAR_BUFFER)
		return DROP_FAR_BUFFERED;
	if (far && far->action == FAR_ACCESS_NO_TUNNEL)
		return DROP_FAR_ACCESS_NO_TUNNEL;
	return DROP_FAR_DROP;
}

static __always_inline void count_usage(const struct pdr *pdr, __u32 bytes)
{
	__u32 slot = pdr->counter;
	struct counters *c = bpf_map_lookup_elem(&xupf_usage, &slot);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

#endif
