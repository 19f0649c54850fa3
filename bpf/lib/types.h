/* Structures shared with Go (bpf2go generates their Go twins from BTF). Fields the datapath
 * compares with packet bytes are kept in network byte order (__be32) so no conversion happens
 * per packet; Go writes them with binary.BigEndian. */
#ifndef XUPF_TYPES_H
#define XUPF_TYPES_H

#include <linux/types.h>

/* A packet's direction: the one encoding every module uses (PDR selection, the classifier's
 * direction field, whose table values these are: internal/classifier DirUplink, DirDownlink). */
enum direction {
	DIR_UPLINK = 1,    /* from the UE: N3 (or N9) in, decapsulated */
	DIR_DOWNLINK = 2,  /* toward the UE: N6 in, encapsulated */
};

/* Key of the table of the UPF's own services a UE may reach (ue_to_upf_allowed): local address,
 * IP protocol and destination port (0 for protocols without ports, such as ICMP). */
struct ue_allowed_key {
	__be32 addr;
	__u8 proto;
	__u8 pad;
	__be16 port;
};

/* A G-PDU to a TEID no session has (errind.h): whom to send the Error Indication to, from
 * which local GTP-U address, about which TEID. */
struct unknown_teid_event {
	__be32 peer;   /* the G-PDU's outer source address */
	__be32 local;  /* its outer destination: one of the GTP-U addresses */
	__be32 teid;
};


/* What a route leads to, as route_ipv4 acts on it. The control plane (internal/router) keeps
 * every entry resolved: a packet needs one lookup. */
enum nexthop_kind {
	/* Not forwarded here: local and broadcast addresses, multicast, routes of other types.
	 * A missing route means the same; 0 so that a zeroed entry never forwards. */
	NH_KERNEL = 0,
	NH_NO_ROUTE = 1,    /* blackhole, unreachable or prohibit: dropped as no_route */
	NH_UNRESOLVED = 2,  /* the next hop's neighbour entry is missing or not valid yet */
	NH_FORWARD = 3,     /* resolved: rewrite the MACs and redirect to ifindex */
};

/* The value of a route: a next hop resolved down to the frame to send. */
struct nexthop {
	__u8 kind;          /* enum nexthop_kind */
	__u8 pad[3];
	__u32 ifindex;      /* out interface (NH_UNRESOLVED, NH_FORWARD) */
	__u32 mtu;          /* the route's MTU, else the out interface's: longer packets go to the kernel */
	__u8 dmac[6];       /* NH_FORWARD: the neighbour's MAC */
	__u8 smac[6];       /* NH_FORWARD: the out interface's MAC */
};

/* How many MBR meters one PDR applies (one per QER with an MBR in its direction). */
#define PDR_MAX_METERS 4

/* Bits of pdr.usage: the usage measurements a PDR takes besides its counter (urr.h). */
enum pdr_usage {
	/* A URR of the PDR measures before QoS enforcement (Measurement Information MBQE):
	 * counter_before_qos also counts the packets the QERs and the policer then drop. */
	PDR_U_BEFORE_QOS = 1 << 0,
	/* A URR of the PDR has a volume quota: quota names its budget (struct quota). */
	PDR_U_QUOTA = 1 << 1,
	/* With PDR_U_QUOTA: several URRs of the PDR have volume quotas, and quota names the list
	 * of their budgets instead (struct quota_list). */
	PDR_U_QUOTAS = 1 << 2,
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
	/* QERs (qos.h): a closed gate in this PDR's direction drops every packet; otherwise the
	 * packet must conform to each of the first nmeters meters (the MBRs of the PDR's QERs in
	 * its direction, e.g. the session AMBR and the flow MBR). */
	__u8 gate_closed;
	__u8 nmeters;
	__u8 usage;    /* enum pdr_usage bits */
	__u32 meters[PDR_MAX_METERS];
	__u32 counter_before_qos; /* with PDR_U_BEFORE_QOS: a usage counter slot */
	__u32 quota;              /* with PDR_U_QUOTA: a xupf_quotas slot */
};

enum far_action {
	FAR_DROP = 0,     /* a zeroed slot drops: an unwritten FAR never forwards */
	/* Uplink packets lose their outer headers first. Then, either way, FAR_F_OHC puts them
	 * in a tunnel; without it they are routed as they are. */
	FAR_FORWARD = 1,
	/* BUFF: hold the packets until the FAR forwards again. The datapath cannot hold them: it
	 * hands a copy of each frame to xupfd (buffer.h), which keeps them. */
	FAR_BUFFER = 2,
	/* FORW toward Access without outer header creation (free5GC's downlink FAR before the
	 * gNB's tunnel is known): the only way to the UE is a tunnel, so routing the packet as it
	 * is would send it back into the data network. Dropped (DROP_FAR_ACCESS_NO_TUNNEL), not
	 * counted as usage. */
	FAR_ACCESS_NO_TUNNEL = 3,
	/* FORW after BUFF, while xupfd still holds packets of the PDR: forwarded like
	 * FAR_FORWARD, but a packet that arrives while any are held is buffered behind them, so
	 * that none overtakes them. xupfd makes the FAR FAR_FORWARD once it holds none. Kept off
	 * FAR_FORWARD so that forwarding FARs pay nothing for it. */
	FAR_DRAIN = 4,
	/* DROP with NOCP: dropped (DROP_FAR_DROP), but the first packet after xupfd writes the
	 * FAR is handed over as a buffered one (buffer.h), for xupfd to discard and notify the
	 * SMF of; handing it over makes the FAR FAR_DROP, so a flood costs one copy. */
	FAR_DROP_NOTIFY = 5,
};

/* Bits of far.flags: the parts of a forwarding FAR that are optional. */
enum far_flag {
	/* Outer header creation: push IPv4/UDP/GTP-U toward peer_addr with teid (a gNB
	 * downlink; another UPF, as on N9, or the SMF uplink). */
	FAR_F_OHC = 1 << 0,
	/* Transport level marking: the outer header's DSCP is tos's, not the inner packet's. */
	FAR_F_TLM = 1 << 1,
	/* With FLOWCACHE_KERNEL_N6, overrides of cfg_n6_default for the FAR's network instance:
	 * the kernel treats its uplink on N6 (decapsulated, it goes to flow_from_ue), or the
	 * datapath routes it. A FAR with neither follows the default. */
	FAR_F_KERNEL_N6 = 1 << 2,
	FAR_F_ROUTED_N6 = 1 << 3,
};

/* A Forwarding Action Rule slot. The tunnel fields mean something only with FAR_F_OHC. */
struct far {
	__u32 action;      /* enum far_action */
	__u8 flags;        /* enum far_flag bits */
	/* Transport level marking (FAR_F_TLM): the top six bits (DSCP) are the outer ToS's; the
	 * ECN bits always come from the inner packet, so congestion marks cross the tunnel. */
	__u8 tos;
	/* Outer header creation: the word of xupf_nh_pins that holds peer_addr's next hop
	 * (route.h), 0 for none: the tunnel's packets then walk the route table. */
	__u16 nh_pin;
	__be32 teid;       /* outer header creation: TEID of the peer */
	__be32 peer_addr;  /* outer header creation: peer (gNB, UPF) address, the outer destination */
	__be32 local_addr; /* outer header creation: our GTP-U address, the outer source */
};

/* What xupfd receives for each frame a buffering FAR hands it (buffer.h), before the frame. */
struct buffered_hdr {
	__u32 counter;  /* the PDR's counter slot: names the PDR across modifications */
	__u32 ifindex;  /* the interface the frame arrived on, to run it through again as from there */
	__u32 len;      /* bytes of frame that follow */
	__u32 pad;
};

/* The first 4 bytes of XDP metadata xupfd puts before a frame it runs through the program
 * again (BPF_PROG_TEST_RUN): the packet was buffered and is now to be forwarded. Only an XDP
 * program or BPF_PROG_TEST_RUN can write metadata, so no packet from the wire carries it. */
enum buffer_mark {
	BUFFER_REPLAY_MARK = 0x78627566,  /* "xbuf" */
};

/* What a TEID or UE address leads to: the value its key lookup returns. With ruleset 0 (one PDR
 * and no filter to tell packets apart, the common case) the PDR and its FAR are here, copied
 * when the key is published, so the packet needs no other lookup to find its rules (only the
 * end of a drain, FAR_DRAIN to FAR_FORWARD, changes that FAR in place); otherwise ruleset names
 * the rule set whose PDRs the packet is classified against (pdr_select.h). */
struct rule_ref {
	__u32 ruleset;
	/* Uplink: the inner source address every packet on the TEID must have, the session's UE
	 * address (anti-spoofing, DROP_SPOOFED_SOURCE); 0 accepts any source. Kept here, in the
	 * value the TEID lookup returns anyway, so the check costs one compare. */
	__be32 ue_addr;
	struct pdr pdr;  /* ruleset 0: the key's one PDR (its far slot is unused: far is below) */
	struct far far;  /* ruleset 0: that PDR's FAR */
};

struct cls_class;

/* What one module learns about a packet for the modules after it, in the one XDP program. */
struct pkt_meta {
	const struct cls_class *cls;  /* the traffic class (classifier.h), NULL for none */
};

/* The volumes of a quota (struct quota): each direction's, and their total. */
enum quota_volume {
	QUOTA_UL = 0,
	QUOTA_DL = 1,
	QUOTA_TOTAL = 2,
};

/* A URR's volume quota (TS 29.244 5.2.2.3): bytes forwarded since it was granted, per
 * direction, against a limit per direction and in total (~0 for none). Shared by every CPU
 * and every PDR of the URR, so that it is one budget; the daemon writes a fresh one with
 * each grant. */
struct quota {
	__u64 used[2];   /* [QUOTA_UL], [QUOTA_DL] */
	__u64 limit[3];  /* enum quota_volume */
};

/* How many URRs with a volume quota one PDR may have. */
#define PDR_MAX_QUOTAS 4

/* The budgets of a PDR several of whose URRs have volume quotas (PDR_U_QUOTAS): a packet
 * passes only if none is used up, and is charged to all. */
struct quota_list {
	__u32 n;                       /* slots used, 2 to PDR_MAX_QUOTAS */
	__u32 slots[PDR_MAX_QUOTAS];   /* xupf_quotas slots */
};

/* Packets and bytes (of the inner IP packet) counted per counter slot and CPU. */
struct counters {
	__u64 packets;
	__u64 bytes;
};

#endif
