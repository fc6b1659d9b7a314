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
 * gradient (tests/test_fusion.c): each element is the same chain of
 * products and the same softmax row, to the bit at a toy GPT's sizes (a
 * row cut short below, in float, may add its terms in another order when
 * S > 64).  Rows whose scores hold a NaN or overflow to +inf are NaN, as
 * there, but only over the keys their block of queries reaches (a block
 * of 8 queries in the kernel for toy heads, of 16 or 64 otherwise), where
 * the three nodes spread the NaN over all S keys, into the gradients of
 * keys no query of the row's block may see.  What one node buys:
 *   - a head's scores and their gradient stay in the cache (a buffer of
 *     T S values per thread) instead of going out to [B, H, T, S] tensors
 *     larger than the cache and back, four times a step;
 *   - with fill -inf, the products leave out the keys no query of a block
 *     may see (seen_keys): their weights are exactly 0.  A causal mask
 *     leaves out a quarter of the work at T = 32;
 *   - a toy head (S <= 32 keys, a multiple of 8; D, Dv <= 16; T <= 64: a
 *     small GPT's) takes, on AVX-512 in float, a kernel of its own
 *     (head512, in src/core/attention_kernel.c): K^T and V^T turned once
 *     per head, the softmax's steps in registers for 8 rows at a time, and
 *     the next head's rows asked of the cache ahead; the same operations
 *     in the same order, so the same bits.
 * Only P is saved for the backward.
 *
 * src = {q, k, v}; aux = the mask, P and the keys each block sees;
 * farg[0] = scale, farg[1] = fill; iarg[0] = 1 when masked. */
#include "core/attention_kernel.h"

#include <math.h>
#include <stdio.h>

/* Rows of a head in blocks: the products of a block of queries stop at the
 * last key any of them may see, a multiple of 16 (a vector of floats, so
 * that a row's softmax adds the same lanes as over all S keys).  Blocks of
 * 16 rows when a head's products take gemm.c's kernel for toy heads
 * (N <= 32), which packs nothing; of 64 otherwise, so that packing K^T or
 * dO for the blocked product repays itself (T = 512: 20% faster than 16). */
static int block_rows(int S) { return S <= 32 ? 16 : 64; }

typedef struct saved {
    ag_tensor *mask; /* never differentiated: data, like the ids of embedding */
    ag_real *p;      /* [B, H, T, S] */
    int *kend;       /* per block of queries: keys [0, kend) may be seen */
    int *tfirst;     /* per block of keys: the first query that may see one */
} saved;

/* With fill -inf, query t's weight on key s is exactly 0 wherever the mask
 * is 0 in every head: past the last key that some head lets it see.  So a
 * block of queries needs the keys [0, kend) only (P is 0 beyond), and a
 * block of keys only the queries from tfirst on (P is 0 before): the
 * products skip what would add exact zeros (a causal mask drops a quarter
 * at T = 32).  Otherwise (no mask, a finite fill) kend = S, tfirst = 0.
 * last[t] (T ints after kend) is one past the last key query t may see. */
static void seen_keys(const ag_tensor *mask, double fill, int T, int S, int *kend, int *tfirst)
{
    const int RB = block_rows(S);
    int seen_all = mask && fill == -INFINITY ? 0 : S, *last = kend + (T + RB - 1) / RB;
    for (int t = 0; t < T; t++) last[t] = seen_all;
    if (!seen_all) { /* the mask is [..., T or 1, S or 1] */
        int md = mask->ndim, mS = md >= 1 ? mask->shape[md - 1] : 1, mT = md >= 2 ? mask->shape[md - 2] : 1;
        for (size_t i = 0; i < mask->size; i++) {
            if (mask->data[i] == 0) continue;
            int s = (int)(i % (size_t)mS), t = (int)(i / (size_t)mS % (size_t)mT), end = mS == 1 ? S : s + 1;
            if (mT == 1) seen_all = end > seen_all ? end : seen_all;
            else last[t] = end > last[t] ? end : last[t];
        }
        for (int t = 0; t < T; t++) last[t] = seen_all > last[t] ? seen_all : last[t];
    }
    for (int t0 = 0; t0 < T; t0 += RB) {
        int e = 0;
        for (int t = t0; t < T && t < t0 + RB; t++) e = last[t] > e ? last[t] : e;
        e = (e + 15) / 16 * 16;
        kend[t0 / RB] = e < S ? e : S;
    }
    for (int s0 = 0; s0 < S; s0 += RB) {
        int t = 0;
        while (t < T && last[t] <= s0) t++;
        tfirst[s0 / RB] = t;
    }
}

/* Rows [t0, t0 + n) of x [T, S]: 0 from column e on. */
static void zero_past(ag_real *x, int S, int t0, int n, int e)
{
    if (e < S)
        for (int t = t0; t < t0 + n; t++) memset(x + (size_t)t * S + e, 0, (size_t)(S - e) * sizeof(ag_real));
}

static void forward_head(const ag__att_job *j, size_t bh)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, H = j->H, RB = block_rows(S);
    const ag_real *q = j->q + ag__att_at(j, bh, T, D), *k = j->k + ag__att_at(j, bh, S, D);
    const ag_real *v = j->v + ag__att_at(j, bh, S, Dv);
    ag_real *p = j->p + bh * (size_t)T * (size_t)S, *y = j->y + ag__att_at(j, bh, T, Dv);
    for (int t0 = 0; t0 < T; t0 += RB) { /* queries [t0, t0 + n), keys [0, e) */
        int n = T - t0 < RB ? T - t0 : RB, e = j->kend[t0 / RB];
        ag_real *pt = p + (size_t)t0 * S;
        /* A = Q K^T, into P's place */
        ag__gemm(0, 1, n, e, D, q + (size_t)t0 * H * D, H * D, k, H * D, 0, pt, S);
        /* P = softmax(mask ? scale A : fill), in place; 0 past the keys seen */
        if (e > 0)
            ag__masked_softmax_rows(bh * (size_t)T + (size_t)t0, (size_t)n, (size_t)e, (size_t)S, pt, j->mask, j->mm,
                                    j->scale, j->fill, pt, pt);
        zero_past(p, S, t0, n, e);
        /* O = P V */
        ag__gemm(0, 0, n, Dv, e, pt, S, v, H * Dv, 0, y + (size_t)t0 * H * Dv, H * Dv);
    }
}

static void backward_head(const ag__att_job *j, size_t bh, ag_real *da)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, H = j->H, RB = block_rows(S);
    const ag_real *p = j->p + bh * (size_t)T * (size_t)S, *dy = j->dy + ag__att_at(j, bh, T, Dv);
    const ag_real *q = j->q + ag__att_at(j, bh, T, D), *k = j->k + ag__att_at(j, bh, S, D);
    const ag_real *v = j->v + ag__att_at(j, bh, S, Dv);
    ag_real *dq = j->dq ? j->dq + ag__att_at(j, bh, T, D) : NULL, *dk = j->dk ? j->dk + ag__att_at(j, bh, S, D) : NULL;
    ag_real *dv = j->dv ? j->dv + ag__att_at(j, bh, S, Dv) : NULL;
    for (int t0 = 0; (dq || dk) && t0 < T; t0 += RB) { /* queries [t0, t0 + n), keys [0, e) */
        int n = T - t0 < RB ? T - t0 : RB, e = j->kend[t0 / RB];
        const ag_real *pt = p + (size_t)t0 * S;
        ag_real *dat = da + (size_t)t0 * S;
        /* O = P V:  dP = dO V^T  [n, Dv] x [Dv, e] */
        ag__gemm(0, 1, n, e, Dv, dy + (size_t)t0 * H * Dv, H * Dv, v, H * Dv, 0, dat, S);
        /* P = softmax(mask ? scale A : fill):  dA = mask ? scale P (dP - rowsum(dP P)) : 0, in place */
        if (e > 0)
            ag__masked_softmax_rows_backward(bh * (size_t)T + (size_t)t0, (size_t)n, (size_t)e, (size_t)S, pt, dat,
                                             dat, j->mask, j->mm, j->scale, false);
        zero_past(da, S, t0, n, e);
        /* A = Q K^T:  dQ += dA K  [n, e] x [e, D] */
        if (dq) ag__gemm(0, 0, n, D, e, dat, S, k, H * D, j->beta_q, dq + (size_t)t0 * H * D, H * D);
    }
    for (int s0 = 0; s0 < S; s0 += RB) { /* keys [s0, s0 + n), queries [t, T) */
        int n = S - s0 < RB ? S - s0 : RB, t = j->tfirst[s0 / RB];
        /* O = P V:  dV += P^T dO  [n, T - t] x [T - t, Dv] */
        if (dv)
            ag__gemm(1, 0, n, Dv, T - t, p + (size_t)t * S + s0, S, dy + (size_t)t * H * Dv, H * Dv, j->beta_v,
                     dv + (size_t)s0 * H * Dv, H * Dv);
        /* A = Q K^T:  dK += dA^T Q  [n, T - t] x [T - t, D] */
        if (dk)
            ag__gemm(1, 0, n, D, T - t, da + (size_t)t * S + s0, S, q + (size_t)t * H * D, H * D, j->beta_k,
                     dk + (size_t)s0 * H * D, H * D);
    }
}

/* Block t of the heads, on one thread: the heads one after another, the
 * backward's dA in the block's own scratch. */
static void forward_block(void *ctx, size_t t)
{
    const ag__att_job *j = ctx;
    for (size_t bh = j->heads * t / j->nt; bh < j->heads * (t + 1) / j->nt; bh++) {
#ifdef AG_HAVE_HEAD512
        if (j->head512) {
            ag__head512_forward(j, bh);
            continue;
        }
#endif
        forward_head(j, bh);
    }
}

static void backward_block(void *ctx, size_t t)
{
    const ag__att_job *j = ctx;
    ag_real *da = j->scratch + t * j->scratch_stride;
    for (size_t bh = j->heads * t / j->nt; bh < j->heads * (t + 1) / j->nt; bh++) {
#ifdef AG_HAVE_HEAD512
        if (j->head512) {
            ag__head512_backward(j, bh, da);
            continue;
        }
#endif
        backward_head(j, bh, da);
    }
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
        ag_graph_fail(g, AG_ERR_SHAPE,
                      "attention: q %s, k %s, v %s do not fit [B, T, H, D], [B, S, H, D], [B, S, H, Dv]",
                      ag_shape_str(q, a, sizeof a), ag_shape_str(k, b, sizeof b), ag_shape_str(v, c, sizeof c));
        return false;
    }
    int scores[4] = {q->shape[0], q->shape[2], q->shape[1], k->shape[1]}; /* [B, H, T, S] */
    for (int i = 0; mask && i < mask->ndim; i++) {
        int ix = 4 - mask->ndim + i, d = mask->shape[i];
        if (ix < 0 ? d != 1 : d != 1 && d != scores[ix]) {
            ag_graph_fail(g, AG_ERR_SHAPE,
                          "attention: mask %s does not broadcast to the scores' [B, H, T, S] = [%d, %d, %d, %d]",
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
    const int RB = block_rows(S);
    size_t nb = (size_t)(T + RB - 1) / RB + (size_t)T + (size_t)(S + RB - 1) / RB; /* kend, last, tfirst */
    size_t head = (sizeof(saved) + nb * sizeof(int) + 63) / 64 * 64; /* P at the arena's 64-byte alignment */
    saved *sv = ag__save(g, head + heads * ts * sizeof(ag_real));
    if (!sv) return NULL;
    sv->mask = mask;
    sv->kend = (int *)(sv + 1);
    sv->tfirst = sv->kend + (T + RB - 1) / RB + T;
    sv->p = (ag_real *)((char *)sv + head);
    seen_keys(mask, fill, T, S, sv->kend, sv->tfirst);
    ag__impl(y)->aux = sv;
    if (y->size == 0 || ts == 0) {
        if (y->size) memset(y->data, 0, y->size * sizeof(ag_real)); /* no key: P V is an empty sum */
        return y;
    }
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, 4, (int[]){B, H, T, S}, mask);
    int nt = ag__threads_for(heads * ts * (size_t)(D + Dv) / 16);
    ag__att_job j = {.T = T, .S = S, .H = H, .D = D, .Dv = Dv, .heads = heads, .nt = (size_t)nt, .mm = &mm,
                 .mask = mask, .kend = sv->kend, .tfirst = sv->tfirst, .q = q->data, .k = k->data,
                 .v = v->data, .y = y->data, .p = sv->p, .scale = (ag_real)scale, .fill = (ag_real)fill};
    j.last = sv->kend + (T + RB - 1) / RB;
    j.head512 = ag__head512_plan(&j);
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
    ag__att_job j = {.T = T, .S = S, .H = H, .D = D, .Dv = Dv, .heads = heads, .mask = sv->mask, .kend = sv->kend,
                 .tfirst = sv->tfirst, .q = q->data, .k = k->data, .v = v->data, .dy = y->grad, .p = sv->p,
                 .scale = (ag_real)ag__impl(y)->farg[0]};
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
    j.last = sv->kend + (T + block_rows(S) - 1) / block_rows(S);
    j.head512 = ag__head512_plan(&j);
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
