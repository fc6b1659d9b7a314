/* tests/test_sdpa_bias.c: ag_scaled_dot_product_attention's additive mask
 * (cfg.bias, PyTorch's float attn_mask) against PyTorch.
 *
 * tests/reference/make_sdpa_fixtures.py computed softmax(where(keep,
 * scale Q K^T + bias, fill)) V in float64, a row with nothing above -inf
 * giving 0: random biases with -inf entries and rows all -inf, ALiBi's
 * slopes, padding as -inf, of shapes [T, S], [B, 1, 1, S], [1, H, T, S] and
 * [B, H, T, S], with and without a 0/1 mask, fills -inf and -1e9, the
 * causal rule both ways, grouped-query heads, T and S from 1 to 300 across
 * the seam at 256 keys (P kept, the flash kernel; the toy heads' kernel
 * declines a bias), and the gradients of L = sum(out * w), the bias's
 * too.  Each case runs in both kernel modes and both layouts, with the
 * bias a constant and needing its gradient.  Then dM from the kernels
 * against the reference's (every shape of M, causal both ways, padding,
 * across the seam) and across threads, finite differences in double, the
 * NaN rule, the path, and the error paths. */
#include "sdpa_check.h"
#include "core/internal.h"

#include <math.h>

#define BIAS_FIXTURE "tests/reference/sdpa_bias.safetensors"

static const char *const cases[] = {"rand_ts", "rand_ts_mask", "pad",         "alibi",     "full",    "toy",
                                    "seam_255", "seam_1",      "seam_alibi", "seam_full", "seam_300"};

Test(sdpa_bias, additive_masks_match_pytorch_in_every_mode_and_layout)
{
    check_cases(BIAS_FIXTURE, cases, sizeof cases / sizeof *cases, 1);
}

/* A bias of 0 and -inf is the 0/1 mask of its finite entries (fill -inf):
 * the same values and gradients, on each path. */
Test(sdpa_bias, a_bias_of_0_and_minus_inf_is_the_mask)
{
    const int Ss[3] = {16, 100, 300}; /* toy heads, P kept, flash */
    for (int i = 0; i < 3; i++) {
        int S = Ss[i], T = 20;
        ag_graph *g = ag_graph_new();
        ag_tensor *mask = noise(g, AG_SHAPE(2, 1, T, S), 9), *bias = ag_tensor_new(g, AG_SHAPE(2, 1, T, S));
        for (size_t e = 0; e < mask->size; e++) {
            mask->data[e] = mask->data[e] > -1.2;
            bias->data[e] = mask->data[e] != 0 ? 0 : -INFINITY;
        }
        ag_tensor *y[2], *in[2][3];
        for (int run = 0; run < 2; run++) {
            in[run][0] = noise(g, AG_SHAPE(2, 4, T, 8), 1), in[run][1] = noise(g, AG_SHAPE(2, 2, S, 8), 2);
            in[run][2] = noise(g, AG_SHAPE(2, 2, S, 8), 3);
            for (int x = 0; x < 3; x++) ag_set_requires_grad(in[run][x], 1);
            ag_sdpa_config c = {.causal = AG_CAUSAL_BOTTOM_RIGHT};
            if (run) c.bias = bias;
            else c.mask = mask;
            y[run] = ag_scaled_dot_product_attention(g, in[run][0], in[run][1], in[run][2], &c);
            cr_assert_not_null(y[run], "%s", ag_graph_error(g));
            cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y[run], y[run]))), AG_OK, "%s", ag_graph_error(g));
        }
        double *want = malloc(y[0]->size * sizeof *want);
        for (size_t e = 0; e < y[0]->size; e++) want[e] = y[0]->data[e];
        expect_close(y[1]->data, want, y[1]->size, TOL(1e-14, 1e-6), TOL(1e-12, 1e-5), "values");
        free(want);
        for (int x = 0; x < 3; x++) {
            want = malloc(in[0][x]->size * sizeof *want);
            for (size_t e = 0; e < in[0][x]->size; e++) want[e] = in[0][x]->grad[e];
            expect_close(in[1][x]->grad, want, in[1][x]->size, TOL(1e-13, 1e-5), TOL(1e-11, 1e-4), "gradients");
            free(want);
        }
        ag_graph_free(g);
    }
}

/* A NaN in the bias at (t0, s0) makes row t0 NaN and no other, in both
 * modes and on each path, whether a mask hides other keys or not. */
Test(sdpa_bias, a_nan_in_the_bias_reaches_its_querys_row_only)
{
    const int Ss[2] = {100, 300}, t0 = 7, s0 = 5;
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < 2; i++)
            for (int masked = 0; masked < 2; masked++) {
                ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
                int S = Ss[i], T = 70;
                ag_graph *g = ag_graph_new();
                ag_tensor *q = noise(g, AG_SHAPE(1, 2, T, 8), 1), *k = noise(g, AG_SHAPE(1, 2, S, 8), 2);
                ag_tensor *v = noise(g, AG_SHAPE(1, 2, S, 8), 3), *bias = noise(g, AG_SHAPE(T, S), 4), *mask = NULL;
                ag_set_requires_grad(q, 1), ag_set_requires_grad(k, 1), ag_set_requires_grad(v, 1);
                if (masked) {
                    mask = ag_tensor_new(g, AG_SHAPE(1, S));
                    for (int s = 0; s < S; s++) mask->data[s] = s % 3 != 1;
                }
                ag_sdpa_config c = {.mask = mask, .bias = bias};
                ag_tensor *clean = ag_scaled_dot_product_attention(g, q, k, v, &c);
                bias = noise(g, AG_SHAPE(T, S), 4);
                bias->data[(size_t)t0 * S + s0] = NAN;
                c.bias = bias;
                ag_tensor *y = ag_scaled_dot_product_attention(g, q, k, v, &c);
                cr_assert_not_null(y, "%s", ag_graph_error(g));
                cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK);
                for (int h = 0; h < 2; h++)
                    for (int t = 0; t < T; t++)
                        for (int e = 0; e < 8; e++) {
                            size_t at = ((size_t)h * T + (size_t)t) * 8 + (size_t)e;
                            if (t == t0) {
                                cr_assert(isnan(y->data[at]), "mode %d S %d masked %d: row %d", mode, S, masked, t);
                                continue;
                            }
                            cr_assert(fabs(y->data[at] - clean->data[at]) <= TOL(1e-13, 1e-6),
                                      "mode %d S %d masked %d: row %d: %g, without the NaN %g", mode, S, masked, t,
                                      (double)y->data[at], (double)clean->data[at]);
                            cr_assert(isfinite(q->grad[at]), "mode %d S %d masked %d: dq row %d", mode, S, masked, t);
                        }
                ag_graph_free(g);
            }
    ag_set_kernels(AG_KERNELS_FAST);
}

Test(sdpa_bias, bad_bias_is_a_clear_error)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(1, 4, 3, 4)), *k = ag_tensor_new(g, AG_SHAPE(1, 2, 5, 4));
    ag_sdpa_config c = {.bias = ag_tensor_new(g, AG_SHAPE(3, 4))};
    cr_assert_null(ag_scaled_dot_product_attention(g, q, k, k, &c));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "attention: the additive mask (bias) [3, 4] does not broadcast to the "
                                        "scores' [B, H, T, S] = [1, 4, 3, 5]");
    ag_graph_reset(g);
    q = ag_tensor_new(g, AG_SHAPE(1, 4, 3, 4)), k = ag_tensor_new(g, AG_SHAPE(1, 2, 5, 4));
    c.bias = ag_tensor_new(g, AG_SHAPE(1, 1, 1, 1, 5));
    cr_assert_null(ag_scaled_dot_product_attention(g, q, k, k, &c));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE, "%s", ag_graph_error(g));
    ag_graph_free(g);
}

/* A bias that needs a gradient is the node's fourth input and keeps the
 * kernels' path; a bias that does not, or a graph recording no gradients,
 * leaves it three inputs. */
Test(sdpa_bias, a_bias_needing_a_gradient_keeps_the_kernels_path)
{
    ag_set_kernels(AG_KERNELS_FAST);
    ag_graph *g = ag_graph_new();
    ag_tensor *q = noise(g, AG_SHAPE(1, 4, 3, 4), 1), *k = noise(g, AG_SHAPE(1, 2, 300, 4), 2);
    ag_tensor *bias = noise(g, AG_SHAPE(4, 3, 300), 3);
    ag_sdpa_config c = {.bias = bias};
    ag_tensor *y = ag_scaled_dot_product_attention(g, q, k, k, &c);
    cr_assert_str_eq(ag_attention_path(y, NULL), "flash");
    cr_assert_eq(y->nsrc, 3);
    ag_set_requires_grad(bias, 1);
    y = ag_scaled_dot_product_attention(g, q, k, k, &c);
    cr_assert_str_eq(ag_attention_path(y, NULL), "flash");
    cr_assert_eq(y->nsrc, 4);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, y))), AG_OK, "%s", ag_graph_error(g));
    cr_assert_not_null(bias->grad);
    ag_graph_set_grad(g, 0);
    y = ag_scaled_dot_product_attention(g, q, k, k, &c);
    cr_assert_str_eq(ag_attention_path(y, NULL), "flash");
    cr_assert_eq(y->nsrc, 3);
    ag_graph_free(g);
}

/* dM from the kernels.  One call: 4 query heads over 2, D 8, B 2, T
 * queries, S keys; M (every 13th entry -inf) of shape sh:
 * 0 [T, S], 1 [1, 1, T, S], 2 [B, 1, T, S], 3 [B, H, T, S], 4 [1, H, 1, S];
 * rule 0 none, 1 causal top-left, 2 causal bottom-right, 3 a padding mask
 * [B, 1, 1, S] hiding sentence 1's last third.  Out: y, then the
 * gradients of q, k, v and M for L = sum(y y), in doubles; the path. */
enum { BG_OUTS = 5 };

/* M's size for shape sh: B H T S over the axes it keeps */
static size_t bias_size(int T, int S, int sh)
{
    const int heads[5] = {1, 1, 2, 8, 4}; /* B H */
    return (size_t)heads[sh] * (size_t)(sh == 4 ? 1 : T) * (size_t)S;
}

static const char *bias_grad_run(int T, int S, int sh, int rule, double **out)
{
    const int nd[5] = {2, 4, 4, 4, 4}, shapes[5][4] = {{T, S}, {1, 1, T, S}, {2, 1, T, S}, {2, 4, T, S}, {1, 4, 1, S}};
    ag_graph *g = ag_graph_new();
    ag_tensor *x[BG_OUTS] = {NULL, noise(g, AG_SHAPE(2, 4, T, 8), 1), noise(g, AG_SHAPE(2, 2, S, 8), 2),
                             noise(g, AG_SHAPE(2, 2, S, 8), 3), noise(g, nd[sh], shapes[sh], 4)};
    for (size_t e = 0; e < x[4]->size; e += 13) x[4]->data[e] = -INFINITY;
    for (int i = 1; i < BG_OUTS; i++) ag_set_requires_grad(x[i], 1);
    ag_sdpa_config c = {.bias = x[4], .causal = rule == 1 ? AG_CAUSAL_TOP_LEFT : rule == 2 ? AG_CAUSAL_BOTTOM_RIGHT : 0};
    if (rule == 3) {
        c.mask = ag_tensor_new(g, AG_SHAPE(2, 1, 1, S));
        for (int s = 0; s < 2 * S; s++) c.mask->data[s] = s < S || s - S < 2 * S / 3;
    }
    ag_tensor *y = x[0] = ag_scaled_dot_product_attention(g, x[1], x[2], x[3], &c);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, y))), AG_OK, "%s", ag_graph_error(g));
    const char *path = ag_attention_path(y, NULL);
    for (int i = 0; i < BG_OUTS; i++) {
        const ag_real *d = i ? x[i]->grad : y->data;
        out[i] = malloc(x[i]->size * sizeof **out);
        for (size_t e = 0; e < x[i]->size; e++) out[i][e] = d[e];
    }
    ag_graph_free(g);
    return path;
}

/* The kernels (P kept at S <= 256, flash beyond) against the reference,
 * every output, dM above all, for each shape of M and each rule; the
 * kernels on 2 threads, whose heads share M in most shapes. */
Test(sdpa_bias, the_kernels_bias_gradient_matches_the_reference)
{
    static const char *const names[BG_OUTS] = {"y", "dq", "dk", "dv", "dM"};
    const int Ss[5] = {8, 255, 256, 257, 513};
    size_t min_work = ag__thread_min_work;
    ag__thread_min_work = 1;
    ag_set_threads(2);
    for (int i = 0; i < 5; i++)
        for (int sh = 0; sh < 5; sh++)
            for (int rule = 0; rule < 4; rule++) {
                int S = Ss[i], T = S < 70 ? S : 70;
                size_t n[BG_OUTS] = {(size_t)2 * 4 * T * 8, (size_t)2 * 4 * T * 8, (size_t)2 * 2 * S * 8,
                                     (size_t)2 * 2 * S * 8, bias_size(T, S, sh)};
                double *want[BG_OUTS], *got[BG_OUTS];
                ag_set_kernels(AG_KERNELS_REFERENCE);
                cr_assert_str_eq(bias_grad_run(T, S, sh, rule, want), "plain");
                ag_set_kernels(AG_KERNELS_FAST);
                const char *path = bias_grad_run(T, S, sh, rule, got);
                cr_assert_str_eq(path, S <= 256 ? "P kept" : "flash", "S %d shape %d rule %d", S, sh, rule);
                for (int o = 0; o < BG_OUTS; o++) {
                    char what[64];
                    snprintf(what, sizeof what, "S %d shape %d rule %d: %s", S, sh, rule, names[o]);
                    for (size_t e = 0; e < n[o]; e++) {
                        double d = fabs(got[o][e] - want[o][e]);
                        cr_assert(d <= TOL(1e-12, 2e-5) + TOL(1e-10, 1e-4) * fabs(want[o][e]) ||
                                      (isinf(want[o][e]) && got[o][e] == want[o][e]),
                                  "%s[%zu] = %.10g, want %.10g", what, e, got[o][e], want[o][e]);
                    }
                    free(want[o]), free(got[o]);
                }
            }
    ag_set_threads(1);
    ag__thread_min_work = min_work;
}

/* A bias shared by the heads that two threads take: the same dM at 1 and
 * 2 threads, and the same bits at 2 threads run after run. */
Test(sdpa_bias, a_shared_bias_gradient_is_reproducible_across_threads)
{
    const int Ss[2] = {200, 300}; /* P kept, flash */
    size_t min_work = ag__thread_min_work;
    ag__thread_min_work = 1;
    for (int i = 0; i < 2; i++)
        for (int sh = 0; sh < 5; sh += 4) { /* [T, S] and [1, H, 1, S] */
            double *r[3][BG_OUTS];
            for (int run = 0; run < 3; run++) {
                ag_set_threads(run ? 2 : 1);
                bias_grad_run(128, Ss[i], sh, 2, r[run]);
            }
            size_t n = bias_size(128, Ss[i], sh);
            for (size_t e = 0; e < n; e++) {
                cr_assert(fabs(r[1][4][e] - r[0][4][e]) <= TOL(1e-12, 2e-5) + TOL(1e-10, 1e-4) * fabs(r[0][4][e]) ||
                              r[1][4][e] == r[0][4][e],
                          "S %d shape %d: dM[%zu] %.10g at 2 threads, %.10g at 1", Ss[i], sh, e, r[1][4][e],
                          r[0][4][e]);
                cr_assert(memcmp(&r[1][4][e], &r[2][4][e], sizeof(double)) == 0, "S %d shape %d: dM[%zu] %.17g then %.17g",
                          Ss[i], sh, e, r[1][4][e], r[2][4][e]);
            }
            for (int run = 0; run < 3; run++)
                for (int o = 0; o < BG_OUTS; o++) free(r[run][o]);
        }
    ag_set_threads(1);
    ag__thread_min_work = min_work;
}

#ifdef AG_DOUBLE
Test(sdpa_bias, gradients_pass_finite_differences_across_the_seam)
{
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        for (int bias = 1; bias <= 2; bias++) { /* a constant with -inf; a parameter */
            gradcheck_sdpa(4, 6, AG_CAUSAL_BOTTOM_RIGHT, 0, bias);
            gradcheck_sdpa(1, 257, AG_CAUSAL_NONE, 0, bias); /* the flash kernel (bias 1) */
            gradcheck_sdpa(3, 260, AG_CAUSAL_BOTTOM_RIGHT, 0, bias);
            gradcheck_sdpa(5, 5, AG_CAUSAL_TOP_LEFT, 0, bias);
        }
    }
    ag_set_kernels(AG_KERNELS_FAST); /* dM through the kernels: M [T, S] shared by the 6 heads */
    gradcheck_sdpa(4, 6, AG_CAUSAL_BOTTOM_RIGHT, 0, 3);
    gradcheck_sdpa(3, 260, AG_CAUSAL_TOP_LEFT, 0, 3);
    ag_set_kernels(AG_KERNELS_FAST);
}
#endif
