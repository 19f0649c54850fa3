/* Structures shared with Go (bpf2go generates their Go twins from BTF). Fields the datapath
 * compares with packet bytes are kept in network byte order (__be32) so no conversion happens
 * per packet; Go writes them with binary.BigEndian. */
#ifndef XUPF_TYPES_H
#define XUPF_TYPES_H

#include <linux/types.h>

/* Key of the uplink rule table: the TEID of the local F-TEID, as on the wire. */
struct ul_key {
	__be32 teid;
};

/* Key of the downlink rule table: the UE's IPv4 address. */
struct dl_key {
	__be32 ue_addr;
};

/* What a TEID or UE address leads to: with ruleset 0, the one PDR slot to apply; otherwise
 * the rule set whose PDRs the packet is classified against (classify.h). */
struct rule_ref {
	__u32 pdr;
	__u32 ruleset;
};

/* A Packet Detection Rule slot. */
struct pdr {
	__u32 far;     /* FAR slot */
	/* Usage counter slot. It stays with the rule when a modification moves the rule to new
	 * PDR/FAR slots, so counts are not lost across updates. */
	__u32 counter;
	/* Uplink: the QFI a packet must carry (0 = any). Downlink: the QFI written into the PDU
	 * Session Container (0 = send no container). */
	__u8 qfi;
	__u8 pad[3];
};

enum far_action {
	FAR_DROP = 0,     /* a zeroed slot drops: an unwritten FAR never forwards */
	FAR_FORWARD = 1,  /* uplink: remove outer headers and route the inner packet */
	FAR_ENCAP = 2,    /* downlink: add outer IPv4/UDP/GTP-U toward peer_addr */
};

/* A Forwarding Action Rule slot. */
struct far {
	__u32 action;      /* enum far_action */
	__be32 teid;       /* outer header creation: TEID of the peer */
	__be32 peer_addr;  /* outer header creation: peer (gNB) address */
	__be32 local_addr; /* outer header creation: our GTP-U address, the outer source */
};

/* What one module learns about a packet for the modules after it, in the one XDP program. */
struct pkt_meta {
	__u32 class_id;  /* the traffic class (classifier.h), 0 for none */
};

/* Packets and bytes (of the inner IP packet) counted per counter slot and CPU. */
struct counters {
	__u64 packets;
	__u64 bytes;
};

#endif
