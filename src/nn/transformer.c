/* transformer.c: Add&Norm, the feed-forward layer, sinusoidal positions and
 * the encoder and decoder blocks of the original Transformer (post-norm). */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>

ag_tensor *ag_add_norm(ag_graph *g, const ag_norm *n, ag_tensor *x, ag_tensor *y, double p_drop)
{
    if (p_drop > 0 && ag_graph_training(g)) y = ag_dropout(g, y, p_drop);
    return ag_norm_forward(g, n, ag_add(g, x, y));
}

ag_status ag_ffn_init(ag_ffn *f, ag_store *s, const char *prefix, int C, int F, uint64_t seed)
{
    char name[64];
    snprintf(name, sizeof name, "%s.dense1", prefix);
    ag_status st = ag_linear_init(&f->dense1, s, name, C, F, 1, seed);
    if (st != AG_OK) return st;
    snprintf(name, sizeof name, "%s.dense2", prefix);
    return ag_linear_init(&f->dense2, s, name, F, C, 1, seed);
}

ag_tensor *ag_ffn_forward(ag_graph *g, const ag_ffn *f, ag_tensor *x)
{
    return ag_linear_forward(g, &f->dense2, ag_relu(g, ag_linear_forward(g, &f->dense1, x)));
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

/* Xavier-uniform weights and zero biases for every linear layer of an mha or
 * ffn (the translator's init; d2l's draws the same weights, not the biases). */
static void xavier(ag_linear *l, uint64_t seed)
{
    ag_init_xavier_uniform(l->weight, ag_param_seed(seed, l->weight->name));
    if (l->bias) ag_init_const(l->bias, 0);
}

static void xavier_mha(ag_mha *m, uint64_t seed)
{
    xavier(&m->w_q, seed), xavier(&m->w_k, seed), xavier(&m->w_v, seed), xavier(&m->w_o, seed);
}

#define TRY(call)                                                                                            \
    do {                                                                                                     \
        ag_status st_ = (call);                                                                              \
        if (st_ != AG_OK) return st_;                                                                        \
    } while (0)

ag_status ag_encoder_block_init(ag_encoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                double dropout, uint64_t seed)
{
    char name[64];
    memset(b, 0, sizeof *b);
    b->dropout = dropout;
    snprintf(name, sizeof name, "%s.attention", prefix);
    TRY(ag_mha_init(&b->attention, s, name, C, H, 1, dropout, seed));
    snprintf(name, sizeof name, "%s.norm1", prefix);
    TRY(ag_norm_init(&b->norm1, s, name, C));
    snprintf(name, sizeof name, "%s.ffn", prefix);
    TRY(ag_ffn_init(&b->ffn, s, name, C, F, seed));
    snprintf(name, sizeof name, "%s.norm2", prefix);
    TRY(ag_norm_init(&b->norm2, s, name, C));
    xavier_mha(&b->attention, seed);
    xavier(&b->ffn.dense1, seed), xavier(&b->ffn.dense2, seed);
    return AG_OK;
}

ag_status ag_decoder_block_init(ag_decoder_block *b, ag_store *s, const char *prefix, int C, int H, int F,
                                double dropout, uint64_t seed)
{
    char name[64];
    memset(b, 0, sizeof *b);
    b->dropout = dropout;
    snprintf(name, sizeof name, "%s.self_attention", prefix);
    TRY(ag_mha_init(&b->self_attention, s, name, C, H, 1, dropout, seed));
    snprintf(name, sizeof name, "%s.norm1", prefix);
    TRY(ag_norm_init(&b->norm1, s, name, C));
    snprintf(name, sizeof name, "%s.cross_attention", prefix);
    TRY(ag_mha_init(&b->cross_attention, s, name, C, H, 1, dropout, seed));
    snprintf(name, sizeof name, "%s.norm2", prefix);
    TRY(ag_norm_init(&b->norm2, s, name, C));
    snprintf(name, sizeof name, "%s.ffn", prefix);
    TRY(ag_ffn_init(&b->ffn, s, name, C, F, seed));
    snprintf(name, sizeof name, "%s.norm3", prefix);
    TRY(ag_norm_init(&b->norm3, s, name, C));
    xavier_mha(&b->self_attention, seed), xavier_mha(&b->cross_attention, seed);
    xavier(&b->ffn.dense1, seed), xavier(&b->ffn.dense2, seed);
    return AG_OK;
}

ag_tensor *ag__encoder_block_rows(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *src_mask, ag_tensor **weights)
{
    double p = ag_graph_training(g) ? b->dropout : 0;
    ag_tensor *a = ag__mha_rows(g, &b->attention, x, rows, x, rows, src_mask, AG_MASK_NEG_INF, weights);
    x = ag_add_norm(g, &b->norm1, x, a, p);
    return ag_add_norm(g, &b->norm2, x, ag_ffn_forward(g, &b->ffn, x), p);
}

ag_tensor *ag__decoder_block_rows(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, const ag__rows *rows,
                                  ag_tensor *enc, const ag__rows *enc_rows, ag_tensor *self_mask,
                                  ag_tensor *src_mask, ag_tensor **self_w, ag_tensor **cross_w)
{
    double p = ag_graph_training(g) ? b->dropout : 0;
    ag_tensor *a = ag__mha_rows(g, &b->self_attention, x, rows, x, rows, self_mask, AG_MASK_NEG_INF, self_w);
    x = ag_add_norm(g, &b->norm1, x, a, p);
    ag_tensor *c = ag__mha_rows(g, &b->cross_attention, x, rows, enc, enc_rows, src_mask, AG_MASK_NEG_INF, cross_w);
    x = ag_add_norm(g, &b->norm2, x, c, p);
    return ag_add_norm(g, &b->norm3, x, ag_ffn_forward(g, &b->ffn, x), p);
}

ag_tensor *ag_encoder_block_forward(ag_graph *g, const ag_encoder_block *b, ag_tensor *x, ag_tensor *src_mask,
                                    ag_tensor **weights)
{
    return ag__encoder_block_rows(g, b, x, NULL, src_mask, weights);
}

ag_tensor *ag_decoder_block_forward(ag_graph *g, const ag_decoder_block *b, ag_tensor *x, ag_tensor *enc,
                                    ag_tensor *self_mask, ag_tensor *src_mask, ag_tensor **self_w,
                                    ag_tensor **cross_w)
{
    return ag__decoder_block_rows(g, b, x, NULL, enc, NULL, self_mask, src_mask, self_w, cross_w);
}
