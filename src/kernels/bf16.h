/* kernels/bf16.h: ops/bf16.c's rounding on a float's bits, for the
 * kernels that round as they go (kernels/bf16.c over arrays, gemm_bf16.c
 * while packing): the bf16 value's bits in the high half, zeros below. */
#ifndef AG_KERNELS_BF16_H
#define AG_KERNELS_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* to nearest, ties to even; a NaN is 0x7fc0 */
static inline uint32_t ag__bf16_bits(uint32_t u)
{
    return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

/* the same on 16 floats' bits, in place (through a pointer: a vector of
 * 64 bytes passed by value would change the ABI between instruction sets).
 * u is a NaN when |u| > 0x7f800000, that is when 0x7f800000 - |u| (which
 * an int32 holds) is negative: its sign bit, spread by an arithmetic
 * shift, is the mask.  (A vector compare would do, but gcc makes one of
 * 64 bytes 16 scalar compares where the registers are narrower: AVX2.) */
typedef uint32_t ag__u32x16 __attribute__((vector_size(64)));
typedef int32_t ag__i32x16 __attribute__((vector_size(64)));
static inline __attribute__((always_inline)) void ag__bf16_bits16(ag__u32x16 *v)
{
    ag__u32x16 u = *v, r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    ag__u32x16 nan = (ag__u32x16)((ag__i32x16)(0x7f800000u - (u & 0x7fffffffu)) >> 31); /* all ones: a NaN */
    *v = (nan & 0x7fc00000u) | (~nan & r);
}

/* A bf16 product shared among threads (kernels/gemm_bf16.c, gemm_amx.c):
 * C = beta C + bf16(op(A)) bf16(op(B)), in nshares strips of rows
 * (by_rows) or columns. */
typedef struct ag__bf16_job {
    int ta, tb, M, N, K, lda, ldb, ldc;
    const float *A, *B;
    float *C;
    bool overwrite; /* beta 0 */
    int nshares, by_rows;
} ag__bf16_job;

/* C[m0:m1, n0:n1] (= or +=) sum_k bf16(op(A)(i, k)) bf16(op(B)(k, j)), k
 * ascending, by plain loops: the bf16 kernels' fallback when there are no
 * packing buffers (kernels/gemm_bf16.c). */
void ag__gemm_bf16_plain(int ta, int tb, int m0, int m1, int n0, int n1, int K, const float *A, int lda,
                         const float *B, int ldb, bool overwrite, float *C, int ldc);

#endif
