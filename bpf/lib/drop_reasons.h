/* Why the datapath dropped a packet. This enum is the one list: Go reads the names from the
 * object's BTF (internal/datapath/names.go), so a reason added here shows up in the API, the
 * CLI and /metrics without another edit. Keep DROP_MAX last. */
#ifndef XUPF_DROP_REASONS_H
#define XUPF_DROP_REASONS_H

enum drop_reason {
	DROP_UNSPECIFIED = 0,      /* never counted; 0 means "no drop" in return codes */
	DROP_MALFORMED_IP,         /* outer IPv4/UDP to a GTP-U address: IHL below 5 or options cut short */
	DROP_OUTER_FRAGMENT,       /* outer GTP-U packet is an IP fragment (no reassembly here) */
	DROP_MALFORMED_UDP,        /* UDP header cut short */
	DROP_MALFORMED_GTP,        /* GTP-U header truncated or its length field overruns */
	DROP_GTP_VERSION,          /* GTP version is not 1 */
	DROP_GTP_NOT_GTPU,         /* PT=0: GTP' rather than GTP-U */
	DROP_GTP_MSG_TYPE,         /* a GTP-U message type the datapath does not handle */
	DROP_GTP_EXT_MALFORMED,    /* extension header truncated or with length 0 */
	DROP_GTP_EXT_CHAIN_TOO_LONG, /* more than GTPU_MAX_EXT_HDRS extension headers */
	DROP_INNER_NOT_IPV4,       /* G-PDU payload is not IPv4 */
	DROP_MALFORMED_INNER,      /* G-PDU payload IPv4 header truncated or inconsistent */
	DROP_UNKNOWN_TEID,         /* no rules for this TEID */
	DROP_NO_PDR_MATCH,         /* rules exist but no PDR matches (e.g. QFI differs) */
	DROP_FAR_DROP,             /* the matching FAR says drop */
	DROP_MALFORMED_DL_IP,      /* downlink IPv4 to a UE: bad IHL or total length */
	DROP_NO_ROUTE,             /* the route is a blackhole, unreachable or prohibited; or, from the return device, no UE session, not IPv4, or back into it */
	DROP_HEADROOM,             /* bpf_xdp_adjust_head/tail failed: no room to encapsulate */
	DROP_BUFFER_FULL,          /* to buffer, but its PDR holds cfg_buffer_max_packets already, or the ring is full */
	DROP_QER_GATE_CLOSED,      /* a QER of the PDR closes the gate in the packet's direction */
	DROP_QER_MBR,              /* over a QER's maximum bit rate */
	DROP_POLICER,              /* the policer's contract for the packet's class: DROP, or over its rate */
	DROP_FAR_ACCESS_NO_TUNNEL, /* the FAR forwards toward Access but has no tunnel to the gNB yet */
	DROP_SPOOFED_SOURCE,       /* uplink inner source is not the session's UE address */
	DROP_GTPU_NOT_N3,          /* GTP-U to a local GTP-U address on an interface without the n3 role */
	DROP_UE_TO_UPF,            /* uplink inner packet to the UPF's own address (ue_to_upf_allowed has exceptions) */
	DROP_SPREAD_QUEUE_FULL,    /* uplink spreading: the chosen CPU's queue in the CPU map was full */
	DROP_URR_QUOTA,            /* a URR of the PDR has used up its volume quota */
	DROP_INTERNAL,             /* internal: a bounds check the verifier needs failed (a datapath bug if ever counted) */
	DROP_MAX,
};

#endif
