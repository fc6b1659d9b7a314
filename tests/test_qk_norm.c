/* tests/test_qk_norm.c: the cures of a saturated softmax, QK-norm in the
 * multi-head attention and pre-norm in the translator's model.
 *   - QK-norm bounds the scores: with gain 1 and bias 0 every head's
 *     normalised q and k have norm sqrt(D), so |q.k| / sqrt(D) <= sqrt(D) and
 *     a row's log-weights span at most 2 sqrt(D), however large W_q and W_k
 *     grow (the same layer without it goes one-hot);
 *   - its gradients, and the pre-norm + QK-norm translator's, against
 *     finite differences in double (every parameter);
 *   - the options' parameters have PyTorch's names and shapes, and a zero
 *     config makes the model of before. */
#include "common.h"

enum { C = 6, H = 2, D = C / H, B = 2, T = 3, S = 4 };

typedef struct qk {
    ag_store *s;
    ag_mha m;
    ag_tensor *x, *e; /* queries' input [B, T, C], keys' and values' [B, S, C] */
} qk;

static void qk_make(qk *q, int qk_norm, uint64_t seed)
{
    q->s = ag_store_new();
    cr_assert_eq(ag_mha_init(&q->m, q->s, "attn", C, H, 1, 0.0, seed), AG_OK, "%s", ag_store_error(q->s));
    if (qk_norm) cr_assert_eq(ag_mha_add_qk_norm(&q->m, q->s, "attn"), AG_OK, "%s", ag_store_error(q->s));
    q->x = ag_param(q->s, "x", AG_SHAPE(B, T, C));
    q->e = ag_param(q->s, "e", AG_SHAPE(B, S, C));
    for (int i = 0; i < ag_store_count(q->s); i++) ag_init_uniform(ag_store_at(q->s, i), -1, 1, seed + (uint64_t)i);
}

Test(qk_norm, parameters_have_pytorch_names_and_head_width)
{
    qk q;
    qk_make(&q, 1, 1);
    const char *names[4] = {"attn.q_norm.weight", "attn.q_norm.bias", "attn.k_norm.weight", "attn.k_norm.bias"};
    for (int i = 0; i < 4; i++) {
        ag_tensor *t = ag_store_find(q.s, names[i]);
        cr_assert_not_null(t, "%s is missing", names[i]);
        cr_assert(t->ndim == 1 && t->shape[0] == D, "%s is not [%d]", names[i], D);
    }
    cr_assert_eq(q.m.qk_norm, 1);
    ag_store_free(q.s);
    ag_store *s = ag_store_new();
    ag_mha blank;
    memset(&blank, 0, sizeof blank);
    cr_assert_eq(ag_mha_add_qk_norm(&blank, s, "attn"), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(s), "mha 'attn': QK-norm on a layer not made by ag_mha_init"), "%s",
              ag_store_error(s));
    ag_store_free(s);
}

/* The largest gap max - min of log P over the rows of w [B, H, T, S]
 * (infinite when a weight is exactly 0: a one-hot row). */
static double largest_log_gap(const ag_tensor *w)
{
    double worst = 0;
    for (size_t r = 0; r < w->size / S; r++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int s = 0; s < S; s++) {
            double l = log((double)w->data[r * S + s]);
            lo = fmin(lo, l), hi = fmax(hi, l);
        }
        worst = fmax(worst, hi - lo);
    }
    return worst;
}

Test(qk_norm, bounds_the_scores_however_large_the_projections_grow)
{
    double gap[2];
    for (int on = 0; on <= 1; on++) {
        qk q;
        qk_make(&q, on, 3);
        /* W_q and W_k 300 times larger: what training can do to them */
        for (size_t i = 0; i < q.m.w_q.weight->size; i++) q.m.w_q.weight->data[i] *= 300, q.m.w_k.weight->data[i] *= 300;
        if (on) { /* gain 1, bias 0: each normalised head has norm sqrt(D) */
            ag_init_const(q.m.q_norm.weight, 1), ag_init_const(q.m.q_norm.bias, 0);
            ag_init_const(q.m.k_norm.weight, 1), ag_init_const(q.m.k_norm.bias, 0);
        }
        ag_graph *g = ag_graph_new();
        ag_tensor *w = NULL;
        cr_assert_not_null(ag_mha_forward(g, &q.m, q.x, q.e, NULL, AG_MASK_NEG_INF, &w), "%s", ag_graph_error(g));
        cr_assert(w && w->ndim == 4 && w->shape[3] == S);
        gap[on] = largest_log_gap(w);
        ag_graph_free(g);
        ag_store_free(q.s);
    }
    cr_assert_gt(gap[0], 50, "without QK-norm the rows should saturate (gap %g)", gap[0]);
    cr_assert_leq(gap[1], 2 * sqrt((double)D) + TOL(1e-9, 1e-4), "with QK-norm a row's gap is %g > 2 sqrt(D)",
                  gap[1]);
}

Test(qk_norm, a_zero_config_makes_the_model_of_before)
{
    ag_seq2seq_config cfg = {.src_vocab = 9, .tgt_vocab = 9, .hidden = 4, .heads = 2, .ffn = 6, .layers = 2,
                             .max_len = 6, .dropout = 0};
    ag_store *plain = ag_store_new(), *both = ag_store_new();
    ag_seq2seq a, b;
    cr_assert_eq(ag_seq2seq_init(&a, plain, &cfg, 4), AG_OK);
    ag_seq2seq_config on = cfg;
    on.pre_norm = on.qk_norm = 1;
    cr_assert_eq(ag_seq2seq_init(&b, both, &on, 4), AG_OK, "%s", ag_store_error(both));
    /* the options add 2 final norms and 2 norms in each of 3 L attentions,
     * each a weight and a bias; the shared parameters draw the same values */
    cr_assert_eq(ag_store_count(both), ag_store_count(plain) + 2 * 2 + 3 * cfg.layers * 2 * 2);
    for (int i = 0; i < ag_store_count(plain); i++) {
        ag_tensor *p = ag_store_at(plain, i), *q = ag_store_find(both, p->name);
        cr_assert_not_null(q, "%s is missing with the options on", p->name);
        cr_assert_eq(memcmp(p->data, q->data, p->size * sizeof(ag_real)), 0, "%s drawn differently", p->name);
    }
    const char *extra[] = {"encoder.norm.weight", "decoder.norm.bias", "encoder.blocks.1.attention.q_norm.weight",
                           "decoder.blocks.0.cross_attention.k_norm.bias", "decoder.blocks.1.self_attention.k_norm.weight"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        cr_assert_not_null(ag_store_find(both, extra[i]), "%s is missing", extra[i]);
        cr_assert_null(ag_store_find(plain, extra[i]), "%s is in the default model", extra[i]);
    }
    ag_seq2seq_free(&a), ag_seq2seq_free(&b);
    on.qk_norm = 2;
    cr_assert_eq(ag_seq2seq_init(&b, both, &on, 4), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(both), "seq2seq: pre_norm = 1, qk_norm = 2: each must be 0 or 1"), "%s",
              ag_store_error(both));
    ag_store_free(plain), ag_store_free(both);
}

#ifdef AG_DOUBLE
static void expect_gradcheck(ag_store *s, ag_build_fn build, void *p)
{
    int n = ag_store_count(s);
    ag_tensor **in = calloc((size_t)n, sizeof *in);
    ag_gradcheck_result *r = calloc((size_t)n, sizeof *r);
    for (int i = 0; i < n; i++) in[i] = ag_store_at(s, i);
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck(g, build, p, in, n, NULL, r);
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < n; i++)
        cr_expect_eq(r[i].failed, 0, "%s: %zu elements fail (max abs %.3g, rel %.3g)", r[i].input->name,
                     r[i].failed, r[i].max_abs_err, r[i].max_rel_err);
    ag_graph_free(g);
    free(in), free(r);
}

static ag_tensor *weigh(ag_graph *g, ag_tensor *y)
{
    ag_tensor *w = ag_tensor_new(g, y ? y->ndim : 0, y ? y->shape : NULL);
    if (w) ag_init_uniform(w, -1, 1, 99);
    return ag_sum_all(g, ag_mul(g, y, w));
}

/* cross-attention of x over e, the second sentence's last key masked */
static ag_tensor *build_mha(ag_graph *g, void *p)
{
    qk *q = p;
    static const int valid[B] = {S, S - 1};
    ag_tensor *mask = ag_padding_mask(g, valid, B, 0, T, S);
    return weigh(g, ag_mha_forward(g, &q->m, q->x, q->e, mask, AG_MASK_NEG_INF, NULL));
}

Test(qk_norm, mha_gradcheck_every_parameter_and_input)
{
    qk q;
    qk_make(&q, 1, 7);
    expect_gradcheck(q.s, build_mha, &q);
    ag_store_free(q.s);
}

typedef struct tiny {
    ag_store *s;
    ag_seq2seq m;
} tiny;

static ag_tensor *tiny_loss(ag_graph *g, void *p)
{
    tiny *t = p;
    /* sources of 4, 2 tokens; targets of 3, 2 (padding holds garbage) */
    static const int src[2 * 4] = {4, 5, 6, 2, /**/ 7, 2, 8, 8};
    static const int valid[2] = {4, 2};
    static const int tin[2 * 3] = {1, 4, 5, /**/ 1, 6, 3};
    static const int tout[2 * 3] = {4, 5, 2, /**/ 6, 2, 0};
    return ag_seq2seq_loss(g, &t->m, src, valid, tin, tout, 2, 4, 3);
}

Test(qk_norm, pre_norm_qk_norm_seq2seq_gradcheck_every_parameter)
{
    tiny t = {.s = ag_store_new()};
    ag_seq2seq_config cfg = {.src_vocab = 9, .tgt_vocab = 9, .hidden = 6, .heads = 2, .ffn = 5, .layers = 2,
                             .max_len = 6, .dropout = 0, .pre_norm = 1, .qk_norm = 1};
    cr_assert_eq(ag_seq2seq_init(&t.m, t.s, &cfg, 9), AG_OK, "%s", ag_store_error(t.s));
    /* norms off gain 1 and bias 0, biases off 0 */
    for (int i = 0; i < ag_store_count(t.s); i++) {
        ag_tensor *p = ag_store_at(t.s, i);
        if (strstr(p->name, "norm")) ag_init_uniform(p, 0.5, 1.5, 30 + (uint64_t)i);
        if (strstr(p->name, "bias")) ag_init_uniform(p, -0.3, 0.3, 90 + (uint64_t)i);
    }
    expect_gradcheck(t.s, tiny_loss, &t);
    ag_seq2seq_free(&t.m);
    ag_store_free(t.s);
}
#endif
