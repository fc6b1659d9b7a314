/* embedding_layer.c: token and position embeddings, x = tokens[ids] +
 * positions[t], and the tied output layer that reads the token table back
 * (logits = x tokens^T).
 *
 * Invariant: the layer owns no graph tensor; its tables live in the store,
 * and the sinusoidal positions are made on the graph at each forward. */
#include "nn/nn_internal.h"

#include <stdio.h>

ag_status ag_embedding_layer_init_ex(ag_embedding_layer *e, ag_store *s, const char *prefix, int V, int C,
                                     int max_len, ag_positions kind, const ag_init_opts *init, uint64_t seed)
{
    if (!e) return ag__store_fail(s, AG_ERR_ARG, "embedding_layer_init: layer is NULL");
    memset(e, 0, sizeof *e);
    const char *p = prefix ? prefix : "(null)";
    if (!s || !prefix || V <= 0 || C <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "embedding '%s': %s (V %d, C %d: both must be >= 1)", p,
                              prefix ? "bad size" : "prefix is NULL", V, C);
    if (kind != AG_POS_LEARNED && kind != AG_POS_SINUSOIDAL && kind != AG_POS_NONE)
        return ag__store_fail(s, AG_ERR_ARG, "embedding '%s': positions %d are not learned (%d), sinusoidal (%d) "
                              "or none (%d)", p, (int)kind, AG_POS_LEARNED, AG_POS_SINUSOIDAL, AG_POS_NONE);
    if (kind == AG_POS_LEARNED && max_len <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "embedding '%s': learned positions need max_len >= 1, got %d", p,
                              max_len);
    char who[80];
    snprintf(who, sizeof who, "embedding '%s'", p);
    ag_status st = ag__init_check(s, who, init);
    if (st != AG_OK) return st;
    *e = (ag_embedding_layer){.V = V, .C = C, .max_len = max_len, .kind = kind};
    char name[64];
    snprintf(name, sizeof name, "%s.tokens.weight", prefix);
    if (!(e->tokens = ag_param(s, name, AG_SHAPE(V, C)))) return AG_ERR_ARG; /* the store says why */
    ag__init_table(e->tokens, init, seed); /* by default N(0, 1), as nn.Embedding */
    if (kind != AG_POS_LEARNED) return AG_OK;
    snprintf(name, sizeof name, "%s.positions.weight", prefix);
    if (!(e->positions = ag_param(s, name, AG_SHAPE(max_len, C)))) return AG_ERR_ARG;
    ag__init_table(e->positions, init, seed);
    return AG_OK;
}

ag_status ag_embedding_layer_init(ag_embedding_layer *e, ag_store *s, const char *prefix, int V, int C,
                                  int max_len, ag_positions kind, uint64_t seed)
{
    return ag_embedding_layer_init_ex(e, s, prefix, V, C, max_len, kind, NULL, seed);
}

/* x[b, t] = tokens[ids[b, t]] + positions[t]:  [B, T, C] + [T, C] (broadcast over B) */
ag_tensor *ag_embedding_layer_forward(ag_graph *g, const ag_embedding_layer *e, const int *ids, int B, int T)
{
    if (!ag__given(g, "embedding_layer_forward", "layer", e)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    ag_tensor *x = NULL;
    if (B < 1 || T < 1 || !ids)
        ag_graph_fail(g, AG_ERR_ARG, "embedding_layer: ids %s for B %d, T %d (want B, T >= 1)",
                      ids ? "given" : "NULL", B, T);
    else if (e->kind == AG_POS_LEARNED && T > e->max_len)
        ag_graph_fail(g, AG_ERR_SHAPE, "embedding_layer: T = %d is longer than the %d learned positions", T,
                      e->max_len);
    else
        x = ag_embedding(g, e->tokens, ids, AG_SHAPE(B, T)); /* checks every id */
    if (x && e->kind == AG_POS_LEARNED) x = ag_add(g, x, ag_slice(g, e->positions, 0, 0, T));
    if (x && e->kind == AG_POS_SINUSOIDAL) x = ag_add(g, x, ag_positional_encoding(g, T, e->C));
    return ag__layer_done(g, ok, e->tokens, 2, x); /* "embedding: ..." */
}

/* logits = x tokens^T: the row of token v scores how well x matches v's
 * embedding.  One linear op without bias, [..., C] x [V, C] -> [..., V]. */
ag_tensor *ag_embedding_layer_logits(ag_graph *g, const ag_embedding_layer *e, ag_tensor *x)
{
    if (!ag__given(g, "embedding_layer_logits", "layer", e)) return NULL;
    bool ok = ag_graph_status(g) == AG_OK;
    if (!ag__ok(g, "embedding_layer_logits", 1, x)) return ag__layer_done(g, ok, e->tokens, 2, NULL);
    if (x->ndim < 1 || x->shape[x->ndim - 1] != e->C) {
        char a[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "embedding_layer_logits: input %s does not end in C = %d features",
                      ag_shape_str(x, a, sizeof a), e->C);
        return ag__layer_done(g, ok, e->tokens, 2, NULL);
    }
    return ag__layer_done(g, ok, e->tokens, 2, ag__linear(g, x, e->tokens, NULL));
}
