/* The traffic classifier (the papers' module): classes over the frame's MACs and ethertype,
 * the user packet's IPv4 addresses, protocol and ports, and the direction; the highest
 * priority matching class wins and its id goes into the packet metadata for the modules
 * after it (the policer). Linear Bit Vector Search with one global scope and wide vectors:
 * per field, value -> vector of the classes that accept it; the vectors are ANDed in a
 * per-CPU scratch vector and the lowest set bit is the class (bits are in priority order).
 *
 * Double buffering: every table is written twice over, keyed by buffer 0 or 1. The loaded
 * program reads the buffer cfg_cls_buf; a change fills the other buffer, then swaps in a
 * program that reads it, so no packet ever sees a half-written table. internal/classifier
 * compiles the tables; internal/datapath writes them and swaps. */
#ifndef XUPF_CLASSIFIER_H
#define XUPF_CLASSIFIER_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parse.h"
#include "types.h"
#include "stats.h"
#include "bits.h"

#ifndef XUPF_MAX_CLASSES
#define XUPF_MAX_CLASSES 10240
#endif
#define CLS_WORDS (XUPF_MAX_CLASSES / 64)
#ifndef XUPF_MAX_CLS_ENTRIES
#define XUPF_MAX_CLS_ENTRIES 65536
#endif

enum cls_field {
	CLS_DIRECTION = 0,  /* exact: enum direction (types.h) */
	CLS_SRC_MAC,        /* exact: the received frame's source MAC */
	CLS_DST_MAC,        /* exact: the received frame's destination MAC */
	CLS_ETHERTYPE,      /* exact: the received frame's ethertype */
	CLS_PROTO,          /* exact: the user packet's IP protocol */
	CLS_SRC_IP,         /* prefix of 32 */
	CLS_DST_IP,         /* prefix of 32 */
	CLS_SRC_PORT,       /* prefix of 16 */
	CLS_DST_PORT,       /* prefix of 16 */
	CLS_FIELD_MAX,
};
#define CLS_EXACT_FIELDS (CLS_PROTO + 1)

/* Load-time settings: the fields some class uses, the vector words in use (0: no classes,
 * the classifier is off) and the buffer this program reads. */
volatile const __u32 cfg_cls_fields = 0;
volatile const __u32 cfg_cls_words = 0;
volatile const __u32 cfg_cls_buf = 0;

struct cls_vec {
	__u64 w[CLS_WORDS];
};

struct cls_exact_key {
	__u32 buf;
	__u32 field;
	__u64 value;  /* MACs as 48-bit numbers, the rest as host-order numbers */
};

struct cls_lpm_key {
	__u32 prefixlen;  /* 64 + the value's prefix length */
	__u32 buf;
	__u32 field;
	__be32 value;     /* big-endian, left-aligned */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_CLS_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cls_exact_key);
	__type(value, struct cls_vec);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_exact SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, XUPF_MAX_CLS_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cls_lpm_key);
	__type(value, struct cls_vec);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_lpm SEC(".maps");

/* Per buffer: [CLS_VEC_ALL] the vector of all classes (the start), [CLS_VEC_WILD(f)] the
 * wildcard vector of exact field f (the classes that accept any value). */
#define CLS_VEC_ALL 0
#define CLS_VEC_WILD(field) (1 + (field))
#define CLS_VECS_PER_BUF (1 + CLS_EXACT_FIELDS)
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * CLS_VECS_PER_BUF);
	__type(key, __u32);
	__type(value, struct cls_vec);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_vecs SEC(".maps");

/* A class as the packets of one buffer see it. */
struct cls_class {
	__u32 id;    /* the user's class id, for the modules after the classifier */
	__u32 slot;  /* its counters in xupf_cls_stats, the same in both buffers for its life */
};

/* Per buffer: bit -> class. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * XUPF_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct cls_class);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_classes SEC(".maps");

/* Counter slots beyond one per class: a deleted class's slot rests behind these before
 * another class gets it, so that the packets still classified by the old buffer are not
 * counted in the new class. */
#ifndef XUPF_CLS_SPARE_SLOTS
#define XUPF_CLS_SPARE_SLOTS 1024
#endif

/* Packets and bytes per class counter slot, per CPU: an array, indexed by a slot the
 * daemon gives each class id, costs a few ns where a hash by class id cost ~25. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XUPF_MAX_CLASSES + XUPF_CLS_SPARE_SLOTS);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_stats SEC(".maps");

/* The packet's vector: too big for the 512-byte stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cls_vec);
} xupf_cls_scratch SEC(".maps");

struct cls_pkt {
	__u64 src_mac, dst_mac;
	__be32 src_ip, dst_ip;
	__u16 ethertype, src_port, dst_port;  /* host order */
	__u8 direction, proto, has_ports;  /* direction: enum direction */
};

static __always_inline __u64 mac_u64(const unsigned char *m)
{
	return ((__u64)m[0] << 40) | ((__u64)m[1] << 32) | ((__u64)m[2] << 24) |
	       ((__u64)m[3] << 16) | ((__u64)m[4] << 8) | (__u64)m[5];
}

/* cls_pkt_fill reads the frame's Ethernet header eth and the user packet ip (header known
 * to be in the packet, ihl_len bytes long) travelling in direction dir: uplink ("ingress") it
 * is the inner packet, downlink ("egress") the packet before encapsulation. */
static __always_inline void cls_pkt_fill(struct cls_pkt *p, const struct ethhdr *eth,
					 struct iphdr *ip, __u32 ihl_len, void *data_end,
					 enum direction dir)
{
	p->direction = dir;
	p->src_mac = mac_u64(eth->h_source);
	p->dst_mac = mac_u64(eth->h_dest);
	p->ethertype = bpf_ntohs(eth->h_proto);
	p->proto = ip->protocol;
	p->src_ip = ip->saddr;
	p->dst_ip = ip->daddr;
	p->has_ports = 0;
	p->src_port = 0;
	p->dst_port = 0;
	if (cfg_cls_fields & ((1 << CLS_SRC_PORT) | (1 << CLS_DST_PORT))) {
		__u32 ports = l4_ports(ip, ihl_len, data_end);

		p->has_ports = ports != 0;
		p->src_port = bpf_ntohs(ports >> 16);
		p->dst_port = bpf_ntohs(ports & 0xffff);
	}
}

/* cls_and ANDs src into dst over the words in use; returns whether any bit is left. */
static __always_inline int cls_and(struct cls_vec *dst, const struct cls_vec *src)
{
	__u64 any = 0;

	for (__u32 i = 0; i < CLS_WORDS; i++) {
		if (i >= cfg_cls_words)
			break;
		dst->w[i] &= src->w[i];
		any |= dst->w[i];
	}
	return any != 0;
}

static __always_inline const struct cls_vec *cls_vec_at(__u32 index)
{
	__u32 key = cfg_cls_buf * CLS_VECS_PER_BUF + index;

	return bpf_map_lookup_elem(&xupf_cls_vecs, &key);
}

static __always_inline const struct cls_vec *cls_exact(__u32 field, __u64 value)
{
	struct cls_exact_key key = { .buf = cfg_cls_buf, .field = field, .value = value };
	const struct cls_vec *v = bpf_map_lookup_elem(&xupf_cls_exact, &key);

	return v ? v : cls_vec_at(CLS_VEC_WILD(field));
}

/* cls_lpm looks up the first bits of value; with bits 0 (a value the packet does not have)
 * only the zero-length entry, the classes that accept anything, can match. */
static __always_inline const struct cls_vec *cls_lpm(__u32 field, __be32 value, __u32 bits)
{
	struct cls_lpm_key key = {
		.prefixlen = 64 + bits,
		.buf = cfg_cls_buf,
		.field = field,
		.value = value,
	};

	return bpf_map_lookup_elem(&xupf_cls_lpm, &key);
}

#define CLS_AND(field, expr)                                   \
	do {                                                   \
		if (cfg_cls_fields & (1 << (field))) {         \
			const struct cls_vec *src = (expr);    \
			if (!src || !cls_and(vec, src))        \
				return NULL;                   \
		}                                              \
	} while (0)

/* classify_traffic returns the class p belongs to, or NULL for none. */
static __always_inline const struct cls_class *classify_traffic(const struct cls_pkt *p)
{
	const struct cls_vec *base;
	struct cls_vec *vec;
	__u32 zero = 0;

	if (!cfg_cls_words)
		return NULL;
	vec = bpf_map_lookup_elem(&xupf_cls_scratch, &zero);
	base = cls_vec_at(CLS_VEC_ALL);
	if (!vec || !base)
		return NULL;
	for (__u32 i = 0; i < CLS_WORDS; i++) {
		if (i >= cfg_cls_words)
			break;
		vec->w[i] = base->w[i];
	}
	CLS_AND(CLS_DIRECTION, cls_exact(CLS_DIRECTION, p->direction));
	CLS_AND(CLS_SRC_MAC, cls_exact(CLS_SRC_MAC, p->src_mac));
	CLS_AND(CLS_DST_MAC, cls_exact(CLS_DST_MAC, p->dst_mac));
	CLS_AND(CLS_ETHERTYPE, cls_exact(CLS_ETHERTYPE, p->ethertype));
	CLS_AND(CLS_PROTO, cls_exact(CLS_PROTO, p->proto));
	CLS_AND(CLS_SRC_IP, cls_lpm(CLS_SRC_IP, p->src_ip, 32));
	CLS_AND(CLS_DST_IP, cls_lpm(CLS_DST_IP, p->dst_ip, 32));
	CLS_AND(CLS_SRC_PORT, cls_lpm(CLS_SRC_PORT, bpf_htonl((__u32)p->src_port << 16), p->has_ports ? 16 : 0));
	CLS_AND(CLS_DST_PORT, cls_lpm(CLS_DST_PORT, bpf_htonl((__u32)p->dst_port << 16), p->has_ports ? 16 : 0));

	for (__u32 i = 0; i < CLS_WORDS; i++) {
		__u64 w;
		__u32 key;

		if (i >= cfg_cls_words)
			break;
		w = vec->w[i];
		if (!w)
			continue;
		key = cfg_cls_buf * XUPF_MAX_CLASSES + i * 64 + lowest_bit(w);
		return bpf_map_lookup_elem(&xupf_cls_classes, &key);
	}
	return NULL;
}

/* count_class adds a packet of bytes to the counters of class cls (NULL: none). */
static __always_inline void count_class(const struct cls_class *cls, __u32 bytes)
{
	struct counters *c;

	if (!cls) {
		count_stat(STAT_CLS_MISS);
		return;
	}
	count_stat(STAT_CLS_HIT);
	c = bpf_map_lookup_elem(&xupf_cls_stats, &cls->slot);
	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

#endif
