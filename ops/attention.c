/* ops/attention.c: scaled dot-product attention over every head of a batch
 * in one node, what multi-head attention's heads do (src/nn/attention.c)
 * when nobody asks for the attention weights and no dropout applies.
 *
 *   q [B, T, H, D], k [B, S, H, D], v [B, S, H, Dv], mask (broadcast to
 *   [B, H, T, S]) or NULL -> y [B, T, H, Dv]
 *
 * Head h of sentence b, Q [T, D], K [S, D], V [S, Dv] and O [T, Dv], is read
 * and written in place, rows H D apart (ops/matmul.c's heads layout):
 *
 * forward:  A  = Q K^T                                      [T, S]
 *           P  = softmax(mask ? scale A : fill), row-wise   [T, S]
 *           O  = P V                                        [T, Dv]
 * backward: dP = dO V^T,   dV += P^T dO
 *           dA = mask ? scale P (dP - rowsum(dP P)) : 0     (masked_softmax's)
 *           dQ += dA K,    dK += dA^T Q
 *
 * It equals the three nodes it replaces, matmul_heads(q, k^T),
 * masked_softmax and matmul_heads(., v), value for value and gradient for
 * gradient (tests/test_fusion.c): the same gemm calls and the same softmax
 * rows.  What one node buys: a head's scores and their gradient stay in
 * the cache (a buffer of T S values per thread) instead of going out to
 * [B, H, T, S] tensors larger than the cache and back, four times a step.
 * Only P is saved for the backward.
 *
 * src = {q, k, v}; aux = the mask and P; farg[0] = scale, farg[1] = fill;
 * iarg[0] = 1 when masked. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

typedef struct saved {
    ag_tensor *mask; /* never differentiated: data, like the ids of embedding */
    ag_real *p;      /* [B, H, T, S] */
} saved;

/* Everything a block of heads needs, forward or backward. */
typedef struct att_job {
    int T, S, H, D, Dv;
    size_t heads, nt; /* B H heads, cut into nt blocks */
    const ag__mask_map *mm;
    const ag_tensor *mask;
    const ag_real *q, *k, *v, *dy;
    ag_real *y, *p, *dq, *dk, *dv, *scratch;
    size_t scratch_stride;
    ag_real scale, fill, beta_q, beta_k, beta_v;
} att_job;

/* Head bh = b H + h: where it starts in q and k (cols D) or in v and y
 * (cols Dv), for an operand of `rows` rows per sentence. */
static size_t at(const att_job *j, size_t bh, int rows, int cols)
{
    size_t b = bh / (size_t)j->H, h = bh % (size_t)j->H;
    return (b * (size_t)rows * (size_t)j->H + h) * (size_t)cols;
}

static void forward_head(const att_job *j, size_t bh)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, H = j->H;
    ag_real *p = j->p + bh * (size_t)T * (size_t)S;
    /* A = Q K^T, into P's place */
    ag__gemm(0, 1, T, S, D, j->q + at(j, bh, T, D), H * D, j->k + at(j, bh, S, D), H * D, 0, p, S);
    /* P = softmax(mask ? scale A : fill), in place */
    ag__masked_softmax_rows(bh * (size_t)T, (size_t)T, (size_t)S, p, j->mask, j->mm, j->scale, j->fill, p, p);
    /* O = P V */
    ag__gemm(0, 0, T, Dv, S, p, S, j->v + at(j, bh, S, Dv), H * Dv, 0, j->y + at(j, bh, T, Dv), H * Dv);
}

static void backward_head(const att_job *j, size_t bh, ag_real *da)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, H = j->H;
    const ag_real *p = j->p + bh * (size_t)T * (size_t)S, *dy = j->dy + at(j, bh, T, Dv);
    size_t iq = at(j, bh, T, D), ik = at(j, bh, S, D), iv = at(j, bh, S, Dv);
    /* O = P V:  dV += P^T dO  [S, T] x [T, Dv] */
    if (j->dv) ag__gemm(1, 0, S, Dv, T, p, S, dy, H * Dv, j->beta_v, j->dv + iv, H * Dv);
    if (!j->dq && !j->dk) return;
    /* O = P V:  dP = dO V^T  [T, Dv] x [Dv, S] */
    ag__gemm(0, 1, T, S, Dv, dy, H * Dv, j->v + iv, H * Dv, 0, da, S);
    /* P = softmax(mask ? scale A : fill):  dA = mask ? scale P (dP - rowsum(dP P)) : 0, in place */
    ag__masked_softmax_rows_backward(bh * (size_t)T, (size_t)T, (size_t)S, p, da, da, j->mask, j->mm, j->scale,
                                     false);
    /* A = Q K^T:  dQ += dA K  [T, S] x [S, D];  dK += dA^T Q  [S, T] x [T, D] */
    if (j->dq) ag__gemm(0, 0, T, D, S, da, S, j->k + ik, H * D, j->beta_q, j->dq + iq, H * D);
    if (j->dk) ag__gemm(1, 0, S, D, T, da, S, j->q + iq, H * D, j->beta_k, j->dk + ik, H * D);
}

/* Block t of the heads, on one thread: the heads one after another, the
 * backward's dA in the block's own scratch. */
static void forward_block(void *ctx, size_t t)
{
    const att_job *j = ctx;
    for (size_t bh = j->heads * t / j->nt; bh < j->heads * (t + 1) / j->nt; bh++) forward_head(j, bh);
}

static void backward_block(void *ctx, size_t t)
{
    const att_job *j = ctx;
    for (size_t bh = j->heads * t / j->nt; bh < j->heads * (t + 1) / j->nt; bh++)
        backward_head(j, bh, j->scratch + t * j->scratch_stride);
}

/* q [B, T, H, D], k [B, S, H, D], v [B, S, H, Dv]; the mask broadcasts to
 * [B, H, T, S].  Otherwise records why and returns false. */
static bool shapes_fit(ag_graph *g, const ag_tensor *q, const ag_tensor *k, const ag_tensor *v, const ag_tensor *mask)
{
    char a[96], b[96], c[96];
    bool fit = q->ndim == 4 && k->ndim == 4 && v->ndim == 4 && k->shape[0] == q->shape[0] &&
               v->shape[0] == q->shape[0] && k->shape[2] == q->shape[2] && v->shape[2] == q->shape[2] &&
               k->shape[3] == q->shape[3] && v->shape[1] == k->shape[1];
    if (!fit) {
        ag_graph_fail(g, AG_ERR_SHAPE, "attention: q %s, k %s, v %s do not fit [B, T, H, D], [B, S, H, D], [B, S, H, Dv]",
                      ag_shape_str(q, a, sizeof a), ag_shape_str(k, b, sizeof b), ag_shape_str(v, c, sizeof c));
        return false;
    }
    int scores[4] = {q->shape[0], q->shape[2], q->shape[1], k->shape[1]}; /* [B, H, T, S] */
    for (int i = 0; mask && i < mask->ndim; i++) {
        int ix = 4 - mask->ndim + i, d = mask->shape[i];
        if (ix < 0 ? d != 1 : d != 1 && d != scores[ix]) {
            ag_graph_fail(g, AG_ERR_SHAPE, "attention: mask %s does not broadcast to the scores' [B, H, T, S] = [%d, %d, %d, %d]",
                          ag_shape_str(mask, a, sizeof a), scores[0], scores[1], scores[2], scores[3]);
            return false;
        }
    }
    return true;
}

ag_tensor *ag__attention_heads(ag_graph *g, ag_tensor *q, ag_tensor *k, ag_tensor *v, double scale, ag_tensor *mask,
                               double fill)
{
    if (!ag__ok(g, "attention", 3, q, k, v)) return NULL;
    if (mask && !ag__usable(g, "attention", 3, mask)) return NULL;
    if (!shapes_fit(g, q, k, v, mask)) return NULL;
    int B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3], S = k->shape[1], Dv = v->shape[3];
    ag_tensor *src[3] = {q, k, v};
    ag_tensor *y = ag__node(g, AG_OP_ATTENTION, 4, (int[]){B, T, H, Dv}, 3, src);
    if (!y) return NULL;
    ag__impl(y)->farg[0] = scale;
    ag__impl(y)->farg[1] = fill;
    ag__impl(y)->iarg[0] = mask != NULL;
    size_t heads = (size_t)B * (size_t)H, ts = (size_t)T * (size_t)S;
    saved *sv = ag__save(g, sizeof(saved) + 64 + heads * ts * sizeof(ag_real));
    if (!sv) return NULL;
    sv->mask = mask;
    sv->p = (ag_real *)((char *)sv + (sizeof(saved) + 63) / 64 * 64); /* the arena's 64-byte alignment */
    ag__impl(y)->aux = sv;
    if (y->size == 0 || ts == 0) {
        if (y->size) memset(y->data, 0, y->size * sizeof(ag_real)); /* no key: P V is an empty sum */
        return y;
    }
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, 4, (int[]){B, H, T, S}, mask);
    int nt = ag__threads_for(heads * ts * (size_t)(D + Dv) / 16);
    att_job j = {.T = T, .S = S, .H = H, .D = D, .Dv = Dv, .heads = heads, .nt = (size_t)nt, .mm = &mm,
                 .mask = mask, .q = q->data, .k = k->data, .v = v->data, .y = y->data, .p = sv->p,
                 .scale = (ag_real)scale, .fill = (ag_real)fill};
    ag__parallel_for((size_t)nt, nt, forward_block, &j);
    return y;
}

/* x's gradient, each head of it written by one head's products: fresh,
 * and read by this node once, the products store into it (*beta = 0);
 * otherwise they add (*beta = 1), into zeros if it was fresh. */
static ag_real *grad_of(ag_graph *g, ag_tensor *x, bool once, ag_real *beta)
{
    if (!x->requires_grad) return NULL;
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    *beta = fresh && once ? 0 : 1;
    if (dx && fresh && !once) memset(dx, 0, x->size * sizeof(ag_real));
    return dx;
}

static void attention_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *q = y->src[0], *k = y->src[1], *v = y->src[2];
    const saved *sv = ag__impl(y)->aux;
    int B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3], S = k->shape[1], Dv = v->shape[3];
    size_t heads = (size_t)B * (size_t)H, ts = (size_t)T * (size_t)S;
    att_job j = {.T = T, .S = S, .H = H, .D = D, .Dv = Dv, .heads = heads, .mask = sv->mask, .q = q->data,
                 .k = k->data, .v = v->data, .dy = y->grad, .p = sv->p, .scale = (ag_real)ag__impl(y)->farg[0]};
    j.dq = grad_of(g, q, q != k && q != v, &j.beta_q);
    j.dk = grad_of(g, k, k != q && k != v, &j.beta_k);
    j.dv = grad_of(g, v, v != q && v != k, &j.beta_v);
    if ((q->requires_grad && !j.dq) || (k->requires_grad && !j.dk) || (v->requires_grad && !j.dv)) return;
    if (ts == 0 || y->size == 0) { /* nothing read: the gradients are 0 */
        if (j.dq && j.beta_q == 0) memset(j.dq, 0, q->size * sizeof(ag_real));
        if (j.dk && j.beta_k == 0) memset(j.dk, 0, k->size * sizeof(ag_real));
        if (j.dv && j.beta_v == 0) memset(j.dv, 0, v->size * sizeof(ag_real));
        return;
    }
    ag__mask_map mm = {0};
    if (sv->mask) ag__mask_map_init(&mm, 4, (int[]){B, H, T, S}, sv->mask);
    j.mm = &mm;
    int nt = ag__threads_for(heads * ts * (size_t)(D + Dv) / 8);
    j.nt = (size_t)nt;
    j.scratch_stride = (ts + 15) / 16 * 16; /* a cache line apart */
    j.scratch = ag__alloc(g, (size_t)nt * j.scratch_stride * sizeof(ag_real));
    if (!j.scratch) return;
    ag__parallel_for((size_t)nt, nt, backward_block, &j);
}

/* Fixed masks, made inside the builds: they are data, not checked inputs. */
static ag_tensor *case_plain(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention_heads(g, in[0], in[1], in[2], 0.5, NULL, 0);
}
static ag_tensor *case_causal(ag_graph *g, ag_tensor *const *in)
{
    ag_tensor *causal3 = ag_tensor_from(g, AG_SHAPE(3, 3), (ag_real[]){1, 0, 0, 1, 1, 0, 1, 1, 1});
    return ag__attention_heads(g, in[0], in[1], in[2], 0.7, causal3, -INFINITY);
}
static ag_tensor *padding(ag_graph *g)
{
    /* [B, 1, 1, S] = [2, 1, 1, 4]: sentence 1 masks every key */
    return ag_tensor_from(g, AG_SHAPE(2, 1, 1, 4), (ag_real[]){1, 1, 0, 1, 0, 0, 0, 0});
}
static ag_tensor *case_padding(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention_heads(g, in[0], in[1], in[2], 1.3, padding(g), -INFINITY);
}
static ag_tensor *case_padding_uniform(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention_heads(g, in[0], in[1], in[2], 1.3, padding(g), -1e9);
}

static const ag_op_case cases[] = {
    {"q [2, 3, 2, 4], k [2, 5, 2, 4], v [2, 5, 2, 3], no mask", 3, {4, 4, 4},
     {{2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 3}}, -1, 1, 0, case_plain},
    {"causal [3, 3], fill -inf", 3, {4, 4, 4}, {{2, 3, 2, 4}, {2, 3, 2, 4}, {2, 3, 2, 4}}, -1, 1, 0, case_causal},
    {"padding [2, 1, 1, 4], a sentence all -inf", 3, {4, 4, 4}, {{2, 3, 2, 2}, {2, 4, 2, 2}, {2, 4, 2, 3}}, -1, 1, 0,
     case_padding},
    {"padding, fill -1e9: a uniform row", 3, {4, 4, 4}, {{2, 2, 1, 3}, {2, 4, 1, 3}, {2, 4, 1, 2}}, -1, 1, 0,
     case_padding_uniform},
    {"size-1: [1, 1, 1, 1]", 3, {4, 4, 4}, {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, -1, 1, 0, case_plain},
};

const ag_op_desc ag_op_attention = {.name = "attention", .backward = attention_backward, AG_CASES(cases)};
