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

#endif
