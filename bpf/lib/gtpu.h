/* GTP-U (TS 29.281): the local GTP-U addresses, header parsing and the
 * Echo Response; the PDU Session Container extension header is TS 38.415. Encapsulation and
 * decapsulation are encap.h's. */
#ifndef XUPF_GTPU_H
#define XUPF_GTPU_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parse.h"
#include "csum.h"
#include "stats.h"

#define GTPU_PORT 2152
#define GTPU_VERSION 1
#define GTPU_FLAG_PT 0x10  /* protocol type: 1 = GTP, 0 = GTP' */
#define GTPU_FLAG_E 0x04   /* extension header present */
#define GTPU_FLAG_S 0x02   /* sequence number present */
#define GTPU_FLAG_PN 0x01  /* N-PDU number present */
#define GTPU_FLAGS_V1_PT ((GTPU_VERSION << 5) | GTPU_FLAG_PT)

#define GTPU_ECHO_REQUEST 1
#define GTPU_ECHO_RESPONSE 2
#define GTPU_ERROR_INDICATION 26
#define GTPU_G_PDU 255

#define GTPU_EXT_NONE 0x00
#define GTPU_EXT_PDU_SESSION_CONTAINER 0x85
#define PDU_TYPE_DL_SESSION_INFO 0  /* TS 38.415 PDU type, high nibble of the first octet */
#define PSC_QFI_MASK 0x3f           /* QFI: low six bits of the second octet */
/* No QFI: a PDR's qfi of 0, and encapsulation without a PDU Session Container. */
#define QFI_NONE 0

/* Longest extension-header chain the datapath walks; a longer one is a counted drop. Real
 * gNBs send one (the PDU Session Container), sometimes two. */
#ifndef GTPU_MAX_EXT_HDRS
#define GTPU_MAX_EXT_HDRS 4
#endif

#define GTPU_IE_RECOVERY 14  /* Recovery IE type (TV, one octet of restart counter) */

#ifndef XUPF_MAX_GTPU_ADDRS
#define XUPF_MAX_GTPU_ADDRS 16
#endif
#ifndef XUPF_MAX_N3_PORTS
#define XUPF_MAX_N3_PORTS 16
#endif

/* The local GTP-U addresses and the interfaces GTP-U is accepted on (those with the n3 role:
 * N3 from gNBs, N9 from peer UPFs), set when the program is loaded from the configuration.
 * Every uplink packet is checked against them, so they are compares against constants rather
 * than a map lookup: the verifier knows the counts and drops the compares past them, so one
 * address on one interface costs two compares. */
volatile const __u32 cfg_gtpu_naddrs = 0;
volatile const __be32 cfg_gtpu_addrs[XUPF_MAX_GTPU_ADDRS] = {};
volatile const __u32 cfg_n3_nports = 0;
volatile const __u32 cfg_n3_ifindex[XUPF_MAX_N3_PORTS] = {};

/* With this ifindex, is_gtpu_addr asks whether an address is a local GTP-U address at all. */
#define GTPU_ANY_IFINDEX 0

/* is_gtpu_addr reports whether addr is a local GTP-U address accepting GTP-U on ifindex; with
 * GTPU_ANY_IFINDEX, whether it is one at all (so that GTP-U arriving elsewhere is told apart
 * and dropped). */
static __always_inline int is_gtpu_addr(__be32 addr, __u32 ifindex)
{
	int i, ours = 0;

#pragma unroll
	for (i = 0; i < XUPF_MAX_GTPU_ADDRS; i++) {
		if (i >= cfg_gtpu_naddrs)
			break;
		if (addr == cfg_gtpu_addrs[i])
			ours = 1;
	}
	if (!ours || ifindex == GTPU_ANY_IFINDEX)
		return ours;
#pragma unroll
	for (i = 0; i < XUPF_MAX_N3_PORTS; i++) {
		if (i >= cfg_n3_nports)
			break;
		if (ifindex == cfg_n3_ifindex[i])
			return 1;
	}
	return 0;
}

/* Not packed: its fields fall on their natural offsets anyway, and packed would have clang read
 * and write the TEID and the length a byte at a time (ten instructions for the TEID every
 * G-PDU is looked up by). In a frame it is seldom 4-byte aligned (42 bytes in, behind
 * Ethernet, IPv4 and UDP), which BPF allows as eth.h says. */
struct gtpu_hdr {
	__u8 flags;     /* version(3) PT(1) spare(1) E(1) S(1) PN(1) */
	__u8 type;
	__be16 length;  /* bytes after this 8-byte header */
	__be32 teid;
};
_Static_assert(sizeof(struct gtpu_hdr) == 8, "the GTP-U header is 8 bytes");

/* Present when any of E, S, PN is set. */
struct gtpu_opt {
	__be16 seq;
	__u8 npdu;
	__u8 next_ext;
} __attribute__((packed));

/* PDU Session Container of length 1 (4 octets), the only form we send. */
struct gtpu_psc {
	__u8 len;       /* in 4-octet units */
	__u8 pdu_type;  /* PDU type << 4 | flags */
	__u8 qfi;       /* PPP RQI QFI(6) downlink; N3 delay, new IE, QFI(6) uplink */
	__u8 next_ext;
} __attribute__((packed));

/* The QFI of a packet's PDU Session Container, when it has one (an uplink G-PDU may). */
struct psc_qfi {
	__u8 qfi;
	__u8 present;  /* 0: no container, qfi means nothing */
};

/* A packet without a PDU Session Container: every downlink packet. */
#define PSC_NONE ((struct psc_qfi){ .qfi = QFI_NONE, .present = 0 })

/* The optional fields and one PDU Session Container of length 1 that ends the chain, as one
 * little-endian 64-bit word (bpfel): octet 3 the next type (the container), octet 4 its
 * length, octet 7 the next type after it (none). Sequence and N-PDU numbers (octets 0-2), the
 * PDU type and the QFI (octets 5-6) may be anything. */
#define GTPU_PSC_ONLY_MASK 0xff0000ffff000000ull
#define GTPU_PSC_ONLY ((1ull << 32) | ((__u64)GTPU_EXT_PDU_SESSION_CONTAINER << 24))
#define GTPU_PSC_ONLY_QFI_SHIFT 48

struct gtpu_gpdu {
	void *payload;       /* the T-PDU (inner packet) */
	struct psc_qfi psc;  /* from the PDU Session Container */
};

/* gtpu_parse_gpdu walks the optional fields and extension headers of the G-PDU at gtp and
 * fills g. Returns 0, or the drop reason. */
static __always_inline int gtpu_parse_gpdu(struct gtpu_hdr *gtp, void *data_end,
					   struct gtpu_gpdu *g)
{
	__u8 *cur = (void *)(gtp + 1);
	__u8 next = GTPU_EXT_NONE;

	g->psc = PSC_NONE;
	/* What a gNB sends on every G-PDU (GTPU_PSC_ONLY): read at fixed offsets, one bounds
	 * check and two compares, with what the walk below would find. */
	if (gtp->flags == (GTPU_FLAGS_V1_PT | GTPU_FLAG_E)) {
		__u64 *w = (void *)(gtp + 1);

		if ((void *)(w + 1) <= data_end && (*w & GTPU_PSC_ONLY_MASK) == GTPU_PSC_ONLY &&
		    sizeof(*w) <= bpf_ntohs(gtp->length) &&
		    (void *)(gtp + 1) + bpf_ntohs(gtp->length) <= data_end) {
			g->psc.qfi = (*w >> GTPU_PSC_ONLY_QFI_SHIFT) & PSC_QFI_MASK;
			g->psc.present = 1;
			g->payload = w + 1;
			return 0;
		}
	}
	if (gtp->flags & (GTPU_FLAG_E | GTPU_FLAG_S | GTPU_FLAG_PN)) {
		struct gtpu_opt *opt = (void *)cur;

		if ((void *)(opt + 1) > data_end)
			return DROP_MALFORMED_GTP;
		if (gtp->flags & GTPU_FLAG_E)
			next = opt->next_ext;
		cur = (void *)(opt + 1);
	}

#pragma unroll
	for (int i = 0; i < GTPU_MAX_EXT_HDRS; i++) {
		__u8 *last;
		__u32 len;

		if (next == GTPU_EXT_NONE)
			break;
		if ((void *)(cur + 1) > data_end)
			return DROP_GTP_EXT_MALFORMED;
		len = (__u32)cur[0] * 4;
		if (len == 0)
			return DROP_GTP_EXT_MALFORMED;
		last = cur + len - 1;  /* the next-extension-type octet */
		if (last + 1 > (__u8 *)data_end)
			return DROP_GTP_EXT_MALFORMED;
		if (next == GTPU_EXT_PDU_SESSION_CONTAINER) {
			struct gtpu_psc *psc = (void *)cur;

			/* len >= 4 already implies this, but the verifier tracks cur and last
			 * separately and needs the check on cur itself. */
			if ((void *)(psc + 1) > data_end)
				return DROP_INTERNAL;
			g->psc.qfi = psc->qfi & PSC_QFI_MASK;
			g->psc.present = 1;
		}
		next = *last;
		cur = last + 1;
	}
	if (next != GTPU_EXT_NONE)
		return DROP_GTP_EXT_CHAIN_TOO_LONG;

	/* The headers walked must fit inside the length the GTP header declares, and the
	 * declared length inside the packet. */
	if ((void *)cur - (void *)(gtp + 1) > bpf_ntohs(gtp->length) ||
	    (void *)(gtp + 1) + bpf_ntohs(gtp->length) > data_end)
		return DROP_MALFORMED_GTP;
	g->payload = cur;
	return 0;
}

/* What gtpu_header returns for UDP to a local GTP-U address that is not GTP-U (another port,
 * or a non-first fragment, which carries no port): the kernel's, untouched. */
#define GTPU_NOT_OURS -1

/* gtpu_header finds and checks the GTP-U header of the IPv4/UDP packet ip to a local GTP-U
 * address: UDP to GTPU_PORT, not fragmented, GTP version 1 with PT set. Returns 0 with *gtp
 * and *ihl_len (the outer IPv4 header's length) set, GTPU_NOT_OURS, or the drop reason. */
static __always_inline int gtpu_header(struct iphdr *ip, void *data_end, __u32 *ihl_len,
				       struct gtpu_hdr **gtp)
{
	__u32 len = ipv4_hdr_len(ip, data_end);
	struct gtpu_hdr *g;
	struct udphdr *udp;

	if (!len)
		return DROP_MALFORMED_IP;
	/* A non-first fragment carries no port, so it cannot be told from other UDP to this
	 * address (PFCP may share it): the kernel reassembles or discards it. */
	if (ip->frag_off & bpf_htons(IPV4_OFFSET))
		return GTPU_NOT_OURS;
	udp = (void *)ip + len;
	if ((void *)(udp + 1) > data_end)
		return DROP_MALFORMED_UDP;
	if (udp->dest != bpf_htons(GTPU_PORT))
		return GTPU_NOT_OURS;
	if (ipv4_is_fragment(ip))
		return DROP_OUTER_FRAGMENT;

	g = (void *)(udp + 1);
	if ((void *)(g + 1) > data_end)
		return DROP_MALFORMED_GTP;
	if ((g->flags >> 5) != GTPU_VERSION)
		return DROP_GTP_VERSION;
	if (!(g->flags & GTPU_FLAG_PT))
		return DROP_GTP_NOT_GTPU;
	*ihl_len = len;
	*gtp = g;
	return 0;
}

/* Echo Response as we send it: mandatory header with S set, sequence number copied from the
 * request, and a Recovery IE with restart counter 0 (TS 29.281 7.2.2: GTP-U sends 0). */
struct gtpu_echo_resp {
	struct gtpu_hdr hdr;
	struct gtpu_opt opt;
	__u8 ie_type;
	__u8 restart_counter;
} __attribute__((packed));

#define ECHO_RESP_LEN (sizeof(struct ethhdr) + sizeof(struct iphdr) + \
		       sizeof(struct udphdr) + sizeof(struct gtpu_echo_resp))

/* gtpu_echo_reply turns the Echo Request in ctx (already checked: IPv4/UDP to our address and
 * port, GTP header present) into an Echo Response back to its sender. Returns the XDP action.
 * A subprogram: a path echo requests take, every few seconds per peer, kept out of the
 * uplink's forwarding code (stats.h's drop says why). */
static __noinline int gtpu_echo_reply(struct xdp_md *ctx, __u32 ihl_len)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, eth_copy;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;
	struct gtpu_hdr *gtp;
	struct gtpu_echo_resp *resp;
	__be32 saddr, daddr;
	__be16 sport, seq = 0;
	__u8 tos;

	/* Both checked by the caller, at the same offsets; restated for the verifier. */
	if ((void *)(ip + 1) > data_end)
		return drop(DROP_INTERNAL);
	udp = (void *)ip + ihl_len;
	gtp = (void *)(udp + 1);
	if ((void *)(gtp + 1) > data_end)
		return drop(DROP_INTERNAL);
	if (gtp->flags & (GTPU_FLAG_E | GTPU_FLAG_S | GTPU_FLAG_PN)) {
		struct gtpu_opt *opt = (void *)(gtp + 1);

		if ((void *)(opt + 1) > data_end)
			return drop(DROP_MALFORMED_GTP);
		seq = opt->seq;
	}
	__builtin_memcpy(&eth_copy, eth, sizeof(eth_copy));
	saddr = ip->saddr;
	daddr = ip->daddr;
	tos = ip->tos;
	sport = udp->source;

	/* Drop IP options, then make the frame exactly as long as the response. */
	if (bpf_xdp_adjust_head(ctx, (int)ihl_len - (int)sizeof(struct iphdr)))
		return drop(DROP_HEADROOM);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (bpf_xdp_adjust_tail(ctx, (int)ECHO_RESP_LEN - (int)(data_end - data)))
		return drop(DROP_HEADROOM);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + ECHO_RESP_LEN > data_end)
		return drop(DROP_INTERNAL);  /* adjust_tail made it exactly this long */

	eth = data;
	__builtin_memcpy(eth->h_dest, eth_copy.h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth_copy.h_dest, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	ip = (void *)(eth + 1);
	ipv4_set_ver_tos(ip, tos);
	ip->tot_len = bpf_htons(ECHO_RESP_LEN - sizeof(struct ethhdr));
	ip->id = 0;
	ip->frag_off = bpf_htons(IPV4_DF);
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = daddr;
	ip->daddr = saddr;
	ip->check = 0;
	ip->check = ipv4_csum(ip);

	udp = (void *)(ip + 1);
	udp->source = bpf_htons(GTPU_PORT);
	udp->dest = sport;
	udp->len = bpf_htons(sizeof(struct udphdr) + sizeof(struct gtpu_echo_resp));
	udp->check = 0;  /* optional over IPv4 */

	resp = (void *)(udp + 1);
	resp->hdr.flags = GTPU_FLAGS_V1_PT | GTPU_FLAG_S;
	resp->hdr.type = GTPU_ECHO_RESPONSE;
	resp->hdr.length = bpf_htons(sizeof(*resp) - sizeof(resp->hdr));
	resp->hdr.teid = 0;
	resp->opt.seq = seq;
	resp->opt.npdu = 0;
	resp->opt.next_ext = GTPU_EXT_NONE;
	resp->ie_type = GTPU_IE_RECOVERY;
	resp->restart_counter = 0;
	count_stat(STAT_ECHO_REPLIED);
	return XDP_TX;
}

#endif
