/* PDR selection: which PDR of its TEID or UE address a packet applies (select_pdr), inside
 * the key's rule set (the PDRs of one TEID or one UE address, in precedence order). A small
 * rule set (up to SDF_LINEAR_RULES rules, the common case) keeps its rules in its descriptor
 * and is matched rule by rule, first match wins: a few masked compares per rule, no lookup.
 * A larger one is searched by Linear Bit Vector Search scoped to it (classify_bits): per
 * field, entries {rule set, field, value} -> 64-bit vector of the rules (one bit per SDF
 * filter) that accept the value; the packet's vectors are ANDed and the lowest set bit wins.
 * Its cost is one hash or LPM lookup per field the rule set uses (some 25-60 ns each),
 * whatever the number of sessions. internal/lbvs compiles the tables; internal/datapath
 * writes them and chooses the method. */
#ifndef XUPF_PDR_SELECT_H
#define XUPF_PDR_SELECT_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parse.h"
#include "types.h"
#include "bits.h"
#include "gtpu.h"
#include "rules.h"

/* The fields an SDF filter (plus the PDR's QFI) can constrain. Bit (1 << field) of
 * ruleset.fields and cfg_sdf_fields. The exact-match ones come first. */
enum sdf_field {
	SDF_PROTO = 0,      /* exact: IP protocol */
	SDF_QFI,            /* exact: QFI of the PDU Session Container (uplink) */
	SDF_SPI,            /* exact: IPsec SPI (ESP, AH) */
	SDF_REMOTE_ADDR,    /* prefix of 32: the far end's address */
	SDF_LOCAL_ADDR,     /* prefix of 32: the UE's address */
	SDF_REMOTE_PORT,    /* prefix of 16: the far end's port */
	SDF_LOCAL_PORT,     /* prefix of 16: the UE's port */
	SDF_TOS,            /* prefix of 8: type of service, masked */
	SDF_FIELD_MAX,
};
#define SDF_EXACT_FIELDS (SDF_SPI + 1)
#define SDF_PORT_FIELDS ((1 << SDF_REMOTE_PORT) | (1 << SDF_LOCAL_PORT))

/* Rules (bits) per rule set: one 64-bit word. */
#define SDF_MAX_RULES 64

/* Rules a rule set matched one by one holds at most (a filter with several port ranges is
 * one rule per pair of ranges): the common 2-16 PDRs. Sixteen rules of compares cost less
 * in traffic than the two or three hash/LPM lookups of LBVS they replace, and keep the
 * descriptor at about 1 KB (docs/architecture.md, section 6). */
#define SDF_LINEAR_RULES 16

/* LPM keys count the rule set and field words in their prefix length. */
#define SDF_LPM_KEY_BITS 64

#ifndef XUPF_MAX_RULE_SETS
#define XUPF_MAX_RULE_SETS 16384
#endif
#ifndef XUPF_MAX_SDF_ENTRIES
#define XUPF_MAX_SDF_ENTRIES 262144
#endif

/* Fields any installed rule set uses, set when the program is loaded: the verifier drops the
 * parsing and lookups of the others. The daemon reloads and swaps the program when a rule
 * set needs a field that is off. */
volatile const __u32 cfg_sdf_fields = 0;

/* How a rule set is searched. */
enum sdf_method {
	SDF_BITS = 0,    /* LBVS over xupf_sdf_exact and xupf_sdf_lpm */
	SDF_LINEAR = 1,  /* ruleset.rules, one by one */
};

/* The packet's one-byte values and which of the optional ones it has, in one 64-bit word,
 * so that a rule checks them all with one masked compare (sdf_key_word). */
struct sdf_key {
	__u8 proto, tos, qfi;
	__u8 has_qfi, has_ports, has_spi;  /* 1: the packet has the value */
	__u8 pad[2];
} __attribute__((aligned(8)));

/* One rule matched by compares: it accepts a packet whose key masked by key_mask equals key,
 * whose addresses masked equal theirs, whose ports lie in their ranges (0-65535: any, even
 * none) and, when key_mask has has_spi, whose SPI is spi. A condition on a value the packet
 * may lack (QFI, ports, SPI) asks for the value's has_* byte. The PDR comes with the rule:
 * the winner's cache line holds it. */
struct sdf_rule {
	struct sdf_key key, key_mask;
	__be32 remote, remote_mask;
	__be32 local, local_mask;
	__u16 remote_first, remote_last;  /* host order */
	__u16 local_first, local_last;
	__u32 spi;                        /* host order */
	__u32 pdr;                        /* PDR slot */
};

/* A rule set's descriptor. The method and the first rules share the first cache line. */
struct ruleset {
	enum sdf_method method;
	__u32 fields;                  /* (1 << sdf_field) of the fields some rule constrains */
	__u32 nrules;                  /* SDF_LINEAR: rules[0 .. nrules-1], in precedence order */
	struct sdf_rule rules[SDF_LINEAR_RULES];
	/* SDF_BITS */
	__u64 all;                     /* the rules that can match an IPv4 packet: the start */
	__u64 wild[SDF_EXACT_FIELDS];  /* exact fields: rules that accept any value */
	__u32 pdr[SDF_MAX_RULES];      /* rule (bit) -> PDR slot */
};

struct sdf_exact_key {
	__u32 ruleset;
	__u32 field;
	__u32 value;
};

/* Prefix fields: value is big-endian and left-aligned (a port is its top 16 bits). */
struct sdf_lpm_key {
	__u32 prefixlen;  /* SDF_LPM_KEY_BITS + the value's prefix length */
	__u32 ruleset;
	__u32 field;
	__be32 value;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XUPF_MAX_RULE_SETS);
	__type(key, __u32);
	__type(value, struct ruleset);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_rulesets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XUPF_MAX_SDF_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sdf_exact_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_sdf_exact SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, XUPF_MAX_SDF_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sdf_lpm_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} xupf_sdf_lpm SEC(".maps");

/* A packet as the filters see it: from the UE's point of view. */
struct sdf_pkt {
	struct sdf_key key;             /* protocol, ToS, QFI and which values the packet has */
	__be32 remote, local;
	__u16 remote_port, local_port;  /* host order */
	__u32 spi;                      /* host order */
};

/* sdf_pkt_fill reads ip (whose header and ihl_len bytes are known to be in the packet) into
 * p; on the uplink the UE is the source. Ports and SPI are read only when some rule set uses
 * them. */
static __always_inline void sdf_pkt_fill(struct sdf_pkt *p, struct iphdr *ip, __u32 ihl_len,
					 void *data_end, enum direction dir)
{
	int uplink = dir == DIR_UPLINK;

	p->key.proto = ip->protocol;
	p->key.tos = ip->tos;
	p->remote = uplink ? ip->daddr : ip->saddr;
	p->local = uplink ? ip->saddr : ip->daddr;
	p->key.has_ports = 0;
	p->key.has_spi = 0;
	if (cfg_sdf_fields & SDF_PORT_FIELDS) {
		__u32 ports = l4_ports(ip, ihl_len, data_end);
		__u16 sport = bpf_ntohs(ports >> 16), dport = bpf_ntohs(ports & 0xffff);

		/* l4_ports gives 0 for no ports; port 0 itself is not a real port. */
		p->key.has_ports = ports != 0;
		p->remote_port = uplink ? dport : sport;
		p->local_port = uplink ? sport : dport;
	}
	if ((cfg_sdf_fields & (1 << SDF_SPI)) && !ipv4_is_fragment(ip)) {
		/* ESP: SPI first; AH: after next header, length and reserved. */
		__be32 *spi = NULL;

		if (ip->protocol == IPPROTO_ESP)
			spi = (void *)ip + ihl_len;
		else if (ip->protocol == IPPROTO_AH)
			spi = (void *)ip + ihl_len + 4;
		if (spi && (void *)(spi + 1) <= data_end) {
			p->spi = bpf_ntohl(*spi);
			p->key.has_spi = 1;
		}
	}
}

static __always_inline __u64 sdf_exact(__u32 rs_id, __u32 field, __u32 value, __u64 wild)
{
	struct sdf_exact_key key = { .ruleset = rs_id, .field = field, .value = value };
	__u64 *v = bpf_map_lookup_elem(&xupf_sdf_exact, &key);

	return v ? *v : wild;
}

/* sdf_lpm looks up the first bits of value; with bits 0 (a value the packet does not have)
 * only the zero-length entry, the rules that accept anything, can match. */
static __always_inline __u64 sdf_lpm(__u32 rs_id, __u32 field, __be32 value, __u32 bits)
{
	struct sdf_lpm_key key = {
		.prefixlen = SDF_LPM_KEY_BITS + bits,
		.ruleset = rs_id,
		.field = field,
		.value = value,
	};
	__u64 *v = bpf_map_lookup_elem(&xupf_sdf_lpm, &key);

	return v ? *v : 0;
}

#define SDF_AND(cond, expr)                \
	do {                               \
		if (cond) {                \
			v &= (expr);       \
			if (!v)            \
				return -1; \
		}                          \
	} while (0)

/* classify_bits returns the PDR slot the packet p selects in rule set rs_id (whose
 * descriptor is rs) by LBVS, or -1. */
static __always_inline __s64 classify_bits(__u32 rs_id, const struct ruleset *rs, const struct sdf_pkt *p)
{
	__u32 fields = rs->fields & cfg_sdf_fields;
	__u64 v = rs->all;

	SDF_AND(fields & (1 << SDF_PROTO), sdf_exact(rs_id, SDF_PROTO, p->key.proto, rs->wild[SDF_PROTO]));
	SDF_AND(fields & (1 << SDF_QFI),
		p->key.has_qfi ? sdf_exact(rs_id, SDF_QFI, p->key.qfi, rs->wild[SDF_QFI]) : rs->wild[SDF_QFI]);
	SDF_AND(fields & (1 << SDF_SPI),
		p->key.has_spi ? sdf_exact(rs_id, SDF_SPI, p->spi, rs->wild[SDF_SPI]) : rs->wild[SDF_SPI]);
	SDF_AND(fields & (1 << SDF_REMOTE_ADDR), sdf_lpm(rs_id, SDF_REMOTE_ADDR, p->remote, 32));
	SDF_AND(fields & (1 << SDF_LOCAL_ADDR), sdf_lpm(rs_id, SDF_LOCAL_ADDR, p->local, 32));
	SDF_AND(fields & (1 << SDF_REMOTE_PORT),
		sdf_lpm(rs_id, SDF_REMOTE_PORT, bpf_htonl((__u32)p->remote_port << 16), p->key.has_ports ? 16 : 0));
	SDF_AND(fields & (1 << SDF_LOCAL_PORT),
		sdf_lpm(rs_id, SDF_LOCAL_PORT, bpf_htonl((__u32)p->local_port << 16), p->key.has_ports ? 16 : 0));
	SDF_AND(fields & (1 << SDF_TOS), sdf_lpm(rs_id, SDF_TOS, bpf_htonl((__u32)p->key.tos << 24), 8));
	if (!v)
		return -1;
	return rs->pdr[lowest_bit(v) & (SDF_MAX_RULES - 1)];
}

static __always_inline __u64 sdf_key_word(const struct sdf_key *k)
{
	__u64 w;

	__builtin_memcpy(&w, k, sizeof(w));
	return w;
}

/* classify_linear returns the PDR slot of the first of rs's rules that accepts p, or -1.
 * Only the fields some rule set uses are compared (cfg_sdf_fields): the rules of the others
 * accept anything. */
static __always_inline __s64 classify_linear(const struct ruleset *rs, const struct sdf_pkt *p)
{
	__u64 key = sdf_key_word(&p->key);

	for (__u32 i = 0; i < SDF_LINEAR_RULES; i++) {
		const struct sdf_rule *r = &rs->rules[i];

		if (i >= rs->nrules)
			break;
		if ((key & sdf_key_word(&r->key_mask)) != sdf_key_word(&r->key))
			continue;
		if ((cfg_sdf_fields & (1 << SDF_REMOTE_ADDR)) && (p->remote & r->remote_mask) != r->remote)
			continue;
		if ((cfg_sdf_fields & (1 << SDF_LOCAL_ADDR)) && (p->local & r->local_mask) != r->local)
			continue;
		if ((cfg_sdf_fields & (1 << SDF_REMOTE_PORT)) &&
		    (p->remote_port < r->remote_first || p->remote_port > r->remote_last))
			continue;
		if ((cfg_sdf_fields & (1 << SDF_LOCAL_PORT)) &&
		    (p->local_port < r->local_first || p->local_port > r->local_last))
			continue;
		if ((cfg_sdf_fields & (1 << SDF_SPI)) && r->key_mask.has_spi && p->spi != r->spi)
			continue;
		return r->pdr;
	}
	return -1;
}

/* classify returns the PDR slot the packet p selects in rule set rs_id, or -1. */
static __always_inline __s64 classify(__u32 rs_id, const struct sdf_pkt *p)
{
	struct ruleset *rs = bpf_map_lookup_elem(&xupf_rulesets, &rs_id);

	if (!rs)
		return -1;
	if (rs->method == SDF_LINEAR)
		return classify_linear(rs, p);
	return classify_bits(rs_id, rs, p);
}

/* select_pdr returns the PDR that applies to the packet whose IPv4 header is ip, and sets *farp
 * to its FAR: the classification winner of the key's rule set, or the key's one PDR and FAR,
 * which ref holds itself, without a classification step. psc is the packet's PDU Session
 * Container (PSC_NONE downlink). NULL: no PDR matches. */
static __always_inline const struct pdr *select_pdr(const struct rule_ref *ref, struct iphdr *ip,
						    __u32 ihl_len, void *data_end, enum direction dir,
						    struct psc_qfi psc, const struct far **farp)
{
	const struct pdr *pdr;

	if (ref->ruleset) {
		struct sdf_pkt p = { .key = { .qfi = psc.qfi, .has_qfi = psc.present } };
		__s64 slot;

		sdf_pkt_fill(&p, ip, ihl_len, data_end, dir);
		slot = classify(ref->ruleset, &p);
		pdr = slot < 0 ? NULL : pdr_at(slot);
		*farp = pdr ? far_of(pdr) : NULL;
		return pdr;
	}
	pdr = &ref->pdr;
	/* A downlink PDR's QFI is a marking; an uplink one's must be on the packet. */
	if (dir == DIR_UPLINK && pdr->qfi && (!psc.present || psc.qfi != pdr->qfi))
		return NULL;
	*farp = &ref->far;
	return pdr;
}

#endif
