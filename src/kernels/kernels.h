/* kernels/kernels.h: the kernel room's entry points.
 *
 * ops/<name>.c holds an op as a reader should meet it: the math, a plain
 * reference forward and backward, its cases.  src/kernels/ holds the code
 * that makes some of them fast (SIMD, per instruction set, tiles, fused row
 * loops, gemm, the attention kernel).  An op calls its kernel only when
 * ag__fast() is true and a kernel exists; otherwise it runs its reference.
 * Each kernel is tested equal to its reference (tests/test_kernels_vs_ref.c). */
#ifndef AG_KERNELS_KERNELS_H
#define AG_KERNELS_KERNELS_H

#include "attograd_core.h"

#include <stdbool.h>

/* true unless the reference mode is on (ag_set_kernels, AG_KERNELS). */
bool ag__fast(void);

#endif
