/* seq2seq.c: the encoder-decoder Transformer of "Attention Is All You Need"
 * (post-norm; pre-norm with a final LayerNorm per stack, and QK-norm, as
 * options of the config), for the toy translator.  d2l.ai's Transformer chapter builds
 * the same layers but for one thing: its attention projections have no
 * bias (here they have one).  Its initial weights are those of d2l's
 * train_seq2seq, AG_SEQ2SEQ_INIT_D2L here; the config's default (init 0)
 * is AG_SEQ2SEQ_INIT_SCALED.  attograd_nn.h says what each draws.
 *
 *   encoder: x = dropout(E_src[src] * sqrt(C) + P);  N x encoder block
 *   decoder: y = dropout(E_tgt[tgt_in] * sqrt(C) + P); N x decoder block
 *            logits = dense(y)                               [B, T, Vt]
 * pre_norm: x = encoder.norm(x) after the encoder blocks and
 * y = decoder.norm(y) after the decoder blocks (each pre-norm block leaves
 * its residual stream unnormalised).
 *
 * Everything is a composition of primitive ops: no backward here.
 *
 * The training loss runs on the real tokens only.  On the toy data about a
 * third of the source positions and half of the target positions are
 * padding; their rows never reach the loss (attention masks padded keys,
 * and the causal mask keeps a target from seeing what follows it), so the
 * loss packs the real rows [n, C] from the embeddings on, and every
 * position-wise layer skips the padding.  Attention alone unpacks its
 * queries, keys and values to [B, T, C], zeros at the padding (see
 * ag__rows in internal.h).  The loss is the same number as with the
 * padded layout (tests/test_seq2seq.c compares them); only the float
 * rounding of sums over rows and the dropout draws (fewer rows) differ. */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>

/* nn.Linear's default bias, U(-1/sqrt(in), 1/sqrt(in)) */
static void torch_bias(ag_linear_layer *l, uint64_t seed)
{
    double k = 1 / sqrt((double)l->in);
    ag_init_uniform(l->bias, -k, k, ag_param_seed(seed, l->bias->name));
}

/* The initial weights of m->cfg.init (attograd_nn.h), each parameter
 * drawn from its own seed.  The blocks come with Xavier-uniform weights and
 * zero biases (src/nn/transformer.c); this sets the rest. */
static void init_weights(ag_seq2seq *m, uint64_t seed)
{
    int d2l = m->cfg.init == AG_SEQ2SEQ_INIT_D2L;
    /* scaled: std 1/sqrt(C), so that E * sqrt(C) has unit variance */
    double emb_std = d2l ? 1 : 1 / sqrt((double)m->cfg.hidden);
    ag_init_normal(m->src_embedding, 0, emb_std, ag_param_seed(seed, m->src_embedding->name));
    ag_init_normal(m->tgt_embedding, 0, emb_std, ag_param_seed(seed, m->tgt_embedding->name));
    ag_init_xavier_uniform(m->dense.weight, ag_param_seed(seed, m->dense.weight->name));
    ag_init_const(m->dense.bias, 0);
    if (!d2l) return;
    /* d2l keeps nn.Linear's default bias where it has one; its attention
     * projections have none, so theirs stay 0 */
    torch_bias(&m->dense, seed);
    for (int i = 0; i < m->cfg.layers; i++) {
        torch_bias(&m->enc[i].ffn.dense1, seed), torch_bias(&m->enc[i].ffn.dense2, seed);
        torch_bias(&m->dec[i].ffn.dense1, seed), torch_bias(&m->dec[i].ffn.dense2, seed);
    }
}

ag_status ag_seq2seq_init(ag_seq2seq *m, ag_store *s, const ag_seq2seq_config *cfg, uint64_t seed)
{
    if (!m || !cfg) return ag__store_fail(s, AG_ERR_ARG, "seq2seq_init: %s is NULL", m ? "config" : "model");
    memset(m, 0, sizeof *m);
    if (!s || !cfg) return ag__store_fail(s, AG_ERR_ARG, "seq2seq: %s is NULL", cfg ? "the store" : "the config");
    if (cfg->src_vocab < 4 || cfg->tgt_vocab < 4)
        return ag__store_fail(s, AG_ERR_ARG, "seq2seq: vocabularies of %d and %d tokens, need >= 4 (the specials)",
                              cfg->src_vocab, cfg->tgt_vocab);
    if (cfg->hidden <= 0 || cfg->heads <= 0 || cfg->ffn <= 0 || cfg->layers <= 0 || cfg->max_len <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "seq2seq: hidden %d, heads %d, ffn %d, layers %d, max_len %d: each must "
                              "be >= 1", cfg->hidden, cfg->heads, cfg->ffn, cfg->layers, cfg->max_len);
    if (!(cfg->dropout >= 0 && cfg->dropout < 1))
        return ag__store_fail(s, AG_ERR_ARG, "seq2seq: dropout = %g must be in [0, 1)", cfg->dropout);
    if (cfg->init != AG_SEQ2SEQ_INIT_SCALED && cfg->init != AG_SEQ2SEQ_INIT_D2L)
        return ag__store_fail(s, AG_ERR_ARG, "seq2seq: init = %d is not AG_SEQ2SEQ_INIT_SCALED (0) or "
                              "AG_SEQ2SEQ_INIT_D2L (1)", cfg->init);
    if ((cfg->pre_norm != 0 && cfg->pre_norm != 1) || (cfg->qk_norm != 0 && cfg->qk_norm != 1))
        return ag__store_fail(s, AG_ERR_ARG, "seq2seq: pre_norm = %d, qk_norm = %d: each must be 0 or 1",
                              cfg->pre_norm, cfg->qk_norm);
    if (cfg->hidden % cfg->heads)
        return ag__store_fail(s, AG_ERR_SHAPE, "seq2seq: hidden = %d is not a multiple of heads = %d", cfg->hidden,
                              cfg->heads);
    m->cfg = *cfg;
    int C = cfg->hidden;
    m->enc = ag__calloc((size_t)cfg->layers, sizeof *m->enc);
    m->dec = ag__calloc((size_t)cfg->layers, sizeof *m->dec);
    if (!m->enc || !m->dec) {
        ag_seq2seq_free(m);
        return ag__store_fail(s, AG_ERR_NOMEM, "seq2seq: out of memory for %d layers", cfg->layers);
    }
    m->src_embedding = ag_param(s, "encoder.embedding.weight", AG_SHAPE(cfg->src_vocab, C));
    m->tgt_embedding = ag_param(s, "decoder.embedding.weight", AG_SHAPE(cfg->tgt_vocab, C));
    if (!m->src_embedding || !m->tgt_embedding) goto fail;
    char name[64];
    ag_block_config bc = {.pre_norm = cfg->pre_norm, .qk_norm = cfg->qk_norm};
    for (int i = 0; i < cfg->layers; i++) {
        snprintf(name, sizeof name, "encoder.blocks.%d", i);
        if (ag_encoder_block_init_ex(&m->enc[i], s, name, C, cfg->heads, cfg->ffn, cfg->dropout, &bc, seed) != AG_OK)
            goto fail;
    }
    if (cfg->pre_norm && ag_layer_norm_layer_init(&m->enc_norm, s, "encoder.norm", C) != AG_OK) goto fail;
    for (int i = 0; i < cfg->layers; i++) {
        snprintf(name, sizeof name, "decoder.blocks.%d", i);
        if (ag_decoder_block_init_ex(&m->dec[i], s, name, C, cfg->heads, cfg->ffn, cfg->dropout, &bc, seed) != AG_OK)
            goto fail;
    }
    if (cfg->pre_norm && ag_layer_norm_layer_init(&m->dec_norm, s, "decoder.norm", C) != AG_OK) goto fail;
    if (ag_linear_layer_init(&m->dense, s, "decoder.dense", C, cfg->tgt_vocab, 1, seed) != AG_OK) goto fail;
    init_weights(m, seed);
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

/* dropout(E[ids] * sqrt(C) + P[:L]):  ids [B, L] -> [B, L, C], or the
 * real rows only, [rows->n, C], when rows is given */
static ag_tensor *embed(ag_graph *g, const ag_seq2seq *m, ag_tensor *table, const int *ids, int B, int L,
                        const ag__rows *rows)
{
    int C = m->cfg.hidden;
    if (L > m->cfg.max_len) {
        ag_graph_fail(g, AG_ERR_SHAPE, "seq2seq: sequence of %d tokens, the model has positions for %d", L,
                      m->cfg.max_len);
        return NULL;
    }
    ag_tensor *x;
    if (rows) {
        /* row i is token ids[at[i]] at position at[i] % L */
        int n = rows->n, *pick = ag__alloc(g, ((size_t)n + 1) * 2 * sizeof(int)), *pos = pick ? pick + n + 1 : NULL;
        if (!pick) return NULL;
        for (int i = 0; i < n; i++) pick[i] = ids[rows->at[i]], pos[i] = rows->at[i] % L;
        x = ag_scale(g, ag_embedding(g, table, pick, AG_SHAPE(n)), sqrt((double)C));
        x = ag_add(g, x, ag_embedding(g, ag_positional_encoding(g, L, C), pos, AG_SHAPE(n)));
    } else {
        x = ag_scale(g, ag_embedding(g, table, ids, AG_SHAPE(B, L)), sqrt((double)C));
        x = ag_add(g, x, ag_positional_encoding(g, L, C));
    }
    if (ag_graph_training(g) && m->cfg.dropout > 0) x = ag_dropout(g, x, m->cfg.dropout);
    return x;
}

/* The weights of layer i go to w's slots when w is given and has room. */
static ag_tensor **slot(ag_tensor **arr, ag_seq2seq_weights *w, int i)
{
    return w && i < AG_SEQ2SEQ_MAX_LAYERS ? &arr[i] : NULL;
}

/* The encoder's output: [B, S, C], or [rows->n, C] when rows is given. */
static ag_tensor *encode(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B, int S,
                         const ag__rows *rows, ag_tensor **src_mask, ag_seq2seq_weights *w)
{
    ag_tensor *mask = ag_padding_mask(g, src_valid, B, 0, S, S);
    if (src_mask) *src_mask = mask;
    ag_tensor *x = embed(g, m, m->src_embedding, src, B, S, rows);
    for (int i = 0; i < m->cfg.layers; i++)
        x = ag__encoder_block_rows(g, &m->enc[i], x, rows, mask, slot(w ? w->enc_self : NULL, w, i));
    if (m->cfg.pre_norm) x = ag_layer_norm_layer_forward(g, &m->enc_norm, x);
    return ag_set_name(x, "encoder_out");
}

/* The decoder blocks' output y [B, T, C] (or [rows->n, C]), before the
 * dense layer. */
static ag_tensor *decode_hidden(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, const ag__rows *enc_rows,
                                ag_tensor *src_mask, const int *tgt_in, int B, int T, const ag__rows *rows,
                                ag_seq2seq_weights *w)
{
    ag_tensor *causal = ag_causal_mask(g, T, T);
    ag_tensor *y = embed(g, m, m->tgt_embedding, tgt_in, B, T, rows);
    for (int i = 0; i < m->cfg.layers; i++)
        y = ag__decoder_block_rows(g, &m->dec[i], y, rows, enc, enc_rows, causal, src_mask,
                                   slot(w ? w->dec_self : NULL, w, i), slot(w ? w->dec_cross : NULL, w, i));
    return m->cfg.pre_norm ? ag_layer_norm_layer_forward(g, &m->dec_norm, y) : y;
}

static ag_tensor *decode(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask, const int *tgt_in,
                         int B, int T, ag_seq2seq_weights *w)
{
    ag_tensor *y = decode_hidden(g, m, enc, NULL, src_mask, tgt_in, B, T, NULL, w);
    return ag_set_name(ag_linear_layer_forward(g, &m->dense, y), "logits");
}

ag_tensor *ag_seq2seq_encode(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                             int S, ag_tensor **src_mask)
{
    if (src_mask) *src_mask = NULL;
    if (!ag__given(g, "seq2seq_encode", "model", m)) return NULL;
    return encode(g, m, src, src_valid, B, S, NULL, src_mask, NULL);
}

ag_tensor *ag_seq2seq_decode(ag_graph *g, const ag_seq2seq *m, ag_tensor *enc, ag_tensor *src_mask,
                             const int *tgt_in, int B, int T)
{
    if (!ag__given(g, "seq2seq_decode", "model", m)) return NULL;
    return decode(g, m, enc, src_mask, tgt_in, B, T, NULL);
}

ag_tensor *ag_seq2seq_trace(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B, int S,
                            const int *tgt_in, int T, ag_seq2seq_weights *w)
{
    if (!ag__given(g, "seq2seq_trace", "model", m) || !ag__given(g, "seq2seq_trace", "weights", w)) return NULL;
    memset(w, 0, sizeof *w);
    w->layers = m->cfg.layers < AG_SEQ2SEQ_MAX_LAYERS ? m->cfg.layers : AG_SEQ2SEQ_MAX_LAYERS;
    int training = ag_graph_training(g);
    ag_graph_set_training(g, 0);
    ag_tensor *mask = NULL;
    ag_tensor *enc = encode(g, m, src, src_valid, B, S, NULL, &mask, w);
    ag_tensor *logits = decode(g, m, enc, mask, tgt_in, B, T, w);
    ag_graph_set_training(g, training);
    return logits;
}

ag_tensor *ag_seq2seq_loss(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid,
                           const int *tgt_in, const int *tgt_out, int B, int S, int T)
{
    if (!ag__given(g, "seq2seq_loss", "model", m)) return NULL;
    if (!src || !src_valid || !tgt_in || !tgt_out || B <= 0 || S <= 0 || T <= 0) {
        ag_graph_fail(g, AG_ERR_ARG, "seq2seq_loss: a batch of B %d, S %d, T %d with %s", B, S, T,
                      src && src_valid && tgt_in && tgt_out ? "every array" : "a NULL array");
        return NULL;
    }
    if (S > m->cfg.max_len || T > m->cfg.max_len) { /* before reading the batch */
        ag_graph_fail(g, AG_ERR_SHAPE, "seq2seq: sequence of %d tokens, the model has positions for %d",
                      S > T ? S : T, m->cfg.max_len);
        return NULL;
    }
    /* The real rows: a source's first src_valid[b] positions; a target's
     * positions up to its last token that is not <pad> (the causal mask lets
     * each see only those before it). */
    int *tgt_len = ag__alloc(g, (size_t)B * sizeof(int));
    if (!tgt_len) return NULL;
    for (int b = 0; b < B; b++) {
        tgt_len[b] = 0;
        for (int t = 0; t < T; t++)
            if (tgt_out[b * T + t] != 0) tgt_len[b] = t + 1;
    }
    ag__rows *src_rows = ag__rows_new(g, src_valid, B, S), *tgt_rows = ag__rows_new(g, tgt_len, B, T);
    if (!src_rows || !tgt_rows) return NULL;
    ag_tensor *mask = NULL;
    ag_tensor *enc = encode(g, m, src, src_valid, B, S, src_rows, &mask, NULL);               /* [ns, C] */
    ag_tensor *y = decode_hidden(g, m, enc, src_rows, mask, tgt_in, B, T, tgt_rows, NULL);    /* [nt, C] */
    int *targets = ag__alloc(g, ((size_t)tgt_rows->n + 1) * sizeof(int));
    if (!targets) return NULL;
    for (int i = 0; i < tgt_rows->n; i++) targets[i] = tgt_out[tgt_rows->at[i]];
    ag_tensor *logits = ag_set_name(ag_linear_layer_forward(g, &m->dense, y), "logits"); /* [nt, Vt] */
    /* a <pad> target inside a sentence (none in the translator's data) is
     * ignored, as before */
    return ag_set_name(ag_cross_entropy(g, logits, targets, 0, 0.0), "loss");
}

/* ---- greedy decoding with a key/value cache ------------------------------------ */

/* What every decoding step reads and no step changes or grows: per decoder
 * layer l, the self-attention cache self[l] (keys then values, [B, L, C]
 * each, position t written at step t) and the cross-attention's keys and
 * values of the encoder output, cross[l] ([B, S, C] each, projected once);
 * the source padding mask [B, 1, 1, S]; the positions [L, C].  Kept in
 * memory of its own, so the graph is reset at every step. */
typedef struct decode_state {
    int B, S, L, C, layers;
    ag_real *self, *cross, *mask, *pos;
} decode_state;

static void decode_state_free(decode_state *d) { ag__free(d->self); }

/* Run the encoder on g, copy what the steps need into d (one allocation).
 * Returns g's status. */
static ag_status decode_state_init(decode_state *d, ag_graph *g, const ag_seq2seq *m, const int *src,
                                   const int *src_valid, int B, int S, int L)
{
    int C = m->cfg.hidden, n = m->cfg.layers;
    *d = (decode_state){.B = B, .S = S, .L = L, .C = C, .layers = n};
    size_t self = 2 * (size_t)B * L * C, cross = 2 * (size_t)B * S * C, mask = (size_t)B * S;
    d->self = ag__calloc(n * (self + cross) + mask + (size_t)L * C, sizeof(ag_real));
    if (!d->self) return ag_graph_fail(g, AG_ERR_NOMEM, "seq2seq_greedy: out of memory for the cache");
    d->cross = d->self + n * self, d->mask = d->cross + n * cross, d->pos = d->mask + mask;
    ag_graph_reset(g);
    ag_tensor *src_mask = NULL;
    ag_tensor *enc = ag_seq2seq_encode(g, m, src, src_valid, B, S, &src_mask);
    ag_tensor *pe = ag_positional_encoding(g, L, C);
    for (int l = 0; l < n && ag_graph_status(g) == AG_OK; l++) {
        const ag_mha_layer *ca = &m->dec[l].cross_attention;
        ag_tensor *k = ag__qk_norm(g, ca, &ca->k_norm, ag_linear_layer_forward(g, &ca->w_k, enc));
        ag_tensor *v = ag_linear_layer_forward(g, &ca->w_v, enc);
        if (!k || !v) break;
        memcpy(d->cross + l * cross, k->data, cross / 2 * sizeof(ag_real));
        memcpy(d->cross + l * cross + cross / 2, v->data, cross / 2 * sizeof(ag_real));
    }
    if (ag_graph_status(g) != AG_OK || !src_mask || !pe) return ag_graph_status(g);
    memcpy(d->mask, src_mask->data, mask * sizeof(ag_real));
    memcpy(d->pos, pe->data, (size_t)L * C * sizeof(ag_real));
    return AG_OK;
}

/* residual sublayer, eval mode: pre-norm x + f, post-norm norm(x + f) */
static ag_tensor *residual(ag_graph *g, int pre, const ag_layer_norm_layer *n, ag_tensor *x, ag_tensor *fx)
{
    return pre ? ag_add(g, x, fx) : ag_add_norm(g, n, x, fx, 0);
}

/* Decoder block l on the rows y [B, 1, C] at position t, as
 * ag_decoder_block_forward computes that row of the whole prefix:
 * self-attention over the cache, cross-attention over the encoder's
 * projected keys and values, FFN. */
static ag_tensor *decoder_block_step(ag_graph *g, const ag_decoder_block *b, const decode_state *d, int l, int t,
                                     ag_tensor *y)
{
    int pre = b->cfg.pre_norm, B = d->B, S = d->S, C = d->C;
    ag_real *self = d->self + 2 * (size_t)l * B * d->L * C, *cross = d->cross + 2 * (size_t)l * B * S * C;
    ag_tensor *h = pre ? ag_layer_norm_layer_forward(g, &b->norm1, y) : y;
    y = residual(g, pre, &b->norm1, y, ag__mha_cached(g, &b->self_attention, h, 0, self, self + (size_t)B * d->L * C, t, d->L));
    h = pre ? ag_layer_norm_layer_forward(g, &b->norm2, y) : y;
    ag_tensor *k = ag__view_of(g, cross, AG_SHAPE(B, S, C));
    ag_tensor *v = ag__view_of(g, cross + (size_t)B * S * C, AG_SHAPE(B, S, C));
    ag_tensor *mask = ag__view_of(g, d->mask, AG_SHAPE(B, 1, 1, S));
    y = residual(g, pre, &b->norm2, y, ag__mha_projected(g, &b->cross_attention, h, k, v, mask, AG_MASK_NEG_INF));
    h = pre ? ag_layer_norm_layer_forward(g, &b->norm3, y) : y;
    return residual(g, pre, &b->norm3, y, ag_ffn_layer_forward(g, &b->ffn, h));
}

/* The logits [B, 1, V] of position t, whose input ids are ids [B]. */
static ag_tensor *decode_step(ag_graph *g, const ag_seq2seq *m, const decode_state *d, const int *ids, int t)
{
    int C = d->C;
    ag_tensor *y = ag_scale(g, ag_embedding(g, m->tgt_embedding, ids, AG_SHAPE(d->B, 1)), sqrt((double)C));
    y = ag_add(g, y, ag__view_of(g, d->pos + (size_t)t * C, AG_SHAPE(1, C)));
    for (int l = 0; l < d->layers; l++) y = decoder_block_step(g, &m->dec[l], d, l, t, y);
    if (m->cfg.pre_norm) y = ag_layer_norm_layer_forward(g, &m->dec_norm, y);
    return ag_linear_layer_forward(g, &m->dense, y);
}

ag_status ag_seq2seq_greedy(ag_graph *g, const ag_seq2seq *m, const int *src, const int *src_valid, int B,
                            int S, int bos, int eos, int max_len, int *out, int *out_len)
{
    if (!g) return AG_ERR_ARG;
    if (!ag__given(g, "seq2seq_greedy", "model", m) || !ag__given(g, "seq2seq_greedy", "out", out))
        return ag_graph_status(g) ? ag_graph_status(g) : AG_ERR_ARG;
    if (B < 1 || S < 1 || max_len < 1)
        return ag_graph_fail(g, AG_ERR_ARG, "seq2seq_greedy: B = %d, S = %d, max_len = %d: each must be >= 1", B,
                             S, max_len);
    if (max_len > m->cfg.max_len) max_len = m->cfg.max_len;
    int *prefix = ag__calloc((size_t)B * (size_t)max_len, sizeof(int));
    unsigned char *done = ag__calloc((size_t)B, 1);
    if (!prefix || !done) {
        ag__free(prefix);
        ag__free(done);
        return AG_ERR_NOMEM;
    }
    int training = ag_graph_training(g), grad = ag_graph_grad(g);
    ag_graph_set_training(g, 0);
    ag_graph_set_grad(g, 0);
    for (int b = 0; b < B; b++) out_len[b] = 0, prefix[(size_t)b * max_len] = bos;
    /* The encoder runs once, into d; each step decodes only the newest
     * position of every sentence, its attention reading the keys and values
     * the earlier steps left in d's cache. */
    decode_state d;
    ag_status st = decode_state_init(&d, g, m, src, src_valid, B, S, max_len);
    int *ids = ag__calloc((size_t)B, sizeof *ids);
    if (!ids && st == AG_OK) st = ag_graph_fail(g, AG_ERR_NOMEM, "seq2seq_greedy: out of memory");
    for (int t = 0; t < max_len && st == AG_OK; t++) {
        ag_graph_reset(g);
        for (int b = 0; b < B; b++) ids[b] = prefix[(size_t)b * max_len + t];
        ag_tensor *logits = decode_step(g, m, &d, ids, t);
        if ((st = ag_graph_status(g)) != AG_OK) break;
        int V = m->cfg.tgt_vocab, all_done = 1;
        for (int b = 0; b < B; b++) {
            if (done[b]) continue;
            const ag_real *row = logits->data + (size_t)b * V;
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
    ag__free(ids);
    decode_state_free(&d);
    ag_graph_set_grad(g, grad);
    if (st == AG_OK) st = ag_graph_status(g);
    ag_graph_set_training(g, training);
    ag__free(prefix);
    ag__free(done);
    return st;
}
