/* kernels/gemm_head.c: the products of one head of a toy attention model,
 * C = beta C + op(A) op(B) for N <= 32, K <= 64, M <= 64 (beta 0 or 1):
 * Q K^T, P V and their backward's, thousands of them a step, float on
 * x86 (kernels/gemm.c sends them here).  No packing or blocking: at these
 * sizes the blocked product's bookkeeping costs more than the arithmetic.
 * Each element of C is the same chain of FMAs as in the blocked product
 * (k ascending, then + C when beta is 1): the results are identical to
 * the bit.  One kernel for AVX-512, one for AVX2. */
#include "core/internal.h"
#include "kernels/gemm.h"

#if AG_X86_KERNELS && !defined(AG_DOUBLE)
#include "core/transpose.h"
#include <immintrin.h>

/* ---- AVX-512: 32 registers of 16 floats ---------------------------------- */

/* op(B)'s rows are one or two vectors (N <= 16 or 32), zero beyond column
 * N: B's own rows, read in place by masked loads, or (B transposed) a
 * buffer of at most 64 rows, filled by 16 x 16 blocks transposed in
 * registers.  Then 12 rows of C at a time (the last block 4, 8 or 12; 13
 * to 16 rows as 8 and 8, or, one vector wide, 16 at once: a toy head's
 * block of 16 queries): one FMA per row, vector and k, with A's element
 * broadcast. */
enum { HR = 12 }; /* rows of C at a time: a toy head's 10 in one go, 12 (or 24) accumulators;
                    16 rows of one vector: 16 accumulators */

/* mr <= R rows of C from R rows of A (a[i] = a0 + i rs; rows past mr
 * repeat row 0, computed and not stored): R NV accumulators in registers.
 * Columns 16 v .. 16 v + 15 of op(B)'s row k are at b + k ldbk + 16 v, the
 * lanes of mb[v] (the others read as 0); mn[v]: the columns of C. */
__attribute__((target("avx512f,fma"), always_inline)) static inline void
head_rows(const float *a0, size_t rs, size_t cs, const float *b, size_t ldbk, const __mmask16 *mb, int K, int mr,
          const __mmask16 *mn, float beta, float *c0, int ldc, const int R, const int NV)
{
    const float *a[16];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) a[i] = a0 + (size_t)(i < mr ? i : 0) * rs;
    __m512 acc[16][2];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
    /* 16 whole rows along which k runs (cs 1): row 4 j + m at q[j] + m rs,
     * m < 4, q[j] stepping with k: 4 pointers and the offsets (rs, 3 rs)
     * in registers, where 16 pointers, one per row, spill to the stack */
    const float *q[4] = {a0, a0 + 4 * rs, a0 + 8 * rs, a0 + 12 * rs};
    for (int k = 0; k < K; k++) {
        __m512 bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) bv[v] = _mm512_maskz_loadu_ps(mb[v], b + (size_t)k * ldbk + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512 ak = R == 16 && cs == 1 ? _mm512_set1_ps(q[i / 4][(size_t)(i % 4) * rs])
                                           : _mm512_set1_ps(a[i][(size_t)k * cs]);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ak, bv[v], acc[i][v]);
        }
        if (R == 16 && cs == 1) q[0]++, q[1]++, q[2]++, q[3]++;
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) { /* unrolled, so that acc stays in registers */
        if (i >= mr) break;
        float *c = c0 + (size_t)i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m512 r = acc[i][v];
            if (beta != 0) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mn[v], c + 16 * v));
            _mm512_mask_storeu_ps(c + 16 * v, mn[v], r);
        }
    }
}

/* All M rows of C, in blocks of head_rows: 12 rows at a time, the last
 * block of 4, 8 or 12; 13 to 16 rows as 8 and 8, or, one vector wide, 16
 * at once (a toy head's block of 16 queries). */
__attribute__((target("avx512f,fma"), always_inline)) static inline void
head_blocks(const float *A, size_t rs, size_t cs, const float *b, size_t ldbk, const __mmask16 *mb, int M, int K,
            const __mmask16 *mn, float beta, float *C, int ldc, const int NV)
{
    for (int i0 = 0, mr; i0 < M; i0 += mr) {
        mr = M - i0 < HR ? M - i0 : HR;
        if (M - i0 > HR && M - i0 <= HR + 4) mr = 8; /* 13 to 16 rows: 8 then 8, not 12 then 4 */
        const float *a0 = A + (size_t)i0 * rs;
        float *c0 = C + (size_t)i0 * ldc;
        if (NV == 1 && M - i0 == 16) { /* 16 accumulators: one block */
            head_rows(a0, rs, cs, b, ldbk, mb, K, 16, mn, beta, c0, ldc, 16, NV);
            break;
        }
        if (mr <= 4) head_rows(a0, rs, cs, b, ldbk, mb, K, mr, mn, beta, c0, ldc, 4, NV);
        else if (mr <= 8) head_rows(a0, rs, cs, b, ldbk, mb, K, mr, mn, beta, c0, ldc, 8, NV);
        else head_rows(a0, rs, cs, b, ldbk, mb, K, mr, mn, beta, c0, ldc, HR, NV);
    }
}

/* The kernel for NV = 1 (N <= 16) or 2 (N <= 32) vectors of C per row. */
__attribute__((target("avx512f,fma"), always_inline)) static inline void
head512(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C,
          int ldc, const int NV)
{
    __m512 bk[64 * 2];
    __mmask16 mn[2], all[2] = {0xFFFF, 0xFFFF};
    for (int v = 0; v < NV; v++) {
        int w = N - 16 * v; /* 1..16 for v < NV */
        mn[v] = (__mmask16)(w >= 16 ? 0xFFFFu : (1u << w) - 1);
    }
    /* op(B)'s rows: B's own, read in place (masked past column N), or the
     * transpose, in bk */
    const float *b = B;
    size_t ldbk = (size_t)ldb;
    const __mmask16 *mb = mn;
    if (tb) {
        b = (const float *)bk, ldbk = 16 * (size_t)NV, mb = all;
        for (int k0 = 0; k0 < K; k0 += 16) { /* B stored [N, K]: its rows are columns of op(B) */
            int kk = K - k0 < 16 ? K - k0 : 16;
            __mmask16 mk = (__mmask16)((1u << kk) - 1);
            for (int v = 0; v < NV; v++) {
                __m512 r[16];
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++)
                    r[j] = 16 * v + j < N ? _mm512_maskz_loadu_ps(mk, B + (size_t)(16 * v + j) * ldb + k0)
                                          : _mm512_setzero_ps();
                /* columns k0 .. k0 + 15 (zero past K, inside bk as K <= 64)
                 * to vector v of bk's rows */
                transpose16(r, bk + k0 * NV + v, NV);
            }
        }
    }
    /* element (i, k) of op(A): A[i rs + k cs]; one of the two strides is 1,
     * known to the compiler: the rows' addresses take fewer registers */
    if (ta) head_blocks(A, 1, (size_t)lda, b, ldbk, mb, M, K, mn, beta, C, ldc, NV);
    else head_blocks(A, (size_t)lda, 1, b, ldbk, mb, M, K, mn, beta, C, ldc, NV);
}

__attribute__((target("avx512f,fma"))) void ag__gemm_head512(int ta, int tb, int M, int N, int K, const float *A,
                                                              int lda, const float *B, int ldb, float beta, float *C,
                                                              int ldc)
{
    if (N <= 16) head512(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 1);
    else head512(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 2);
}

/* ---- AVX2: 16 registers of 8 floats -------------------------------------- */

/* 8 rows of 8 floats (row stride ld) transposed in registers into o[0..7]
 * (o[c]: column c), rows past n and columns past m read as 0. */
__attribute__((target("avx2"), always_inline)) static inline void transpose8(const float *r, size_t ld, int n, int m,
                                                                            __m256 o[8])
{
    __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), lanes);
    __m256 x[8], t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) /* masked loads only past the end of a row: slower on AMD's cores */
        x[i] = i >= n ? _mm256_setzero_ps() : m == 8 ? _mm256_loadu_ps(r + (size_t)i * ld)
                                                     : _mm256_maskload_ps(r + (size_t)i * ld, mk);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* rows 2i, 2i+1 interleaved */
        t[2 * i] = _mm256_unpacklo_ps(x[2 * i], x[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(x[2 * i], x[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int q = 0; q < 2; q++) { /* pairs of pairs: columns c, c+4 of rows 4q..4q+3 */
        u[4 * q] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
        u[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* 128-bit halves: rows 0-3 and 4-7 of columns c and c + 4 */
        o[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        o[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* mr <= R rows of C from R rows of A (element (i, k) at a0[i rs + k cs];
 * rows past mr repeat row 0, computed and not stored): R NV accumulators,
 * R NV <= 12, with NV vectors of B and a broadcast of A 15 registers.
 * op(B)'s row k: NV vectors at b + k ldbk, zero past column N; the last
 * vector holds rem columns of C (mask: those lanes). */
__attribute__((target("avx2,fma"), always_inline)) static inline void
rows256(const float *a0, size_t rs, size_t cs, const float *b, size_t ldbk, int K, int mr, __m256i mask, int rem,
        float beta, float *c0, int ldc, const int R, const int NV)
{
    __m256 acc[12][4];
    size_t off[12];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) off[i] = (size_t)(i < mr ? i : 0) * rs;
#pragma GCC unroll 12
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();
    const float *a = a0;
    for (int k = 0; k < K; k++, a += cs, b += ldbk) {
        __m256 bv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            __m256 ak = _mm256_broadcast_ss(a + off[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(ak, bv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) { /* unrolled, so that acc stays in registers */
        if (i >= mr) break;
        float *c = c0 + (size_t)i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m256 r = acc[i][v];
            if (v < NV - 1 || rem == 8) {
                if (beta != 0) r = _mm256_add_ps(r, _mm256_loadu_ps(c + 8 * v));
                _mm256_storeu_ps(c + 8 * v, r);
            } else { /* the last rem < 8 columns: a masked store is slow on AMD's cores */
                float t[8];
                if (beta != 0) r = _mm256_add_ps(r, _mm256_maskload_ps(c + 8 * v, mask));
                _mm256_storeu_ps(t, r);
                for (int j = 0; j < rem; j++) c[8 * v + j] = t[j];
            }
        }
    }
}

/* All M rows of C: R = 12 / NV rows at a time, a last block of at most
 * R / 2 rows as R / 2. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
blocks256(const float *A, size_t rs, size_t cs, const float *b, size_t ldbk, int M, int K, __m256i mask, int rem,
          float beta, float *C, int ldc, const int NV)
{
    const int R = 12 / NV;
    for (int i0 = 0, mr; i0 < M; i0 += mr) {
        mr = M - i0 < R ? M - i0 : R;
        const float *a0 = A + (size_t)i0 * rs;
        float *c0 = C + (size_t)i0 * ldc;
        if (mr <= R / 2) rows256(a0, rs, cs, b, ldbk, K, mr, mask, rem, beta, c0, ldc, R / 2, NV);
        else rows256(a0, rs, cs, b, ldbk, K, mr, mask, rem, beta, c0, ldc, R, NV);
    }
}

/* NV = 1..4 vectors of 8 columns of C per row.  op(B)'s rows: B's own,
 * read in place when they are whole vectors, else copied (or transposed,
 * B stored [N, K], 8 x 8 blocks in registers) into bk, zero past N. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
head256(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C,
        int ldc, const int NV)
{
    float bk[64 * 32] __attribute__((aligned(32)));
    int rem = N - 8 * (NV - 1); /* columns in the last vector, 1..8 */
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const float *b = B;
    size_t ldbk = (size_t)ldb;
    if (tb || N != 8 * NV) {
        b = bk, ldbk = 8 * (size_t)NV;
        if (tb) /* B stored [N, K]: its rows are op(B)'s columns */
            for (int k0 = 0; k0 < K; k0 += 8)
                for (int v = 0; v < NV; v++) {
                    __m256 o[8];
                    int n = N - 8 * v < 8 ? N - 8 * v : 8, m = K - k0 < 8 ? K - k0 : 8;
                    transpose8(B + (size_t)(8 * v) * ldb + k0, (size_t)ldb, n, m, o);
                    for (int c = 0; c < m; c++) _mm256_store_ps(bk + (size_t)(k0 + c) * ldbk + 8 * v, o[c]);
                }
        else
            for (int k = 0; k < K; k++) {
                float *d = bk + (size_t)k * ldbk;
                memcpy(d, B + (size_t)k * ldb, (size_t)N * sizeof(float));
                memset(d + N, 0, (8 * (size_t)NV - (size_t)N) * sizeof(float));
            }
    }
    if (ta) blocks256(A, 1, (size_t)lda, b, ldbk, M, K, mask, rem, beta, C, ldc, NV);
    else blocks256(A, (size_t)lda, 1, b, ldbk, M, K, mask, rem, beta, C, ldc, NV);
}

__attribute__((target("avx2,fma"))) void ag__gemm_head256(int ta, int tb, int M, int N, int K, const float *A,
                                                           int lda, const float *B, int ldb, float beta, float *C,
                                                           int ldc)
{
    switch ((N + 7) / 8) {
    case 1: head256(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 1); break;
    case 2: head256(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 2); break;
    case 3: head256(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 3); break;
    default: head256(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 4); break;
    }
}
#endif
