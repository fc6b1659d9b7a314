/* positions_layer.c: what a model of continuous inputs (image patches,
 * feature vectors) puts in front of its blocks, where the embedding layer
 * would for token ids: a learned position table added to x, and a class
 * token prepended to the sequence (ViT's pos_embed and cls_token).
 *
 * Invariant: the layer owns no graph tensor; its table lives in the store. */
#include "nn/nn_internal.h"

#include <stdio.h>

ag_status ag_learned_positions_init(ag_learned_positions *p, ag_store *s, const char *prefix, int max_T, int C,
                                    uint64_t seed)
{
    if (!p || !prefix)
        return ag__store_fail(s, AG_ERR_ARG, "learned_positions_init: %s is NULL", p ? "prefix" : "layer");
    memset(p, 0, sizeof *p);
    if (!s || max_T <= 0 || C <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "learned_positions '%s': %s (max_T %d, C %d: both must be >= 1)",
                              prefix, s ? "bad size" : "store is NULL", max_T, C);
    char name[64];
    int n = snprintf(name, sizeof name, "%s.weight", prefix);
    if (n < 0 || (size_t)n >= sizeof name)
        return ag__store_fail(s, AG_ERR_ARG, "learned_positions '%s': the name is longer than %zu bytes", prefix,
                              sizeof name - 1);
    if (!(p->weight = ag_param(s, name, AG_SHAPE(max_T, C)))) return AG_ERR_ARG; /* the store says why */
    p->max_T = max_T;
    p->C = C;
    /* GPT-2's wpe: N(0, 0.02) (see attograd_nn.h) */
    ag_init_normal(p->weight, 0, 0.02, ag_param_seed(seed, name));
    return AG_OK;
}

/* y = x + P[:T]:  [..., T, C] + [T, C] (broadcast over the leading axes) */
ag_tensor *ag_learned_positions_forward(ag_graph *g, const ag_learned_positions *p, ag_tensor *x)
{
    if (!ag__given(g, "learned_positions_forward", "layer", p) ||
        !ag__given(g, "learned_positions_forward", "layer's weight (made by ag_learned_positions_init)", p->weight) ||
        !ag__ok(g, "learned_positions", 1, x))
        return NULL;
    int T = x->ndim >= 2 ? x->shape[x->ndim - 2] : 0;
    if (x->ndim < 2 || x->shape[x->ndim - 1] != p->C || T < 1 || T > p->max_T) {
        char a[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "learned_positions '%s': input %s is not [..., T, C] with C = %d and "
                      "1 <= T <= %d (the learned positions)", p->weight->name, ag_shape_str(x, a, sizeof a), p->C,
                      p->max_T);
        return NULL;
    }
    return ag_add(g, x, ag_slice(g, p->weight, 0, 0, T));
}

/* [tok expanded to [B, 1, C]; x] along the sequence: x [B, N, C] -> [B, N + 1, C] */
ag_tensor *ag_prepend_token(ag_graph *g, ag_tensor *tok, ag_tensor *x)
{
    if (!ag__ok(g, "prepend_token", 2, tok, x)) return NULL;
    int C = x->ndim == 3 ? x->shape[2] : 0, fits = x->ndim == 3 && tok->ndim >= 1 && tok->ndim <= 3;
    for (int i = 0; fits && i < tok->ndim; i++) fits = tok->shape[i] == (i == tok->ndim - 1 ? C : 1);
    if (!fits) {
        char a[96], b[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "prepend_token: token %s and x %s: want x [B, N, C] and a token [C], "
                      "[1, C] or [1, 1, C]", ag_shape_str(tok, a, sizeof a), ag_shape_str(x, b, sizeof b));
        return NULL;
    }
    ag_tensor *t = ag_reshape(g, tok, AG_SHAPE(1, 1, C));
    ag_tensor *parts[2] = {ag_expand(g, t, AG_SHAPE(x->shape[0], 1, C)), x};
    return parts[0] ? ag_concat(g, 2, parts, 1) : NULL;
}
