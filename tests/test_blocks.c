/* tests/test_blocks.c: whole Transformer blocks, differentiated by autodiff
 * through the primitive ops, checked against finite differences in double
 * (every parameter and every input) with each option (post- or pre-norm,
 * relu, gelu or gelu_tanh, causal by flag, the decoder-only block, the
 * embedding layer with a tied output, QK-norm), and kept finite at the edges: a
 * fully masked row, scores of 1e4, sequences of length 1.  The init
 * functions' errors each leave a message in the store. */
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

/* Both blocks with the options cfg (NULL: the defaults, by the plain init). */
static void blocks_make_cfg(blocks *b, int B, int S, int T, uint64_t seed, const ag_block_config *cfg)
{
    b->s = ag_store_new();
    b->B = B, b->S = S, b->T = T;
    if (cfg) {
        cr_assert_eq(ag_encoder_block_init_ex(&b->enc, b->s, "enc", C, H, F, 0.0, cfg, seed), AG_OK);
        cr_assert_eq(ag_decoder_block_init_ex(&b->dec, b->s, "dec", C, H, F, 0.0, cfg, seed), AG_OK);
    } else {
        cr_assert_eq(ag_encoder_block_init(&b->enc, b->s, "enc", C, H, F, 0.0, seed), AG_OK);
        cr_assert_eq(ag_decoder_block_init(&b->dec, b->s, "dec", C, H, F, 0.0, seed), AG_OK);
    }
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

static void blocks_make(blocks *b, int B, int S, int T, uint64_t seed) { blocks_make_cfg(b, B, S, T, seed, NULL); }

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

/* The decoder with its causal flag on: no self mask from the caller. */
static ag_tensor *build_decoder_flag(ag_graph *g, void *p)
{
    blocks *b = p;
    ag_tensor *src_mask = ag_padding_mask(g, b->valid, b->B, 0, b->T, b->S);
    return weigh(g, ag_decoder_block_forward(g, &b->dec, b->y, b->x, NULL, src_mask, NULL, NULL));
}

#ifdef AG_DOUBLE
/* The encoder block as the decoder-only block (its causal flag on). */
static ag_tensor *build_decoder_only(ag_graph *g, void *p)
{
    blocks *b = p;
    return weigh(g, ag_decoder_only_block_forward(g, &b->enc, b->x, NULL));
}

/* Every tensor of in[n] (at most 64) against finite differences; *worst
 * gets the largest absolute error seen. */
static void gradcheck_inputs(ag_build_fn build, void *p, ag_tensor **in, int n, double *worst)
{
    ag_gradcheck_result r[64];
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck(g, build, p, in, n, NULL, r);
    for (int i = 0; i < n; i++) {
        *worst = worse_of(*worst, r[i].max_abs_err);
        cr_expect_eq(r[i].failed, 0, "%s: %zu elements fail (max abs %.3g, rel %.3g)", r[i].input->name, r[i].failed,
                     r[i].max_abs_err, r[i].max_rel_err);
    }
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
}

static void check_all(blocks *b, ag_build_fn build, const char *prefix, double *worst)
{
    ag_tensor *in[64];
    int n = 0;
    for (int i = 0; i < ag_store_count(b->s) && n < 64; i++) {
        ag_tensor *t = ag_store_at(b->s, i);
        if (!strncmp(t->name, prefix, strlen(prefix)) || !strcmp(t->name, "x") || !strcmp(t->name, "y")) in[n++] = t;
    }
    gradcheck_inputs(build, b, in, n, worst);
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

/* Each option, the whole block against finite differences. */
static void check_option(const ag_block_config *cfg, ag_build_fn build, const char *prefix, uint64_t seed)
{
    blocks b;
    blocks_make_cfg(&b, 2, 3, 3, seed, cfg);
    double worst = 0;
    check_all(&b, build, prefix, &worst);
    cr_log_info("%s pre_norm %d activation %d causal %d: worst abs error %.3g", prefix, cfg->pre_norm,
                (int)cfg->activation, cfg->causal, worst);
    ag_store_free(b.s);
}

Test(blocks, pre_norm_gelu_encoder_block_gradcheck)
{
    check_option(&(ag_block_config){.pre_norm = 1, .activation = AG_ACT_GELU}, build_encoder, "enc.", 21);
}

Test(blocks, post_norm_gelu_tanh_encoder_block_gradcheck)
{
    check_option(&(ag_block_config){.activation = AG_ACT_GELU_TANH}, build_encoder, "enc.", 22);
}

Test(blocks, decoder_only_block_gradcheck)
{
    check_option(&(ag_block_config){.pre_norm = 1, .activation = AG_ACT_GELU_TANH, .causal = 1}, build_decoder_only,
                 "enc.", 23);
}

Test(blocks, pre_norm_decoder_block_with_causal_flag_gradcheck)
{
    check_option(&(ag_block_config){.pre_norm = 1, .activation = AG_ACT_GELU, .causal = 1}, build_decoder_flag,
                 "dec.", 24);
}

typedef struct tied {
    ag_store *s;
    ag_embedding_layer e;
} tied;

/* L = sum(logits * w) of ids through the embedding and back through the
 * same table: the token table gets both gradients */
static ag_tensor *build_tied(ag_graph *g, void *p)
{
    tied *t = p;
    static const int ids[] = {0, 3, 3, 1, 4, 2};
    return weigh(g, ag_embedding_layer_logits(g, &t->e, ag_tanh(g, ag_embedding_layer_forward(g, &t->e, ids, 2, 3))));
}

Test(blocks, embedding_layer_with_tied_output_gradcheck)
{
    for (int kind = AG_POS_LEARNED; kind <= AG_POS_NONE; kind++) {
        tied t = {.s = ag_store_new()};
        cr_assert_eq(ag_embedding_layer_init(&t.e, t.s, "emb", 5, 4, 3, (ag_positions)kind, 31), AG_OK, "%s",
                     ag_store_error(t.s));
        cr_assert_eq(ag_store_count(t.s), kind == AG_POS_LEARNED ? 2 : 1);
        ag_tensor *in[2] = {t.e.tokens, t.e.positions};
        ag_gradcheck_result r[2];
        ag_graph *g = ag_graph_new();
        ag_status st = ag_gradcheck(g, build_tied, &t, in, ag_store_count(t.s), NULL, r);
        cr_assert_eq(st, AG_OK, "positions %d: %s (worst abs %.3g)", kind, ag_graph_error(g), r[0].max_abs_err);
        ag_graph_free(g);
        ag_store_free(t.s);
    }
}
#endif

Test(blocks, causal_flag_equals_the_explicit_causal_mask)
{
    /* post-norm decoder: the flag (no mask) and the caller's mask with the
     * flag off give the same numbers, in both builds */
    blocks with, without;
    blocks_make_cfg(&with, 2, 3, 4, 14, &(ag_block_config){.causal = 1});
    blocks_make(&without, 2, 3, 4, 14);
    ag_graph *g = ag_graph_new();
    ag_tensor *a = build_decoder_flag(g, &with), *b = build_decoder(g, &without);
    cr_assert(a && b, "%s", ag_graph_error(g));
    cr_assert_eq(a->data[0], b->data[0], "flag %.17g, mask %.17g", (double)a->data[0], (double)b->data[0]);
    ag_graph_free(g);
    ag_store_free(with.s);
    ag_store_free(without.s);
}

Test(blocks, zero_config_is_the_original_block)
{
    blocks plain, zero;
    blocks_make(&plain, 2, 3, 2, 15);
    blocks_make_cfg(&zero, 2, 3, 2, 15, &(ag_block_config){0});
    ag_graph *g = ag_graph_new();
    ag_tensor *a = build_decoder(g, &plain), *b = build_decoder(g, &zero);
    ag_tensor *c = build_encoder(g, &plain), *d = build_encoder(g, &zero);
    cr_assert(a && b && c && d, "%s", ag_graph_error(g));
    cr_assert_eq(a->data[0], b->data[0]);
    cr_assert_eq(c->data[0], d->data[0]);
    cr_assert_eq(plain.enc.ffn.activation, AG_ACT_RELU);
    ag_graph_free(g);
    ag_store_free(plain.s);
    ag_store_free(zero.s);
}

/* ---- every init error leaves a message in the store ------------------------ */

static void expect_init_error(ag_store *s, ag_status got, ag_status want, const char *needle)
{
    cr_assert_eq(got, want, "status %s, want %s (%s)", ag_status_name(got), ag_status_name(want), ag_store_error(s));
    cr_assert(strstr(ag_store_error(s), needle), "message '%s' lacks '%s'", ag_store_error(s), needle);
}

Test(blocks, init_errors_say_what_was_wrong)
{
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    ag_linear_layer l;
    ag_layer_norm_layer n;
    ag_ffn_layer f;
    ag_encoder_block e;
    ag_embedding_layer emb;
    expect_init_error(s, ag_mha_layer_init(&m, s, "attn", 6, 4, 1, 0, 1), AG_ERR_SHAPE,
                      "mha 'attn': width C = 6 is not a multiple of the heads H = 4");
    expect_init_error(s, ag_mha_layer_init(&m, s, "attn", 8, 0, 1, 0, 1), AG_ERR_ARG, "mha 'attn': bad size (C 8, H 0");
    expect_init_error(s, ag_mha_layer_init(&m, s, NULL, 8, 2, 1, 0, 1), AG_ERR_ARG, "prefix is NULL");
    expect_init_error(s, ag_linear_layer_init(&l, s, "dense", 0, 3, 1, 1), AG_ERR_ARG, "linear 'dense': bad size (in 0");
    expect_init_error(s, ag_layer_norm_layer_init(&n, s, "ln", -1), AG_ERR_ARG, "layernorm 'ln': bad size (C -1");
    expect_init_error(s, ag_ffn_layer_init_ex(&f, s, "ffn", 4, 8, (ag_activation)7, 1), AG_ERR_ARG,
                      "ffn 'ffn': activation 7 is not relu");
    expect_init_error(s, ag_encoder_block_init_ex(&e, s, "enc", 4, 2, 8, 0, &(ag_block_config){.pre_norm = 2}, 1),
                      AG_ERR_ARG, "block 'enc': pre_norm is 2");
    expect_init_error(s, ag_encoder_block_init(&e, s, "enc", 6, 4, 8, 0, 1), AG_ERR_SHAPE, "not a multiple");
    expect_init_error(s, ag_encoder_block_init(&e, s, NULL, 4, 2, 8, 0, 1), AG_ERR_ARG, "encoder_block_init: prefix is NULL");
    expect_init_error(s, ag_ffn_layer_init(&f, s, NULL, 4, 8, 1), AG_ERR_ARG, "ffn_init: prefix is NULL");
    expect_init_error(s, ag_embedding_layer_init(&emb, s, "emb", 5, 4, 0, AG_POS_LEARNED, 1), AG_ERR_ARG,
                      "learned positions need max_len >= 1, got 0");
    expect_init_error(s, ag_embedding_layer_init(&emb, s, "emb", 0, 4, 3, AG_POS_LEARNED, 1), AG_ERR_ARG,
                      "embedding 'emb': bad size (V 0");
    char longname[80];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    expect_init_error(s, ag_linear_layer_init(&l, s, longname, 2, 3, 1, 1), AG_ERR_ARG, "is longer than 63 bytes");
    cr_assert_eq(ag_layer_norm_layer_init(&n, s, "ln", 4), AG_OK);
    expect_init_error(s, ag_layer_norm_layer_init(&n, s, "ln", 4), AG_ERR_ARG, "duplicate name 'ln.weight'");
    ag_seq2seq sq;
    ag_seq2seq_config cfg = {.src_vocab = 10, .tgt_vocab = 10, .hidden = 6, .heads = 4, .ffn = 8, .layers = 1,
                             .max_len = 5};
    expect_init_error(s, ag_seq2seq_init(&sq, s, &cfg, 1), AG_ERR_SHAPE, "seq2seq: hidden = 6 is not a multiple of heads = 4");
    cfg.heads = 2, cfg.tgt_vocab = 3;
    expect_init_error(s, ag_seq2seq_init(&sq, s, &cfg, 1), AG_ERR_ARG, "vocabularies of 10 and 3 tokens");
    cfg.tgt_vocab = 10, cfg.dropout = 1.5;
    expect_init_error(s, ag_seq2seq_init(&sq, s, &cfg, 1), AG_ERR_ARG, "seq2seq: dropout = 1.5 must be in [0, 1)");
    cfg.dropout = 0, cfg.layers = 0;
    expect_init_error(s, ag_seq2seq_init(&sq, s, &cfg, 1), AG_ERR_ARG, "layers 0");
    ag_store_free(s);
}

Test(blocks, layernorm_and_its_deprecated_names_agree)
{
    ag_store *s = ag_store_new();
    ag_layer_norm_layer a;
    ag_layer_norm_layer b; /* the old name of the same type */
    cr_assert_eq(ag_layer_norm_layer_init(&a, s, "a", 3), AG_OK);
    cr_assert_eq(ag_layer_norm_layer_init(&b, s, "b", 3), AG_OK);
    cr_assert_not_null(ag_store_find(s, "b.weight"));
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 3), (ag_real[]){1, 2, 4});
    ag_tensor *y1 = ag_layer_norm_layer_forward(g, &a, x), *y2 = ag_layer_norm_layer_forward(g, &b, x);
    cr_assert(y1 && y2, "%s", ag_graph_error(g));
    for (int i = 0; i < 3; i++) cr_assert_eq(y1->data[i], y2->data[i]);
    /* (1, 2, 4): mean 7/3, biased variance 14/9 */
    double want = (1 - 7.0 / 3) / sqrt(14.0 / 9 + 1e-5);
    cr_assert_float_eq((double)y1->data[0], want, TOL(1e-12, 1e-6));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(blocks, learned_positions_bound_the_length)
{
    ag_store *s = ag_store_new();
    ag_embedding_layer e;
    cr_assert_eq(ag_embedding_layer_init(&e, s, "emb", 5, 4, 3, AG_POS_LEARNED, 1), AG_OK);
    ag_graph *g = ag_graph_new();
    static const int ids[4] = {0, 1, 2, 3};
    cr_assert_null(ag_embedding_layer_forward(g, &e, ids, 1, 4));
    cr_assert_str_eq(ag_graph_error(g), "emb: embedding_layer: T = 4 is longer than the 3 learned positions");
    ag_graph_reset(g);
    static const int bad[2] = {0, 5};
    cr_assert_null(ag_embedding_layer_forward(g, &e, bad, 1, 2));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG, "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

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

/* ---- QK-norm: a LayerNorm of each head's q and k (ag_mha_layer_add_qk_norm) ------- */

/* D = 3: a LayerNorm over 2 values (the blocks' D) has almost no gradient */
enum { QK_C = 6, QK_H = 2, QK_D = QK_C / QK_H, QK_B = 2, QK_T = 3, QK_S = 4 };

typedef struct qk {
    ag_store *s;
    ag_mha_layer m;
    ag_tensor *x, *e; /* queries' input [B, T, C], keys' and values' [B, S, C] */
} qk;

static void qk_make(qk *q, int qk_norm, uint64_t seed)
{
    q->s = ag_store_new();
    cr_assert_eq(ag_mha_layer_init(&q->m, q->s, "attn", QK_C, QK_H, 1, 0.0, seed), AG_OK, "%s", ag_store_error(q->s));
    if (qk_norm) cr_assert_eq(ag_mha_layer_add_qk_norm(&q->m, q->s, "attn"), AG_OK, "%s", ag_store_error(q->s));
    q->x = ag_param(q->s, "x", AG_SHAPE(QK_B, QK_T, QK_C));
    q->e = ag_param(q->s, "e", AG_SHAPE(QK_B, QK_S, QK_C));
    for (int i = 0; i < ag_store_count(q->s); i++) ag_init_uniform(ag_store_at(q->s, i), -1, 1, seed + (uint64_t)i);
}

Test(blocks, qk_norm_parameters_have_pytorch_names_and_head_width)
{
    qk q;
    qk_make(&q, 1, 1);
    const char *names[4] = {"attn.q_norm.weight", "attn.q_norm.bias", "attn.k_norm.weight", "attn.k_norm.bias"};
    for (int i = 0; i < 4; i++) {
        ag_tensor *t = ag_store_find(q.s, names[i]);
        cr_assert_not_null(t, "%s is missing", names[i]);
        cr_assert(t->ndim == 1 && t->shape[0] == QK_D, "%s is not [%d]", names[i], QK_D);
    }
    cr_assert_eq(q.m.qk_norm, 1);
    ag_store_free(q.s);
    ag_store *s = ag_store_new();
    ag_mha_layer blank;
    memset(&blank, 0, sizeof blank);
    cr_assert_eq(ag_mha_layer_add_qk_norm(&blank, s, "attn"), AG_ERR_ARG);
    cr_assert(strstr(ag_store_error(s), "mha 'attn': QK-norm on a layer not made by ag_mha_layer_init"), "%s",
              ag_store_error(s));
    ag_store_free(s);
}

/* The largest gap max - min of log P over the rows of w [B, H, T, S]
 * (infinite when a weight is exactly 0: a one-hot row). */
static double largest_log_gap(const ag_tensor *w)
{
    double worst = 0;
    for (size_t r = 0; r < w->size / QK_S; r++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int s = 0; s < QK_S; s++) {
            double l = log((double)w->data[r * QK_S + s]);
            lo = fmin(lo, l), hi = fmax(hi, l);
        }
        worst = worse_of(worst, hi - lo);
    }
    return worst;
}

Test(blocks, qk_norm_bounds_the_scores_however_large_the_projections_grow)
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
        cr_assert_not_null(ag_mha_layer_forward(g, &q.m, q.x, q.e, NULL, AG_MASK_NEG_INF, &w), "%s", ag_graph_error(g));
        cr_assert(w && w->ndim == 4 && w->shape[3] == QK_S);
        gap[on] = largest_log_gap(w);
        ag_graph_free(g);
        ag_store_free(q.s);
    }
    cr_assert_gt(gap[0], 50, "without QK-norm the rows should saturate (gap %g)", gap[0]);
    cr_assert_leq(gap[1], 2 * sqrt((double)QK_D) + TOL(1e-9, 1e-4), "with QK-norm a row's gap is %g > 2 sqrt(QK_D)",
                  gap[1]);
}

#ifdef AG_DOUBLE
/* cross-attention of x over e, the second sentence's last key masked */
static ag_tensor *build_qk_mha(ag_graph *g, void *p)
{
    qk *q = p;
    static const int valid[QK_B] = {QK_S, QK_S - 1};
    ag_tensor *mask = ag_padding_mask(g, valid, QK_B, 0, QK_T, QK_S);
    return weigh(g, ag_mha_layer_forward(g, &q->m, q->x, q->e, mask, AG_MASK_NEG_INF, NULL));
}

Test(blocks, qk_norm_mha_gradcheck_every_parameter_and_input)
{
    qk q;
    qk_make(&q, 1, 7);
    ag_tensor *in[16];
    int n = 0;
    for (int i = 0; i < ag_store_count(q.s) && n < 16; i++) in[n++] = ag_store_at(q.s, i);
    double worst = 0;
    gradcheck_inputs(build_qk_mha, &q, in, n, &worst);
    cr_log_info("QK-norm mha: worst abs error %.3g", worst);
    ag_store_free(q.s);
}

Test(blocks, qk_norm_encoder_block_gradcheck)
{
    check_option(&(ag_block_config){.qk_norm = 1}, build_encoder, "enc.", 25);
}

Test(blocks, pre_norm_qk_norm_decoder_block_gradcheck)
{
    check_option(&(ag_block_config){.pre_norm = 1, .qk_norm = 1}, build_decoder, "dec.", 26);
}
#endif
