/* Ethernet header moves in whole words. The kernel's struct ethhdr is packed, so a
 * __builtin_memcpy of it, or of a MAC into it, loads and stores one byte at a time and
 * assembles the bytes with shifts and ors: some 40 instructions for a 14-byte header, on the
 * path of every forwarded packet. These move 8, 4 and 2 bytes at a time instead. The loads
 * and stores may be unaligned: BPF allows that wherever the kernel has efficient unaligned
 * access (x86-64, arm64), the only places the verifier would refuse them. */
#ifndef XUPF_ETH_H
#define XUPF_ETH_H

#include <linux/types.h>

/* An Ethernet header held in registers, for instance across a bpf_xdp_adjust_head that moves
 * the frame's start: addresses and type, as in the frame. */
struct eth_words {
	__u64 w0;  /* bytes 0-7 */
	__u32 w1;  /* bytes 8-11 */
	__u16 w2;  /* bytes 12-13: the EtherType */
};

/* eth_load reads the 14-byte Ethernet header at eth (in the frame: the caller has checked
 * that it is all there). */
static __always_inline struct eth_words eth_load(const void *eth)
{
	return (struct eth_words){
		.w0 = *(const __u64 *)eth,
		.w1 = *(const __u32 *)(eth + 8),
		.w2 = *(const __u16 *)(eth + 12),
	};
}

/* eth_store writes w as the Ethernet header at eth. */
static __always_inline void eth_store(void *eth, struct eth_words w)
{
	*(__u64 *)eth = w.w0;
	*(__u32 *)(eth + 8) = w.w1;
	*(__u16 *)(eth + 12) = w.w2;
}

/* eth_set_macs writes dst and src (six bytes each, at even addresses) as the destination and
 * source MACs of the Ethernet header at eth. */
static __always_inline void eth_set_macs(void *eth, const __u8 *dst, const __u8 *src)
{
	*(__u32 *)eth = *(const __u32 *)dst;
	*(__u16 *)(eth + 4) = *(const __u16 *)(dst + 4);
	*(__u16 *)(eth + 6) = *(const __u16 *)src;
	*(__u32 *)(eth + 8) = *(const __u32 *)(src + 2);
}

#endif
