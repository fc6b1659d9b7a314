/* model.c: the ladder's model at any rung.  One forward serves them all:
 * each idea is a line or two guarded by the rung that brings it, so that
 * reading the function for rung N + 1 against rung N shows that idea alone.
 * Shapes: B sequences of T characters, width C, H heads, V characters. */
#include "ladder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rung_idea[NRUNGS + 1] = {
    "", "bigram", "+ positions", "+ one head", "+ heads", "+ feed-forward", "+ residual", "+ norm (post)",
    "+ norm (pre)",
};

static ag_tensor *param(ag_store *s, const char *name, int rows, int cols)
{
    return ag_param(s, name, AG_SHAPE(rows, cols));
}

static ag_status layer_init(ladder_layer *l, ag_store *s, const ladder_config *c, int i, uint64_t seed)
{
    char name[64];
    int H = c->rung >= HEADS ? c->heads : 1; /* one head: the whole width C */
    snprintf(name, sizeof name, "layers.%d.attention", i);
    ag_status st = ag_mha_layer_init(&l->attention, s, name, c->hidden, H, 1, 0, seed);
    l->attention.causal = 1; /* a character sees only those before it */
    snprintf(name, sizeof name, "layers.%d.ffn", i);
    if (st == AG_OK && c->rung >= FEED_FORWARD)
        st = ag_ffn_layer_init_ex(&l->ffn, s, name, c->hidden, c->ffn, AG_ACT_GELU, seed);
    snprintf(name, sizeof name, "layers.%d.norm1", i);
    if (st == AG_OK && c->rung >= POST_NORM) st = ag_layer_norm_layer_init(&l->norm1, s, name, c->hidden);
    snprintf(name, sizeof name, "layers.%d.norm2", i);
    if (st == AG_OK && c->rung >= POST_NORM) st = ag_layer_norm_layer_init(&l->norm2, s, name, c->hidden);
    return st;
}

/* One init for every rung: matrices N(0, 0.02), biases 0, norms gain 1 and
 * bias 0; so that two rungs differ in their idea alone.  These are GPT-2's
 * distributions without its 1/sqrt(2 L) on the residual projections, which
 * rungs 3 to 5, having no residual path, could not share. */
static void init_all(ag_store *s, uint64_t seed)
{
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        if (p->ndim == 2) ag_init_normal(p, 0, 0.02, ag_param_seed(seed, p->name));
        else if (!strstr(p->name, "norm")) ag_init_const(p, 0); /* a bias; a norm's stay 1 and 0 */
    }
}

ag_status ladder_init(ladder_model *m, ag_store *s, const ladder_config *cfg, uint64_t seed)
{
    *m = (ladder_model){.cfg = *cfg};
    if (cfg->rung == BIGRAM) {
        if (!(m->bigram = param(s, "bigram.weight", cfg->V, cfg->V))) return AG_ERR_ARG;
        init_all(s, seed);
        return AG_OK;
    }
    m->tokens = param(s, "tokens.weight", cfg->V, cfg->hidden);
    m->positions = param(s, "positions.weight", cfg->context, cfg->hidden);
    if (!m->tokens || !m->positions) return AG_ERR_ARG;
    int L = cfg->rung >= ONE_HEAD ? cfg->layers : 0;
    if (L && !(m->layers = calloc((size_t)L, sizeof *m->layers))) return AG_ERR_NOMEM;
    ag_status st = AG_OK;
    for (int i = 0; i < L && st == AG_OK; i++) st = layer_init(&m->layers[i], s, cfg, i, seed);
    if (st == AG_OK && cfg->rung >= PRE_NORM) st = ag_layer_norm_layer_init(&m->norm, s, "norm", cfg->hidden);
    if (st == AG_OK) st = ag_linear_layer_init(&m->head, s, "head", cfg->hidden, cfg->V, 1, seed);
    if (st == AG_OK) init_all(s, seed);
    return st;
}

void ladder_free(ladder_model *m)
{
    free(m->layers);
    m->layers = NULL;
}

/* One layer at rung r: attention, then (rung 5 on) the feed-forward. */
static ag_tensor *layer_forward(ag_graph *g, const ladder_layer *l, int r, ag_tensor *x, ag_tensor **weights)
{
    ag_tensor *in = r >= PRE_NORM ? ag_layer_norm_layer_forward(g, &l->norm1, x) : x;
    ag_tensor *a = ag_mha_layer_forward(g, &l->attention, in, in, NULL, AG_MASK_NEG_INF, weights);
    x = r >= RESIDUAL ? ag_add(g, x, a) : a;                           /* rung 6: the residual path */
    if (r == POST_NORM) x = ag_layer_norm_layer_forward(g, &l->norm1, x);     /* rung 7: norm after the add */
    if (r < FEED_FORWARD) return x;
    in = r >= PRE_NORM ? ag_layer_norm_layer_forward(g, &l->norm2, x) : x;    /* rung 8: norm before */
    ag_tensor *f = ag_ffn_layer_forward(g, &l->ffn, in);
    x = r >= RESIDUAL ? ag_add(g, x, f) : f;
    return r == POST_NORM ? ag_layer_norm_layer_forward(g, &l->norm2, x) : x;
}

ag_tensor *ladder_forward(ag_graph *g, const ladder_model *m, const int *ids, int B, int T, ag_tensor **weights)
{
    const int r = m->cfg.rung;
    if (r == BIGRAM) return ag_embedding(g, m->bigram, ids, AG_SHAPE(B, T)); /* a row of logits per character */
    ag_tensor *x = ag_embedding(g, m->tokens, ids, AG_SHAPE(B, T));        /* [B, T, C] */
    x = ag_add(g, x, ag_slice(g, m->positions, 0, 0, T));                 /* rung 2: where it is */
    for (int i = 0; r >= ONE_HEAD && i < m->cfg.layers; i++)
        x = layer_forward(g, &m->layers[i], r, x, weights ? &weights[i] : NULL);
    if (r >= PRE_NORM) x = ag_layer_norm_layer_forward(g, &m->norm, x);
    return ag_linear_layer_forward(g, &m->head, x); /* [B, T, V] */
}
