/* attention.c: masks, scaled dot-product attention and multi-head attention,
 * two ways that give the same values and gradients:
 *
 *   fast      ag_scaled_dot_product_attention: one node over every head
 *             (ops/attention.c), PyTorch's layout or the heads layout;
 *             ag_attention and ag_mha_layer_forward call it (dropout
 *             drawn inside, no mask kept) unless the weights are asked
 *             for, or the layer's dropout applies to 256 keys or fewer
 *             (where P is kept anyway); then Q K^T and P V read the heads in place
 *             (ag__matmul_heads, ops/matmul_heads.c) and the scale, mask
 *             and softmax are one op (ag__masked_softmax,
 *             ops/masked_softmax.c), three nodes that keep P;
 *   textbook  ag_attention_textbook, ag_mha_layer_forward_textbook (or an ag_mha_layer
 *             with .textbook = 1): the tutorials' formula, one public op per
 *             step: matmul, transpose, scale, masked_fill, softmax, matmul;
 *             heads split by reshape + permute, joined by permute + reshape.
 *
 * Invariant: both build the same function; tests/test_textbook.c checks
 * values and every gradient against each other in double.  Gradients come
 * from the ops' backward functions (autodiff over the tape). */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>

ag_tensor *ag_causal_mask(ag_graph *g, int T, int S)
{
    if (!ag__ok(g, "causal_mask", 0)) return NULL;
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(T, S));
    if (!m) return NULL;
    for (int t = 0; t < T; t++)
        for (int s = 0; s < S && s <= t; s++) m->data[(size_t)t * S + s] = 1;
    return ag_set_name(m, "causal_mask");
}

ag_tensor *ag_padding_mask(ag_graph *g, const int *valid_lens, int B, int per_query, int T, int S)
{
    if (!ag__ok(g, "padding_mask", 0)) return NULL;
    if (!valid_lens) {
        ag_graph_fail(g, AG_ERR_ARG, "padding_mask: valid_lens is NULL");
        return NULL;
    }
    int rows = per_query ? T : 1;
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(B, 1, rows, S));
    if (!m) return NULL;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < rows; t++) {
            int len = valid_lens[per_query ? b * T + t : b];
            for (int s = 0; s < S && s < len; s++) m->data[((size_t)b * rows + t) * S + s] = 1;
        }
    return ag_set_name(m, "padding_mask");
}

/* 1 / sqrt(D): the scale that keeps the scores' variance near 1 (see
 * attend_kept), for q [..., D]. */
static double scale_of(const ag_tensor *q)
{
    int D = q->ndim ? q->shape[q->ndim - 1] : 0;
    return D > 0 ? 1 / sqrt((double)D) : 1;
}

/* Dropout's seed inside the node: the caller's, or (0) the next draw of
 * g's random stream, so that each step drops other weights and a seeded
 * graph repeats. */
static uint64_t seed_of(ag_graph *g, uint64_t seed)
{
    return seed ? seed : ag_rng_next(ag__graph_rng(g));
}

ag_tensor *ag_scaled_dot_product_attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v,
                                           const ag_sdpa_config *cfg)
{
    ag_sdpa_config c = cfg ? *cfg : (ag_sdpa_config){0};
    if (!ag__ok(g, "scaled_dot_product_attention", 3, q, k, v)) return NULL;
    if ((unsigned)c.causal > AG_CAUSAL_BOTTOM_RIGHT || !(c.dropout_p >= 0 && c.dropout_p < 1) ||
        c.scale != c.scale || c.fill != c.fill) {
        ag_graph_fail(g, AG_ERR_ARG,
                      "scaled_dot_product_attention: causal %d (0, 1 or 2), dropout_p %g (in [0, 1)), scale %g, "
                      "fill %g (not NaN)", (int)c.causal, c.dropout_p, c.scale, c.fill);
        return NULL;
    }
    int causal = c.causal == AG_CAUSAL_TOP_LEFT       ? AG__CAUSAL_DIAG
                 : c.causal == AG_CAUSAL_BOTTOM_RIGHT ? AG__CAUSAL_BOTTOM_RIGHT
                                                      : AG__CAUSAL_NONE;
    ag__attn_rule r = {.mask = c.mask, .bias = c.bias, .scale = c.scale != 0 ? c.scale : scale_of(q),
                       .fill = c.fill != 0 ? c.fill : -INFINITY, .bhtd = !c.heads_layout, .causal = causal};
    if (c.dropout_p > 0 && ag_graph_training(g)) r.dropout = c.dropout_p, r.seed = seed_of(g, c.seed);
    return ag__attention(g, q, k, v, &r);
}

/* Scaled dot-product attention as three nodes that keep P (dropout, if
 * any, an ag_dropout node on it), for a caller who asks for the weights
 * and for the layer's dropout over 256 keys or fewer.
 * heads = 0: q [..., T, D], k and v [..., S, D] as they are.  heads = 1:
 * q [B, T, H, D],
 * k and v [B, S, H, D] (multi-head attention's split heads, a view of the
 * linear layers' outputs): the products read head h of sentence b in
 * place, as the [B, H, T, D] that permute(x, {0, 2, 1, 3}) would copy out,
 * and the result comes out [B, T, H, D], the heads side by side. */
static ag_tensor *attend_kept(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, int heads, ag_tensor *mask,
                              double fill, double p_drop, ag_tensor **weights)
{
    int D = q->shape[q->ndim - 1];
    /* Q K^T: how well query t matches key s (the product reads K as it is:
     * ag_matmul_bt = ag_matmul(q, ag_transpose(k, -1, -2)), no copy). */
    ag_tensor *scores = heads ? ag__matmul_heads(g, q, k, 1, AG__MM_A | AG__MM_B) : ag_matmul_bt(g, q, k);
    ag_set_name(scores, "q k^T"); /* unscaled, as the textbook path's "q k^T" */
    /* One op (ops/masked_softmax.c) does the rest of the scores' way:
     *   - the scale 1/sqrt(D) keeps their variance near 1 whatever the head
     *     width (a dot product of D unit-variance terms has variance D), so
     *     softmax does not saturate;
     *   - masked positions get `fill` (-inf or a large negative number):
     *     after the softmax their weight is exp(fill - max) = 0;
     *   - softmax: each row a distribution over keys. */
    ag_tensor *p = ag_set_name(ag__masked_softmax(g, scores, 1 / sqrt((double)D), mask, fill), "attn");
    if (p_drop > 0) p = ag_dropout(g, p, p_drop);
    if (weights) *weights = p;
    /* P V: for each query, the weighted mix of the values */
    return heads ? ag__matmul_heads(g, p, v, 0, AG__MM_B | AG__MM_Y) : ag_matmul(g, p, v);
}

/* x [..., R, C] with n axes (2, 3 or 4) as the [B, H, R, C] of
 * scaled_dot_product_attention: a view, batch axes in front. */
static ag_tensor *as_bhtd(ag_graph *g, ag_tensor *x)
{
    int n = x->ndim, R = x->shape[n - 2], C = x->shape[n - 1];
    if (n == 4) return x;
    return ag_reshape(g, x, AG_SHAPE(1, n == 3 ? x->shape[0] : 1, R, C));
}

/* Whether ag_attention's q, k, v can be one fused node: up to 4 axes,
 * the same on all three, the batch axes alike (not broadcast), D and S
 * agreeing (else the three nodes say what is wrong). */
static bool fusable(const ag_tensor *q, const ag_tensor *k, const ag_tensor *v)
{
    int n = q->ndim;
    if (n < 2 || n > 4 || k->ndim != n || v->ndim != n || k->shape[n - 1] != q->shape[n - 1] ||
        v->shape[n - 2] != k->shape[n - 2])
        return false;
    for (int d = 0; d < q->ndim - 2; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d]) return false;
    return true;
}

ag_tensor *ag_attention(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                        double fill, double p_drop, ag_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ag__ok(g, "attention", 3, q, k, v)) return NULL;
    if (weights || !fusable(q, k, v) || !(p_drop >= 0 && p_drop < 1))
        return attend_kept(g, q, k, v, 0, mask, fill, p_drop, weights);
    ag__attn_rule r = {.mask = mask, .scale = scale_of(q), .fill = fill, .bhtd = true};
    if (p_drop > 0 && ag_graph_training(g)) r.dropout = p_drop, r.seed = seed_of(g, 0);
    ag_tensor *y = ag__attention(g, as_bhtd(g, q), as_bhtd(g, k), as_bhtd(g, v), &r);
    if (!y || q->ndim == 4) return y;
    int shape[4] = {0};
    memcpy(shape, q->shape, (size_t)q->ndim * sizeof(int));
    shape[q->ndim - 1] = v->shape[v->ndim - 1];
    return ag_reshape(g, y, q->ndim, shape);
}

ag_status ag_mha_layer_init(ag_mha_layer *m, ag_store *s, const char *prefix, int C, int H, int bias, double dropout,
                      uint64_t seed)
{
    if (!m || !prefix) return ag__store_fail(s, AG_ERR_ARG, "mha_init: %s is NULL", m ? "prefix" : "layer");
    memset(m, 0, sizeof *m);
    if (!s || !prefix || C <= 0 || H <= 0)
        return ag__store_fail(s, AG_ERR_ARG, "mha '%s': %s (C %d, H %d: both must be >= 1)",
                              prefix ? prefix : "(null)", prefix ? "bad size" : "prefix is NULL", C, H);
    if (C % H != 0)
        return ag__store_fail(s, AG_ERR_SHAPE, "mha '%s': width C = %d is not a multiple of the heads H = %d",
                              prefix, C, H);
    m->C = C;
    m->H = H;
    m->dropout = dropout;
    char name[64];
    ag_linear_layer *ls[4] = {&m->w_q, &m->w_k, &m->w_v, &m->w_o};
    const char *names[4] = {"w_q", "w_k", "w_v", "w_o"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, names[i]);
        ag_status st = ag_linear_layer_init(ls[i], s, name, C, C, bias, seed);
        if (st != AG_OK) return st;
    }
    return AG_OK;
}

ag_status ag_mha_layer_add_qk_norm(ag_mha_layer *m, ag_store *s, const char *prefix)
{
    if (!m || !prefix) return ag__store_fail(s, AG_ERR_ARG, "mha_add_qk_norm: %s is NULL", m ? "prefix" : "layer");
    if (m->H <= 0 || m->C % m->H)
        return ag__store_fail(s, AG_ERR_ARG, "mha '%s': QK-norm on a layer not made by ag_mha_layer_init", prefix);
    char name[64];
    snprintf(name, sizeof name, "%s.q_norm", prefix);
    ag_status st = ag_layer_norm_layer_init(&m->q_norm, s, name, m->C / m->H);
    snprintf(name, sizeof name, "%s.k_norm", prefix);
    if (st == AG_OK) st = ag_layer_norm_layer_init(&m->k_norm, s, name, m->C / m->H);
    if (st == AG_OK) m->qk_norm = 1;
    return st;
}

ag_tensor *ag__qk_norm(ag_graph *g, const ag_mha_layer *m, const ag_layer_norm_layer *n, ag_tensor *x)
{
    if (!m->qk_norm || !x) return x;
    /* [..., C] -> [N, H, D]: LayerNorm over each head's D values -> [..., C] */
    int D = m->C / m->H, N = (int)(x->size / (size_t)m->C);
    ag_tensor *h = ag_layer_norm_layer_forward(g, n, ag_reshape(g, x, AG_SHAPE(N, m->H, D)));
    return ag_reshape(g, h, x->ndim, x->shape);
}

/* [B, T, C] -> [B, T, H, D]: head h's features are columns h D .. h D + D - 1.
 * A reshape, so a view: the attention node reads each head in place,
 * as PyTorch's x.view(B, T, H, D).transpose(1, 2) is read without a copy. */
static ag_tensor *split_heads(ag_graph *g, ag_tensor *x, int H)
{
    if (!x) return NULL;
    int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    return ag_reshape(g, x, AG_SHAPE(B, T, H, C / H));
}

/* [B, T, H, D] -> [B, T, C]: the heads side by side again (a view) */
static ag_tensor *concat_heads(ag_graph *g, ag_tensor *x)
{
    if (!x) return NULL;
    int B = x->shape[0], T = x->shape[1], H = x->shape[2], D = x->shape[3];
    return ag_reshape(g, x, AG_SHAPE(B, T, H * D));
}

/* ---- the textbook path: one public op per step ------------------------------ */

/* softmax(Q K^T / sqrt(D) + M) V, as the tutorials write it.  q [..., T, D],
 * k [..., S, D], v [..., S, Dv] -> [..., T, Dv]; the batch axes broadcast. */
static ag_tensor *attend_textbook(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                                  double fill, double p_drop, ag_tensor **weights)
{
    int D = q->shape[q->ndim - 1];
    ag_tensor *kt = ag_set_name(ag_transpose(g, k, -1, -2), "k^T");               /* [..., D, S] */
    ag_tensor *qk = ag_set_name(ag_matmul(g, q, kt), "q k^T");                      /* [..., T, S] */
    ag_tensor *s = ag_set_name(ag_scale(g, qk, 1 / sqrt((double)D)), "scores");     /* / sqrt(D) */
    if (mask) s = ag_set_name(ag_masked_fill(g, s, mask, fill), "scores + M");    /* + M */
    ag_tensor *p = ag_set_name(ag_softmax(g, s), "attn");                           /* P */
    if (p_drop > 0) p = ag_dropout(g, p, p_drop);
    if (weights) *weights = p;
    return ag_set_name(ag_matmul(g, p, v), "P V");                                  /* P V */
}

ag_tensor *ag_attention_textbook(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                                 double fill, double p_drop, ag_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ag__ok(g, "attention_textbook", 3, q, k, v)) return NULL;
    return attend_textbook(g, q, k, v, mask, fill, p_drop, weights);
}

/* [B, T, C] -> reshape [B, T, H, D] -> permute [B, H, T, D]: a copy with
 * the head axis in front, PyTorch's x.view(B, T, H, D).transpose(1, 2). */
static ag_tensor *split_heads_textbook(ag_graph *g, ag_tensor *x, int H)
{
    static const int perm[4] = {0, 2, 1, 3};
    int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    char name[80];
    snprintf(name, sizeof name, "%s heads", x->name[0] ? x->name : "x");
    return ag_set_name(ag_permute(g, ag_reshape(g, x, AG_SHAPE(B, T, H, C / H)), perm), name);
}

/* [B, H, T, D] -> permute [B, T, H, D] -> reshape [B, T, C]: the heads side
 * by side, PyTorch's o.transpose(1, 2).contiguous().view(B, T, C). */
static ag_tensor *concat_heads_textbook(ag_graph *g, ag_tensor *o)
{
    static const int perm[4] = {0, 2, 1, 3};
    if (!o) return NULL;
    int B = o->shape[0], H = o->shape[1], T = o->shape[2], D = o->shape[3];
    return ag_set_name(ag_reshape(g, ag_permute(g, o, perm), AG_SHAPE(B, T, H * D)), "concat heads");
}

/* q [B, T, C], k and v [B, S, C] (the linear layers' outputs) -> [B, T, C] */
static ag_tensor *textbook_heads(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_tensor *mask,
                                 double fill, double p_drop, ag_tensor **weights)
{
    ag_tensor *qh = split_heads_textbook(g, q, H), *kh = split_heads_textbook(g, k, H);
    ag_tensor *vh = split_heads_textbook(g, v, H);
    if (!ag__ok(g, "mha", 3, qh, kh, vh)) return NULL;
    return concat_heads_textbook(g, attend_textbook(g, qh, kh, vh, mask, fill, p_drop, weights));
}

/* ---- packed rows (see internal.h) ---------------------------------------- */

ag__rows *ag__rows_new(ag_graph *g, const int *len, int B, int T)
{
    if (!ag__ok(g, "rows", 0)) return NULL;
    if (!len || B < 0 || T < 0) {
        ag_graph_fail(g, AG_ERR_ARG, "rows: lengths %s for B %d, T %d", len ? "given" : "NULL", B, T);
        return NULL;
    }
    ag__rows *r = ag__alloc(g, sizeof *r);
    int *at = ag__alloc(g, ((size_t)B * (size_t)T + 1) * sizeof(int));
    if (!r || !at) return NULL;
    int n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T && t < len[b]; t++) at[n++] = b * T + t;
    *r = (ag__rows){.B = B, .T = T, .n = n, .at = at};
    return r;
}

ag_tensor *ag__pack(ag_graph *g, ag_tensor *x, const ag__rows *r)
{
    if (!x) return NULL;
    int C = x->shape[x->ndim - 1];
    return ag_embedding(g, ag_reshape(g, x, AG_SHAPE(r->B * r->T, C)), r->at, AG_SHAPE(r->n));
}

ag_tensor *ag__unpack(ag_graph *g, ag_tensor *x, const ag__rows *r)
{
    if (!x) return NULL;
    int C = x->shape[1];
    return ag_reshape(g, ag_index_add(g, x, r->at, r->B * r->T), AG_SHAPE(r->B, r->T, C));
}

/* x is [B, T, C] (r NULL) or [r->n, C] */
static int mha_input_ok(const ag_tensor *x, const ag__rows *r, int C)
{
    if (r) return x->ndim == 2 && x->shape[0] == r->n && x->shape[1] == C;
    return x->ndim == 3 && x->shape[2] == C;
}

/* The causal mask [T, S] that the layers of one graph share: made by the
 * first layer that asks, found by the next (one mask per layer would keep
 * L T S values: 768 MB at GPT-2 small's 12 layers and T 4096). */
static ag_tensor *causal_shared(ag_graph *g, int T, int S)
{
    ag_tensor **slot = ag__graph_causal(g), *m = *slot;
    if (m && m->shape[0] == T && m->shape[1] == S) return m;
    return *slot = ag_causal_mask(g, T, S);
}

/* Keys up to which the fused node keeps P [T, S] (the kernels' seam,
 * AG__FLASH_KEYS); past it, its rows keep their max and sum alone. */
enum { KEPT_KEYS = 256 };

static ag_tensor *mha_rows(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, const ag__rows *rq, ag_tensor *x_kv,
                           const ag__rows *rkv, ag_tensor *mask, double fill, ag_tensor **weights, ag_tensor *res)
{
    if (weights) *weights = NULL;
    if (!ag__ok(g, "mha", 2, x_q, x_kv)) return NULL;
    int Bq = rq ? rq->B : x_q->shape[0], Bkv = rkv ? rkv->B : x_kv->shape[0];
    if (!mha_input_ok(x_q, rq, m->C) || !mha_input_ok(x_kv, rkv, m->C) || Bq != Bkv) {
        char a[96], b[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "mha: queries %s and keys/values %s must be [B, T, %d] and [B, S, %d]",
                      ag_shape_str(x_q, a, sizeof a), ag_shape_str(x_kv, b, sizeof b), m->C, m->C);
        return NULL;
    }
    ag_tensor *q = ag_set_name(ag_linear_layer_forward(g, &m->w_q, x_q), "q");
    ag_tensor *k = ag_set_name(ag_linear_layer_forward(g, &m->w_k, x_kv), "k");
    ag_tensor *v = ag_set_name(ag_linear_layer_forward(g, &m->w_v, x_kv), "v");
    q = ag__qk_norm(g, m, &m->q_norm, q), k = ag__qk_norm(g, m, &m->k_norm, k);
    /* packed rows: attention needs the padded [B, T, C] layout */
    if (rq) q = ag__unpack(g, q, rq);
    if (rkv) k = ag__unpack(g, k, rkv), v = ag__unpack(g, v, rkv);
    double p = ag_graph_training(g) ? m->dropout : 0;
    if (!ag__ok(g, "mha", 3, q, k, v)) return NULL;
    /* P kept (the textbook path, the weights asked for, or dropout over
     * 256 keys or fewer, where the fused node would keep P anyway and
     * three nodes train a toy model faster): causal is a [T, S]
     * mask, with the caller's (both 0/1: their product allows what both
     * allow); otherwise a rule of the one node, dropout drawn inside */
    bool kept = m->textbook || weights || (p > 0 && k->shape[1] <= KEPT_KEYS);
    if (m->causal && kept) {
        ag_tensor *causal = causal_shared(g, q->shape[1], k->shape[1]);
        mask = mask ? ag_mul(g, mask, causal) : causal;
    }
    /* split the heads, attend in every head at once (one batched matmul over
     * [B, H]), and put the heads side by side again */
    ag_tensor *o;
    if (m->textbook) o = textbook_heads(g, q, k, v, m->H, mask, fill, p, weights);
    else {
        ag_tensor *qh = split_heads(g, q, m->H), *kh = split_heads(g, k, m->H), *vh = split_heads(g, v, m->H);
        if (!ag__ok(g, "mha", 3, qh, kh, vh)) return NULL;
        ag__attn_rule r = {.mask = mask, .scale = scale_of(qh), .fill = fill,
                           .causal = m->causal ? AG__CAUSAL_DIAG : AG__CAUSAL_NONE};
        if (p > 0 && !kept) r.dropout = p, r.seed = seed_of(g, 0);
        o = concat_heads(g, kept ? attend_kept(g, qh, kh, vh, 1, mask, fill, p, weights)
                                 : ag__attention(g, qh, kh, vh, &r));
    }
    if (rq) o = ag__pack(g, o, rq);
    return res ? ag__linear_add(g, o, m->w_o.weight, m->w_o.bias, res) : ag_linear_layer_forward(g, &m->w_o, o);
}

/* an error inside names the layer: "blocks.0.attention: ..." */
ag_tensor *ag__mha_rows(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, const ag__rows *rq, ag_tensor *x_kv,
                        const ag__rows *rkv, ag_tensor *mask, double fill, ag_tensor **weights, ag_tensor *res)
{
    bool ok = ag_graph_status(g) == AG_OK;
    ag_tensor *y = mha_rows(g, m, x_q, rq, x_kv, rkv, mask, fill, weights, res);
    return ag__layer_done(g, ok, m->w_q.weight, 2, y);
}

ag_tensor *ag_mha_layer_forward(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, ag_tensor *x_kv, ag_tensor *mask, double fill,
                  ag_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ag__given(g, "mha_forward", "layer", m)) return NULL;
    return ag__mha_rows(g, m, x_q, NULL, x_kv, NULL, mask, fill, weights, NULL);
}

ag_tensor *ag_mha_layer_forward_textbook(ag_graph *g, const ag_mha_layer *m, ag_tensor *x_q, ag_tensor *x_kv, ag_tensor *mask,
                                   double fill, ag_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ag__ok(g, "mha_textbook", 0)) return NULL;
    if (!m) {
        ag_graph_fail(g, AG_ERR_ARG, "mha_textbook: the layer is NULL");
        return NULL;
    }
    ag_mha_layer tb = *m;
    tb.textbook = 1;
    return ag__mha_rows(g, &tb, x_q, NULL, x_kv, NULL, mask, fill, weights, NULL);
}

/* ---- incremental decoding: attention over a key/value cache --------------- */

/* x [B, T, C] holds the rows at positions pos .. pos + T - 1 of B
 * sequences whose earlier rows' keys and values are in keys, values
 * [B, S, C] (rows [0, pos) of each).  Their own keys and values are
 * written to rows [pos, pos + T), then query t attends to keys s <= pos + t:
 * the rows of the uncached causal attention over the whole prefix.  Only
 * the queries of rows q0 .. T - 1 are computed: the result is [B, T - q0, C]
 * (a last layer whose other rows nobody reads takes q0 = T - 1).  With
 * B = 1 (ag_gpt) the attention is ag_scaled_dot_product_attention over
 * rows [0, pos + T), bottom-right causal.  With B > 1 (the translator) it
 * attends over all S rows, the ones past pos + t hidden by the causal rule,
 * diagonal at pos + q0 (their weight is exactly 0, and the kernel skips
 * them by blocks); rows past pos + T must be finite (0 * NaN is NaN). */
ag_tensor *ag__mha_cached(ag_graph *g, const ag_mha_layer *m, ag_tensor *x, int q0, ag_real *keys, ag_real *values,
                          int pos, int S)
{
    if (!ag__ok(g, "mha_cached", 1, x)) return NULL;
    int C = m->C, H = m->H, B = x->shape[0], T = x->ndim == 3 ? x->shape[1] : 0;
    if (x->ndim != 3 || x->shape[2] != C || pos < 0 || pos + T > S || q0 < 0 || q0 >= T) {
        char a[96];
        ag_graph_fail(g, AG_ERR_SHAPE,
                      "mha_cached: x %s at position %d, queries from row %d: want [B, T, %d] with %d + T <= %d",
                      ag_shape_str(x, a, sizeof a), pos, q0, C, pos, S);
        return NULL;
    }
    ag_tensor *q = ag_set_name(ag_linear_layer_forward(g, &m->w_q, q0 ? ag_slice(g, x, 1, q0, T - q0) : x), "q");
    ag_tensor *k = ag_set_name(ag_linear_layer_forward(g, &m->w_k, x), "k");
    ag_tensor *v = ag_set_name(ag_linear_layer_forward(g, &m->w_v, x), "v");
    q = ag__qk_norm(g, m, &m->q_norm, q), k = ag__qk_norm(g, m, &m->k_norm, k);
    if (!ag__ok(g, "mha_cached", 3, q, k, v)) return NULL;
    size_t row = (size_t)T * C;
    for (int b = 0; b < B; b++) {
        memcpy(keys + ((size_t)b * S + pos) * C, k->data + b * row, row * sizeof(ag_real));
        memcpy(values + ((size_t)b * S + pos) * C, v->data + b * row, row * sizeof(ag_real));
    }
    ag_tensor *qh = split_heads(g, q, H), *o;
    if (B == 1) {
        /* one sequence: its rows [0, pos + T) are the keys, the queries the
         * last T - q0 of them (bottom-right causal), as a user's decoder
         * with an ag_kv_cache attends */
        ag_tensor *kh = ag__view_of(g, keys, AG_SHAPE(1, pos + T, H, C / H));
        ag_tensor *vh = ag__view_of(g, values, AG_SHAPE(1, pos + T, H, C / H));
        if (!ag__ok(g, "mha_cached", 3, qh, kh, vh)) return NULL;
        ag_sdpa_config cfg = {.causal = AG_CAUSAL_BOTTOM_RIGHT, .heads_layout = 1};
        o = concat_heads(g, ag_scaled_dot_product_attention(g, qh, kh, vh, &cfg));
    } else {
        /* B sequences of S rows each: rows [0, pos + T) are not one tensor,
         * so all S rows, query row i (position pos + q0 + i) seeing keys
         * s <= pos + q0 + i */
        ag_tensor *kh = ag__view_of(g, keys, AG_SHAPE(B, S, H, C / H));
        ag_tensor *vh = ag__view_of(g, values, AG_SHAPE(B, S, H, C / H));
        if (!ag__ok(g, "mha_cached", 3, qh, kh, vh)) return NULL;
        ag__attn_rule r = {.scale = scale_of(qh), .fill = AG_MASK_NEG_INF, .causal = AG__CAUSAL_DIAG,
                           .diag = pos + q0};
        o = concat_heads(g, ag__attention(g, qh, kh, vh, &r));
    }
    return ag_linear_layer_forward(g, &m->w_o, o);
}

/* Attention of x [B, T, C] over keys and values already projected, k and v
 * [B, S, C] (w_k and w_v of m applied once, e.g. to an encoder's output
 * that every decoding step reads): ag_mha_layer_forward(x, kv source) without
 * computing k and v again. */
ag_tensor *ag__mha_projected(ag_graph *g, const ag_mha_layer *m, ag_tensor *x, ag_tensor *k, ag_tensor *v,
                             ag_tensor *mask, double fill)
{
    if (!ag__ok(g, "mha_projected", 3, x, k, v)) return NULL;
    ag_tensor *q = ag__qk_norm(g, m, &m->q_norm, ag_set_name(ag_linear_layer_forward(g, &m->w_q, x), "q"));
    ag_tensor *qh = split_heads(g, q, m->H), *kh = split_heads(g, k, m->H), *vh = split_heads(g, v, m->H);
    if (!ag__ok(g, "mha_projected", 3, qh, kh, vh)) return NULL;
    ag__attn_rule r = {.mask = mask, .scale = scale_of(qh), .fill = fill};
    return ag_linear_layer_forward(g, &m->w_o, concat_heads(g, ag__attention(g, qh, kh, vh, &r)));
}
