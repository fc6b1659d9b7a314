/* tests/test_sdpa.c: ag_scaled_dot_product_attention against PyTorch.
 *
 * tests/reference/make_sdpa_fixtures.py computed softmax(where(keep,
 * scale Q K^T, fill)) V in float64 with the key/value heads repeated
 * (grouped-query attention: 12 query heads over 4 and over 1), the causal
 * rule aligned top-left and bottom-right, masks with fully masked rows,
 * fills -inf and -1e9, on both sides of the seam at 256 keys (P kept, the
 * flash kernel), and the gradients of L = sum(out * w).  Each case runs
 * in both kernel modes and both layouts (PyTorch's [B, H, T, D] and the
 * heads layout [B, T, H, D], read in place).  Then finite differences in
 * double, and the error paths. */
#include "sdpa_check.h"

#include <math.h>

#define SDPA_FIXTURE "tests/reference/sdpa.safetensors"

static const char *const cases[] = {"gqa4",      "mqa1",          "lower_right",     "dead_uniform",
                                    "dead_zero", "seam_mask",     "seam_top_left",   "seam_lower_right"};

Test(sdpa, grouped_query_heads_match_pytorch_in_every_mode_and_layout)
{
    check_cases(SDPA_FIXTURE, cases, sizeof cases / sizeof *cases, 0);
}

/* t's values as doubles (the caller frees them). */
static double *as_doubles(const ag_tensor *t)
{
    double *d = malloc(t->size * sizeof *d);
    for (size_t i = 0; i < t->size; i++) d[i] = t->data[i];
    return d;
}

/* ag_attention calls it: the same numbers as the three nodes it no longer
 * builds (asked for the weights, it still builds them). */
Test(sdpa, ag_attention_is_the_fused_call_unless_weights_are_asked)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *q = noise(g, AG_SHAPE(3, 5, 4), 1), *k = noise(g, AG_SHAPE(3, 6, 4), 2);
    ag_tensor *v = noise(g, AG_SHAPE(3, 6, 2), 3), *mask = ag_padding_mask(g, (int[]){6, 2, 0}, 3, 0, 5, 6);
    ag_tensor *m3 = ag_reshape(g, mask, AG_SHAPE(3, 1, 6)), *weights = NULL;
    int before = ag_graph_node_count(g);
    ag_tensor *fused = ag_attention(g, q, k, v, m3, -INFINITY, 0, NULL);
    cr_assert_not_null(fused, "%s", ag_graph_error(g));
    int fused_nodes = ag_graph_node_count(g) - before;
    ag_tensor *kept = ag_attention(g, q, k, v, m3, -INFINITY, 0, &weights);
    cr_assert_not_null(weights);
    cr_assert_eq(fused->ndim, 3);
    cr_assert_eq(fused->shape[2], 2);
    double *want = as_doubles(kept);
    expect_close(fused->data, want, fused->size, TOL(1e-14, 1e-6), TOL(1e-12, 1e-5), "ag_attention");
    free(want);
    cr_assert_leq(fused_nodes, 5, "views and one attention node, got %d nodes", fused_nodes);
    for (int i = 20; i < 30; i++) cr_assert_eq(fused->data[i], 0, "sentence 2 sees no key: 0"); /* [2, t, :] */
    ag_graph_free(g);
}

Test(sdpa, bad_input_is_a_clear_error)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(1, 6, 3, 4)), *k = ag_tensor_new(g, AG_SHAPE(1, 4, 5, 4));
    cr_assert_null(ag_scaled_dot_product_attention(g, q, k, k, NULL));
    cr_assert_str_eq(ag_graph_error(g), "attention: q [1, 6, 3, 4] has 6 heads, not a multiple of the 4 of "
                                        "k [1, 4, 5, 4] and v [1, 4, 5, 4]");
    ag_graph_reset(g);
    q = ag_tensor_new(g, AG_SHAPE(1, 4, 3, 4)), k = ag_tensor_new(g, AG_SHAPE(1, 2, 5, 8));
    cr_assert_null(ag_scaled_dot_product_attention(g, q, k, k, NULL));
    cr_assert_str_eq(ag_graph_error(g), "attention: q [1, 4, 3, 4], k [1, 2, 5, 8], v [1, 2, 5, 8] do not fit "
                                        "[B, H, T, D], [B, Hkv, S, D], [B, Hkv, S, Dv]");
    ag_graph_reset(g);
    q = ag_tensor_new(g, AG_SHAPE(1, 4, 3, 4)), k = ag_tensor_new(g, AG_SHAPE(1, 2, 5, 4));
    ag_sdpa_config bad = {.causal = (ag_causal)7};
    cr_assert_null(ag_scaled_dot_product_attention(g, q, k, k, &bad));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert(strstr(ag_graph_error(g), "causal 7") != NULL, "%s", ag_graph_error(g));
    ag_graph_reset(g);
    q = ag_tensor_new(g, AG_SHAPE(1, 4, 3, 4)), k = ag_tensor_new(g, AG_SHAPE(1, 2, 5, 4));
    ag_sdpa_config m = {.mask = ag_tensor_new(g, AG_SHAPE(3, 4))};
    cr_assert_null(ag_scaled_dot_product_attention(g, q, k, k, &m));
    cr_assert_str_eq(ag_graph_error(g),
                     "attention: mask [3, 4] does not broadcast to the scores' [B, H, T, S] = [1, 4, 3, 5]");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(sdpa, gradients_pass_finite_differences_across_the_seam)
{
    gradcheck_sdpa(4, 6, AG_CAUSAL_BOTTOM_RIGHT, 0, 0);
    gradcheck_sdpa(3, 260, AG_CAUSAL_BOTTOM_RIGHT, 0, 0); /* the flash kernel */
    gradcheck_sdpa(5, 5, AG_CAUSAL_TOP_LEFT, 0, 0);
}

/* With the seed fixed, dropout's mask is fixed: the same function at
 * every build, so finite differences check the backward's redrawn mask,
 * on the kernel that keeps P (blocks of 16 queries, then of 64) and on
 * the flash kernel. */
Test(sdpa, dropout_gradients_pass_finite_differences_with_the_mask_fixed)
{
    gradcheck_sdpa(4, 6, AG_CAUSAL_BOTTOM_RIGHT, 0.3, 0);
    gradcheck_sdpa(5, 40, AG_CAUSAL_TOP_LEFT, 0.3, 0);
    gradcheck_sdpa(3, 260, AG_CAUSAL_NONE, 0.3, 0);
}
#endif

/* The causal rule against the causal mask it replaces: the same bits,
 * values and gradients, on each kernel (head512's toy heads, P kept,
 * flash) and in both layouts. */
static void rule_equals_mask(int T, int heads_layout)
{
    ag_graph *g = ag_graph_new();
    int H = 2, D = 8;
    const int *shape = heads_layout ? (int[]){1, T, H, D} : (int[]){1, H, T, D};
    ag_tensor *y[2], *in[2][3];
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < 3; i++) in[run][i] = noise(g, 4, shape, 10 + (uint32_t)i), ag_set_requires_grad(in[run][i], 1);
        ag_sdpa_config c = {.heads_layout = heads_layout};
        if (run) c.causal = AG_CAUSAL_TOP_LEFT;
        else c.mask = ag_causal_mask(g, T, T);
        y[run] = ag_scaled_dot_product_attention(g, in[run][0], in[run][1], in[run][2], &c);
        cr_assert_not_null(y[run], "%s", ag_graph_error(g));
        cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y[run], y[run]))), AG_OK, "%s", ag_graph_error(g));
    }
    cr_assert_eq(memcmp(y[0]->data, y[1]->data, y[0]->size * sizeof(ag_real)), 0, "T %d: values", T);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(memcmp(in[0][i]->grad, in[1][i]->grad, in[0][i]->size * sizeof(ag_real)), 0, "T %d: grad %d", T, i);
    ag_graph_free(g);
}

Test(sdpa, the_causal_rule_gives_the_causal_masks_bits)
{
    for (int layout = 0; layout < 2; layout++) {
        rule_equals_mask(16, layout);  /* toy heads (AVX-512, float, heads layout) */
        rule_equals_mask(100, layout); /* P kept */
        rule_equals_mask(300, layout); /* flash */
    }
}

/* One NaN rule, at T = S = 1024 (the flash kernel's blocks of 64 queries
 * when the inputs are finite): a NaN in the key or the value (column 3)
 * of position 1000, hidden from some queries by the causal rule or from
 * all by the mask.  A query that cannot see it gets what it gets without
 * the NaN; one that can is NaN (its whole row for a key, column 3 for a
 * value). */
enum { NT = 1024, NPOS = 1000 };

static ag_tensor *nan_case(ag_graph *g, int which, bool masked, ag_tensor **q)
{
    ag_tensor *in[3];
    for (int i = 0; i < 3; i++) in[i] = noise(g, AG_SHAPE(1, 1, NT, 8), 20 + (uint32_t)i);
    ag_set_requires_grad(in[0], 1);
    if (which >= 0) in[which]->data[(size_t)NPOS * 8 + 3] = NAN;
    ag_sdpa_config c = {.causal = masked ? AG_CAUSAL_NONE : AG_CAUSAL_TOP_LEFT};
    if (masked) { /* key NPOS hidden from every query */
        c.mask = ag_tensor_new(g, AG_SHAPE(1, NT));
        for (int s = 0; s < NT; s++) c.mask->data[s] = s != NPOS;
    }
    *q = in[0];
    return ag_scaled_dot_product_attention(g, in[0], in[1], in[2], &c);
}

Test(sdpa, a_nan_reaches_the_queries_that_see_it_and_no_other)
{
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        for (int masked = 0; masked < 2; masked++)
            for (int which = 1; which < 3; which++) { /* the key, the value */
                ag_graph *g = ag_graph_new();
                ag_tensor *q1, *clean = nan_case(g, -1, masked, &q1), *y = nan_case(g, which, masked, &q1);
                cr_assert_not_null(y, "%s", ag_graph_error(g));
                cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK);
                for (int t = 0; t < NT; t++) {
                    bool sees = !masked && t >= NPOS;
                    for (int e = 0; e < 8; e++) {
                        ag_real got = y->data[t * 8 + e], want = clean->data[t * 8 + e];
                        if (sees && (which == 1 || e == 3)) cr_assert(isnan(got), "mode %d masked %d which %d: row %d sees it", mode, masked, which, t);
                        else
                            cr_assert(fabs(got - want) <= TOL(1e-12, 1e-5), "mode %d masked %d which %d: row %d: %g, "
                                      "without the NaN %g", mode, masked, which, t, (double)got, (double)want);
                        if (!sees) cr_assert(isfinite(q1->grad[t * 8 + e]), "row %d: dq", t);
                    }
                }
                ag_graph_free(g);
            }
    }
    ag_set_kernels(AG_KERNELS_FAST);
}

/* What ran, read back: each path of the table in docs/attention_long.md,
 * what it keeps, and the graph's count.  The fast paths are what this
 * reads, so it asks for them whatever AG_KERNELS says (CI's reference
 * mode runs this file too); the plain path is asked for below. */
Test(sdpa, each_attention_says_which_path_it_took_and_what_it_kept)
{
    ag_set_kernels(AG_KERNELS_FAST);
    ag_graph *g = ag_graph_new();
    size_t kept;
    ag_tensor *q = noise(g, AG_SHAPE(1, 2, 16, 4), 1), *k = noise(g, AG_SHAPE(1, 1, 16, 4), 2);
    ag_tensor *y = ag_scaled_dot_product_attention(g, q, k, k, NULL);
    cr_assert_str_eq(ag_attention_path(y, &kept), "P kept");
    cr_assert_eq(kept, 2 * 16 * 16 * sizeof(ag_real)); /* P [1, 2, 16, 16] */
    ag_tensor *kl = noise(g, AG_SHAPE(1, 1, 300, 4), 3);
    y = ag_scaled_dot_product_attention(g, q, kl, kl, &(ag_sdpa_config){.causal = AG_CAUSAL_BOTTOM_RIGHT});
    cr_assert_str_eq(ag_attention_path(y, &kept), "flash");
    cr_assert_eq(kept, 2 * 16 * 2 * sizeof(ag_real)); /* each row's max and sum */
    ag_set_kernels(AG_KERNELS_REFERENCE);
    y = ag_scaled_dot_product_attention(g, q, kl, kl, NULL);
    ag_set_kernels(AG_KERNELS_FAST);
    cr_assert_str_eq(ag_attention_path(y, &kept), "plain");
    cr_assert_eq(kept, 2 * 16 * 300 * sizeof(ag_real));
    ag_tensor *q3 = noise(g, AG_SHAPE(2, 5, 4), 4), *k3 = noise(g, AG_SHAPE(2, 7, 4), 5), *w = NULL;
    cr_assert_str_eq(ag_attention_path(ag_attention(g, q3, k3, k3, NULL, 0, 0, NULL), NULL), "P kept");
    cr_assert_str_eq(ag_attention_path(ag_attention(g, q3, k3, k3, NULL, 0, 0, &w), &kept), "three nodes");
    cr_assert_eq(kept, w->size * sizeof(ag_real));
    cr_assert_str_eq(ag_attention_path(ag_attention_textbook(g, q3, k3, k3, NULL, 0, 0, NULL), NULL), "textbook");
    cr_assert_null(ag_attention_path(q, &kept));
    cr_assert_eq(kept, 0);
    ag_attention_stats st;
    ag_graph_attention_stats(g, &st);
    cr_assert(st.flash == 1 && st.p_kept == 2 && st.plain == 1 && st.three_nodes == 1 && st.textbook == 1,
              "%d %d %d %d %d", st.flash, st.p_kept, st.plain, st.three_nodes, st.textbook);
    size_t want = (2 * 16 * 16 + 2 * 16 * 2 + 2 * 16 * 300 + 2 * 5 * 7 * 3) * sizeof(ag_real);
    cr_assert_eq(st.kept_bytes, want, "%zu bytes, want %zu", st.kept_bytes, want);
    ag_graph_free(g);
}

/* ---- dropout inside the node --------------------------------------------- */

/* With q = 0 every weight is 1/S, and with v one-hot (v_s = e_s, Dv = S)
 * row t of the output is Z_t / S: dropout's factors themselves, read out
 * of the forward.  z gets them for heads [B 1, H, T, S]. */
static ag_tensor *dropout_factors(ag_graph *g, int H, int T, int S, double p, uint64_t seed)
{
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(1, H, T, 2)), *k = noise(g, AG_SHAPE(1, 1, S, 2), 7);
    ag_tensor *v = ag_tensor_new(g, AG_SHAPE(1, 1, S, S));
    for (int s = 0; s < S; s++) v->data[(size_t)s * S + s] = 1;
    ag_tensor *y = ag_scaled_dot_product_attention(g, q, k, v, &(ag_sdpa_config){.dropout_p = p, .seed = seed});
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    for (size_t i = 0; i < y->size; i++) y->data[i] *= (ag_real)S;
    return y;
}

Test(sdpa, dropout_keeps_1_minus_p_independently_across_heads_and_steps)
{
    enum { H = 4, T = 64 };
    const double p = 0.1, keep = 1 - p;
    for (int S = 64; S <= 300; S += 236) { /* either side of the seam: both by the flash kernel */
        ag_graph *g = ag_graph_new();
        ag_graph_seed(g, 5);
        ag_tensor *a = dropout_factors(g, H, T, S, p, 0), *b = dropout_factors(g, H, T, S, p, 0);
        ag_tensor *c = dropout_factors(g, H, T, S, p, 99), *d = dropout_factors(g, H, T, S, p, 99);
        size_t n = (size_t)T * S, kept = 0, both_heads = 0, both_steps = 0;
        for (size_t i = 0; i < a->size; i++) {
            cr_assert(a->data[i] == 0 || fabs(a->data[i] - 1 / keep) < TOL(1e-12, 1e-5), "factor %g", (double)a->data[i]);
            kept += a->data[i] != 0;
            both_steps += a->data[i] != 0 && b->data[i] != 0;
            if (i < n) both_heads += a->data[i] != 0 && a->data[i + n] != 0; /* heads 0 and 1 */
            cr_assert_eq(c->data[i], d->data[i], "the same seed, the same mask");
        }
        double rate = (double)kept / (double)a->size, heads = (double)both_heads / (double)n;
        double steps = (double)both_steps / (double)a->size, sd = sqrt(keep * (1 - keep) / (double)a->size);
        cr_assert(fabs(rate - keep) < 5 * sd, "S %d: keep rate %.4f, want %.2f +- %.4f", S, rate, keep, 5 * sd);
        cr_assert(fabs(heads - keep * keep) < 0.02, "S %d: kept in heads 0 and 1: %.4f, independent %.4f", S, heads,
                  keep * keep);
        cr_assert(fabs(steps - keep * keep) < 0.01, "S %d: kept in two steps: %.4f, independent %.4f", S, steps,
                  keep * keep);
        ag_graph_free(g);
    }
}

/* The kernel and the plain code draw the same mask, forward and backward;
 * out of training mode nothing is dropped. */
Test(sdpa, dropout_is_the_same_in_both_modes_and_off_in_eval)
{
    for (int S = 40; S <= 300; S += 260) {
        ag_tensor *y[2], *in[2][3];
        ag_graph *g = ag_graph_new();
        for (int mode = 0; mode < 2; mode++) {
            ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
            in[mode][0] = noise(g, AG_SHAPE(1, 4, 30, 8), 1), in[mode][1] = noise(g, AG_SHAPE(1, 2, S, 8), 2);
            in[mode][2] = noise(g, AG_SHAPE(1, 2, S, 5), 3);
            for (int i = 0; i < 3; i++) ag_set_requires_grad(in[mode][i], 1);
            ag_sdpa_config c = {.dropout_p = 0.25, .seed = 42, .causal = AG_CAUSAL_BOTTOM_RIGHT};
            y[mode] = ag_scaled_dot_product_attention(g, in[mode][0], in[mode][1], in[mode][2], &c);
            cr_assert_not_null(y[mode], "%s", ag_graph_error(g));
            cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y[mode], y[mode]))), AG_OK);
        }
        ag_set_kernels(AG_KERNELS_FAST);
        double *want = as_doubles(y[1]);
        expect_close(y[0]->data, want, y[0]->size, TOL(1e-13, 1e-5), TOL(1e-11, 1e-4), "dropout: values");
        free(want);
        for (int i = 0; i < 3; i++) {
            want = malloc(in[1][i]->size * sizeof *want);
            for (size_t e = 0; e < in[1][i]->size; e++) want[e] = in[1][i]->grad[e];
            expect_close(in[0][i]->grad, want, in[0][i]->size, TOL(1e-13, 1e-5), TOL(1e-11, 1e-4), "dropout: grads");
            free(want);
        }
        ag_graph_set_training(g, 0);
        ag_tensor *off = ag_scaled_dot_product_attention(g, in[0][0], in[0][1], in[0][2],
                                                         &(ag_sdpa_config){.dropout_p = 0.25, .seed = 42,
                                                                           .causal = AG_CAUSAL_BOTTOM_RIGHT});
        ag_tensor *none = ag_scaled_dot_product_attention(g, in[0][0], in[0][1], in[0][2],
                                                          &(ag_sdpa_config){.causal = AG_CAUSAL_BOTTOM_RIGHT});
        cr_assert_eq(memcmp(off->data, none->data, off->size * sizeof(ag_real)), 0, "eval mode: no dropout");
        ag_graph_free(g);
    }
}

/* A decoding step against a KV cache through the same call: one query
 * (T 1) over the S keys so far, the diagonal bottom-right, equals the last
 * row of causal attention over the whole prefix, at every S up to past
 * the seam. */
Test(sdpa, a_decoding_step_over_a_growing_cache_is_the_prefixs_last_row)
{
    enum { H = 4, HKV = 2, D = 8, N = 270 };
    ag_graph *g = ag_graph_new();
    ag_tensor *q = noise(g, AG_SHAPE(1, H, N, D), 1), *k = noise(g, AG_SHAPE(1, HKV, N, D), 2);
    ag_tensor *v = noise(g, AG_SHAPE(1, HKV, N, D), 3);
    ag_tensor *full = ag_scaled_dot_product_attention(g, q, k, v, &(ag_sdpa_config){.causal = AG_CAUSAL_TOP_LEFT});
    cr_assert_not_null(full, "%s", ag_graph_error(g));
    ag_graph *step = ag_graph_new();
    for (int S = 1; S <= N; S += S < 250 ? 37 : 1) {
        ag_graph_reset(step);
        ag_tensor *qs = ag_tensor_new(step, AG_SHAPE(1, H, 1, D));
        ag_tensor *ks = ag_tensor_new(step, AG_SHAPE(1, HKV, S, D)), *vs = ag_tensor_new(step, AG_SHAPE(1, HKV, S, D));
        for (int h = 0; h < H; h++) memcpy(qs->data + h * D, q->data + ((size_t)h * N + S - 1) * D, D * sizeof(ag_real));
        for (int h = 0; h < HKV; h++) {
            memcpy(ks->data + (size_t)h * S * D, k->data + (size_t)h * N * D, (size_t)S * D * sizeof(ag_real));
            memcpy(vs->data + (size_t)h * S * D, v->data + (size_t)h * N * D, (size_t)S * D * sizeof(ag_real));
        }
        ag_tensor *y = ag_scaled_dot_product_attention(step, qs, ks, vs,
                                                       &(ag_sdpa_config){.causal = AG_CAUSAL_BOTTOM_RIGHT});
        cr_assert_not_null(y, "%s", ag_graph_error(step));
        for (int h = 0; h < H; h++) {
            double want[D];
            for (int e = 0; e < D; e++) want[e] = full->data[((size_t)h * N + S - 1) * D + e];
            expect_close(y->data + h * D, want, D, TOL(1e-13, 2e-6), TOL(1e-12, 1e-5), "decoding step");
        }
    }
    ag_graph_free(step);
    ag_graph_free(g);
}

/* Grouped-query heads in the heads layout at a toy head's size (S 16, a
 * multiple of 8; D 8: the toy heads' kernel's shapes, which takes only
 * as many key/value heads as query heads): the fast modes against the
 * plain code, values and gradients. */
Test(sdpa, grouped_query_toy_heads_match_the_plain_code)
{
    ag_tensor *y[2], *in[2][3];
    ag_graph *g = ag_graph_new();
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        in[mode][0] = noise(g, AG_SHAPE(2, 16, 6, 8), 1), in[mode][1] = noise(g, AG_SHAPE(2, 16, 2, 8), 2);
        in[mode][2] = noise(g, AG_SHAPE(2, 16, 2, 8), 3);
        for (int i = 0; i < 3; i++) ag_set_requires_grad(in[mode][i], 1);
        ag_sdpa_config c = {.causal = AG_CAUSAL_TOP_LEFT, .heads_layout = 1};
        y[mode] = ag_scaled_dot_product_attention(g, in[mode][0], in[mode][1], in[mode][2], &c);
        cr_assert_not_null(y[mode], "%s", ag_graph_error(g));
        cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y[mode], y[mode]))), AG_OK);
    }
    ag_set_kernels(AG_KERNELS_FAST);
    double *want = as_doubles(y[1]);
    expect_close(y[0]->data, want, y[0]->size, TOL(1e-13, 1e-6), TOL(1e-11, 1e-5), "values");
    free(want);
    for (int i = 0; i < 3; i++) {
        want = malloc(in[1][i]->size * sizeof *want);
        for (size_t e = 0; e < in[1][i]->size; e++) want[e] = in[1][i]->grad[e];
        expect_close(in[0][i]->grad, want, in[0][i]->size, TOL(1e-13, 1e-6), TOL(1e-11, 1e-5), "gradients");
        free(want);
    }
    ag_graph_free(g);
}
