/* kernels/kernels.h: the kernel room's entry points.
 *
 * ops/<name>.c holds an op as a reader should meet it: the math, a plain
 * reference forward and backward, its cases.  src/kernels/ holds the code
 * that makes some of them fast (SIMD, per instruction set, tiles, fused row
 * loops, gemm, the attention kernel).  An op calls its kernel only when
 * ag__fast() is true and a kernel exists; otherwise it runs its reference.
 * Each kernel is tested equal to its reference (tests/test_kernels_vs_ref.c,
 * tests/test_rooms.c). */
#ifndef AG_KERNELS_KERNELS_H
#define AG_KERNELS_KERNELS_H

#include "core/internal.h"

#include <stdbool.h>

/* true unless the reference mode is on (ag_set_kernels, AG_KERNELS). */
bool ag__fast(void);

/* The element-wise ops' kernels (src/kernels/elementwise.c), one entry per
 * op that has one, found by op id; NULL for an op with none.  A unary op's
 * entry gives fwd and bwd, or fwd_slope, a forward that keeps dy/dx for a
 * backward that needs nothing else (GELU's: ag__unary_slope); a binary
 * op's gives fwd, bwd and, optionally, rows_fwd (ag__binary_rows). */
typedef struct ag__unary_kernel {
    ag_unary_fwd fwd;
    ag_unary_bwd bwd;
    ag_unary_fwd_slope fwd_slope;
} ag__unary_kernel;
typedef struct ag__binary_kernel {
    ag_binary_fwd fwd;
    ag_binary_bwd bwd;
    ag_binary_rows rows_fwd;
} ag__binary_kernel;
const ag__unary_kernel *ag__unary_kernel_of(int op);
const ag__binary_kernel *ag__binary_kernel_of(int op);

#endif
