/* seq2seq.c: the encoder-decoder Transformer of "Attention Is All You Need"
 * (post-norm), as d2l.ai builds it, for the toy translator.
 *
 *   encoder: x = dropout(E_src[src] * sqrt(C) + P);  N x encoder block
 *   decoder: y = dropout(E_tgt[tgt_in] * sqrt(C) + P); N x decoder block
 *            logits = dense(y)                               [B, T, Vt]
 *
 * Everything is a composition of primitive ops: no backward here.
 *
 * The training loss needs logits only where a target is not <pad>: it
 * picks those rows of y first (an embedding lookup into y, whose backward
 * scatters the gradient back), so dense and the cross-entropy skip the
 * padded positions, about 45% of them on the toy data.  The loss is the
 * same number: each row's logits and terms do not depend on the others. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

ag_status ag_seq2seq_init(ag_seq2seq *m, ag_store *s, const ag_seq2seq_config *cfg, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (!s || !cfg || cfg->src_vocab < 4 || cfg->tgt_vocab < 4 || cfg->hidden <= 0 || cfg->heads <= 0 ||
        cfg->ffn <= 0 || cfg->layers <= 0 || cfg->max_len <= 0 || !(cfg->dropout >= 0 && cfg->dropout < 1))
        return AG_ERR_ARG;
    if (cfg->hidden % cfg->heads) return AG_ERR_SHAPE;
    m->cfg = *cfg;
    int C = cfg->hidden;
    m->enc = ag__calloc((size_t)cfg->layers, sizeof *m->enc);
    m->dec = ag__calloc((size_t)cfg->layers, sizeof *m->dec);
    if (!m->enc || !m->dec) {
        ag_seq2seq_free(m);
        return AG_ERR_NOMEM;
    }
    m->src_embedding = ag_param(s, "encoder.embedding.weight", AG_SHAPE(cfg->src_vocab, C));
    m->tgt_embedding = ag_param(s, "decoder.embedding.weight", AG_SHAPE(cfg->tgt_vocab, C));
    if (!m->src_embedding || !m->tgt_embedding) goto fail;
    ag_init_normal(m->src_embedding, 0, 1 / sqrt((double)C), ag_param_seed(seed, m->src_embedding->name));
    ag_init_normal(m->tgt_embedding, 0, 1 / sqrt((double)C), ag_param_seed(seed, m->tgt_embedding->name));
    char name[64];
    for (int i = 0; i < cfg->layers; i++) {
        snprintf(name, sizeof name, "encoder.blocks.%d", i);
        if (ag_encoder_block_init(&m->enc[i], s, name, C, cfg->heads, cfg->ffn, cfg->dropout, seed) != AG_OK)
            goto fail;
    }
    for (int i = 0; i < cfg->layers; i++) {
        snprintf(name, sizeof name, "decoder.blocks.%d", i);
        if (ag_decoder_block_init(&m->dec[i], s, name, C, cfg->heads, cfg->ffn, cfg->dropout, seed) != AG_OK)
            goto fail;
    }
    if (ag_linear_init(&m->dense, s, "decoder.dense", C, cfg->tgt_vocab, 1, seed) != AG_OK) goto fail;
    ag_init_xavier_uniform(m->dense.weight, ag_param_seed(seed, m->dense.weight->name));
    ag_init_const(m->dense.bias, 0);
    return AG_OK;
fail:
    ag_seq2seq_free(m);
    return AG_ERR_ARG;
}

void ag_seq2seq_free(ag_seq2seq *m)
{
    if (!m) return;
    ag__free(m->enc);
    ag__free(m->dec);
    m->enc = NULL;
    m->dec = NULL;
}

/* dropout(E[ids] * sqrt(C) + P[:L]):  ids [B, L] -> [B, L, C] */
static ag_tensor *embed(ag_graph *g, const ag_seq2seq *m, ag_tensor *table, const int *ids, int B, int L)
{
    int C = m->cfg.hidden;
    if (L > m->cfg.max_len) {
        ag_graph_fail(g, AG_ERR_SHAPE, "seq2seq: sequence of %d tokens, the model has positions for %d", L,
                      m->cfg.max_len);
        return NULL;
    }
    ag_tensor *x = ag_scale(g, ag_embedding(g, table, ids, AG_SHAPE(B, L)), sqrt((double)C));
    x = ag_add(g, x, ag_positional_encoding(g, L, C));
    if (ag_graph_training(g) && m->cfg.dropout > 0) x = ag_dropout(g, x, m->cfg.dropout);
    return x;
}

/* The weights of layer i go to w's slots when w is given and has room. */
static ag_tensor **slot(ag_tensor **arr, ag_seq2seq_weights *w, int i)
{
    return w && i < AG_SEQ2SEQ_MAX_LAYERS ? &arr[i] : NULL;
}

static ag_tensor *encode(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B, int S,
                         ag_tensor **src_mask, ag_seq2seq_weights *w)
{
    ag_tensor *mask = ag_padding_mask(g, src_valid, B, 0, S, S);
    if (src_mask) *src_mask = mask;
    ag_tensor *x = embed(g, m, m->src_embedding, src, B, S);
    for (int i = 0; i < m->cfg.layers; i++)
        x = ag_encoder_block_forward(g, &m->enc[i], x, mask, slot(w ? w->enc_self : NULL, w, i));
    return ag_set_name(x, "encoder_out");
}

/* The decoder blocks' output y [B, T, C], before the dense layer. */
static ag_tensor *decode_hidden(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask,
                                const int *tgt_in, int B, int T, ag_seq2seq_weights *w)
{
    ag_tensor *causal = ag_causal_mask(g, T, T);
    ag_tensor *y = embed(g, m, m->tgt_embedding, tgt_in, B, T);
    for (int i = 0; i < m->cfg.layers; i++)
        y = ag_decoder_block_forward(g, &m->dec[i], y, enc, causal, src_mask, slot(w ? w->dec_self : NULL, w, i),
                                     slot(w ? w->dec_cross : NULL, w, i));
    return y;
}

static ag_tensor *decode(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask, const int *tgt_in,
                         int B, int T, ag_seq2seq_weights *w)
{
    ag_tensor *y = decode_hidden(g, m, enc, src_mask, tgt_in, B, T, w);
    return ag_set_name(ag_linear_forward(g, &m->dense, y), "logits");
}

ag_tensor *ag_seq2seq_encode(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                             int S, ag_tensor **src_mask)
{
    return encode(g, m, src, src_valid, B, S, src_mask, NULL);
}

ag_tensor *ag_seq2seq_decode(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask,
                             const int *tgt_in, int B, int T)
{
    return decode(g, m, enc, src_mask, tgt_in, B, T, NULL);
}

ag_tensor *ag_seq2seq_trace(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B, int S,
                            const int *tgt_in, int T, ag_seq2seq_weights *w)
{
    memset(w, 0, sizeof *w);
    w->layers = m->cfg.layers < AG_SEQ2SEQ_MAX_LAYERS ? m->cfg.layers : AG_SEQ2SEQ_MAX_LAYERS;
    int training = ag_graph_training(g);
    ag_graph_set_training(g, 0);
    ag_tensor *mask = NULL;
    ag_tensor *enc = encode(g, m, src, src_valid, B, S, &mask, w);
    ag_tensor *logits = decode(g, m, enc, mask, tgt_in, B, T, w);
    ag_graph_set_training(g, training);
    return logits;
}

ag_tensor *ag_seq2seq_loss(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid,
                           const int *tgt_in, const int *tgt_out, int B, int S, int T)
{
    ag_tensor *mask = NULL;
    ag_tensor *enc = ag_seq2seq_encode(g, m, src, src_valid, B, S, &mask);
    ag_tensor *y = decode_hidden(g, m, enc, mask, tgt_in, B, T, NULL);
    if (!y) return NULL;
    /* positions with a target (not <pad>): their rows of y and targets */
    int n = 0, BT = B * T, C = m->cfg.hidden;
    int *rows = ag__alloc(g, (size_t)(BT > 0 ? BT : 1) * 2 * sizeof(int)), *targets = rows ? rows + BT : NULL;
    if (!rows) return NULL;
    for (int p = 0; p < BT; p++)
        if (tgt_out[p] != 0) rows[n] = p, targets[n++] = tgt_out[p];
    ag_tensor *picked = ag_embedding(g, ag_reshape(g, y, AG_SHAPE(BT, C)), rows, 1, (const int[]){n}); /* [n, C] */
    ag_tensor *logits = ag_set_name(ag_linear_forward(g, &m->dense, picked), "logits");              /* [n, Vt] */
    return ag_set_name(ag_cross_entropy(g, logits, targets, 0, 0.0), "loss");
}

ag_status ag_seq2seq_greedy(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                            int S, int bos, int eos, int max_len, int *out, int *out_len)
{
    if (max_len > m->cfg.max_len) max_len = m->cfg.max_len;
    int *prefix = ag__calloc((size_t)B * (size_t)max_len, sizeof(int));
    unsigned char *done = ag__calloc((size_t)B, 1);
    if (!prefix || !done) {
        ag__free(prefix);
        ag__free(done);
        return AG_ERR_NOMEM;
    }
    int training = ag_graph_training(g);
    ag_graph_set_training(g, 0);
    for (int b = 0; b < B; b++) out_len[b] = 0, prefix[(size_t)b * max_len] = bos;
    ag_status st = AG_OK;
    /* The encoder runs once; each step decodes the whole prefix again on the
     * same graph (no reset between steps, so the encoder output stays). */
    ag_graph_reset(g);
    ag_tensor *mask = NULL;
    ag_tensor *enc = ag_seq2seq_encode(g, m, src, src_valid, B, S, &mask);
    for (int t = 0; t < max_len; t++) {
        int T = t + 1;
        int *tin = ag__alloc(g, (size_t)B * T * sizeof(int));
        if (!tin) break;
        for (int b = 0; b < B; b++) memcpy(tin + (size_t)b * T, prefix + (size_t)b * max_len, (size_t)T * sizeof(int));
        ag_tensor *logits = ag_seq2seq_decode(g, m, enc, mask, tin, B, T);
        if ((st = ag_graph_status(g)) != AG_OK) break;
        int V = m->cfg.tgt_vocab, all_done = 1;
        for (int b = 0; b < B; b++) {
            if (done[b]) continue;
            const ag_real *row = logits->data + ((size_t)b * T + t) * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            if (best == eos) {
                done[b] = 1;
                continue;
            }
            out[(size_t)b * max_len + out_len[b]++] = best;
            if (t + 1 < max_len) prefix[(size_t)b * max_len + t + 1] = best;
            all_done = 0;
        }
        if (all_done) break;
    }
    if (st == AG_OK) st = ag_graph_status(g);
    ag_graph_set_training(g, training);
    ag__free(prefix);
    ag__free(done);
    return st;
}
