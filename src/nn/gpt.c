/* gpt.c: a decoder-only Transformer (GPT) from the standard blocks, and its
 * sampling loop (the sampler's filters and draw: sample.c).
 *
 *   x      = embed(ids)                  tokens + learned positions   [B, T, C]
 *   x      = block_i(x), i < L           pre-norm, causal             [B, T, C]
 *   logits = head(norm(x))               tied: x tokens^T             [B, T, V]
 *
 * Sampling draws one token at a time from the last position's logits;
 * next_logits() is the one place that runs the model: with a key/value
 * cache (ag_gpt_cache) it feeds the model only the newest token, whose
 * attention reads the keys and values the earlier positions left.
 *
 * Invariant: every parameter lives in the caller's store under the
 * PyTorch twin's state_dict names (tests/reference/gpt.py); m->blocks is
 * the only memory the model owns.  A cache's rows [0, len) are the keys
 * and values of the positions it was given, in order. */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static ag_status check_config(ag_store *s, const ag_gpt_config *c)
{
    const char *bad = NULL;
    int value = 0;
    if (c->vocab < 1) bad = "vocab", value = c->vocab;
    else if (c->context < 1) bad = "context", value = c->context;
    else if (c->hidden < 1) bad = "hidden", value = c->hidden;
    else if (c->heads < 1) bad = "heads", value = c->heads;
    else if (c->ffn < 1) bad = "ffn", value = c->ffn;
    else if (c->layers < 1) bad = "layers", value = c->layers;
    if (bad) return ag__store_fail(s, AG_ERR_ARG, "gpt: %s = %d, must be >= 1", bad, value);
    if (c->hidden % c->heads)
        return ag__store_fail(s, AG_ERR_SHAPE, "gpt: hidden = %d is not a multiple of heads = %d", c->hidden,
                              c->heads);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return ag__store_fail(s, AG_ERR_ARG, "gpt: dropout = %g must be in [0, 1)", c->dropout);
    if (c->untied != 0 && c->untied != 1)
        return ag__store_fail(s, AG_ERR_ARG, "gpt: untied = %d, want 0 or 1", c->untied);
    return ag__init_check(s, "gpt", &c->init);
}

/* The model's init: its config's, AG_INIT_DEFAULT standing for GPT-2's,
 * with L the model's own unless given. */
static ag_init_opts model_init(const ag_gpt_config *c)
{
    ag_init_opts o = c->init;
    if (o.scheme == AG_INIT_DEFAULT) o.scheme = AG_INIT_GPT2;
    if (o.layers == 0) o.layers = c->layers;
    return o;
}

ag_status ag_gpt_init(ag_gpt *m, ag_store *s, const ag_gpt_config *cfg, uint64_t seed)
{
    if (!m) return ag__store_fail(s, AG_ERR_ARG, "gpt_init: model is NULL");
    memset(m, 0, sizeof *m);
    if (!s || !cfg) return ag__store_fail(s, AG_ERR_ARG, "gpt: %s is NULL", cfg ? "the store" : "the config");
    ag_status st = check_config(s, cfg);
    if (st != AG_OK) return st;
    m->cfg = *cfg;
    const ag_gpt_config *c = &m->cfg;
    ag_init_opts init = model_init(c);
    st = ag_embedding_layer_init_ex(&m->embedding, s, "embedding", c->vocab, c->hidden, c->context, AG_POS_LEARNED,
                                    &init, seed);
    if (st != AG_OK) return st;
    m->blocks = ag__calloc((size_t)c->layers, sizeof *m->blocks);
    if (!m->blocks) return ag__store_fail(s, AG_ERR_NOMEM, "gpt: out of memory for %d blocks", c->layers);
    ag_block_config bc = {.pre_norm = 1, .activation = c->activation, .causal = 1, .init = init};
    char name[64];
    for (int i = 0; i < c->layers && st == AG_OK; i++) {
        snprintf(name, sizeof name, "blocks.%d", i);
        st = ag_decoder_only_block_init(&m->blocks[i], s, name, c->hidden, c->heads, c->ffn, c->dropout, &bc, seed);
    }
    if (st == AG_OK) st = ag_layer_norm_layer_init(&m->norm, s, "norm", c->hidden);
    if (st == AG_OK && c->untied) st = ag_linear_layer_init_ex(&m->head, s, "head", c->hidden, c->vocab, 0, &init, seed);
    if (st != AG_OK) {
        ag_gpt_free(m);
        return st;
    }
    return AG_OK;
}

void ag_gpt_free(ag_gpt *m)
{
    if (!m) return;
    ag__free(m->blocks);
    m->blocks = NULL;
}

ag_tensor *ag_gpt_forward(ag_graph *g, const ag_gpt *m, const int *ids, int B, int T)
{
    if (!ag__ok(g, "gpt", 0)) return NULL;
    if (!m || !m->blocks) {
        ag_graph_fail(g, AG_ERR_ARG, "gpt: the model is %s", m ? "not made (ag_gpt_init)" : "NULL");
        return NULL;
    }
    double p = ag_graph_training(g) ? m->cfg.dropout : 0;
    ag_tensor *x = ag_embedding_layer_forward(g, &m->embedding, ids, B, T); /* [B, T, C] */
    if (p > 0) x = ag_dropout(g, x, p);
    for (int i = 0; i < m->cfg.layers; i++) x = ag_decoder_only_block_forward(g, &m->blocks[i], x, NULL);
    x = ag_layer_norm_layer_forward(g, &m->norm, x);
    ag_tensor *logits = m->cfg.untied ? ag_linear_layer_forward(g, &m->head, x) : ag_embedding_layer_logits(g, &m->embedding, x);
    return ag_set_name(logits, "logits"); /* [B, T, V] */
}

ag_tensor *ag_gpt_loss(ag_graph *g, const ag_gpt *m, const int *ids, const int *targets, int B, int T)
{
    return ag_cross_entropy(g, ag_gpt_forward(g, m, ids, B, T), targets, -1, 0);
}

/* ---- incremental decoding ------------------------------------------------------ */

/* kv holds, for block l, keys then values: [2 L, context, C], the rows of
 * positions [0, len) written, the others zero or stale (finite). */
struct ag_gpt_cache {
    int layers, context, C, len;
    ag_real *kv;
};

ag_gpt_cache *ag_gpt_cache_new(const ag_gpt *m)
{
    if (!m || !m->blocks) return NULL;
    ag_gpt_cache *c = ag__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (ag_gpt_cache){.layers = m->cfg.layers, .context = m->cfg.context, .C = m->cfg.hidden};
    c->kv = ag__calloc(2 * (size_t)c->layers * (size_t)c->context * (size_t)c->C, sizeof *c->kv);
    if (!c->kv) ag_gpt_cache_free(c), c = NULL;
    return c;
}

void ag_gpt_cache_free(ag_gpt_cache *c)
{
    if (!c) return;
    ag__free(c->kv);
    ag__free(c);
}

void ag_gpt_cache_clear(ag_gpt_cache *c) { if (c) c->len = 0; }
int ag_gpt_cache_len(const ag_gpt_cache *c) { return c ? c->len : 0; }

/* One pre-norm block on the rows x [1, T, C] at positions pos ..:
 *   x = x + attention(norm1(x))   (over the cached rows and these)
 *   x = x + ffn(norm2(x))
 * as ag_decoder_only_block_forward in eval mode, for the new rows only.
 * Every row's key and value goes to the cache; the output is rows
 * q0 .. T - 1 only (the last block of a step that needs the last row). */
static ag_tensor *block_cached(ag_graph *g, const ag_decoder_only_block *b, ag_tensor *x, int q0, ag_real *keys,
                               ag_real *values, int pos, int S)
{
    ag_tensor *h = ag_layer_norm_layer_forward(g, &b->norm1, x);
    ag_tensor *a = ag__mha_cached(g, &b->attention, h, q0, keys, values, pos, S);
    if (q0 && x) x = ag_slice(g, x, 1, q0, x->shape[1] - q0);
    x = ag_add(g, x, a);
    h = ag_layer_norm_layer_forward(g, &b->norm2, x);
    return ag_add(g, x, ag_ffn_layer_forward(g, &b->ffn, h));
}

/* ag_gpt_forward_cached; last_only: the logits of the last id only,
 * [1, 1, V] (the sampler's need: the last block and the head skip the
 * other rows, whose keys and values still go to the cache). */
static ag_tensor *forward_cached(ag_graph *g, const ag_gpt *m, ag_gpt_cache *c, const int *ids, int T,
                                 int last_only)
{
    if (!ag__ok(g, "gpt_forward_cached", 0) || !ag__given(g, "gpt_forward_cached", "cache", c) ||
        !ag__given(g, "gpt_forward_cached", "ids", ids))
        return NULL;
    if (!m || !m->blocks || m->cfg.layers != c->layers || m->cfg.context != c->context || m->cfg.hidden != c->C) {
        ag_graph_fail(g, AG_ERR_ARG, "gpt_forward_cached: %s", !m || !m->blocks ? "no model"
                                                                 : "the cache was made for another model");
        return NULL;
    }
    if (ag_graph_training(g) && m->cfg.dropout > 0) {
        ag_graph_fail(g, AG_ERR_STATE, "gpt_forward_cached: the model has dropout %g and g is in training mode: "
                      "decode in eval mode (ag_graph_set_training(g, 0))", m->cfg.dropout);
        return NULL;
    }
    int pos = c->len, S = c->context, C = c->C;
    if (T < 1 || pos + T > S) {
        ag_graph_fail(g, AG_ERR_SHAPE, "gpt_forward_cached: %d ids after %d cached positions: want 1 .. %d "
                      "(the context); crop the sequence and clear the cache", T, pos, S - pos);
        return NULL;
    }
    /* x = tokens[ids] + positions[pos .. pos + T)   [1, T, C] */
    const ag_embedding_layer *e = &m->embedding;
    ag_tensor *x = ag_embedding(g, e->tokens, ids, AG_SHAPE(1, T));
    x = ag_add(g, x, ag_slice(g, e->positions, 0, pos, T));
    for (int l = 0; l < c->layers; l++) {
        ag_real *keys = c->kv + 2 * (size_t)l * S * C, *values = keys + (size_t)S * C;
        x = block_cached(g, &m->blocks[l], x, last_only && l == c->layers - 1 ? T - 1 : 0, keys, values, pos, S);
    }
    x = ag_layer_norm_layer_forward(g, &m->norm, x);
    ag_tensor *logits = m->cfg.untied ? ag_linear_layer_forward(g, &m->head, x) : ag_embedding_layer_logits(g, &m->embedding, x);
    if (!logits || ag_graph_status(g) != AG_OK) return NULL;
    c->len = pos + T;
    return ag_set_name(logits, "logits"); /* [1, T, V], or [1, 1, V] when last_only */
}

ag_tensor *ag_gpt_forward_cached(ag_graph *g, const ag_gpt *m, ag_gpt_cache *c, const int *ids, int T)
{
    return forward_cached(g, m, c, ids, T, 0);
}

/* The logits [V] that follow out[0 .. len): the model on the window of the
 * newest `context` ids, its last position.  With a cache: only the newest
 * id when the cache holds the len - 1 before it; else (the first token, or
 * a window that slid) the whole window from an emptied cache. */
static const ag_real *next_logits(ag_graph *g, const ag_gpt *m, ag_gpt_cache *c, const int *out, int len)
{
    int ctx = m->cfg.context, T = len < ctx ? len : ctx;
    ag_tensor *logits;
    if (!c) logits = ag_gpt_forward(g, m, out + len - T, 1, T);
    else if (ag_gpt_cache_len(c) == len - 1 && len <= ctx) logits = forward_cached(g, m, c, out + len - 1, 1, 1);
    else {
        ag_gpt_cache_clear(c);
        logits = forward_cached(g, m, c, out + len - T, T, 1);
    }
    return logits ? logits->data + (size_t)(logits->shape[1] - 1) * (size_t)m->cfg.vocab : NULL;
}

ag_status ag_gpt_sample(ag_graph *g, const ag_gpt *m, const int *prompt, int n_prompt, int n_new,
                        const ag_sample_opts *opts, int *out)
{
    if (!g) return AG_ERR_ARG;
    ag_graph_reset(g);
    if (!m || !m->blocks || !prompt || !out || !opts || n_prompt < 1 || n_new < 0)
        return ag_graph_fail(g, AG_ERR_ARG, "gpt_sample: %s", !m || !m->blocks ? "no model"
                                                             : !prompt || n_prompt < 1 ? "the prompt is empty"
                                                             : !out ? "out is NULL"
                                                             : !opts ? "opts is NULL"
                                                                     : "n_new < 0");
    /* top_p 0 (a zeroed struct) means no top-p */
    ag_sampling s = {opts->temperature, opts->top_k, opts->top_p == 0 ? 1 : opts->top_p};
    char why[128];
    if (ag_sampling_check(&s, why, sizeof why) != AG_OK) return ag_graph_fail(g, AG_ERR_ARG, "gpt_sample: %s", why);
    int V = m->cfg.vocab;
    double *work = ag__malloc(2 * (size_t)V * sizeof *work); /* the weights, then room for top-k and top-p */
    ag_gpt_cache *cache = opts->no_cache ? NULL : ag_gpt_cache_new(m);
    if (!work || (!opts->no_cache && !cache)) {
        ag__free(work);
        return ag_graph_fail(g, AG_ERR_NOMEM, "gpt_sample: out of memory for %d logits and the cache", V);
    }
    ag_rng rng;
    ag_rng_seed(&rng, opts->seed);
    int was_training = ag_graph_training(g), had_grad = ag_graph_grad(g);
    ag_graph_set_training(g, 0);
    ag_graph_set_grad(g, 0);
    memcpy(out, prompt, (size_t)n_prompt * sizeof *out);
    for (int len = n_prompt; len < n_prompt + n_new; len++) {
        ag_graph_reset(g);
        const ag_real *row = next_logits(g, m, cache, out, len);
        if (!row) break;
        int next = ag_sample_next(row, V, &s, &rng, work);
        if (next < 0) {
            ag_graph_fail(g, AG_ERR_NUMERIC, "gpt_sample: no finite logit at position %d", len);
            break;
        }
        out[len] = next;
    }
    ag_graph_set_training(g, was_training);
    ag_graph_set_grad(g, had_grad);
    ag_gpt_cache_free(cache);
    ag__free(work);
    return ag_graph_status(g);
}
