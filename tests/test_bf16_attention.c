/* tests/test_bf16_attention.c: attention's own products under bf16
 * (ops/attention.c, ops/matmul.c on heads).
 *
 * Each path (the fused node; Q K^T and P V as matmul nodes on the heads;
 * the textbook's public ops) in both kernel modes, forward and backward,
 * against a double computation of the same rounded operands (the flash
 * kernel's past 256 keys too): S = scale bf16(Q) bf16(K)^T,
 * O = bf16(P Z) bf16(V); dV = bf16(P Z)^T bf16(dO), dP = Z bf16(dO)
 * bf16(V)^T, dA = scale P (dP - rowsum(dP P)), dQ = bf16(dA) bf16(K),
 * dK = bf16(dA)^T bf16(Q).  P and dA are computed in ag_real from rounded
 * sums, so their values differ from the double ones by a bound the test
 * carries along (delta below); bf16 rounding is monotone, so the rounded
 * operand the code used lies between the roundings of the double value
 * minus and plus delta, and only where those two differ (a value near a
 * midpoint between bf16 numbers) may it be either.  Every sum is then
 * held to gamma(n) = n u / (1 - n u) (u ag_real's unit roundoff) times
 * the sum of its terms' magnitudes, plus those spans.  A rounding left
 * out moves the results by up to 2^-9 of each term, far outside. */
#include "common.h"
#include "core/internal.h"
#include "kernels/kernels.h"

#include <float.h>

static const double u_real = sizeof(ag_real) == 4 ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
static double gamma_n(int n, double u) { return n * u / (1 - n * u); }
/* a product's operand: rounded to bf16 */
static double rb(double x) { return (double)ag_bf16_round((float)x); }

enum { B = 2, T = 4, D = 8, DV = 4 };

typedef struct fixture {
    int S, H, Hkv;
    bool causal, padding;
    double dropout;
} fixture;

/* key s seen by query t of sentence b: padding (sentence 1 sees S - 3
 * keys), causal bottom-right */
static bool seen(const fixture *f, int b, int t, int s)
{
    if (f->padding && b == 1 && s >= f->S - 3) return false;
    return !f->causal || s <= t + f->S - T;
}

/* inputs [B, T or S, H or Hkv, D or DV] (heads layout), all leaves */
typedef struct inputs { ag_tensor *q, *k, *v, *dy; } inputs;

static inputs make_inputs(ag_graph *g, const fixture *f)
{
    ag_rng r;
    ag_rng_seed(&r, 7 + (uint64_t)f->S);
    inputs in = {ag_tensor_new(g, AG_SHAPE(B, T, f->H, D)), ag_tensor_new(g, AG_SHAPE(B, f->S, f->Hkv, D)),
                 ag_tensor_new(g, AG_SHAPE(B, f->S, f->Hkv, DV)), ag_tensor_new(g, AG_SHAPE(B, T, f->H, DV))};
    ag_tensor *all[] = {in.q, in.k, in.v, in.dy};
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < all[i]->size; j++) all[i]->data[j] = (ag_real)ag_rng_normal(&r);
    for (int i = 0; i < 3; i++) ag_set_requires_grad(all[i], 1);
    return in;
}

/* mask [B, 1, T, S] for the matmul path */
static ag_tensor *mask_of(ag_graph *g, const fixture *f)
{
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(B, 1, T, f->S));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int s = 0; s < f->S; s++) m->data[((size_t)b * T + t) * f->S + s] = seen(f, b, t, s);
    return m;
}

/* path 0: the fused node; path 1: Q K^T and P V as matmul nodes on the
 * heads, the scale and mask in masked_softmax; path 2: the textbook's
 * public ops (matmul, scale, masked_fill, softmax, matmul) on the heads
 * permuted to [B, H, T, D].  No dropout on paths 1 and 2.  *p: the
 * weights on path 1, else NULL. */
static ag_tensor *attend(ag_graph *g, const fixture *f, const inputs *in, int path, ag_tensor **p)
{
    double scale = 1 / sqrt((double)D);
    *p = NULL;
    if (path == 0) {
        ag_sdpa_config c = {.mask = f->padding ? mask_of(g, &(fixture){.S = f->S, .padding = true}) : NULL,
                            .causal = f->causal ? AG_CAUSAL_BOTTOM_RIGHT : AG_CAUSAL_NONE,
                            .dropout_p = f->dropout, .seed = 11, .heads_layout = 1};
        return ag_scaled_dot_product_attention(g, in->q, in->k, in->v, &c);
    }
    if (path == 2) {
        const int *bhtd = (int[]){0, 2, 1, 3};
        ag_tensor *y = ag_attention_textbook(g, ag_permute(g, in->q, bhtd), ag_permute(g, in->k, bhtd),
                                             ag_permute(g, in->v, bhtd), mask_of(g, f), -INFINITY, 0, NULL);
        return ag_permute(g, y, bhtd);
    }
    ag_tensor *s = ag__matmul_heads(g, in->q, in->k, 1, AG__MM_A | AG__MM_B);
    *p = ag__masked_softmax(g, s, scale, mask_of(g, f), -INFINITY);
    return ag__matmul_heads(g, *p, in->v, 0, AG__MM_B | AG__MM_Y);
}

/* element (b, t, h, c) of x [B, rows, heads, cols] */
static double at(const ag_tensor *x, int b, int t, int h, int c)
{
    return (double)x->data[(((size_t)b * x->shape[1] + t) * x->shape[2] + h) * x->shape[3] + c];
}
static size_t ix(const ag_tensor *x, int b, int t, int h, int c)
{
    return (((size_t)b * x->shape[1] + t) * x->shape[2] + h) * x->shape[3] + c;
}

/* |got - want| <= bound, with the names of where */
#define EXPECT(got, want, bound, ...)                                                                 \
    cr_assert(fabs((double)(got) - (want)) <= (bound), __VA_ARGS__)

/* the span of the operand the code rounded: rb(x - d) .. rb(x + d) */
static void span(double x, double d, double *lo, double *hi) { *lo = rb(x - d), *hi = rb(x + d); }

typedef struct acc { double want, mag, spread; } acc; /* a sum: double value, sum of |terms|, span */

static void add(acc *a, double lo, double hi, double mid, double w)
{
    a->want += mid * w, a->mag += fmax(fabs(lo), fabs(hi)) * fabs(w), a->spread += (hi - lo) * fabs(w);
}
static double bound(const acc *a, int n) { return a->spread + (gamma_n(n, u_real) + gamma_n(n, DBL_EPSILON)) * a->mag; }

/* dA = scale P (dP - dot)'s error: P's (rel P), dP's and dot's (e), the
 * scale's, and the products' own roundings */
static double da_err(double scale, double rel, double p, double diff, double e)
{
    return scale * (1 + 2 * u_real) * 1.01 * (rel * p * fabs(diff) + p * e) + 4 * u_real * scale * p * fabs(diff);
}

/* One head (b, h): the checks of the forward and backward, in double. */
static void check_head(const fixture *f, const inputs *in, const ag_tensor *y, const ag_tensor *pw, int b, int h,
                       const char *what, acc *ak, acc *av)
{
    const int S = f->S, hk = h / (f->H / f->Hkv);
    const double scale = 1 / sqrt((double)D), scale_err = 1 + 2 * u_real;
    ag__attn za = {.H = f->H, .dropout = f->dropout, .seed = 11};
    for (int t = 0; t < T; t++) {
        double a[512], ea[512], p[512], dp[512], edp[512], z[512], m = -INFINITY, sum = 0, e = 0;
        for (int s = 0; s < S; s++) { /* S = scale bf16(Q) bf16(K)^T: error gamma(D) |terms|, the scale's */
            double dot = 0, mag = 0;
            for (int d = 0; d < D; d++) {
                double w = rb(at(in->q, b, t, h, d)) * rb(at(in->k, b, s, hk, d));
                dot += w, mag += fabs(w);
            }
            a[s] = scale * dot, ea[s] = scale * scale_err * (gamma_n(D + 2, u_real) * mag);
            z[s] = ag__attn_kept(&za, (size_t)b * f->H + h, t, s);
            if (seen(f, b, t, s)) m = fmax(m, a[s]), e = fmax(e, ea[s]);
        }
        for (int s = 0; s < S; s++) sum += p[s] = seen(f, b, t, s) ? exp(a[s] - m) : 0;
        double rel = 2.01 * e + (S + 16) * u_real; /* P's relative error: the scores' shift, exp's, the sum's */
        for (int s = 0; s < S; s++) {
            p[s] /= sum;
            if (pw) EXPECT(pw->data[(((size_t)b * f->H + h) * T + t) * S + s], p[s], rel * p[s] + 1e-300,
                           "%s: P[%d, %d, %d, %d]", what, b, h, t, s);
        }
        double dot = 0, edot = 0; /* rowsum(dP P) and its error */
        for (int c = 0; c < DV; c++) { /* O = bf16(P Z) bf16(V) */
            acc o = {0};
            for (int s = 0; s < S; s++) {
                double lo, hi, x = p[s] * z[s];
                span(x, (rel + 3 * u_real) * x, &lo, &hi);
                add(&o, lo, hi, rb(x), rb(at(in->v, b, s, hk, c)));
            }
            EXPECT(at(y, b, t, h, c), o.want, bound(&o, S), "%s: O[%d, %d, %d, %d] = %.9g, want %.9g (bound %.3g)",
                   what, b, t, h, c, at(y, b, t, h, c), o.want, bound(&o, S));
        }
        for (int s = 0; s < S; s++) { /* dP = Z bf16(dO) bf16(V)^T */
            double w = 0, mag = 0;
            for (int c = 0; c < DV; c++) {
                double x = rb(at(in->dy, b, t, h, c)) * rb(at(in->v, b, s, hk, c));
                w += x, mag += fabs(x);
            }
            dp[s] = z[s] * w, edp[s] = z[s] * (gamma_n(DV + 2, u_real) * mag);
            dot += dp[s] * p[s];
            edot += (edp[s] * p[s] + fabs(dp[s]) * rel * p[s]) * 1.01 + gamma_n(S, u_real) * fabs(dp[s] * p[s]);
        }
        for (int s = 0; s < S; s++) {
            double lo, hi, x = p[s] * z[s]; /* dV += bf16(P Z)^T bf16(dO) */
            span(x, (rel + 3 * u_real) * x, &lo, &hi);
            for (int c = 0; c < DV; c++) add(&av[(size_t)s * DV + c], lo, hi, rb(x), rb(at(in->dy, b, t, h, c)));
            /* dA = scale P (dP - dot), within its error; dQ, dK from bf16(dA) */
            double da = scale * p[s] * (dp[s] - dot);
            span(da, da_err(scale, rel, p[s], dp[s] - dot, edp[s] + edot), &lo, &hi);
            for (int d = 0; d < D; d++) add(&ak[(size_t)s * D + d], lo, hi, rb(da), rb(at(in->q, b, t, h, d)));
        }
        for (int d = 0; d < D; d++) { /* dQ = bf16(dA) bf16(K) */
            acc q = {0};
            for (int s = 0; s < S; s++) {
                double lo, hi, da = scale * p[s] * (dp[s] - dot);
                span(da, da_err(scale, rel, p[s], dp[s] - dot, edp[s] + edot), &lo, &hi);
                add(&q, lo, hi, rb(da), rb(at(in->k, b, s, hk, d)));
            }
            double got = in->q->grad[ix(in->q, b, t, h, d)];
            EXPECT(got, q.want, bound(&q, S), "%s: dQ[%d, %d, %d, %d] = %.9g, want %.9g (bound %.3g)", what, b, t, h, d,
                   got, q.want, bound(&q, S));
        }
    }
}

/* The whole case on one path in the current kernel mode. */
static void check_case(const fixture *f, int path, const char *mode)
{
    char what[128];
    snprintf(what, sizeof what, "S %d H %d/%d%s%s dropout %g, %s, %s", f->S, f->H, f->Hkv, f->causal ? " causal" : "",
             f->padding ? " padding" : "", f->dropout, (const char *[]){"fused", "matmul nodes", "textbook"}[path], mode);
    /* the fused node past AG__FLASH_KEYS in the fast mode: the flash kernel */
    const bool flash = path == 0 && ag_get_kernels() == AG_KERNELS_FAST && f->S > 256;
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, AG_PRECISION_BF16);
    ag_graph_set_training(g, 1);
    inputs in = make_inputs(g, f);
    ag_tensor *pw, *y = attend(g, f, &in, path, &pw);
    cr_assert_not_null(y, "%s: %s", what, ag_graph_error(g));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, in.dy))), AG_OK, "%s", ag_graph_error(g));
    const int S = f->S, G = f->H / f->Hkv;
    for (int b = 0; b < B; b++)
        for (int hk = 0; hk < f->Hkv; hk++) { /* dK, dV sum over the G query heads of key head hk */
            acc *ak = calloc((size_t)S * D, sizeof *ak), *av = calloc((size_t)S * DV, sizeof *av);
            for (int h = hk * G; h < (hk + 1) * G; h++) check_head(f, &in, y, pw, b, h, what, ak, av);
            for (int s = 0; s < S; s++) {
                for (int d = 0; d < D; d++) {
                    const acc *x = &ak[(size_t)s * D + d];
                    double got = in.k->grad[ix(in.k, b, s, hk, d)];
                    EXPECT(got, x->want, bound(x, G * T), "%s: dK[%d, %d, %d, %d] = %.9g, want %.9g (bound %.3g)", what,
                           b, s, hk, d, got, x->want, bound(x, G * T));
                }
                for (int c = 0; c < DV; c++) {
                    const acc *x = &av[(size_t)s * DV + c];
                    double got = in.v->grad[ix(in.v, b, s, hk, c)];
                    EXPECT(got, x->want, bound(x, G * T), "%s: dV[%d, %d, %d, %d] = %.9g, want %.9g (bound %.3g)", what,
                           b, s, hk, c, got, x->want, bound(x, G * T));
                }
            }
            free(ak), free(av);
        }
    if (path == 0) /* the path the case was meant to test */
        cr_assert_str_eq(ag_attention_path(y, NULL),
                         ag_get_kernels() != AG_KERNELS_FAST ? "plain" : flash ? "flash" : "P kept", "%s", what);
    ag_graph_free(g);
}

/* the keys around the flash kernel's seam (AG__FLASH_KEYS = 256) */
static const int key_counts[] = {8, 255, 256, 257, 300};

Test(bf16_attention, every_path_both_modes_against_double_on_rounded_operands)
{
    for (int mode = 0; mode < 2; mode++) { /* CI runs under AG_KERNELS=reference too: each mode set here */
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        for (size_t i = 0; i < sizeof key_counts / sizeof *key_counts; i++) {
            int S = key_counts[i];
            const fixture fs[] = {
                {S, 2, 2, false, false, 0}, {S, 2, 2, true, true, 0}, /* every path */
                {S, 4, 2, true, false, 0}, {S, 2, 1, false, true, 0.25}, /* GQA, dropout: the fused node */
            };
            for (size_t c = 0; c < 4; c++)
                for (int path = 0; path < (c < 2 ? 3 : 1); path++)
                    check_case(&fs[c], path, mode ? "reference" : "fast");
        }
    }
    ag_set_kernels(AG_KERNELS_FAST);
}

/* The fused node's output and gradients, bf16 against fp32.  Each rounded
 * operand is off by at most u = 2^-8 relative; the longest path (dQ, dK)
 * holds six: Q and K in the scores (through the softmax, whose
 * derivative's row sums are at most 1, times scores of order 1 here),
 * dO and V in dP, dA and K (or Q) in the product.  Normwise, as
 * tests/test_bf16.c's two layers, the tolerance is 8 u. */
static void fused_grads(ag_precision prec, ag_real *out, size_t *n)
{
    const fixture f = {256, 2, 2, true, true, 0}; /* the P-kept kernel's longest rows: it rounds */
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, prec);
    inputs in = make_inputs(g, &f);
    ag_tensor *pw, *y = attend(g, &f, &in, 0, &pw);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, in.dy))), AG_OK, "%s", ag_graph_error(g));
    const ag_real *parts[] = {y->data, in.q->grad, in.k->grad, in.v->grad};
    size_t sizes[] = {y->size, in.q->size, in.k->size, in.v->size}, at = 0;
    for (int i = 0; i < 4; i++) memcpy(out + at, parts[i], sizes[i] * sizeof *out), n[i] = sizes[i], at += sizes[i];
    ag_graph_free(g);
}

Test(bf16_attention, a_bf16_graph_within_8_bf16_roundoffs_of_fp32s)
{
    static ag_real g16[40000], g32[40000];
    size_t n16[4], n32[4], at = 0;
    fused_grads(AG_PRECISION_BF16, g16, n16);
    fused_grads(AG_PRECISION_FP32, g32, n32);
    const char *names[] = {"O", "dQ", "dK", "dV"};
    const double u = 1.0 / 256;
    for (int t = 0; t < 4; t++) {
        double d2 = 0, g2 = 0;
        for (size_t i = at; i < at + n32[t]; i++)
            d2 += ((double)g16[i] - g32[i]) * ((double)g16[i] - g32[i]), g2 += (double)g32[i] * g32[i];
        double rel = sqrt(d2 / g2);
        cr_assert(rel <= 8 * u, "%s: relative difference %.3g, tolerance %.3g", names[t], rel, 8 * u);
        cr_assert(rel > 64 * u_real, "%s: bf16 and fp32 agree to %.3g: no bf16 rounding happened?", names[t], rel);
        at += n32[t];
    }
}
