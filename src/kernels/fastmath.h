/* src/kernels/fastmath.h: e^x for float as straight-line code (no calls, each
 * special case a select rather than a branch), so that a loop over an
 * array of them vectorises at -O2, with its helpers (bit patterns, Horner's
 * rule): the kernel of the float build's exp, tanh and GELU
 * (kernels/fastmath.c) and of softmax's rows (kernels/rows.c).  exp_core
 * with subnormals is within 1 ulp of libm's double result over the whole
 * float range (tests/test_fastmath.c).  Float build only: the double build
 * calls libm.
 *
 * A file that includes it says #pragma GCC optimize("no-trapping-math")
 * first, as for core/blocks.h, so that its selects become vector blends. */
#ifndef AG_KERNELS_FASTMATH_H
#define AG_KERNELS_FASTMATH_H

#ifndef AG_DOUBLE
#include "core/blocks.h"

#include <stdint.h>
#include <string.h>

AG_INLINE float f_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
AG_INLINE uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* c[0] x^(n-1) + c[1] x^(n-2) + ... + c[n-1], by Horner's rule. */
AG_INLINE float horner(float x, const float *c, int n)
{
    float p = c[0];
#ifdef __clang__
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 16
#endif
    for (int k = 1; k < n; k++) p = p * x + c[k];
    return p;
}

/* e^x = 2^n e^r with n = round(x / ln 2), |r| <= ln2 / 2, e^r by Cephes'
 * degree-7 polynomial.  x is clamped first to where e^x is neither 0 nor
 * inf, so that n is a small whole number (a NaN passes the clamps and makes
 * the result NaN through r).  With `subnormals` (a constant
 * where it is called), 2^n is built as 2^(n/2) 2^(n - n/2), two factors in
 * float's normal range, so that results down to the smallest subnormal
 * are rounded once; without, a result below FLT_MIN (x < -87.3) is 0, and
 * the work is less (softmax's exps, where such a term is nothing beside
 * the row's largest, 1).
 * e^r = 1 + r + r^2 (c0 r^5 + ... + c5), |r| <= ln2 / 2 (Cephes) */
static const float exp_c[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                               1.6666665459e-1f, 5.0000001201e-1f};
AG_INLINE float exp_core(float x, int subnormals)
{
    float lo = subnormals ? -104.0f : -88.0f; /* n = -150, or -127: 2^n is 0 */
    float xc = x < lo ? lo : x;               /* a NaN stays */
    xc = xc > 89.0f ? 89.0f : xc;
    float t = xc * 1.44269504088896341f + 12582912.0f; /* x / ln 2 + 1.5 * 2^23: rounded to a whole number */
    float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f; /* x - n ln 2, ln 2 in two parts */
    float p = horner(r, exp_c, 6);
    p = p * r * r + r + 1.0f;
    /* n as an integer, read off t's low bits (defined for every t, NaN
     * too: a NaN's p is NaN, whatever scale it meets) */
    int32_t k = (int32_t)(bits_of(t) - 0x4b400000u), k1 = subnormals ? k / 2 : 0; /* k in [-150, 129] */
    float s1 = f_from_bits((uint32_t)(k1 + 127) << 23), s2 = f_from_bits((uint32_t)(k - k1 + 127) << 23);
    return subnormals ? p * s1 * s2 : p * s2; /* 2^(k + 127 = 0) is read as 0 */
}
#endif

#endif
