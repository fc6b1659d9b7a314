/* kernels/amx.h: the AMX bf16 product (kernels/gemm_amx.c) and the
 * process's permission to use the tiles, for core/cpu.c's dispatch and the
 * tests.
 *
 * Built where the bf16 kernel is (AG_BF16_KERNEL: gcc 12 or clang 14,
 * x86-64) on Linux, whose kernel hands out the tiles' 8 KB of state only
 * on request (arch_prctl), unless -DAG_NO_AMX. */
#ifndef AG_KERNELS_AMX_H
#define AG_KERNELS_AMX_H

#include "core/internal.h"

#if AG_BF16_KERNEL && defined(__linux__) && !defined(AG_NO_AMX) && !defined(AG_DOUBLE)
#define AG_AMX_KERNEL 1
#else
#define AG_AMX_KERNEL 0
#endif

/* Whether this process may run AMX-BF16: the CPU has AMX-TILE and
 * AMX-BF16 and Linux granted the tile data (asked once, on the first
 * call).  false: *why (if not NULL) says which was missing. */
bool ag__amx_permitted(const char **why);

/* Whether the bf16 products run on the tiles now: ag__isa_bf16(), the
 * tiles permitted, and no level below "amx" forced (core/cpu.c). */
bool ag__isa_amx(void);
/* The bf16 products' kernel in use, for reports: "amx", "avx512bf16",
 * "neonbf16" (arm64's BFMLAL), or "fp32 kernel" (rounded copies); and why
 * not "amx" (NULL when it is). */
const char *ag__isa_bf16_kernel(const char **why_not_amx);

/* C = beta C + bf16(op(A)) bf16(op(B)), beta 0 or 1, by the tiles: the
 * operands rounded as ops/bf16.c rounds them while packing, the products
 * exact, the sums in float.  Any M, N, K >= 1, transposes and strides as
 * ag__gemm.  Only where ag__amx_permitted(). */
void ag__gemm_amx(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);

/* steps x 4 TDPBF16PS and nothing else (4 x 16384 flops a step): the
 * tiles' peak, which the bench measures; 0 in a build without them.  Only
 * where ag__amx_permitted(). */
float ag__amx_peak_loop(int steps);

#endif
