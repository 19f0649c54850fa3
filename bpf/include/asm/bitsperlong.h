/* See types.h: arch header mapped onto its generic twin (BPF is little-endian here, bpfel). */
#include <asm-generic/bitsperlong.h>
