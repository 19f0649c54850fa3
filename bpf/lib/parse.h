/* Header parsing with the bounds idiom: every helper checks `hdr + 1 > data_end` before it
 * reads, and returns NULL when the header is not all there. */
#ifndef XUPF_PARSE_H
#define XUPF_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>

#define IPV4_MF 0x2000      /* more fragments flag, host order */
#define IPV4_OFFSET 0x1fff  /* fragment offset mask, host order */
#define IPV4_DF 0x4000      /* don't fragment flag, host order */

/* parse_ipv4 returns the IPv4 header after eth when the fixed 20 bytes are there and the
 * version is 4, else NULL. Options are not checked: see ipv4_hdr_len. */
static __always_inline struct iphdr *parse_ipv4(struct ethhdr *eth, void *data_end)
{
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > data_end || ip->version != 4)
		return NULL;
	return ip;
}

/* ipv4_hdr_len returns the header length in bytes including options, or 0 when the IHL is
 * below 5 or the options run past data_end. */
static __always_inline __u32 ipv4_hdr_len(struct iphdr *ip, void *data_end)
{
	__u32 len = ip->ihl * 4;

	if (len < sizeof(*ip) || (void *)ip + len > data_end)
		return 0;
	return len;
}

static __always_inline int ipv4_is_fragment(const struct iphdr *ip)
{
	return (ip->frag_off & bpf_htons(IPV4_MF | IPV4_OFFSET)) != 0;
}

/* l4_ports returns the transport ports of ip packed as (sport << 16 | dport) in network
 * order, or 0 for protocols without ports, fragments and truncated headers. */
static __always_inline __u32 l4_ports(struct iphdr *ip, __u32 ihl_len, void *data_end)
{
	__be16 *ports = (void *)ip + ihl_len;

	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP &&
	    ip->protocol != IPPROTO_SCTP)
		return 0;
	if (ipv4_is_fragment(ip) || (void *)(ports + 2) > data_end)
		return 0;
	return ((__u32)ports[0] << 16) | ports[1];
}

#endif
