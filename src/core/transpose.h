/* src/core/transpose.h: a 16 x 16 block of floats transposed in AVX-512
 * registers, for the kernels of toy attention heads (kernels/gemm.c,
 * kernels/attention.c), which turn K or V around without a trip
 * through memory.  x86 float builds only. */
#ifndef AG_CORE_TRANSPOSE_H
#define AG_CORE_TRANSPOSE_H

#include <immintrin.h>

/* 16 rows of 16 floats transposed in registers: o[c s] = column c of r
 * (s: the stride, in vectors, of the output).  Four rounds, each pairing
 * vectors: 32-bit interleaves, 64-bit interleaves, then two rounds of
 * 128-bit lanes (a 4 x 4 transpose of 4 x 4 blocks). */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16(const __m512 r[16], __m512 *o,
                                                                                 const int s)
{
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) { /* t[2p], t[2p+1]: rows 2p and 2p+1 interleaved */
        t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) { /* u[4q+m], lane L: column 4L+m of rows 4q..4q+3 */
        __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 2]);
        __m512d c = _mm512_castps_pd(t[4 * q + 1]), d = _mm512_castps_pd(t[4 * q + 3]);
        u[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) { /* o[4L+m], lane Q = lane L of u[4Q+m] */
        __m512 x0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44), x1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
        __m512 x2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
        __m512 x3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
        o[m * s] = _mm512_shuffle_f32x4(x0, x2, 0x88);
        o[(4 + m) * s] = _mm512_shuffle_f32x4(x0, x2, 0xDD);
        o[(8 + m) * s] = _mm512_shuffle_f32x4(x1, x3, 0x88);
        o[(12 + m) * s] = _mm512_shuffle_f32x4(x1, x3, 0xDD);
    }
}

#endif
