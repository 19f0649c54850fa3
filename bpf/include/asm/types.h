/* BPF is one target for every host: map the arch headers the kernel uapi asks for onto the
 * generic ones, so the build never depends on the host's multiarch include directory. */
#include <asm-generic/types.h>
