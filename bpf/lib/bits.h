/* Bit tricks the Linear Bit Vector Search lookups share (PDR selection, pdr_select.h, and the
 * traffic classifier, classifier.h). */
#ifndef XUPF_BITS_H
#define XUPF_BITS_H

#include <linux/types.h>

/* Position of the lowest set bit of a non-zero v: isolate it, multiply by a De Bruijn
 * sequence and look the top six bits up (eBPF has no find-first-set instruction). */
static const __u8 debruijn_index[64] = {
	0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51,
	43, 22, 45, 39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21,
	44, 32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6,
};

static __always_inline __u32 lowest_bit(__u64 v)
{
	return debruijn_index[((v & -v) * 0x03f79d71b4cb0a89ULL) >> 58];
}

/* Set bits of x (eBPF has no population count instruction either). */
static __always_inline __u32 popcount32(__u32 x)
{
	x = x - ((x >> 1) & 0x55555555);
	x = (x & 0x33333333) + ((x >> 2) & 0x33333333);
	x = (x + (x >> 4)) & 0x0f0f0f0f;
	return (x * 0x01010101) >> 24;
}

#endif
