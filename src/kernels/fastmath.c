/* src/kernels/fastmath.c: the float build's vectorised exp, log, tanh and
 * GELU (erf and tanh forms, alone and with their slopes dy/dx, which
 * backward multiplies by dy: ops/gelu.c), each a loop over an
 * array compiled once per instruction set (core/blocks.h), the machine's
 * picked at every call.  The double build calls libm instead (it is the
 * build for gradient checks): nothing here.
 *
 * Each function is straight-line code: no calls, and each special case a
 * select rather than a branch, so that the loops vectorise at -O2.  Each
 * reduces its argument to a short range and evaluates a polynomial there:
 * exp's is Cephes' expf polynomial (kernels/fastmath.h); the others were
 * fitted for this file (least relative error on the reduced range), GELU's
 * with a rational function for the normal distribution's tail
 * (tests/reference/fit_gelu.py).  Their
 * errors against libm's double result, over a sweep of the whole float
 * range and its edges (tests/test_fastmath.c): exp and log within 1 ulp,
 * tanh 1.5, GELU x Phi(x) 8 (10 below x = -13, where Phi(x) is
 * subnormal). */

#include "core/internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Selects as vector blends: nothing here reads the floating-point
 * exception flags (core/blocks.h). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/blocks.h"
#include "kernels/fastmath.h"

#ifndef AG_DOUBLE

AG_INLINE float exp_f(float x) { return exp_core(x, 1); }

/* log x = e ln 2 + log(1 + f) for x = (1 + f) 2^e, 1 + f in [sqrt(1/2),
 * sqrt(2)); log(1 + f) = f - f^2/2 + f^3 P(f), P of degree 7.  A subnormal
 * x is scaled by 2^23 first.  log 0 = -inf, log(x < 0) = NaN, log inf = inf.
 * P(f), f in [sqrt(1/2) - 1, sqrt 2 - 1] */
static const float log_c[8] = {-7.634429634e-02f, 1.276154965e-01f, -1.316019446e-01f, 1.420176178e-01f,
                               -1.662335694e-01f, 2.000122666e-01f, -2.500082254e-01f, 3.333333135e-01f};
AG_INLINE float log_f(float x)
{
    int sub = x < 1.17549435e-38f; /* below FLT_MIN (0, negatives and NaN are fixed at the end) */
    float xs = sub ? x * 8388608.0f : x;
    uint32_t b = bits_of(xs);
    int32_t e = (int32_t)((b >> 23) & 0xff) - 127 - (sub ? 23 : 0);
    float m = f_from_bits((b & 0x007fffff) | 0x3f800000); /* in [1, 2) */
    int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e += big;
    float f = m - 1.0f, f2 = f * f;
    float p = horner(f, log_c, 8);
    float fe = (float)e; /* the small terms first, then f, then e ln 2 (in two parts) */
    float y = f + (f2 * f * p + fe * -2.12194440e-4f - 0.5f * f2) + fe * 0.693359375f;
    y = x == 0 ? -INFINITY : y;
    y = x < 0 || x != x ? NAN : y;
    return x == INFINITY ? x : y;
}

/* tanh x = x + x^3 P(x^2) (P of degree 4) for |x| < 0.625, where
 * 1 - 2 / (e^2|x| + 1) would cancel; that, with x's sign, elsewhere (it
 * reaches +-1 exactly for large |x|, and at +-inf).
 * P(z), z = x^2 in [0, 0.625^2] */
static const float tanh_c[5] = {-5.704990588e-03f, 2.063908987e-02f, -5.373971537e-02f, 1.333144158e-01f,
                                -3.333328068e-01f};
AG_INLINE float tanh_f(float x)
{
    float a = fabsf(x), z = x * x;
    float p = horner(z, tanh_c, 5);
    float small = x + x * z * p;
    float big = 1.0f - 2.0f / (exp_f(2.0f * a) + 1.0f);
    big = x < 0 ? -big : big;
    return x == 0 ? x : a < 0.625f ? small : big; /* tanh -0 = -0 */
}

/* one clone per instruction set of each (core/blocks.h) */
AG_ISA_MAP(exp_map, exp_f)
AG_ISA_MAP(log_map, log_f)
AG_ISA_MAP(tanh_map, tanh_f)
void ag__exp_floats(size_t n, const float *x, float *y) { exp_map(n, x, y); }
void ag__log_floats(size_t n, const float *x, float *y) { log_map(n, x, y); }
void ag__tanh_floats(size_t n, const float *x, float *y) { tanh_map(n, x, y); }

/* The GELUs' loops.  y_i = f(x_i) for i < n, as ag__map (core/blocks.h:
 * the last, shorter block through a padded copy), but the whole blocks as
 * one `omp simd` loop: clang vectorises GELU's long chains only so.  Every
 * element takes the same vector code (a vector's width divides the
 * block's).  With f2, y_i and s_i = dy_i/dx_i are f2(x_i)'s two halves.
 * Their arithmetic is f's, compiled with the options of the loop that
 * calls them (fused or not). */
typedef struct gelu_pair {
    float y, slope;
} gelu_pair;
#define AG_MAP2_PARAMS (size_t n, const float *x, float *y, float *s)
AG_INLINE void simd_map(size_t n, const float *x, float *y, float (*f)(float))
{
    size_t m = n / AG_BLOCK * AG_BLOCK;
#pragma omp simd
    for (size_t i = 0; i < m; i++) y[i] = f(x[i]);
    if (m < n) {
        float xt[AG_BLOCK] = {0}, t[AG_BLOCK];
        memcpy(xt, x + m, (n - m) * sizeof *x);
#pragma omp simd
        for (int l = 0; l < AG_BLOCK; l++) t[l] = f(xt[l]);
        memcpy(y + m, t, (n - m) * sizeof *y);
    }
}
AG_INLINE void simd_map2(size_t n, const float *x, float *y, float *s, gelu_pair (*f2)(float))
{
    size_t m = n / AG_BLOCK * AG_BLOCK;
#pragma omp simd
    for (size_t i = 0; i < m; i++) {
        gelu_pair p = f2(x[i]);
        y[i] = p.y, s[i] = p.slope;
    }
    if (m < n) {
        float xt[AG_BLOCK] = {0}, yt[AG_BLOCK], st[AG_BLOCK];
        memcpy(xt, x + m, (n - m) * sizeof *x);
#pragma omp simd
        for (int l = 0; l < AG_BLOCK; l++) {
            gelu_pair p = f2(xt[l]);
            yt[l] = p.y, st[l] = p.slope;
        }
        memcpy(y + m, yt, (n - m) * sizeof *y);
        memcpy(s + m, st, (n - m) * sizeof *s);
    }
}
/* From here to GELU's entry points, a * b + c may be one fused
 * multiply-add where the instruction set has one (the chains of Horner
 * steps): within the same bounds on every level (tests/test_fastmath.c),
 * the same on every run. */
AG_FUSED_BEGIN

/* a^2 = hi + lo exactly, without a fused multiply-add: a is split in a
 * head ah of 12 bits and a tail al = a - ah,  hi = ah^2 (exact: 24 bits),
 * lo = al (a + ah),  lo small, so that its rounding is harmless. */
AG_INLINE void square_parts(float a, float *hi, float *lo)
{
    float ah = f_from_bits(bits_of(a) & 0xfffff000u), al = a - ah;
    *hi = ah * ah;
    *lo = al * (a + ah);
}

/* phi(a) 2^64 = e^(-a^2/2) / sqrt(2 pi) 2^64 for a = min(|x|, 14.5) (the
 * caller's), as m 2^(64 - n) with m = e^(-r/2) / sqrt(2 pi) in [0.28,
 * 0.57]: the product is exact, since 2^(64 - n) is 2^64 down to 2^-88,
 * which keeps it in float's normal range.  The caller multiplies it by
 * factors prescaled by 2^-64, so that their product is rounded once, even
 * where it is subnormal.  At a = 14.5 (n = 152; NaN and inf are clamped
 * there too) every such product is 0.
 *
 * a^2 is not rounded before the reduction, since that would cost a^2 / 2
 * ulp of the result (80 near a = 13):
 *   e^(-a^2/2) = 2^-n e^(-r/2),  n = round(a^2 / (2 ln 2)),  r = a^2 - n 2 ln 2,
 * with 2 ln 2 = c1 + c2, c1 of 9 bits, so that n c1 is exact (n at most
 * 152).  With a fused multiply-add (fma, a constant where it is called),
 * r = (a a - n c1) rounded once - n c2, n c1 read off t as t c1 - 1.5 2^23
 * c1 (exact: it is n c1); without, r = (hi - n c1) - n c2 + lo, a^2 = hi +
 * lo (square_parts), hi - n c1 exact.  |r| <= ln 2 (and a rounding).
 * e^(-r/2) / sqrt(2 pi) = k - (k/2) r + r^2 G(r), k = 1 / sqrt(2 pi) and
 * k/2 in float, G of degree 3, |r| <= 0.7, within 1.05e-7
 * (tests/reference/fit_gelu.py) */
static const float gauss_c[4] = {-1.036956528e-04f, 1.044751378e-03f, -8.311486803e-03f, 4.986689240e-02f};
AG_INLINE float phi_2p64(float a, int fma)
{
    float t = (a * a) * 0.721347520f + 12582912.0f; /* a^2 / (2 ln 2) + 1.5 2^23: n in the low bits */
    float n = t - 12582912.0f, r;
    if (fma) {
        r = fmaf(a, a, fmaf(t, -1.38671875f, 17448960.0f)) - n * -4.24388880e-4f;
    } else {
        float hi, lo;
        square_parts(a, &hi, &lo);
        r = (hi - n * 1.38671875f) - n * -4.24388880e-4f + lo;
    }
    float m = (horner(r, gauss_c, 4) * r - 1.994711459e-01f) * r + 3.989422917e-01f;
    /* m 2^(64 - n), exact, as 64 - n added to m's exponent field (bits_of(t)
     * = 0x4b400000 + n): an integer addition, not a multiplication */
    return f_from_bits(bits_of(m) + ((0x4b400000u + 64u - bits_of(t)) << 23));
}

/* Phi(x) = P(X <= x) for a standard normal X, and phi(x), its density:
 *   Phi(x) = Phi(-a) for x < 0,  1 - Phi(-a) otherwise,  a = |x|,
 *   Phi(-a) = phi(a) M(a),   M(a) = 1 / (a + S(a) / T(a)) = T(a) / (a T(a) + S(a)),
 * M the Mills ratio, so that the left tail keeps its relative precision
 * (1 + erf(x / sqrt 2) would cancel).  T is monic of degree 4, S of degree
 * 3, fitted on a in [0, 14.5] (beyond, Phi(-a) is below float's range):
 * M ~ 1/a far out, as the true ratio; their coefficients are all positive,
 * so that Horner's rule on a >= 0 adds no cancellation; T serves twice, so
 * that the rational function of degree (4, 5) costs 7 multiply-adds, an
 * addition and one division.  Far out, where a T dominates a T + S, T's
 * rounding cancels in the quotient.  The quotient is taken as 2^-64 M(a),
 * the factor that phi_2p64 asks, as T / (a 2^64 T + 2^64 S): a 2^64 is an
 * integer addition to a's exponent field (a's that are 0 or subnormal
 * become 2^-63, as good as 0 beside 2^64 S).
 * M(a) = T(a) / (a T(a) + S(a)), a in [0, 14.5], within 4.4e-8
 * (tests/reference/fit_gelu.py); S here times 2^64 (exact) */
#define S_(c) (0x1p64f * (c))
static const float mills_s[4] = {S_(9.991658330e-01f), S_(8.895993233e+00f), S_(3.450690460e+01f),
                                 S_(6.918461609e+01f)};
#undef S_
static const float mills_t[5] = {1.0f, 8.864997864e+00f, 3.698669052e+01f, 8.273808289e+01f, 8.671006012e+01f};
AG_INLINE float normal_cdf_f(float x, int fma, float *pdf)
{
    uint32_t ab = bits_of(x) & 0x7fffffffu; /* |x| as an integer: ordered as the floats, NaN above inf */
    ab = ab < 0x41680000u ? ab : 0x41680000u;
    float a = f_from_bits(ab), a_2p64 = f_from_bits(ab + (64u << 23)); /* min(|x|, 14.5), NaN too */
    float e = phi_2p64(a, fma), t = horner(a, mills_t, 5);
    *pdf = e * 0x1p-64f;
    float tail = e * (t / (a_2p64 * t + horner(a, mills_s, 4))); /* Phi(-a), rounded once if subnormal */
    return x < 0 ? tail : 1.0f - tail;
}

/* GELU, alone and with its slope.  The AVX2 and AVX-512 levels have fmaf
 * in hardware (cpu.c asks AVX2's for it) and reduce x^2 with it; the
 * baseline splits x in halves instead, unless its fmaf is fast too
 * (FP_FAST_FMAF: arm64).
 *
 * y = x Phi(x)  ->  dy/dx = Phi(x) + x phi(x)   (product rule; Phi' = phi),
 * with phi(x) the factor of Phi(x)'s tail, rounded once: a multiplication,
 * and a multiply-add for the slope.
 * Where |x| >= 14.5 phi(x) is 0, and the slope at x = +-inf is NaN
 * (inf 0), as in double.  gelu_f is the first half of gelu_pair_f: y has
 * the same bits with or without its slope. */
#ifdef FP_FAST_FMAF
enum { BASE_FMA = 1 };
#else
enum { BASE_FMA = 0 };
#endif
AG_INLINE gelu_pair gelu_pair_f(float x, int fma)
{
    float pdf, cdf = normal_cdf_f(x, fma, &pdf);
    return (gelu_pair){x * cdf, cdf + x * pdf};
}
AG_INLINE gelu_pair gelu_pair_base_f(float x) { return gelu_pair_f(x, BASE_FMA); }
AG_INLINE float gelu_f(float x) { return gelu_pair_f(x, BASE_FMA).y; }

AG_INLINE void gelu_loop AG_MAP_PARAMS { simd_map(n, x, y, gelu_f); }
AG_INLINE void gelu_slope_loop AG_MAP2_PARAMS { simd_map2(n, x, y, s, gelu_pair_base_f); }
#if AG_X86_KERNELS /* the fused loops exist for the AVX2 and AVX-512 clones only */
AG_INLINE gelu_pair gelu_pair_fma_f(float x) { return gelu_pair_f(x, 1); }
AG_INLINE float gelu_fma_f(float x) { return gelu_pair_f(x, 1).y; }
AG_INLINE void gelu_fma_loop AG_MAP_PARAMS { simd_map(n, x, y, gelu_fma_f); }
AG_INLINE void gelu_slope_fma_loop AG_MAP2_PARAMS { simd_map2(n, x, y, s, gelu_pair_fma_f); }
AG_ISA_CLONES(void, gelu_fma_loop, AG_MAP_PARAMS, gelu_fma_loop(n, x, y))
AG_ISA_CLONES(void, gelu_slope_fma_loop, AG_MAP2_PARAMS, gelu_slope_fma_loop(n, x, y, s))
#endif

void ag__gelu_floats(size_t n, const float *x, float *y)
{
#if AG_X86_KERNELS
    if (ag__isa() == AG_ISA_AVX512) {
        gelu_fma_loop_avx512(n, x, y);
        return;
    }
    if (ag__isa() == AG_ISA_AVX2) {
        gelu_fma_loop_avx2(n, x, y);
        return;
    }
#endif
    gelu_loop(n, x, y);
}

void ag__gelu_slope_floats(size_t n, const float *x, float *y, float *s)
{
#if AG_X86_KERNELS
    if (ag__isa() == AG_ISA_AVX512) {
        gelu_slope_fma_loop_avx512(n, x, y, s);
        return;
    }
    if (ag__isa() == AG_ISA_AVX2) {
        gelu_slope_fma_loop_avx2(n, x, y, s);
        return;
    }
#endif
    gelu_slope_loop(n, x, y, s);
}
AG_FUSED_END /* (off x86, the loops are inlined into these two) */

/* GELU's tanh form, x (1 + tanh u) / 2 with u = k (x + c x^3), k = sqrt(2 /
 * pi), c = 0.044715, through the logistic function:
 *   s = (1 + tanh u) / 2 = 1 / (1 + e^w),   1 - s = e^w / (1 + e^w),   w = -2u
 * taken with e = e^-|w| (never above 1, so never inf):
 *   s = (w > 0 ? e : 1) / (1 + e),   1 - s = (w > 0 ? 1 : e) / (1 + e).
 * Three things keep the error small:
 * - w is formed in double and split in two floats, w = hi + lo; lo joins
 *   the reduced argument of e^-|w| (as exp_core's, kernels/fastmath.h), so
 *   that the rounding of w, which e^w would magnify |w| times, is not lost;
 * - e = m 2^-n is kept as m, a normal float, and the power of two, which
 *   scales the result last: where s is below FLT_MIN (x < -9.9), x s and
 *   the gradient are rounded once, not s first;
 * - 1 + e = d + dl exactly (dl = (1 - d) + e, as 1 >= e), and the quotient
 *   by d is corrected by dl (the forward's only where w > 0, x < 0).
 * y = x s is then within 3 ulp of the double result over the whole float
 * range, the gradient within 6 ulp of its terms (tests/test_fastmath.c).
 * Nothing fuses here: every level gives the same bits. */
/* e^-|w| for x, as m 2^-n with m = e^-r in [2^-1/2, 2^1/2] and 2^-n = s1 s2
 * (two factors in float's normal range), and whether w > 0 (x < 0) */
AG_INLINE float logistic_exp(float x, int *neg, float *s1, float *s2)
{
    double v = x, w = -2 * 0.79788456080286535588 * (v + 0.044715 * v * v * v);
    w = w < -120 ? -120 : w > 120 ? 120 : w; /* a NaN stays */
    float hi = (float)w, lo = (float)(w - hi);
    *neg = hi > 0;
    float a = hi > 0 ? -hi : hi, b = hi > 0 ? -lo : lo; /* -|w| = a + b */
    float t = a * 1.44269504088896341f + 12582912.0f;  /* -|w| / ln 2 + 1.5 2^23: n in the low bits */
    float n = t - 12582912.0f;
    float r = (a - n * 0.693359375f) - n * -2.12194440e-4f + b; /* ln 2 in two parts; the first product exact */
    float p = horner(r, exp_c, 6);
    int32_t k = (int32_t)(bits_of(t) - 0x4b400000u), k1 = k / 2; /* k = -n in [-174, 0]; k1 in [-87, 0] */
    *s1 = f_from_bits((uint32_t)(k1 + 127) << 23);
    *s2 = f_from_bits((uint32_t)(k - k1 + 127) << 23);
    /* e^-120 = 2^-173: x s and its gradient are 0 in float from there on
     * (x < -11.2); m = 0 makes them x 0, as in double (NaN for x = -inf) */
    return a == -120.0f ? 0.0f : p * r * r + r + 1.0f;
}

/* y = x s and dy/dx, from one logistic_exp:
 *   y = x s = (w > 0 ? x m : x) / (1 + e), times 2^-n where w > 0;
 *   dy/dx = s + x 2 s (1 - s) k (1 + 3 c x^2)
 *   (ds/du = (1 - tanh^2 u) / 2 = 2 s (1 - s)), with s and 1 - s from
 *   1 / (1 + e), corrected as y's quotient: 1 - s read off y / x would
 *   cancel where s is near 1 (x > 2).
 * gelu_tanh_f is its first half: y has the same bits with or without the
 * slope. */
AG_INLINE gelu_pair gelu_tanh_pair_f(float x)
{
    int neg;
    float s1, s2, m = logistic_exp(x, &neg, &s1, &s2), e = m * s1 * s2;
    float d = 1.0f + e, dl = (1.0f - d) + e; /* 1 + e = d + dl exactly */
    float q = (neg ? x * m : x) / d;
    /* where w > 0, q / (1 + dl / d), with dl / d taken as dl (dl < 2^-24);
     * elsewhere q as it is, within 1.6 ulp without it (and x = inf stays
     * inf: inf dl would be inf 0) */
    float y = neg ? (q - q * dl) * s1 * s2 : q;
    float r = 1.0f / d;
    r = r - r * dl; /* 1 / (1 + e), corrected as the quotient above */
    float s = neg ? m * r : r, sc = neg ? r : e * r; /* s (times 2^n where w > 0) and 1 - s */
    /* k (1 + 3 c x^2) = k + 3 c k x^2; x held to |x| <= 1e4, where 2 s (1 - s)
     * is 0 already, so that x^2 never overflows (inf 0 would be NaN) */
    float xc = x > 1e4f ? 1e4f : x < -1e4f ? -1e4f : x;
    float du = 0.797884583f + 0.107032225f * (xc * xc);
    float g = s + x * (2.0f * s * sc) * du;
    return (gelu_pair){y, neg ? g * s1 * s2 : g};
}
AG_INLINE float gelu_tanh_f(float x) { return gelu_tanh_pair_f(x).y; }

AG_ISA_MAP(gelu_tanh_map, gelu_tanh_f)
AG_INLINE void gelu_tanh_slope_loop AG_MAP2_PARAMS { simd_map2(n, x, y, s, gelu_tanh_pair_f); }
AG_ISA_CLONES(void, gelu_tanh_slope_loop, AG_MAP2_PARAMS, gelu_tanh_slope_loop(n, x, y, s))
void ag__gelu_tanh_floats(size_t n, const float *x, float *y) { gelu_tanh_map(n, x, y); }
void ag__gelu_tanh_slope_floats(size_t n, const float *x, float *y, float *s)
{
    AG_ISA_CALL(gelu_tanh_slope_loop, (n, x, y, s));
}
#endif
