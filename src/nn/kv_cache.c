/* kv_cache.c: a key/value cache for a decoder a user writes from the
 * public calls (linear layers and ag_scaled_dot_product_attention).
 *
 * A decoding step feeds only the new rows x [B, T, C]; each layer's
 * attention needs the keys and values of every position so far.  The cache
 * keeps them, and ag_kv_cache_append hands back the rows [0, len + T) as
 * tensors [B, len + T, Hkv, D] that the attention reads in place:
 *
 *   k_all, v_all = cache rows [0, len) ++ (k, v)      [B, len + T, Hkv, D]
 *   out = sdpa(q, k_all, v_all, causal bottom-right, heads layout)
 *
 * (query t, at position len + t, sees keys s <= len + t).
 *
 * Invariant: layer l's keys hold its lens[l] rows of each sequence packed,
 * [B, lens[l], Hkv, D] row-major at the start of their buffer (its values
 * the same), so that rows [0, len) of all B sequences are one contiguous
 * tensor.  With B = 1 appending writes only the new rows; with B > 1 the
 * rows of sequences 1 .. B - 1 move up by T rows each (a memmove of what
 * they hold) to make room. */
#include "nn/nn_internal.h"

#include <stdint.h>
#include <string.h>

struct ag_kv_cache {
    int layers, B, S_max, Hkv, D;
    int *lens;   /* [layers]: rows held per sequence */
    ag_real *kv; /* [layers][2][B * S_max * Hkv * D]: keys, then values */
};

ag_kv_cache *ag_kv_cache_new(int layers, int B, int S_max, int Hkv, int D)
{
    if (layers < 1 || B < 1 || S_max < 1 || Hkv < 1 || D < 1) return NULL;
    size_t n = 2 * (size_t)layers;
    size_t sizes[] = {(size_t)B, (size_t)S_max, (size_t)Hkv, (size_t)D};
    for (int i = 0; i < 4; i++) {
        if (n > SIZE_MAX / sizeof(ag_real) / sizes[i]) return NULL;
        n *= sizes[i];
    }
    ag_kv_cache *c = ag__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (ag_kv_cache){.layers = layers, .B = B, .S_max = S_max, .Hkv = Hkv, .D = D};
    c->lens = ag__calloc((size_t)layers, sizeof *c->lens);
    c->kv = ag__calloc(n, sizeof *c->kv);
    if (!c->lens || !c->kv) ag_kv_cache_free(c), c = NULL;
    return c;
}

void ag_kv_cache_free(ag_kv_cache *c)
{
    if (!c) return;
    ag__free(c->lens);
    ag__free(c->kv);
    ag__free(c);
}

void ag_kv_cache_clear(ag_kv_cache *c)
{
    if (c) memset(c->lens, 0, (size_t)c->layers * sizeof *c->lens);
}

int ag_kv_cache_len(const ag_kv_cache *c) { return c ? c->lens[0] : 0; }

/* rows [B, len, R] packed at buf -> [B, len + T, R] packed, the new rows
 * x [B, T, R] after each sequence's old ones.  Sequence b moves up by
 * b T rows; the last moves first, so no row is overwritten before it
 * has moved. */
static void append_rows(ag_real *buf, const ag_real *x, int B, int len, int T, size_t R)
{
    size_t n = (size_t)len + T;
    for (int b = B - 1; b >= 0; b--) {
        if (b > 0 && len > 0) memmove(buf + b * n * R, buf + b * (size_t)len * R, (size_t)len * R * sizeof *buf);
        memcpy(buf + (b * n + len) * R, x + (size_t)b * T * R, (size_t)T * R * sizeof *buf);
    }
}

static bool rows_ok(const ag_kv_cache *c, const ag_tensor *x, int T)
{
    return x->ndim == 4 && x->shape[0] == c->B && x->shape[1] == T && x->shape[2] == c->Hkv && x->shape[3] == c->D;
}

ag_status ag_kv_cache_append(ag_graph *g, ag_kv_cache *c, int layer, ag_tensor *k, ag_tensor *v, ag_tensor **k_all,
                             ag_tensor **v_all)
{
    if (k_all) *k_all = NULL;
    if (v_all) *v_all = NULL;
    if (!ag__given(g, "kv_cache_append", "cache", c) || !ag__given(g, "kv_cache_append", "k_all", k_all) ||
        !ag__given(g, "kv_cache_append", "v_all", v_all) || !ag__ok(g, "kv_cache_append", 2, k, v))
        return ag_graph_status(g);
    if (layer < 0 || layer >= c->layers)
        return ag_graph_fail(g, AG_ERR_ARG, "kv_cache_append: layer %d of a cache of %d layers (0 .. %d)", layer,
                             c->layers, c->layers - 1);
    /* the cache holds copies: a gradient could not flow back to k and v */
    if (ag_graph_grad(g) && (k->requires_grad || v->requires_grad))
        return ag_graph_fail(g, AG_ERR_STATE, "kv_cache_append: %s needs a gradient, and the cache keeps copies "
                             "that pass none: decode in no-grad mode (ag_graph_set_grad(g, 0))",
                             k->requires_grad ? "k" : "v");
    int T = k->ndim == 4 ? k->shape[1] : 0, len = c->lens[layer];
    if (T < 1 || !rows_ok(c, k, T) || !rows_ok(c, v, T)) {
        char a[96], b[96];
        return ag_graph_fail(g, AG_ERR_SHAPE, "kv_cache_append: k %s and v %s must both be [B, T, Hkv, D] = "
                             "[%d, T, %d, %d], T >= 1", ag_shape_str(k, a, sizeof a), ag_shape_str(v, b, sizeof b),
                             c->B, c->Hkv, c->D);
    }
    if (T > c->S_max - len)
        return ag_graph_fail(g, AG_ERR_SHAPE, "kv_cache_append: %d rows after %d held in layer %d: the cache "
                             "holds %d; clear it (ag_kv_cache_clear)", T, len, layer, c->S_max);
    size_t R = (size_t)c->Hkv * c->D, part = (size_t)c->B * c->S_max * R;
    ag_real *keys = c->kv + 2 * (size_t)layer * part, *values = keys + part;
    /* the views first: if g has no room for them, the cache is unchanged */
    ag_tensor *kt = ag__view_of(g, keys, AG_SHAPE(c->B, len + T, c->Hkv, c->D));
    ag_tensor *vt = ag__view_of(g, values, AG_SHAPE(c->B, len + T, c->Hkv, c->D));
    if (!kt || !vt) return ag_graph_status(g);
    append_rows(keys, k->data, c->B, len, T, R);
    append_rows(values, v->data, c->B, len, T, R);
    c->lens[layer] = len + T;
    *k_all = ag_set_name(kt, "k_all"), *v_all = ag_set_name(vt, "v_all");
    return AG_OK;
}
