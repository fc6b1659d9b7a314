/* transformer.c: Add&Norm, the feed-forward layer, sinusoidal positions and
 * the Transformer blocks: encoder, decoder and decoder-only, each post-norm
 * (the original Transformer's) or pre-norm (GPT-2's), with a relu, gelu or
 * gelu_tanh feed-forward layer.
 *
 * Invariant: a block made with a zero ag_block_config (or by the init
 * functions without _ex) computes exactly what the original post-norm
 * block did; every option is a switch inside the one forward, not a copy
 * of it. */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>

/* "prefix.part" in buf (64 bytes): a sublayer's name, as a state_dict has
 * it (cut to 63 bytes). */
static const char *child(char *buf, const char *prefix, const char *part)
{
    snprintf(buf, 64, "%s.%s", prefix, part);
    return buf;
}

ag_tensor *ag_add_norm(ag_graph *g, const ag_layer_norm_layer *n, ag_tensor *x, ag_tensor *y, double p_drop)
{
    if (!ag__given(g, "add_norm", "layer", n)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    if (p_drop > 0 && ag_graph_training(g)) y = ag_dropout(g, y, p_drop);
    ag_tensor *sum = ag__layer_done(g, ok, n->weight, 1, ag_add(g, x, y)); /* the norm names its own */
    return ag_layer_norm_layer_forward(g, n, sum);
}

ag_status ag_ffn_layer_init_ex(ag_ffn_layer *f, ag_store *s, const char *prefix, int C, int F, ag_activation act,
                         uint64_t seed)
{
    if (!f || !prefix) return ag__store_fail(s, AG_ERR_ARG, "ffn_init: %s is NULL", f ? "prefix" : "layer");
    memset(f, 0, sizeof *f);
    if (act != AG_ACT_RELU && act != AG_ACT_GELU && act != AG_ACT_GELU_TANH)
        return ag__store_fail(s, AG_ERR_ARG, "ffn '%s': activation %d is not relu (%d), gelu (%d) or gelu_tanh (%d)",
                              prefix, (int)act, AG_ACT_RELU, AG_ACT_GELU, AG_ACT_GELU_TANH);
    f->activation = act;
    char name[64];
    ag_status st = ag_linear_layer_init(&f->dense1, s, child(name, prefix, "dense1"), C, F, 1, seed);
    if (st != AG_OK) return st;
    return ag_linear_layer_init(&f->dense2, s, child(name, prefix, "dense2"), F, C, 1, seed);
}

ag_status ag_ffn_layer_init(ag_ffn_layer *f, ag_store *s, const char *prefix, int C, int F, uint64_t seed)
{
    return ag_ffn_layer_init_ex(f, s, prefix, C, F, AG_ACT_RELU, seed);
}

/* act(dense1(x)).  GELU joins dense1 in one op (linear_gelu: the bits of
 * the two, without keeping dense1's output for the backward); an input
 * that does not fit takes the two ops' path, which names what is wrong. */
static ag_tensor *dense1_act(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x)
{
    if (f->activation == AG_ACT_GELU && x && ag_graph_status(g) == AG_OK && x->ndim >= 1 &&
        x->shape[x->ndim - 1] == f->dense1.in)
        return ag__linear_gelu(g, x, f->dense1.weight, f->dense1.bias);
    ag_tensor *h = ag_linear_layer_forward(g, &f->dense1, x);
    switch (f->activation) {
    case AG_ACT_GELU: return ag_gelu(g, h);
    case AG_ACT_GELU_TANH: return ag_gelu_tanh(g, h);
    default: return ag_relu(g, h);
    }
}

/* Sequences longer than this keep less for the GELU feed-forward layer's
 * backward, at the cost of one more GELU pass (gelu_linear_add); the seam
 * of the attention kernel that keeps no [T, T] matrix (AG__FLASH_KEYS). */
enum { LONG_T = 256 };

/* dense2(act(dense1(x))), plus res (x's shape) when given: res added by
 * dense2 itself (linear_add, the bits of add(res, ffn(x))).  With GELU, a
 * residual and a long sequence x [B, T, C], GELU joins dense2 instead
 * (gelu_linear_add: the same bits, keeping dense1's output alone for the
 * backward, not GELU's value and slope: 8 C fewer values per token, and
 * 2-4% more time at T 128, where memory is not what runs out). */
static ag_tensor *ffn_add(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x, ag_tensor *res)
{
    if (!ag__given(g, "ffn_forward", "layer", f)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    ag_tensor *h;
    if (res && f->activation == AG_ACT_GELU && x && x->ndim >= 3 && x->shape[x->ndim - 2] > LONG_T) {
        h = ag_linear_layer_forward(g, &f->dense1, x);
        h = ag__gelu_linear_add(g, h, f->dense2.weight, f->dense2.bias, res);
    } else {
        h = dense1_act(g, f, x);
        h = res ? ag__linear_add(g, h, f->dense2.weight, f->dense2.bias, res)
                : ag_linear_layer_forward(g, &f->dense2, h);
    }
    return ag__layer_done(g, ok, f->dense1.weight, 2, h);
}

ag_tensor *ag_ffn_layer_forward(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x) { return ffn_add(g, f, x, NULL); }

ag_tensor *ag_ffn_layer_forward_add(ag_graph *g, const ag_ffn_layer *f, ag_tensor *x, ag_tensor *res)
{
    if (!ag__ok(g, "ffn_forward_add", 1, res)) return NULL;
    return ffn_add(g, f, x, res);
}

ag_tensor *ag_positional_encoding(ag_graph *g, int T, int C)
{
    ag_tensor *p = ag_tensor_new(g, AG_SHAPE(T, C));
    if (!p) return NULL;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i += 2) {
            /* each pair of columns is a sine/cosine of one frequency, from
             * 1 down to 1/10000: nearby positions differ in the fast ones,
             * far ones in the slow ones */
            double angle = t / pow(10000.0, (double)i / C);
            p->data[(size_t)t * C + i] = (ag_real)sin(angle);
            if (i + 1 < C) p->data[(size_t)t * C + i + 1] = (ag_real)cos(angle);
        }
    return ag_set_name(p, "positions");
}

/* Every linear layer of a block as its config's init says; by default
 * Xavier-uniform weights and zero biases (the translator's init; d2l's draws
 * the same weights, not the biases).  The output projections (w_o, dense2)
 * write into the residual stream. */
static void init_mha(ag_mha_layer *m, const ag_block_config *c, uint64_t seed)
{
    ag__init_linear(&m->w_q, &c->init, AG_INIT_XAVIER, false, seed);
    ag__init_linear(&m->w_k, &c->init, AG_INIT_XAVIER, false, seed);
    ag__init_linear(&m->w_v, &c->init, AG_INIT_XAVIER, false, seed);
    ag__init_linear(&m->w_o, &c->init, AG_INIT_XAVIER, true, seed);
}

static void init_ffn(ag_ffn_layer *f, const ag_block_config *c, uint64_t seed)
{
    ag__init_linear(&f->dense1, &c->init, AG_INIT_XAVIER, false, seed);
    ag__init_linear(&f->dense2, &c->init, AG_INIT_XAVIER, true, seed);
}

#define TRY(call)                                                                                            \
    do {                                                                                                     \
        ag_status st_ = (call);                                                                              \
        if (st_ != AG_OK) return st_;                                                                        \
    } while (0)

/* The config, checked; NULL is all zeros. */
static ag_status block_config(ag_store *s, const char *prefix, const ag_block_config *cfg, ag_block_config *out)
{
    *out = cfg ? *cfg : (ag_block_config){0};
    if (!prefix) return ag__store_fail(s, AG_ERR_ARG, "block: prefix is NULL");
    if (out->pre_norm != 0 && out->pre_norm != 1)
        return ag__store_fail(s, AG_ERR_ARG, "block '%s': pre_norm is %d, want 0 or 1", prefix, out->pre_norm);
    if (out->causal != 0 && out->causal != 1)
        return ag__store_fail(s, AG_ERR_ARG, "block '%s': causal is %d, want 0 or 1", prefix, out->causal);
    if (out->qk_norm != 0 && out->qk_norm != 1)
        return ag__store_fail(s, AG_ERR_ARG, "block '%s': qk_norm is %d, want 0 or 1", prefix, out->qk_norm);
    char who[80];
    snprintf(who, sizeof who, "block '%s'", prefix);
    return ag__init_check(s, who, &out->init);
}

/* An attention sublayer "<prefix>.<part>", with QK-norm when cfg says so. */
static ag_status block_mha(ag_mha_layer *m, ag_store *s, const char *prefix, const char *part, int C, int H,
                           double dropout, const ag_block_config *cfg, uint64_t seed)
{
    char name[64];
    TRY(ag_mha_layer_init(m, s, child(name, prefix, part), C, H, 1, dropout, seed));
    return cfg->qk_norm ? ag_mha_layer_add_qk_norm(m, s, name) : AG_OK;
}

ag_status ag_encoder_block_init_ex(ag_encoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                   double dropout, const ag_block_config *cfg, uint64_t seed)
{
    if (!b || !prefix) return ag__store_fail(s, AG_ERR_ARG, "encoder_block_init: %s is NULL", b ? "prefix" : "block");
    char name[64];
    memset(b, 0, sizeof *b);
    b->dropout = dropout;
    TRY(block_config(s, prefix, cfg, &b->cfg));
    TRY(block_mha(&b->attention, s, prefix, "attention", C, H, dropout, &b->cfg, seed));
    b->attention.causal = b->cfg.causal;
    TRY(ag_layer_norm_layer_init(&b->norm1, s, child(name, prefix, "norm1"), C));
    TRY(ag_ffn_layer_init_ex(&b->ffn, s, child(name, prefix, "ffn"), C, F, b->cfg.activation, seed));
    TRY(ag_layer_norm_layer_init(&b->norm2, s, child(name, prefix, "norm2"), C));
    init_mha(&b->attention, &b->cfg, seed);
    init_ffn(&b->ffn, &b->cfg, seed);
    return AG_OK;
}

ag_status ag_decoder_block_init_ex(ag_decoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                   double dropout, const ag_block_config *cfg, uint64_t seed)
{
    if (!b || !prefix) return ag__store_fail(s, AG_ERR_ARG, "decoder_block_init: %s is NULL", b ? "prefix" : "block");
    char name[64];
    memset(b, 0, sizeof *b);
    b->dropout = dropout;
    TRY(block_config(s, prefix, cfg, &b->cfg));
    TRY(block_mha(&b->self_attention, s, prefix, "self_attention", C, H, dropout, &b->cfg, seed));
    b->self_attention.causal = b->cfg.causal;
    TRY(ag_layer_norm_layer_init(&b->norm1, s, child(name, prefix, "norm1"), C));
    TRY(block_mha(&b->cross_attention, s, prefix, "cross_attention", C, H, dropout, &b->cfg, seed));
    TRY(ag_layer_norm_layer_init(&b->norm2, s, child(name, prefix, "norm2"), C));
    TRY(ag_ffn_layer_init_ex(&b->ffn, s, child(name, prefix, "ffn"), C, F, b->cfg.activation, seed));
    TRY(ag_layer_norm_layer_init(&b->norm3, s, child(name, prefix, "norm3"), C));
    init_mha(&b->self_attention, &b->cfg, seed), init_mha(&b->cross_attention, &b->cfg, seed);
    init_ffn(&b->ffn, &b->cfg, seed);
    return AG_OK;
}

ag_status ag_encoder_block_init(ag_encoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                double dropout, uint64_t seed)
{
    return ag_encoder_block_init_ex(b, s, prefix, C, H, F, dropout, NULL, seed);
}

ag_status ag_decoder_block_init(ag_decoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                double dropout, uint64_t seed)
{
    return ag_decoder_block_init_ex(b, s, prefix, C, H, F, dropout, NULL, seed);
}

ag_status ag_decoder_only_block_init(ag_decoder_only_block *b, ag_store *s, const char *prefix, int C, int H,
                                     int F, double dropout, const ag_block_config *cfg, uint64_t seed)
{
    if (!b) return ag__store_fail(s, AG_ERR_ARG, "decoder_only_block_init: block is NULL");
    ag_block_config c = cfg ? *cfg : (ag_block_config){0};
    c.causal = 1;
    return ag_encoder_block_init_ex(b, s, prefix, C, H, F, dropout, &c, seed);
}

/* A sublayer f around the residual stream x, in two steps:
 *   in  = sublayer_in(x):          pre-norm: norm(x);  post-norm: x
 *   x   = sublayer_out(x, f(in)):  pre-norm: x + dropout(f);  post-norm: norm(x + dropout(f))
 * When no dropout applies, f's last dense layer adds x itself (linear_add,
 * with the bits of the add): f is given the residual (residual(x)) and
 * returns x + f. */
static ag_tensor *sublayer_in(ag_graph *g, int pre_norm, const ag_layer_norm_layer *n, ag_tensor *x)
{
    return pre_norm ? ag_layer_norm_layer_forward(g, n, x) : x;
}

/* What f adds to its output itself: x, unless dropout comes between (p_drop
 * is 0 outside training). */
static ag_tensor *residual(double p_drop, ag_tensor *x) { return p_drop > 0 ? NULL : x; }

static ag_tensor *sublayer_out(ag_graph *g, int pre_norm, const ag_layer_norm_layer *n, ag_tensor *x, ag_tensor *fx,
                               double p_drop)
{
    if (residual(p_drop, x)) return pre_norm ? fx : ag_layer_norm_layer_forward(g, n, fx); /* fx is x + f */
    if (!pre_norm) return ag_add_norm(g, n, x, fx, p_drop);
    if (p_drop > 0) fx = ag_dropout(g, fx, p_drop);
    return ag_add(g, x, fx);
}

static ag_tensor *encoder_block_rows(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, const ag__rows *rows,
                                     ag_tensor *src_mask, ag_tensor **weights)
{
    double p = ag_graph_training(g) ? b->dropout : 0;
    int pre = b->cfg.pre_norm;
    ag_tensor *h = sublayer_in(g, pre, &b->norm1, x);
    ag_tensor *a = ag__mha_rows(g, &b->attention, h, rows, h, rows, src_mask, AG_MASK_NEG_INF, weights,
                                residual(p, x));
    x = sublayer_out(g, pre, &b->norm1, x, a, p);
    h = sublayer_in(g, pre, &b->norm2, x);
    return sublayer_out(g, pre, &b->norm2, x, ffn_add(g, &b->ffn, h, residual(p, x)), p);
}

static ag_tensor *decoder_block_rows(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, const ag__rows *rows,
                                     ag_tensor *enc, const ag__rows *enc_rows, ag_tensor *self_mask,
                                     ag_tensor *src_mask, ag_tensor **self_w, ag_tensor **cross_w)
{
    double p = ag_graph_training(g) ? b->dropout : 0;
    int pre = b->cfg.pre_norm;
    ag_tensor *h = sublayer_in(g, pre, &b->norm1, x);
    ag_tensor *a = ag__mha_rows(g, &b->self_attention, h, rows, h, rows, self_mask, AG_MASK_NEG_INF, self_w,
                                residual(p, x));
    x = sublayer_out(g, pre, &b->norm1, x, a, p);
    h = sublayer_in(g, pre, &b->norm2, x);
    ag_tensor *c = ag__mha_rows(g, &b->cross_attention, h, rows, enc, enc_rows, src_mask, AG_MASK_NEG_INF, cross_w,
                                residual(p, x));
    x = sublayer_out(g, pre, &b->norm2, x, c, p);
    h = sublayer_in(g, pre, &b->norm3, x);
    return sublayer_out(g, pre, &b->norm3, x, ffn_add(g, &b->ffn, h, residual(p, x)), p);
}

/* The blocks, with an error inside named by the block's path ("blocks.0: ...",
 * or a sublayer's, "blocks.0.norm1: ..."): the path of its first parameter,
 * "<block>.attention.w_q.weight", less three parts. */
ag_tensor *ag__encoder_block_rows(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *src_mask, ag_tensor **weights)
{
    bool ok = ag_graph_status(g) == AG_OK;
    return ag__layer_done(g, ok, b->attention.w_q.weight, 3, encoder_block_rows(g, b, x, rows, src_mask, weights));
}

ag_tensor *ag__decoder_block_rows(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *enc, const ag__rows *enc_rows, ag_tensor *self_mask,
                                  ag_tensor *src_mask, ag_tensor **self_w, ag_tensor **cross_w)
{
    bool ok = ag_graph_status(g) == AG_OK;
    ag_tensor *y = decoder_block_rows(g, b, x, rows, enc, enc_rows, self_mask, src_mask, self_w, cross_w);
    return ag__layer_done(g, ok, b->self_attention.w_q.weight, 3, y);
}

ag_tensor *ag_encoder_block_forward(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, ag_tensor *src_mask,
                                    ag_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ag__given(g, "encoder_block_forward", "block", b)) return NULL;
    return ag__encoder_block_rows(g, b, x, NULL, src_mask, weights);
}

ag_tensor *ag_decoder_block_forward(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, ag_tensor *enc,
                                    ag_tensor *self_mask, ag_tensor *src_mask, ag_tensor **self_w,
                                    ag_tensor **cross_w)
{
    if (self_w) *self_w = NULL;
    if (cross_w) *cross_w = NULL;
    if (!ag__given(g, "decoder_block_forward", "block", b)) return NULL;
    return ag__decoder_block_rows(g, b, x, NULL, enc, NULL, self_mask, src_mask, self_w, cross_w);
}

ag_tensor *ag_decoder_only_block_forward(ag_graph *g, const ag_decoder_only_block *b, ag_tensor *x,
                                         ag_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ag__given(g, "decoder_only_block_forward", "block", b)) return NULL;
    return ag__encoder_block_rows(g, b, x, NULL, NULL, weights);
}
