/* gemm_pack.c: the blocked product's packing (kernels/gemm.c): the
 * panels of op(B) that its micro-kernel streams, [kc][w] each, zero past
 * the last column, any transpose undone; the edge of fewer than MR rows of
 * A, zero-padded; and A^T copied row by row when its rows lie far apart.
 * Copies only: the products' order and so their bits do not depend on it. */
#include "core/internal.h"
#include "kernels/gemm.h"
#include "kernels/gemm_blocks.h"

#if defined(__SSE__) && !defined(AG_DOUBLE)
#include <xmmintrin.h>
#define HAVE_TRANSPOSE4 1
#elif defined(__aarch64__) && defined(__ARM_NEON) && !defined(AG_DOUBLE)
#include <arm_neon.h>
#define HAVE_TRANSPOSE4 1
#endif

/* mr < MR rows [i0, i0+mr) of op(A), zero rows up to MR, depth [p0,
 * p0+kc): dst[k][MR].  Only for a product of fewer than MR rows read in
 * place: whole panels are. */
void ag__gemm_pack_a_edge(ag_real *dst, const ag_real *A, int ta, int lda, int i0, int mr, int p0, int kc)
{
    for (int k = 0; k < kc; k++)
        for (int i = mr; i < MR; i++) dst[(size_t)k * MR + i] = 0;
    if (ta) { /* A stored [K, M]: row k holds the mr values in order */
        for (int k = 0; k < kc; k++) {
            const ag_real *a = A + (size_t)(p0 + k) * lda + i0;
            for (int i = 0; i < mr; i++) dst[(size_t)k * MR + i] = a[i];
        }
    } else { /* A stored [M, K]: read each row in order */
        for (int i = 0; i < mr; i++) {
            const ag_real *a = A + (size_t)(i0 + i) * lda + p0;
            for (int k = 0; k < kc; k++) dst[(size_t)k * MR + i] = a[k];
        }
    }
}

/* Rows [ic, ic+mc) (of a product ending at row m1) of op(A) = A^T, A stored
 * [K, M], depth [p0, p0+kc): the row panels of panel_at, panel p at dst +
 * p MR kc, [kc][MR].  op(A)'s rows are A's columns: read in place, each
 * step of k would be a row of A away, a new page every step or two (the
 * TLB missing all the way: a seventh of dW = dY^T X's time).  Copied row
 * by row of A, each read once, in order. */
void ag__gemm_pack_a_block(ag_real *dst, const ag_real *A, int lda, int ic, int mc, int m1, int p0, int kc)
{
    int start[MC / MR], rows[MC / MR], np = 0, skip;
    for (int i0 = ic; i0 < ic + mc; i0 += MR, np++) start[np] = ag__gemm_panel_at(i0, m1, &rows[np], &skip);
    for (int k = 0; k < kc; k++) {
        const ag_real *a = A + (size_t)(p0 + k) * lda;
        if (k + 8 < kc)
            for (int i = 0; i < mc; i += 64 / (int)sizeof(ag_real)) __builtin_prefetch(a + (size_t)8 * lda + start[0] + i);
        for (int p = 0; p < np; p++) {
            ag_real *d = dst + ((size_t)p * kc + k) * MR;
            if (rows[p] == MR) memcpy(d, a + start[p], MR * sizeof(ag_real));
            else
                for (int i = 0; i < MR; i++) d[i] = i < rows[p] ? a[start[p] + i] : 0;
        }
    }
}

#ifdef HAVE_TRANSPOSE4
/* Four rows of B (4 values each, row stride ldb) to four rows of the
 * panel (stride w), transposed in registers: 4 loads and 4 stores instead
 * of 16 scattered single ones. */
static inline void transpose4(const float *b, size_t ldb, float *d, size_t w)
{
#if defined(__SSE__)
    __m128 r0 = _mm_loadu_ps(b), r1 = _mm_loadu_ps(b + ldb), r2 = _mm_loadu_ps(b + 2 * ldb),
           r3 = _mm_loadu_ps(b + 3 * ldb);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(d, r0), _mm_storeu_ps(d + w, r1), _mm_storeu_ps(d + 2 * w, r2), _mm_storeu_ps(d + 3 * w, r3);
#else
    float32x4_t r0 = vld1q_f32(b), r1 = vld1q_f32(b + ldb), r2 = vld1q_f32(b + 2 * ldb), r3 = vld1q_f32(b + 3 * ldb);
    /* pairs within rows, then halves across them: t0 = a0 b0 a2 b2, ... */
    float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1)), t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
    float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3)), t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
    vst1q_f32(d, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
    vst1q_f32(d + w, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
    vst1q_f32(d + 2 * w, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
    vst1q_f32(d + 3 * w, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
#endif
}
#endif

/* A panel of op(B) w columns wide: columns [j0, j0+nr), zero columns up to
 * w, depth [p0, p0+kc): dst[k][w]. */
void ag__gemm_pack_b_panel(ag_real *dst, int w, const ag_real *B, int tb, int ldb, int j0, int nr, int p0, int kc)
{
    if (!tb && nr == w) { /* B stored [K, N]: row k of the panel is contiguous */
        for (int k = 0; k < kc; k++) memcpy(dst + (size_t)k * w, B + (size_t)(p0 + k) * ldb + j0, (size_t)w * sizeof(ag_real));
        return;
    }
    if (tb) { /* B stored [N, K]: read its rows in order, write columns */
        int j0done = 0;
#ifdef HAVE_TRANSPOSE4
        /* 4 x 4 blocks, transposed in registers */
        int kc4 = kc / 4 * 4;
        for (; j0done + 4 <= nr; j0done += 4) {
            const float *b0 = B + (size_t)(j0 + j0done) * ldb + p0;
            for (int k = 0; k < kc4; k += 4) transpose4(b0 + k, (size_t)ldb, dst + (size_t)k * w + j0done, (size_t)w);
            for (int k = kc4; k < kc; k++)
                for (int c = 0; c < 4; c++) dst[(size_t)k * w + j0done + c] = b0[(size_t)c * ldb + k];
        }
#endif
        for (int j = j0done; j < nr; j++) {
            const ag_real *src = B + (size_t)(j0 + j) * ldb + p0;
            for (int k = 0; k < kc; k++) dst[(size_t)k * w + j] = src[k];
        }
        for (int k = 0; k < kc; k++)
            for (int j = nr; j < w; j++) dst[(size_t)k * w + j] = 0;
        return;
    }
    for (int k = 0; k < kc; k++) {
        const ag_real *src = B + (size_t)(p0 + k) * ldb + j0;
        ag_real *d = dst + (size_t)k * w;
        for (int j = 0; j < nr; j++) d[j] = src[j];
        for (int j = nr; j < w; j++) d[j] = 0;
    }
}

/* Columns [j0, j0+nc) of op(B) = B, stored [K, N], depth [p0, p0+kc), as
 * the panels pack_b_panel makes: panel p (columns j0 + p NR on, nr of
 * them, w = nr rounded up to VL) at dst + p NR kc, [kc][w], zero past nr.
 * Row by row of B, each read once, in order: panel by panel, each step of
 * k would be a row of B away. */
void ag__gemm_pack_b_block(ag_real *dst, int NR, int VL, const ag_real *B, int ldb, int j0, int nc, int p0, int kc)
{
    for (int k = 0; k < kc; k++) {
        const ag_real *b = B + (size_t)(p0 + k) * ldb + j0;
        for (int j = 0; j < nc; j += NR) {
            int nr = nc - j < NR ? nc - j : NR, w = (nr + VL - 1) / VL * VL;
            ag_real *d = dst + (size_t)j * kc + (size_t)k * w;
            memcpy(d, b + j, (size_t)nr * sizeof(ag_real));
            for (int c = nr; c < w; c++) d[c] = 0;
        }
    }
}

