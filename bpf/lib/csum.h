/* Internet checksum helpers (RFC 1071, RFC 1624). */
#ifndef XUPF_CSUM_H
#define XUPF_CSUM_H

#include <linux/ip.h>
#include <bpf/bpf_endian.h>

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* ipv4_set_ver_tos writes the first two octets of an option-less IPv4 header being built:
 * version 4 and IHL 5, then tos, with one 16-bit store. Written field by field (a bit-field
 * update and a byte store), the word ipv4_csum reads back cannot be forwarded from those
 * stores, and the load waits for them to reach the cache (a tenth of the downlink program's
 * samples in traffic fell on that load). */
static __always_inline void ipv4_set_ver_tos(struct iphdr *ip, __u8 tos)
{
	*(__be16 *)ip = bpf_htons(0x4500 | tos);
}

/* ipv4_csum computes the checksum of an option-less (20-byte) IPv4 header whose check field
 * is zero. */
static __always_inline __u16 ipv4_csum(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += w[i];
	return csum_fold(sum);
}

/* ipv4_decrease_ttl decrements the TTL and patches the checksum incrementally: the TTL is the
 * high byte of its 16-bit word, so the word drops by 0x0100 and the one's complement sum rises
 * by the same amount (RFC 1624, as the kernel's ip_decrease_ttl). */
static __always_inline void ipv4_decrease_ttl(struct iphdr *ip)
{
	__u32 check = (__u32)ip->check;

	check += (__u32)bpf_htons(0x0100);
	ip->check = (__sum16)(check + (check >= 0xFFFF));
	ip->ttl--;
}

/* The change to a one's complement sum when 16-bit words change (RFC 1624, eqn. 3: the sum
 * of ~m + m' over the words): csum_delta32 for two words (an IPv4 address), csum_delta16 for
 * one (a port). Worked out once when a flow is learnt; csum_add_delta applies the folded
 * result to a checksum. Byte order does not matter as long as words are taken as they lie in
 * the packet (RFC 1071). */
static __always_inline __u32 csum_delta32(__u32 old, __u32 new)
{
	return (__u16)~(old >> 16) + (__u16)~(old & 0xffff) + (new >> 16) + (new & 0xffff);
}

static __always_inline __u32 csum_delta16(__u16 old, __u16 new)
{
	return (__u16)~old + (__u32)new;
}

/* csum_fold_delta folds a sum of csum_delta32/16 terms to 16 bits. */
static __always_inline __u16 csum_fold_delta(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/* csum_add_delta returns check with the folded delta applied: ~(~check + delta). */
static __always_inline __u16 csum_add_delta(__u16 check, __u16 delta)
{
	__u32 sum = (__u16)~check + (__u32)delta;

	return ~(__u16)((sum & 0xffff) + (sum >> 16));
}

#endif
