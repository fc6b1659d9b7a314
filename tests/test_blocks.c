/* tests/test_blocks.c: whole Transformer blocks, differentiated by autodiff
 * through the primitive ops, checked against finite differences in double
 * (every parameter and every input), and kept finite at the edges: a fully
 * masked row, scores of 1e4, sequences of length 1. */
#include "common.h"

/* The block's input(s) live in the store too, so the checker can move them. */
typedef struct blocks {
    ag_store *s;
    ag_encoder_block enc;
    ag_decoder_block dec;
    ag_tensor *x, *y;    /* encoder input [B, S, C], decoder input [B, T, C] */
    int B, S, T;
    int valid[2];        /* source lengths */
} blocks;

enum { C = 4, H = 2, F = 6 };

static void blocks_make(blocks *b, int B, int S, int T, uint64_t seed)
{
    b->s = ag_store_new();
    b->B = B, b->S = S, b->T = T;
    cr_assert_eq(ag_encoder_block_init(&b->enc, b->s, "enc", C, H, F, 0.0, seed), AG_OK);
    cr_assert_eq(ag_decoder_block_init(&b->dec, b->s, "dec", C, H, F, 0.0, seed), AG_OK);
    b->x = ag_param(b->s, "x", AG_SHAPE(B, S, C));
    b->y = ag_param(b->s, "y", AG_SHAPE(B, T, C));
    ag_init_normal(b->x, 0, 1, seed + 1);
    ag_init_normal(b->y, 0, 1, seed + 2);
    /* layer norms start at gain 1, bias 0: move them off the special point */
    for (int i = 0; i < ag_store_count(b->s); i++) {
        ag_tensor *t = ag_store_at(b->s, i);
        if (strstr(t->name, "norm")) ag_init_uniform(t, 0.5, 1.5, seed + 3 + (uint64_t)i);
        if (strstr(t->name, "bias")) ag_init_uniform(t, -0.3, 0.3, seed + 50 + (uint64_t)i);
    }
    b->valid[0] = S, b->valid[1] = S > 1 ? S - 1 : 1;
}

static ag_tensor *weigh(ag_graph *g, ag_tensor *y)
{
    /* L = sum(y * w) with a fixed w, so every output element counts differently */
    ag_tensor *w = ag_tensor_new(g, y ? y->ndim : 0, y ? y->shape : NULL);
    if (w) ag_init_uniform(w, -1, 1, 99);
    return ag_sum_all(g, ag_mul(g, y, w));
}

static ag_tensor *build_encoder(ag_graph *g, void *p)
{
    blocks *b = p;
    ag_tensor *mask = ag_padding_mask(g, b->valid, b->B, 0, b->S, b->S);
    return weigh(g, ag_encoder_block_forward(g, &b->enc, b->x, mask, NULL));
}

static ag_tensor *build_decoder(ag_graph *g, void *p)
{
    blocks *b = p;
    ag_tensor *src_mask = ag_padding_mask(g, b->valid, b->B, 0, b->T, b->S);
    ag_tensor *causal = ag_causal_mask(g, b->T, b->T);
    return weigh(g, ag_decoder_block_forward(g, &b->dec, b->y, b->x, causal, src_mask, NULL, NULL));
}

#ifdef AG_DOUBLE
static void check_all(blocks *b, ag_build_fn build, const char *prefix, double *worst)
{
    ag_tensor *in[64];
    int n = 0;
    for (int i = 0; i < ag_store_count(b->s) && n < 64; i++) {
        ag_tensor *t = ag_store_at(b->s, i);
        if (!strncmp(t->name, prefix, strlen(prefix)) || !strcmp(t->name, "x") || !strcmp(t->name, "y")) in[n++] = t;
    }
    ag_gradcheck_result r[64];
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck(g, build, b, in, n, NULL, r);
    for (int i = 0; i < n; i++) {
        if (r[i].max_abs_err > *worst) *worst = r[i].max_abs_err;
        cr_expect_eq(r[i].failed, 0, "%s: %zu elements fail (max abs %.3g, rel %.3g)", r[i].input->name, r[i].failed,
                     r[i].max_abs_err, r[i].max_rel_err);
    }
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
}

Test(blocks, encoder_block_gradcheck_every_parameter_and_input)
{
    blocks b;
    blocks_make(&b, 2, 3, 2, 11);
    double worst = 0;
    check_all(&b, build_encoder, "enc.", &worst); /* "y" is not used by the encoder: its gradient must be 0 */
    cr_log_info("encoder block: worst abs error %.3g", worst);
    ag_store_free(b.s);
}

Test(blocks, decoder_block_gradcheck_every_parameter_and_input)
{
    blocks b;
    blocks_make(&b, 2, 3, 2, 12);
    double worst = 0;
    check_all(&b, build_decoder, "dec.", &worst);
    cr_log_info("decoder block: worst abs error %.3g", worst);
    ag_store_free(b.s);
}
#endif

static void expect_finite(const ag_tensor *t, const char *what)
{
    cr_assert_not_null(t, "%s is NULL", what);
    for (size_t i = 0; i < t->size; i++) cr_assert(isfinite((double)t->data[i]), "%s[%zu] = %g", what, i, (double)t->data[i]);
}

static void expect_finite_grads(ag_store *s)
{
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *t = ag_store_at(s, i);
        for (size_t k = 0; k < t->size; k++)
            cr_assert(isfinite((double)t->grad[k]), "d%s[%zu] = %g", t->name, k, (double)t->grad[k]);
    }
}

Test(blocks, length_one_sequences_are_finite)
{
    blocks b;
    blocks_make(&b, 2, 1, 1, 13);
    ag_graph *g = ag_graph_new();
    ag_tensor *loss = build_decoder(g, &b);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_finite(loss, "loss");
    expect_finite_grads(b.s);
    ag_graph_reset(g);
    loss = build_encoder(g, &b);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_finite(loss, "loss");
    ag_graph_free(g);
    ag_store_free(b.s);
}

Test(blocks, a_fully_masked_row_and_scores_of_1e4_stay_finite)
{
    /* q = 100 * ones, k = 100 * x: scores of order 1e4; batch 1 has no
     * allowed key at all (valid length 0): its weights are zeros */
    ag_store *s = ag_store_new();
    ag_tensor *q = ag_param(s, "q", AG_SHAPE(2, 1, 3, 4)), *k = ag_param(s, "k", AG_SHAPE(2, 1, 5, 4));
    ag_tensor *v = ag_param(s, "v", AG_SHAPE(2, 1, 5, 4));
    ag_init_const(q, 100);
    ag_init_normal(k, 0, 100, 3);
    ag_init_normal(v, 0, 1, 4);
    ag_graph *g = ag_graph_new();
    const int valid[2] = {5, 0};
    ag_tensor *w = NULL;
    ag_tensor *o = ag_attention(g, q, k, v, ag_padding_mask(g, valid, 2, 0, 3, 5), AG_MASK_NEG_INF, 0, &w);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, o, o));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_finite(o, "out");
    expect_finite(w, "weights");
    expect_finite_grads(s);
    for (size_t i = 15; i < 30; i++) cr_assert_eq((double)w->data[i], 0.0, "masked row weight %zu", i);
    double row = 0;
    for (int i = 0; i < 5; i++) row += (double)w->data[i];
    cr_assert_float_eq(row, 1.0, 1e-6);
    ag_graph_free(g);
    ag_store_free(s);
}
