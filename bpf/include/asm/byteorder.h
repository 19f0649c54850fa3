/* See types.h: arch header mapped onto its generic twin (BPF is little-endian here, bpfel). */
#include <linux/byteorder/little_endian.h>
