/* The traffic classifier (the papers' module): classes over the frame's MACs and ethertype,
 * the user packet's IPv4 addresses, protocol and ports, and the direction; the highest
 * priority matching class wins and its entry goes into the packet metadata for the modules
 * after it (the policer). Linear Bit Vector Search with one global scope and wide vectors
 * (bits in priority order): per field, value -> vector of the classes that accept it; the
 * packet's vectors are ANDed and the lowest set bit is the class.
 *
 * Cost follows the fields in use, not the vector width. Every field value leads by array
 * lookups (a hash for the MACs) to a vector reference, cls_vref: which of the vector's
 * 512-bit chunks are non-zero, and where in the chunk pool they are. The packet first ANDs
 * the fields' chunk masks, then looks at the chunks left, one pool lookup per field and
 * chunk, and stops at the first chunk with a class. Up to 512 classes that is one chunk:
 * per field one or three index lookups (a port, an address) and one pool lookup.
 *
 * Double buffering: every table is written twice over, at buffer 0 or 1. The loaded
 * program reads the buffer cfg_cls_buf; a change fills the other buffer, then swaps in a
 * program that reads it, so no packet ever sees a half-written table. internal/classifier
 * compiles the class set; internal/datapath lays it out (clslayout.go), writes it and
 * swaps. */
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
/* Chunks of the vector pool, per buffer: distinct vectors times their non-zero chunks. */
#ifndef XUPF_CLS_POOL_CHUNKS
#define XUPF_CLS_POOL_CHUNKS 65536
#endif
/* 256-entry address tables, per buffer, both address fields: one per /16 and per /24 that
 * holds a longer prefix than its block. */
#ifndef XUPF_CLS_IP_TABLES
#define XUPF_CLS_IP_TABLES 1024
#endif
/* Distinct MAC addresses, both buffers and fields. */
#ifndef XUPF_CLS_MACS
#define XUPF_CLS_MACS 65536
#endif

/* The layout of the classifier's arrays. Per buffer, xupf_cls_index holds a cls_vref per
 * value of every array-indexed field, in these regions: */
enum cls_layout {
	CLS_CHUNK_WORDS = 8,                                   /* 64-bit words per chunk */
	CLS_CHUNKS = XUPF_MAX_CLASSES / 64 / CLS_CHUNK_WORDS,  /* chunks of a full vector */
	CLS_NO_PORT = 65536,       /* the port index of a packet without ports */
	CLS_IX_DIRECTION = 0,      /* enum direction: 4 */
	CLS_IX_PROTO = CLS_IX_DIRECTION + 4,       /* IP protocol: 256 */
	CLS_IX_ETHERTYPE = CLS_IX_PROTO + 256,     /* 65536 */
	CLS_IX_SRC_PORT = CLS_IX_ETHERTYPE + 65536,  /* 65536 ports and CLS_NO_PORT */
	CLS_IX_DST_PORT = CLS_IX_SRC_PORT + 65537,
	CLS_IX_SRC_IP = CLS_IX_DST_PORT + 65537,     /* by the address's first 16 bits */
	CLS_IX_DST_IP = CLS_IX_SRC_IP + 65536,
	CLS_IX_MAC_WILD = CLS_IX_DST_IP + 65536,     /* source and destination MAC's wildcard */
	CLS_IX_IP_TABLES = CLS_IX_MAC_WILD + 2,      /* 256 entries per table */
	CLS_IX_PER_BUF = CLS_IX_IP_TABLES + XUPF_CLS_IP_TABLES * 256,
	CLS_VREF_TABLE = 1 << 30,  /* cls_vref.base flag: an address table, not a vector */
	CLS_NO_CLASS = XUPF_MAX_CLASSES,          /* xupf_cls_classes: no class */
	CLS_CLASSES_PER_BUF = XUPF_MAX_CLASSES + 1,
};

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

/* A vector: bit c of present says chunk c is non-zero; the non-zero chunks are at base,
 * base + 1, ... of the buffer's pool, in order. first is its first 64 bits, the whole vector
 * while no more than 64 classes exist (cfg_cls_words 1): then the pool is not read at all.
 * (With CLS_VREF_TABLE in base, an address table instead: its number.) */
struct cls_vref {
	__u32 present;
	__u32 base;
	__u64 first;
};

struct cls_chunk {
	__u64 w[CLS_CHUNK_WORDS];
};

struct cls_mac_key {
	__u32 buf;
	__u32 field;  /* CLS_SRC_MAC or CLS_DST_MAC */
	__u64 mac;    /* as a 48-bit number */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * CLS_IX_PER_BUF);
	__type(key, __u32);
	__type(value, struct cls_vref);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_index SEC(".maps");

/* The vector chunks, per buffer from buf * XUPF_CLS_POOL_CHUNKS. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * XUPF_CLS_POOL_CHUNKS);
	__type(key, __u32);
	__type(value, struct cls_chunk);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_chunks SEC(".maps");

/* 48-bit values do not fit an array: a MAC no class names takes CLS_IX_MAC_WILD. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_CLS_MACS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cls_mac_key);
	__type(value, struct cls_vref);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_cls_macs SEC(".maps");

/* A class as the packets of one buffer see it. */
struct cls_class {
	__u32 id;           /* the user's class id, for the modules after the classifier */
	__u32 slot;         /* its counters in xupf_cls_stats, the same in both buffers for its life */
	__u32 contract;     /* its policer contract's xupf_contracts slot + 1; 0: none (policer.h) */
	__u32 police_slot;  /* its contract's counters in xupf_police_stats */
};

/* Per buffer: bit -> class, and at CLS_NO_CLASS the entry of packets without a class (id 0,
 * the default contract). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * CLS_CLASSES_PER_BUF);
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
	/* A MAC is twelve loads and shifts: only when some class looks at it. */
	p->src_mac = cfg_cls_fields & (1 << CLS_SRC_MAC) ? mac_u64(eth->h_source) : 0;
	p->dst_mac = cfg_cls_fields & (1 << CLS_DST_MAC) ? mac_u64(eth->h_dest) : 0;
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

static __always_inline const struct cls_vref *cls_index(__u32 at)
{
	__u32 key = cfg_cls_buf * CLS_IX_PER_BUF + at;

	return bpf_map_lookup_elem(&xupf_cls_index, &key);
}

static __always_inline const struct cls_vref *cls_mac(__u32 field, __u64 mac)
{
	struct cls_mac_key key = { .buf = cfg_cls_buf, .field = field, .mac = mac };
	const struct cls_vref *v = bpf_map_lookup_elem(&xupf_cls_macs, &key);

	return v ? v : cls_index(CLS_IX_MAC_WILD + field - CLS_SRC_MAC);
}

/* cls_ip walks an address through its field's region (the first 16 bits) and, where a
 * longer prefix needs them, the tables of its /16 (third byte) and /24 (fourth byte). */
static __always_inline const struct cls_vref *cls_ip(__u32 region, __be32 addr)
{
	__u32 a = bpf_ntohl(addr);
	const struct cls_vref *v = cls_index(region + (a >> 16));

	if (v && (v->base & CLS_VREF_TABLE))
		v = cls_index(CLS_IX_IP_TABLES + (v->base & ~CLS_VREF_TABLE) * 256 + ((a >> 8) & 0xff));
	if (v && (v->base & CLS_VREF_TABLE))
		v = cls_index(CLS_IX_IP_TABLES + (v->base & ~CLS_VREF_TABLE) * 256 + (a & 0xff));
	return v;
}

static __always_inline __u32 cls_port(__u32 region, const struct cls_pkt *p, __u16 port)
{
	return region + (p->has_ports ? port : CLS_NO_PORT);
}

/* CLS_REF takes field's vector reference into refs and its chunk mask into present; no
 * reference, or no chunk left, is no class. */
#define CLS_REF(field, expr)                                   \
	do {                                                   \
		if (cfg_cls_fields & (1 << (field))) {         \
			const struct cls_vref *r = (expr);     \
			if (!r)                                \
				return NULL;                   \
			refs[field] = *r;                      \
			present &= r->present;                 \
			if (!present)                          \
				return NULL;                   \
		}                                              \
	} while (0)

/* cls_chunk_and ANDs chunk c of the vector ref into acc; 0 when the chunk is missing. */
static __always_inline int cls_chunk_and(__u64 *acc, const struct cls_vref *ref, __u32 c)
{
	__u32 key = cfg_cls_buf * XUPF_CLS_POOL_CHUNKS + ref->base + popcount32(ref->present & ((1U << c) - 1));
	const struct cls_chunk *k = bpf_map_lookup_elem(&xupf_cls_chunks, &key);

	if (!k)
		return 0;
#pragma unroll
	for (__u32 w = 0; w < CLS_CHUNK_WORDS; w++)
		acc[w] &= k->w[w];
	return 1;
}

/* classify_traffic returns the class p belongs to, or NULL for none. */
static __always_inline const struct cls_class *classify_traffic(const struct cls_pkt *p)
{
	struct cls_vref refs[CLS_FIELD_MAX] = {};
	__u32 present = ~0U;

	if (!cfg_cls_words)
		return NULL;
	CLS_REF(CLS_DIRECTION, cls_index(CLS_IX_DIRECTION + (p->direction & 3)));
	CLS_REF(CLS_SRC_MAC, cls_mac(CLS_SRC_MAC, p->src_mac));
	CLS_REF(CLS_DST_MAC, cls_mac(CLS_DST_MAC, p->dst_mac));
	CLS_REF(CLS_ETHERTYPE, cls_index(CLS_IX_ETHERTYPE + p->ethertype));
	CLS_REF(CLS_PROTO, cls_index(CLS_IX_PROTO + p->proto));
	CLS_REF(CLS_SRC_IP, cls_ip(CLS_IX_SRC_IP, p->src_ip));
	CLS_REF(CLS_DST_IP, cls_ip(CLS_IX_DST_IP, p->dst_ip));
	CLS_REF(CLS_SRC_PORT, cls_index(cls_port(CLS_IX_SRC_PORT, p, p->src_port)));
	CLS_REF(CLS_DST_PORT, cls_index(cls_port(CLS_IX_DST_PORT, p, p->dst_port)));

	if (cfg_cls_words == 1) {
		__u64 v = ~0ULL;
		__u32 key;

#pragma unroll
		for (__u32 f = 0; f < CLS_FIELD_MAX; f++)
			if (cfg_cls_fields & (1 << f))
				v &= refs[f].first;
		if (!v)
			return NULL;
		key = cfg_cls_buf * CLS_CLASSES_PER_BUF + lowest_bit(v);
		return bpf_map_lookup_elem(&xupf_cls_classes, &key);
	}
	for (__u32 c = 0; c < CLS_CHUNKS; c++) {
		__u64 acc[CLS_CHUNK_WORDS];

		if (c * CLS_CHUNK_WORDS >= cfg_cls_words)
			break;
		if (!(present & (1U << c)))
			continue;
#pragma unroll
		for (__u32 w = 0; w < CLS_CHUNK_WORDS; w++)
			acc[w] = ~0ULL;
#pragma unroll
		for (__u32 f = 0; f < CLS_FIELD_MAX; f++)
			if ((cfg_cls_fields & (1 << f)) && !cls_chunk_and(acc, &refs[f], c))
				return NULL;
#pragma unroll
		for (__u32 w = 0; w < CLS_CHUNK_WORDS; w++) {
			if (acc[w]) {
				__u32 key = cfg_cls_buf * CLS_CLASSES_PER_BUF + (c * CLS_CHUNK_WORDS + w) * 64 +
					    lowest_bit(acc[w]);

				return bpf_map_lookup_elem(&xupf_cls_classes, &key);
			}
		}
	}
	return NULL;
}

/* cls_no_class returns the entry of packets without a class. */
static __always_inline const struct cls_class *cls_no_class(void)
{
	__u32 key = cfg_cls_buf * CLS_CLASSES_PER_BUF + CLS_NO_CLASS;

	return bpf_map_lookup_elem(&xupf_cls_classes, &key);
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

/* classify_packet classifies the user packet ip (ihl_len header bytes, len bytes in all) of
 * the frame eth travelling in dir and counts it: its class, NULL for none, and while no class
 * exists (the verifier then drops it all). */
static __always_inline const struct cls_class *classify_packet(const struct ethhdr *eth, struct iphdr *ip,
							       __u32 ihl_len, __u32 len, void *data_end,
							       enum direction dir)
{
	const struct cls_class *cls;
	struct cls_pkt cp;

	if (!cfg_cls_words)
		return NULL;
	cls_pkt_fill(&cp, eth, ip, ihl_len, data_end, dir);
	cls = classify_traffic(&cp);
	count_class(cls, len);
	return cls;
}

#endif
