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
 * bias a constant and needing its gradient (the plain code).  Then finite
 * differences in double, the NaN rule, the path, and the error paths. */
#include "sdpa_check.h"

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

/* A bias that needs a gradient is the node's fourth input and takes the
 * plain code; one that does not, or on a graph recording no gradients,
 * leaves the path as it was. */
Test(sdpa_bias, a_bias_needing_a_gradient_takes_the_plain_code)
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
    cr_assert_str_eq(ag_attention_path(y, NULL), "plain");
    cr_assert_eq(y->nsrc, 4);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, y))), AG_OK, "%s", ag_graph_error(g));
    cr_assert_not_null(bias->grad);
    ag_graph_set_grad(g, 0);
    y = ag_scaled_dot_product_attention(g, q, k, k, &c);
    cr_assert_str_eq(ag_attention_path(y, NULL), "flash");
    ag_graph_free(g);
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
    ag_set_kernels(AG_KERNELS_FAST);
}
#endif
