/* tests/test_fastmath.c: the float build's vectorised exp, log, tanh and
 * GELU (src/kernels/fastmath.c) against libm in double.
 *
 * Each kernel runs over a sweep of the whole float range (every 997th bit
 * pattern: both signs, subnormals, NaNs) and over the edges, each with its
 * neighbours: +-0, the smallest subnormal, FLT_MIN, FLT_MAX, +-inf, NaN, and
 * where each function changes regime (exp's overflow, subnormal and
 * underflow thresholds; tanh's switch of formula and its saturation;
 * GELU's left tail).  The error is measured in ulps of the exact result
 * (the double one) rounded to float; a result that is not finite must be
 * the same non-finite value.
 *
 * Bounds (measured, then rounded up): exp and log 1 ulp, tanh 1.5; GELU
 * 8 ulp down to x = -13 and 10 below, where Phi(x) is subnormal; GELU's
 * gradient 7 ulp of |Phi(x)| + |x phi(x)| (it cancels near its root at
 * x = -0.75, where no relative bound holds), 13 below x = -13, both on the
 * sweep of the whole range and on a dense grid over [-15, 10].  GELU's
 * tanh form 3 ulp, its gradient 6 ulp of its terms, both over the whole
 * range (its tail too: s is kept as a normal float times a power of two
 * there), checked on a dense sweep besides: every float where the errors
 * peak, and a fine grid (a sparse one missed peaks of 4.2 and 7.2 ulp).
 * Both GELUs' gradients are the slopes dy/dx that their forward computes
 * beside y for backward; y has the same bits with or without them.
 * Every test runs at each instruction-set level the CPU has (forced with
 * ag__isa_force, as tests/test_kernels.c does): the kernels are compiled
 * once per level.
 * The double build calls libm itself: nothing to check there. */
#include "common.h"

#ifndef AG_DOUBLE
#include "core/internal.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

/* One ulp of float at r (the subnormals' spacing below FLT_MIN). */
static double ulp_at(double r)
{
    double a = fabs(r);
    if (a < FLT_MIN) return ldexp(1, -149);
    int e;
    frexp(a, &e);
    return ldexp(1, e - 24);
}

static float float_of_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static const char *const levels[] = {"baseline", "avx2", "avx512", "neon"};
static const char *level = "baseline"; /* the one running, for messages */

/* The body after it once per level the CPU has, that level forced. */
#define EACH_LEVEL                                                                                    \
    for (int l_ = 0; l_ < 4; l_++)                                                                  \
        if ((level = levels[l_]), strcmp(ag__isa_force(levels[l_]), levels[l_]) == 0)

typedef void (*kernel)(size_t n, const float *x, float *y);
typedef double (*reference)(double x);

/* The worst error of got against want (ulps), and where. */
typedef struct worst {
    double ulps;
    float at;
} worst;

static void check_one(const char *name, float x, float got, double want, worst *w)
{
    float wf = (float)want;
    if (isnan(want)) {
        cr_assert(isnan(got), "%s: %s(%a) = %a, want NaN", level, name, (double)x, (double)got);
        return;
    }
    if (isinf(wf)) {
        cr_assert_eq(got, wf, "%s: %s(%a) = %a, want %g", level, name, (double)x, (double)got, (double)wf);
        return;
    }
    cr_assert(isfinite(got), "%s: %s(%a) = %a, want %a", level, name, (double)x, (double)got, want);
    double e = fabs((double)got - want) / ulp_at(want);
    if (e > w->ulps) w->ulps = e, w->at = x;
}

/* The edges of every kernel, each with its 3 neighbours on either side. */
static const float edges[] = {0.0f, 1.4e-45f, FLT_MIN, FLT_MAX, 1.0f, 0.625f, 9.01f, 88.7228394f, -87.3365479f,
                              -103.972084f, -104.0f, 89.0f, 0.70710678f, 1.41421356f, 13.0f, 15.0f, 0.75179f};

/* The sweep and the edges: the next block of at most `cap` of them in x,
 * from where *b (the bit patterns) and *e (the edges) stand; 0 at the end. */
static int sweep_block(uint64_t *b, size_t *e, float *x, int cap)
{
    size_t ne = sizeof edges / sizeof *edges * 14;
    int m = 0;
    for (; m < cap && (*b < (1ull << 32) || *e < ne); m++) {
        if (*b < (1ull << 32)) {
            x[m] = float_of_bits((uint32_t)*b);
            *b += 997;
        } else { /* edge e / 14, its sign, and an offset of -3..3 ulps */
            float v = edges[*e / 14] * ((*e / 7) % 2 ? -1.0f : 1.0f);
            for (int s = (int)(*e % 7) - 3; s < 0; s++) v = nextafterf(v, -INFINITY);
            for (int s = (int)(*e % 7) - 3; s > 0; s--) v = nextafterf(v, INFINITY);
            x[m] = v;
            ++*e;
        }
    }
    return m;
}

/* The sweep and the edges, in blocks, through the kernel. */
static worst sweep(const char *name, kernel k, reference ref, double from)
{
    enum { B = 4096 };
    static float x[B], y[B];
    worst w = {0, 0};
    uint64_t b = 0;
    size_t e = 0;
    for (int m; (m = sweep_block(&b, &e, x, B)) > 0;) {
        k((size_t)m, x, y);
        for (int i = 0; i < m; i++)
            if (!(x[i] < from)) check_one(name, x[i], y[i], ref(x[i]), &w);
    }
    return w;
}

static double gelu_ref(double x) { return x * 0.5 * erfc(-x * 0.70710678118654752440); }

Test(fastmath, exp_within_1_ulp)
{
    EACH_LEVEL {
        worst w = sweep("exp", ag__exp_floats, exp, -INFINITY);
        cr_assert(w.ulps <= 1.0, "%s exp: %.3f ulp at %a", level, w.ulps, (double)w.at);
    }
    ag__isa_force(NULL);
}

Test(fastmath, log_within_1_ulp)
{
    EACH_LEVEL {
        worst w = sweep("log", ag__log_floats, log, -INFINITY);
        cr_assert(w.ulps <= 1.0, "%s log: %.3f ulp at %a", level, w.ulps, (double)w.at);
    }
    ag__isa_force(NULL);
}

Test(fastmath, tanh_within_1_5_ulp)
{
    EACH_LEVEL {
        worst w = sweep("tanh", ag__tanh_floats, tanh, -INFINITY);
        cr_assert(w.ulps <= 1.5, "%s tanh: %.3f ulp at %a", level, w.ulps, (double)w.at);
    }
    ag__isa_force(NULL);
}

/* At every level: within `bound` ulp from x = `from` up, `tail` below. */
static void sweep_with_tail(const char *name, kernel k, reference ref, double from, double bound, double tail)
{
    EACH_LEVEL {
        worst w = sweep(name, k, ref, from);
        cr_assert(w.ulps <= bound, "%s %s: %.3f ulp at %a", level, name, w.ulps, (double)w.at);
        w = sweep(name, k, ref, -INFINITY);
        cr_assert(w.ulps <= tail, "%s %s: %.3f ulp at %a", level, name, w.ulps, (double)w.at);
    }
    ag__isa_force(NULL);
}

Test(fastmath, gelu_within_8_ulp_and_10_in_the_far_tail)
{
    sweep_with_tail("gelu", ag__gelu_floats, gelu_ref, -13, 8.0, 10.0);
}

/* Signs and the values that are not finite, one by one. */
Test(fastmath, special_values)
{
    EACH_LEVEL {
        float x[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -1.0f}, y[6];
        ag__exp_floats(6, x, y);
        cr_assert(isnan(y[0]) && y[1] == INFINITY && y[2] == 0 && y[3] == 1 && y[4] == 1, "%s exp", level);
        ag__log_floats(6, x, y);
        cr_assert(isnan(y[0]) && y[1] == INFINITY && isnan(y[2]) && y[3] == -INFINITY && y[4] == -INFINITY &&
                      isnan(y[5]),
                  "%s log", level);
        ag__tanh_floats(6, x, y);
        cr_assert(isnan(y[0]) && y[1] == 1 && y[2] == -1 && y[3] == 0 && !signbit(y[3]) && y[4] == 0 && signbit(y[4]),
                  "%s tanh", level);
        /* gelu(-inf) = -inf * Phi(-inf) = -inf * 0: NaN, as libm's x * 0.5 * (1 + erf(x / sqrt 2)) */
        ag__gelu_floats(6, x, y);
        cr_assert(isnan(y[0]) && y[1] == INFINITY && isnan(y[2]) && y[3] == 0, "%s gelu", level);
    }
    ag__isa_force(NULL);
}

/* GELU's slope Phi(x) + x phi(x) in double. */
static double gelu_slope_ref(double v)
{
    return 0.5 * erfc(-v * 0.70710678118654752440) + v * exp(-0.5 * v * v) * 0.39894228040143267794;
}

/* GELU's slope (the forward's second output, which the backward
 * multiplies by dy) against Phi(x) + x phi(x) in double, on a dense grid
 * over [-15, 10], near 0 down to the smallest subnormal, and the lengths
 * 1 to 40 (every padded tail); the forward's y beside it has gelu's own
 * bits. */
Test(fastmath, gelu_gradient_within_7_ulp_of_its_terms)
{
    EACH_LEVEL {
        enum { N = 1 << 20 };
        float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *y0 = malloc(N * sizeof *y0),
              *s = malloc(N * sizeof *s);
        cr_assert(x && y && y0 && s);
        for (int i = 0; i < N; i++) x[i] = (float)(-15 + 25.0 * i / N);
        ag__gelu_floats(N, x, y0);
        ag__gelu_slope_floats(N, x, y, s);
        cr_assert(memcmp(y, y0, N * sizeof *y) == 0, "%s: gelu with its slope changed y", level);
        double worst_main = 0, worst_tail = 0;
        for (int i = 0; i < N; i++) {
            double v = x[i], cdf = 0.5 * erfc(-v * 0.70710678118654752440),
                   pdf = exp(-0.5 * v * v) * 0.39894228040143267794;
            double e = fabs(s[i] - (cdf + v * pdf)) / ulp_at(fabs(cdf) + fabs(v * pdf));
            if (v >= -13) worst_main = worse_of(worst_main, e);
            else worst_tail = worse_of(worst_tail, e);
        }
        cr_assert(worst_main <= 7 && worst_tail <= 13, "%s gelu grad: %.2f ulp (x >= -13), %.2f below", level, worst_main,
                  worst_tail);
        /* x near 0, down to the smallest subnormal: the gradient is 1/2 */
        static const float tiny[] = {1.4e-45f, 3e-40f, FLT_MIN, 1e-30f, 0x1p-26f, 0x1p-25f, 0x1.000002p-25f, 1e-6f};
        for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++)
            for (int sg = -1; sg <= 1; sg += 2) {
                float v = (float)sg * tiny[i], vy, vs;
                ag__gelu_slope_floats(1, &v, &vy, &vs);
                double want = gelu_slope_ref(v);
                cr_assert(fabs(vs - want) <= 7 * ulp_at(want), "%s gelu grad at %a: %a, want %a", level, (double)v, (double)vs,
                          want);
            }
        /* every tail length: the padded copies must not touch past n */
        for (int n = 1; n <= 40; n++) {
            for (int i = 0; i < 48; i++) x[i] = (float)(i - 20) * 0.25f, y[i] = -7, s[i] = 3;
            ag__gelu_slope_floats((size_t)n, x, y, s);
            for (int i = n; i < 48; i++) cr_assert(y[i] == -7 && s[i] == 3, "%s: n = %d wrote past the end at %d", level, n, i);
            for (int i = 0; i < n; i++)
                cr_assert(fabs(s[i] - gelu_slope_ref(x[i])) <= 4 * FLT_EPSILON, "%s: n = %d: s[%d] = %.9g, want %.9g", level, n,
                          i, (double)s[i], gelu_slope_ref(x[i]));
        }
        free(x), free(y), free(y0), free(s);
    }
    ag__isa_force(NULL);
}

/* GELU's slope over the whole float range and its edges (the sweep of
 * gelu's value), against Phi(x) + x phi(x) in double, relative to the
 * terms' size: within 7 ulp of them from x = -13 up, 13 below.  A slope
 * that is not finite must be the double one's value (NaN at +-inf and for
 * NaN); y beside it has gelu's own bits. */
Test(fastmath, gelu_gradient_within_7_ulp_of_its_terms_over_the_float_range)
{
    enum { B = 4096 };
    static float x[B], y[B], y0[B], s[B];
    EACH_LEVEL {
        double worst_main = 0, worst_tail = 0;
        float at_main = 0, at_tail = 0;
        uint64_t b = 0;
        size_t e = 0;
        for (int m; (m = sweep_block(&b, &e, x, B)) > 0;) {
            ag__gelu_floats((size_t)m, x, y0);
            ag__gelu_slope_floats((size_t)m, x, y, s);
            cr_assert(memcmp(y, y0, (size_t)m * sizeof *y) == 0, "%s: gelu with its slope changed y", level);
            for (int i = 0; i < m; i++) {
                double v = x[i], cdf = 0.5 * erfc(-v * 0.70710678118654752440),
                       pdf = exp(-0.5 * v * v) * 0.39894228040143267794, want = cdf + v * pdf;
                if (!isfinite(want)) {
                    cr_assert(isnan(want) ? isnan(s[i]) : s[i] == (float)want, "%s: gelu slope(%a) = %a, want %a", level,
                              v, (double)s[i], want);
                    continue;
                }
                double err = fabs(s[i] - want) / ulp_at(fabs(cdf) + fabs(v * pdf));
                if (v >= -13 && (err > worst_main || isnan(err))) worst_main = worse_of(worst_main, err), at_main = x[i];
                if (v < -13 && (err > worst_tail || isnan(err))) worst_tail = worse_of(worst_tail, err), at_tail = x[i];
            }
        }
        cr_assert(worst_main <= 7, "%s gelu slope: %.3f ulp of its terms at %a", level, worst_main, (double)at_main);
        cr_assert(worst_tail <= 13, "%s gelu slope: %.3f ulp of its terms at %a", level, worst_tail, (double)at_tail);
    }
    ag__isa_force(NULL);
}

/* At +-inf, Phi(x) + x phi(x) is 1 + inf 0 and 0 - inf 0: NaN, as in
 * double (and PyTorch); NaN stays NaN; far out it is 1 and 0. */
Test(fastmath, gelu_slope_special_values)
{
    EACH_LEVEL {
        float x[] = {NAN, INFINITY, -INFINITY, 20.0f, -20.0f, FLT_MAX, -FLT_MAX}, y[7], s[7];
        ag__gelu_slope_floats(7, x, y, s);
        cr_assert(isnan(s[0]) && isnan(s[1]) && isnan(s[2]), "%s gelu slope: %a %a %a", level, (double)s[0],
                  (double)s[1], (double)s[2]);
        cr_assert(s[3] == 1 && s[4] == 0 && s[5] == 1 && s[6] == 0, "%s gelu slope far out: %a %a %a %a", level,
                  (double)s[3], (double)s[4], (double)s[5], (double)s[6]);
    }
    ag__isa_force(NULL);
}

/* GELU and its slope give each x the same bits wherever it stands: in
 * a long array or alone (the padded last block), whatever the level. */
Test(fastmath, gelu_same_bits_at_every_position)
{
    enum { N = 4099 };
    static float x[N], y[N], s[N], y0[N];
    for (int i = 0; i < N; i++) x[i] = (float)(-16 + 32.0 * i / N);
    EACH_LEVEL {
        ag__gelu_floats(N, x, y0);
        ag__gelu_slope_floats(N, x, y, s);
        for (int i = 0; i < N; i++) {
            float y1, y2, s1;
            ag__gelu_floats(1, &x[i], &y1);
            ag__gelu_slope_floats(1, &x[i], &y2, &s1);
            cr_assert(memcmp(&y1, &y0[i], sizeof y1) == 0 && memcmp(&y2, &y[i], sizeof y2) == 0 &&
                          memcmp(&s1, &s[i], sizeof s1) == 0,
                      "%s: gelu(%a) alone %a / %a, in the array %a / %a", level, (double)x[i], (double)y1, (double)s1,
                      (double)y[i], (double)s[i]);
        }
    }
    ag__isa_force(NULL);
}

/* GELU's tanh form in double: x s, s = 1 / (1 + e^w), w = -2 k (x + c x^3). */
static double gelu_tanh_ref(double x)
{
    return x / (1 + exp(-2 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* dy/dx of it in double: s + x 2 s (1 - s) k (1 + 3 c x^2), and the size
 * of its terms, |s| + |x 2 s (1 - s) k (1 + 3 c x^2)| (the sum cancels near
 * its root, where no relative bound holds). */
static double gelu_tanh_grad_ref(double x, double *terms)
{
    double s = 1 / (1 + exp(-2 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    double t = x * 2 * s * (1 - s) * 0.79788456080286535588 * (1 + 3 * 0.044715 * x * x);
    *terms = fabs(s) + fabs(t);
    return s + t;
}

/* The worst errors of GELU's tanh form and its gradient on a dense sweep:
 * every float of [-3, -2.25], [-5, -4.5] and [-10.25, -10], where the
 * errors peak (the last where s = e^w / (1 + e^w) is a subnormal float),
 * and a grid of 2^22 points over [-15, 10]. */
static void gelu_tanh_dense(worst *fwd, worst *grad)
{
    enum { B = 1 << 16, GRID = 1 << 22 };
    static const float from[] = {-3.0f, -5.0f, -10.25f}, to[] = {-2.25f, -4.5f, -10.0f};
    static float x[B], y[B], y0[B], dx[B];
    *fwd = *grad = (worst){0, 0};
    int range = 0, m = 0;
    float v = from[0];
    for (long g = 0; g < GRID || range < 3;) {
        if (range < 3) { /* every float of the range, then the next */
            x[m++] = v;
            v = nextafterf(v, INFINITY);
            if (v > to[range] && ++range < 3) v = from[range];
        } else {
            x[m++] = (float)(-15 + 25.0 * (double)g++ / GRID);
        }
        if (m == B || (g == GRID && range == 3)) {
            ag__gelu_tanh_floats((size_t)m, x, y0);
            ag__gelu_tanh_slope_floats((size_t)m, x, y, dx); /* dx = the slope: dy = 1 */
            cr_assert(memcmp(y, y0, (size_t)m * sizeof *y) == 0, "%s: gelu_tanh with its slope changed y", level);
            for (int i = 0; i < m; i++) {
                double terms, want = gelu_tanh_grad_ref(x[i], &terms);
                check_one("gelu_tanh", x[i], y[i], gelu_tanh_ref(x[i]), fwd);
                double e = fabs(dx[i] - want) / ulp_at(terms);
                if (e > grad->ulps) grad->ulps = e, grad->at = x[i];
            }
            m = 0;
        }
    }
}

/* Over the whole float range and its edges, and on the dense sweep. */
Test(fastmath, gelu_tanh_within_3_ulp)
{
    EACH_LEVEL {
        worst w = sweep("gelu_tanh", ag__gelu_tanh_floats, gelu_tanh_ref, -INFINITY), grad;
        cr_assert(w.ulps <= 3, "%s gelu_tanh: %.3f ulp at %a", level, w.ulps, (double)w.at);
        gelu_tanh_dense(&w, &grad);
        cr_assert(w.ulps <= 3, "%s gelu_tanh: %.3f ulp at %a (dense)", level, w.ulps, (double)w.at);
    }
    ag__isa_force(NULL);
}

/* Its backward against the double result on the dense sweep, relative
 * to the terms' size, and every tail length. */
Test(fastmath, gelu_tanh_gradient_within_6_ulp_of_its_terms)
{
    EACH_LEVEL {
        worst fwd, w;
        gelu_tanh_dense(&fwd, &w);
        cr_assert(w.ulps <= 6, "%s gelu_tanh grad: %.3f ulp at %a", level, w.ulps, (double)w.at);
        float x[48], y[48], d[48];
        for (int n = 1; n <= 40; n++) { /* every tail length: the padded copies must not touch past n */
            for (int i = 0; i < 48; i++) x[i] = (float)(i - 20) * 0.25f, y[i] = -7, d[i] = 3;
            ag__gelu_tanh_slope_floats((size_t)n, x, y, d);
            for (int i = n; i < 48; i++)
                cr_assert(y[i] == -7 && d[i] == 3, "%s: n = %d wrote past the end at %d", level, n, i);
            for (int i = 0; i < n; i++) {
                double terms, g = gelu_tanh_grad_ref(x[i], &terms);
                cr_assert(fabs(y[i] - gelu_tanh_ref(x[i])) <= 4 * FLT_EPSILON * (fabs(x[i]) + 1),
                          "%s: n = %d: y[%d] = %.9g, want %.9g", level, n, i, (double)y[i], gelu_tanh_ref(x[i]));
                cr_assert(fabs(d[i] - g) <= 4 * FLT_EPSILON, "%s: n = %d: slope[%d] = %.9g, want %.9g", level, n, i,
                          (double)d[i], g);
            }
        }
    }
    ag__isa_force(NULL);
}
#endif
