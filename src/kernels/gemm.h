/* kernels/gemm.h: what the product's files share (gemm.c, the blocked
 * product, and gemm_pack.c, its packing; gemm_head.c, a toy attention
 * head's; gemm_small.c, the plain loops for small products; gemm_slots.c,
 * each thread's packing buffers). */
#ifndef AG_KERNELS_GEMM_H
#define AG_KERNELS_GEMM_H

#include "core/internal.h"

/* element (r, c) of op(X) for X stored row-major with leading dim ld */
#define AT(X, t, ld, r, c) ((t) ? (X)[(size_t)(c) * (ld) + (r)] : (X)[(size_t)(r) * (ld) + (c)])

/* C = beta C + op(A) op(B) (beta 0 or 1) by plain loops: for products too
 * small to repay packing, or when the packing buffers cannot be had. */
void ag__gemm_small(int ta, int tb, int M, int N, int K, const ag_real *A, int lda, const ag_real *B, int ldb,
                    ag_real beta, ag_real *C, int ldc);

/* kernels/gemm_head.c: a toy attention head's product, C = beta C +
 * op(A) op(B) for M <= 64, N <= 32, K <= 64, beta 0 or 1 (float, x86):
 * the blocked product's bits, with none of its bookkeeping. */
#if AG_X86_KERNELS && !defined(AG_DOUBLE)
void ag__gemm_head512(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc);
void ag__gemm_head256(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc);
#endif

/* The calling thread's packing buffers, at least na and nb values each,
 * 64-byte aligned: false when there is no memory (or no free slot). */
bool ag__gemm_buffers(size_t na, size_t nb, ag_real **a, ag_real **b);

#endif
