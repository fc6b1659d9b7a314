/* kernels/attention.c: the attention op (ops/attention.c, where the math
 * and the reference are) over every head at once, heads shared among the
 * threads, each head's products by gemm and its softmax rows by
 * masked_softmax's, in blocks of queries.  It equals the three nodes the
 * op replaces, matmul_heads(q, k^T), masked_softmax and matmul_heads(.,
 * v), value for value and gradient for gradient (tests/test_fusion.c):
 * each element is the same chain of products and the same softmax row,
 * to the bit at a toy GPT's sizes (a row cut short below, in float, may
 * add its terms in another order when S > 64).  Rows whose scores hold a
 * NaN or overflow to +inf are NaN, but only over the keys their block of
 * queries reaches (a block of 8 queries in the kernel for toy heads, of
 * 16 or 64 otherwise), where the three nodes spread the NaN over all S
 * keys.
 * What one node buys:
 *   - a head's scores and their gradient stay in the cache (a buffer of
 *     T S values per thread) instead of going out to [B, H, T, S] tensors
 *     larger than the cache and back, four times a step;
 *   - with fill -inf, the products leave out the keys no query of a block
 *     may see (seen_keys): their weights are exactly 0;
 *   - a toy head (S <= 32 keys, a multiple of 8; D, Dv <= 16; T <= 64: a
 *     small GPT's) takes, on AVX-512 in float, a kernel of its own
 *     (head512, in kernels/attention_head512.c): K^T and V^T turned once
 *     per head, the softmax's steps in registers for 8 rows at a time, and
 *     the next head's rows asked of the cache ahead; the same operations
 *     in the same order, so the same bits.
 * Rows of more than AG__FLASH_KEYS keys take the flash kernel instead
 * (kernels/attention_flash.c): no P, each row's log-sum-exp (as its max
 * and sum), the blocks' keys as here.
 * Dropout (Z, ag__attn_kept's bits, drawn by ag__att_drop) leaves P as
 * the softmax made it: the forward multiplies a block's copy of P by Z
 * before P V, the backward dO V^T by Z and P by Z again before dV.
 * Besides P (the op's), the forward saves for the backward the keys each
 * block of queries sees (a plan, below). */
#include "kernels/attention.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>

/* Rows of a head in blocks: the products of a block of queries stop at the
 * last key any of them may see, a multiple of 16 (a vector of floats, so
 * that a row's softmax adds the same lanes as over all S keys).  Blocks of
 * 16 rows when a head's products take gemm.c's kernel for toy heads
 * (N <= 32), which packs nothing; of 64 otherwise, so that packing K^T or
 * dO for the blocked product repays itself. */
static int block_rows(int S) { return S <= 32 ? 16 : AG__ATT_BLOCK; }

/* The keys the blocks see, made by the forward for its backward too. */
typedef struct plan {
    int *kend;   /* per block of queries: keys [0, kend) may be seen */
    int *last;   /* per query: one past the last key it may see */
    int *tfirst; /* per block of keys: the first query that may see one */
} plan;


/* With fill -inf, query t's weight on key s is exactly 0 wherever the mask
 * is 0 in every head: past the last key that some head lets it see.  So a
 * block of queries needs the keys [0, kend) only (P is 0 beyond), and a
 * block of keys only the queries from tfirst on (P is 0 before): the
 * products skip what would add exact zeros.  The causal rule hides keys
 * the same way, without a mask to read.  Otherwise (no mask, a finite
 * fill) kend = S, tfirst = 0.
 * last[t] (T ints after kend) is one past the last key query t may see. */
static void seen_keys(const ag__attn *a, int *kend, int *tfirst)
{
    const ag_tensor *mask = a->mask;
    const int T = a->T, S = a->S, RB = block_rows(S);
    int seen_all = mask && a->fill == -INFINITY ? 0 : S, *last = kend + (T + RB - 1) / RB;
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
    for (int t = 0; a->causal && a->fill == -INFINITY && t < T; t++) {
        int h = ag__attn_hide(true, a->diag, S, t);
        last[t] = h < last[t] ? h : last[t];
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

/* The causal rule on rows [t0, t0 + n) of x [T, S], keys [0, e): from each
 * row's first hidden key on, x = val (the forward's fill, the backward's
 * dA = 0). */
static void hide_causal(const ag__att_job *j, ag_real *x, int t0, int n, int e, ag_real val)
{
    for (int t = t0; j->a->causal && t < t0 + n; t++)
        for (int s = ag__attn_hide(true, j->a->diag, e, t); s < e; s++) x[(size_t)t * j->S + s] = val;
}

void ag__att_add_bias(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *z, size_t ld)
{
    for (int i = 0; j->bias && i < n; i++) {
        size_t r = bh * (size_t)j->T + (size_t)(t0 + i), ma = j->mm->along, ba = j->bm->along;
        const ag_real *m = j->mask ? j->mask->data + ag__mask_row(j->mm, r) : NULL;
        const ag_real *b = j->bias->data + ag__mask_row(j->bm, r);
        int hid = ag__attn_hide(j->a->causal, j->a->diag, j->S, t0 + i), end = s0 + kb < hid ? s0 + kb : hid;
        ag_real *zr = z + (size_t)i * ld - s0;
        for (int s = s0; s < end; s++)
            if (!m || m[(size_t)s * ma] != 0) zr[s] += b[(size_t)s * ba];
    }
}

void ag__att_bias_grad(const ag__att_job *j, size_t bh, int t0, int n, int s0, int kb, ag_real *dz, size_t ld)
{
    for (int i = 0; i < n; i++) {
        size_t r = bh * (size_t)j->T + (size_t)(t0 + i), ba = j->bm->along;
        ag_real *d = j->dm ? j->dm + ag__mask_row(j->bm, r) : NULL, *zr = dz + (size_t)i * ld - s0;
        int hid = ag__attn_hide(j->a->causal, j->a->diag, j->S, t0 + i), end = s0 + kb < hid ? s0 + kb : hid;
        for (int s = s0; d && s < end; s++) d[(size_t)s * ba] += zr[s]; /* dz is 0 where the mask hides s */
        for (int s = s0; s < s0 + kb; s++) zr[s] *= j->scale;
    }
}

/* Dropout's factors Z [T, S] of head bh, drawn once for the backward's
 * two uses: over the keys each block of queries reaches (kend), 0 past
 * them (where P is 0). */
static void factors(const ag__att_job *j, size_t bh, ag_real *z)
{
    const int T = j->T, S = j->S, RB = block_rows(S);
    for (int t0 = 0; t0 < T; t0 += RB) {
        int n = T - t0 < RB ? T - t0 : RB, e = j->kend[t0 / RB];
        for (int t = t0; t < t0 + n; t++)
            for (int s = 0; s < S; s++) z[(size_t)t * S + s] = s < e;
        ag__att_drop(j, bh, t0, n, 0, e, z + (size_t)t0 * S, S);
    }
}

/* x = x y over rows [0, n) of e values, rows ld apart. */
static void times(int n, int e, ag_real *x, const ag_real *y, int ld)
{
    for (int i = 0; i < n; i++) {
        ag_real *xr = x + (size_t)i * ld;
        const ag_real *yr = y + (size_t)i * ld;
#pragma omp simd
        for (int s = 0; s < e; s++) xr[s] *= yr[s];
    }
}

/* Head bh forward: P (kept, before dropout) and y; with dropout, a block's
 * P Z in the scratch of RB S values; under bf16 (q, k, v already rounded)
 * P Z rounded there too, the operand of P V. */
static void forward_head(const ag__att_job *j, size_t bh, ag_real *pz)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, RB = block_rows(S);
    const ag_real *q = j->q + ag__att_at(j, bh, T, D, false), *k = j->k + ag__att_at(j, bh, S, D, true);
    const ag_real *v = j->v + ag__att_at(j, bh, S, Dv, true);
    ag_real *p = j->p + bh * (size_t)T * (size_t)S, *y = j->y + ag__att_at(j, bh, T, Dv, false);
    for (int t0 = 0; t0 < T; t0 += RB) { /* queries [t0, t0 + n), keys [0, e) */
        int n = T - t0 < RB ? T - t0 : RB, e = j->kend[t0 / RB];
        ag_real *pt = p + (size_t)t0 * S;
        /* A = Q K^T, into P's place */
        ag__gemm(0, 1, n, e, D, q + (size_t)t0 * j->ldq, j->ldq, k, j->ldk, 0, pt, S);
        /* P = softmax(mask ? scale A + M : fill), in place; 0 past the keys seen */
        if (e > 0) {
            ag__masked_fill_rows(bh * (size_t)T + (size_t)t0, (size_t)n, (size_t)e, (size_t)S, pt, j->mask, j->mm,
                                 j->scale, j->fill, pt);
            hide_causal(j, p, t0, n, e, j->fill);
            ag__att_add_bias(j, bh, t0, n, 0, e, pt, (size_t)S);
            if (e == S) ag__softmax_rows((size_t)n, (size_t)S, pt, pt);
            else
                for (int i = 0; i < n; i++) ag__softmax_rows(1, (size_t)e, pt + (size_t)i * S, pt + (size_t)i * S);
        }
        zero_past(p, S, t0, n, e);
        /* O = (P Z) V: P kept as it is, P Z in the scratch */
        const ag_real *pd = pt;
        if ((j->a->dropout > 0 || j->a->bf16) && e > 0) {
            for (int i = 0; i < n; i++) memcpy(pz + (size_t)i * e, pt + (size_t)i * S, (size_t)e * sizeof *pz);
            ag__att_drop(j, bh, t0, n, 0, e, pz, e);
            if (j->a->bf16) ag__bf16_round_all((size_t)n * (size_t)e, pz, pz);
            pd = pz;
        }
        ag__gemm(0, 0, n, Dv, e, pd, pd == pt ? S : e, v, j->ldv, 0, y + (size_t)t0 * j->ldy, j->ldy);
    }
}

/* Head bh backward, dA [T, S] in the scratch da; with dropout, Z [T, S]
 * after it, then P Z in its place.  Under bf16 (q, k, v, dy already
 * rounded) dA is rounded before it meets K and Q, and P Z (after dA) before
 * it meets dO. */
static void backward_head(const ag__att_job *j, size_t bh, ag_real *da)
{
    const int T = j->T, S = j->S, D = j->D, Dv = j->Dv, RB = block_rows(S);
    const int ldq = j->ldq, ldk = j->ldk, ldv = j->ldv, ldy = j->ldy;
    const ag_real *p = j->p + bh * (size_t)T * (size_t)S, *dy = j->dy + ag__att_at(j, bh, T, Dv, false);
    const ag_real *q = j->q + ag__att_at(j, bh, T, D, false), *k = j->k + ag__att_at(j, bh, S, D, true);
    const ag_real *v = j->v + ag__att_at(j, bh, S, Dv, true);
    ag_real *dq = j->dq ? j->dq + ag__att_at(j, bh, T, D, false) : NULL;
    ag_real *dk = j->dk ? j->dk + ag__att_at(j, bh, S, D, true) : NULL;
    ag_real *dv = j->dv ? j->dv + ag__att_at(j, bh, S, Dv, true) : NULL;
    const bool bf16 = j->a->bf16;
    ag_real *pz = j->a->dropout > 0 || bf16 ? da + (size_t)T * S : NULL, *z = j->a->dropout > 0 ? pz : NULL;
    if (z) factors(j, bh, z);
    for (int t0 = 0; (dq || dk || j->dm) && t0 < T; t0 += RB) { /* queries [t0, t0 + n), keys [0, e) */
        int n = T - t0 < RB ? T - t0 : RB, e = j->kend[t0 / RB];
        const ag_real *pt = p + (size_t)t0 * S;
        ag_real *dat = da + (size_t)t0 * S;
        /* O = (P Z) V:  dP = (dO V^T) Z  [n, Dv] x [Dv, e] */
        ag__gemm(0, 1, n, e, Dv, dy + (size_t)t0 * ldy, ldy, v, ldv, 0, dat, S);
        if (z) times(n, e, dat, z + (size_t)t0 * S, S);
        /* P = softmax(mask ? scale A + M : fill):  dA = mask ? scale P (dP - rowsum(dP P)) : 0, in place;
         * dM += mask ? P (dP - rowsum(dP P)) : 0, made first (scale 1), then scaled: the same dA */
        if (e > 0) {
            ag__masked_softmax_rows_backward(bh * (size_t)T + (size_t)t0, (size_t)n, (size_t)e, (size_t)S, pt, dat,
                                             dat, j->mask, j->mm, j->dm ? 1 : j->scale, false);
            hide_causal(j, da, t0, n, e, 0);
            if (j->dm) ag__att_bias_grad(j, bh, t0, n, 0, e, dat, (size_t)S);
        }
        zero_past(da, S, t0, n, e);
        if (bf16) ag__bf16_round_all((size_t)n * (size_t)S, dat, dat); /* dA as the products' operand */
        /* A = Q K^T:  dQ += dA K  [n, e] x [e, D] */
        if (dq) ag__gemm(0, 0, n, D, e, dat, S, k, ldk, j->beta_q, dq + (size_t)t0 * ldq, ldq);
    }
    if (dv && pz) { /* P Z, the weights that made O (0 past kend: Z is), rounded under bf16 */
        if (z) times(T, S, z, p, S);
        else memcpy(pz, p, (size_t)T * S * sizeof *pz);
        if (bf16) ag__bf16_round_all((size_t)T * S, pz, pz);
        p = pz;
    }
    for (int s0 = 0; s0 < S; s0 += RB) { /* keys [s0, s0 + n), queries [t, T) */
        int n = S - s0 < RB ? S - s0 : RB, t = j->tfirst[s0 / RB];
        /* O = (P Z) V:  dV += (P Z)^T dO  [n, T - t] x [T - t, Dv] */
        if (dv)
            ag__gemm(1, 0, n, Dv, T - t, p + (size_t)t * S + s0, S, dy + (size_t)t * ldy, ldy, j->beta_v,
                     dv + (size_t)s0 * ldv, ldv);
        /* A = Q K^T:  dK += dA^T Q  [n, T - t] x [T - t, D] */
        if (dk)
            ag__gemm(1, 0, n, D, T - t, da + (size_t)t * S + s0, S, q + (size_t)t * ldq, ldq, j->beta_k,
                     dk + (size_t)s0 * ldk, ldk);
    }
}

/* Block t of the heads, on one thread: the heads one after another, the
 * backward's dA in the block's own scratch. */
/* The heads of block t: whole groups of query heads, so that one thread
 * adds all of a key/value head's gradient. */
static size_t first_head(const ag__att_job *j, size_t t) { return j->heads / j->group * t / j->nt * j->group; }

static void forward_block(void *ctx, size_t t)
{
    const ag__att_job *j = ctx;
    for (size_t bh = first_head(j, t); bh < first_head(j, t + 1); bh++) {
        if (j->ml) {
            ag__flash_forward(j, bh, j->scratch + t * j->scratch_stride);
            continue;
        }
#ifdef AG_HAVE_HEAD512
        if (j->head512) {
            ag__head512_forward(j, bh);
            continue;
        }
#endif
        forward_head(j, bh, j->scratch ? j->scratch + t * j->scratch_stride : NULL);
    }
}

static void backward_block(void *ctx, size_t t)
{
    ag__att_job jt = *(const ag__att_job *)ctx, *j = &jt;
    if (t > 0 && j->dm_parts) j->dm = j->dm_parts + (t - 1) * j->dm_stride; /* bias_grad_of */
    ag_real *da = j->scratch + t * j->scratch_stride;
    for (size_t bh = first_head(j, t); bh < first_head(j, t + 1); bh++) {
        if (j->ml) {
            ag__flash_backward(j, bh, da);
            continue;
        }
#ifdef AG_HAVE_HEAD512
        if (j->head512) {
            ag__head512_backward(j, bh, da);
            continue;
        }
#endif
        backward_head(j, bh, da);
    }
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

/* The keys the blocks of a's heads see (seen_keys), in the arena: saved
 * (the forward's, for its backward) or for this backward only. */
static plan *make_plan(ag_graph *g, const ag__attn *a, bool save)
{
    const int T = a->T, S = a->S, RB = block_rows(S), nq = (T + RB - 1) / RB, nk = (S + RB - 1) / RB;
    size_t bytes = sizeof(plan) + (size_t)(nq + T + nk) * sizeof(int);
    plan *pl = save ? ag__save(g, bytes) : ag__alloc(g, bytes);
    if (!pl) return NULL;
    pl->kend = (int *)(pl + 1), pl->last = pl->kend + nq, pl->tfirst = pl->last + T;
    seen_keys(a, pl->kend, pl->tfirst);
    return pl;
}

/* The job of a's heads, mask maps mm[2] (the mask's and the bias's,
 * filled here) and plan pl; a backward's blocks of threads take whole
 * groups of query heads (their key/value head's gradient is one sum), a
 * forward's any heads. */
static ag__att_job job_of(const ag__attn *a, ag__mask_map *mm, const plan *pl, size_t work, bool backward)
{
    mm[0] = mm[1] = (ag__mask_map){0};
    if (a->mask) ag__mask_map_init(&mm[0], 4, (int[]){a->B, a->H, a->T, a->S}, a->mask);
    if (a->bias) ag__mask_map_init(&mm[1], 4, (int[]){a->B, a->H, a->T, a->S}, a->bias);
    size_t heads = (size_t)a->B * (size_t)a->H, group = backward ? (size_t)(a->H / a->Hkv) : 1, groups = heads / group;
    int nt = ag__threads_for(heads * (size_t)a->T * (size_t)a->S * (size_t)(a->D + a->Dv) / work);
    nt = groups && (size_t)nt > groups ? (int)groups : nt; /* a block of threads has a group at least */
    return (ag__att_job){.a = a, .T = a->T, .S = a->S, .H = a->H, .D = a->D, .Dv = a->Dv,
                         .ldq = ag__attn_ld(a, a->D, false), .ldk = ag__attn_ld(a, a->D, true),
                         .ldv = ag__attn_ld(a, a->Dv, true), .ldy = ag__attn_ld(a, a->Dv, false), .heads = heads,
                         .group = group, .nt = (size_t)nt, .mm = mm, .bm = mm + 1, .mask = a->mask,
                         .bias = a->bias, .kend = pl->kend, .tfirst = pl->tfirst, .last = pl->last,
                         .scale = (ag_real)a->scale, .fill = (ag_real)a->fill};
}

/* Long rows: P [T, S] per head would be the largest thing a step keeps;
 * shorter ones keep it, with dropout or without, which saves the
 * backward its recomputation (and keeps the toy heads' bits).  Empty
 * heads (D or Dv 0) take the general path. */
bool ag__k_attention_flash(const ag__attn *a)
{
    return a->S > AG__FLASH_KEYS && a->D > 0 && a->Dv > 0;
}

bool ag__k_all_finite(size_t n, const ag_real *x)
{
    int ok = 1; /* x - x is 0 for a finite x, NaN (not equal to 0) for NaN and inf */
#pragma omp simd reduction(& : ok)
    for (size_t i = 0; i < n; i++) ok &= x[i] - x[i] == 0;
    return ok;
}

/* Each block of threads' scratch, n values a cache line apart. */
static ag_real *scratch_of(ag_graph *g, ag__att_job *j, size_t n)
{
    j->scratch_stride = (n + 15) / 16 * 16;
    return j->scratch = ag__alloc(g, j->nt * j->scratch_stride * sizeof(ag_real));
}

/* Under bf16 (a->bf16): each *x[i] replaced by a rounded copy of its n[i]
 * values, in the graph's scratch for this call (ag__temp: the next op
 * reuses it, so a step keeps none of the copies).  false: no memory, the
 * failure on g. */
static bool rounded(ag_graph *g, const ag__attn *a, const ag_real **x[], const size_t *n, int count)
{
    if (!a->bf16) return true;
    size_t total = 0;
    for (int i = 0; i < count; i++) total += (n[i] + 15) / 16 * 16; /* each copy a cache line apart */
    ag_real *t = ag__temp(g, (total ? total : 1) * sizeof(ag_real));
    for (int i = 0; t && i < count; t += (n[i] + 15) / 16 * 16, i++) {
        ag__bf16_round_all(n[i], *x[i], t);
        *x[i] = t;
    }
    return t != NULL;
}

/* q's (kv false) or k's (kv true) size, with `cols` values a row */
static size_t size_of(const ag__attn *a, int cols, bool kv)
{
    return (size_t)a->B * (size_t)(kv ? a->S : a->T) * (size_t)(kv ? a->Hkv : a->H) * (size_t)cols;
}

bool ag__k_attention_forward(ag_graph *g, ag__attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                             ag_real *p, ag_real *y)
{
    /* bf16: rounded copies of the heads (for the flash kernel too); no head512 */
    if (!rounded(g, a, (const ag_real **[]){&q, &k, &v},
                 (size_t[]){size_of(a, a->D, false), size_of(a, a->D, true), size_of(a, a->Dv, true)}, 3))
        return true;
    plan *pl = make_plan(g, a, true);
    if (!pl) return true; /* the graph holds the failure */
    a->plan = pl;
    ag__mask_map mm[2];
    ag__att_job j = job_of(a, mm, pl, 16, false);
    j.q = q, j.k = k, j.v = v, j.y = y;
    if (a->flash) {
        j.ml = p;
        if (!scratch_of(g, &j, ag__flash_scratch(false))) return true;
    } else {
        j.p = p;
        j.head512 = !a->bf16 && ag__head512_plan(&j);
        /* dropout, bf16: each block of threads' P Z for a block of queries */
        if ((a->dropout > 0 || a->bf16) && !scratch_of(g, &j, (size_t)block_rows(a->S) * (size_t)a->S)) return true;
    }
    ag__parallel_for(j.nt, (int)j.nt, forward_block, &j);
    return true;
}

/* Where the blocks add the bias m's gradient (m NULL: nowhere): block 0
 * into dM itself; when two blocks' heads may share an element of M (M
 * broadcast along B or H, and more than one block), blocks 1.. each into
 * a part of their own, zeroed, which bias_grad_sum adds to dM in block
 * order afterwards: the same sums, in the same order, at every run. */
static bool bias_grad_of(ag_graph *g, ag__att_job *j, ag_tensor *m)
{
    if (!m) return true;
    if (!(j->dm = ag__grad(g, m))) return false;
    const ag__attn *a = j->a;
    bool shared = (a->B > 1 && j->bm->st[0] == 0) || (a->H > 1 && j->bm->st[1] == 0);
    if (!shared || j->nt < 2) return true;
    j->dm_stride = (m->size + 15) / 16 * 16;
    size_t n = (j->nt - 1) * j->dm_stride;
    if (!(j->dm_parts = ag__alloc(g, n * sizeof(ag_real)))) return false;
    memset(j->dm_parts, 0, n * sizeof(ag_real));
    return true;
}

static void bias_grad_sum(const ag__att_job *j, size_t size)
{
    for (size_t t = 1; j->dm_parts && t < j->nt; t++)
        for (size_t i = 0; i < size; i++) j->dm[i] += j->dm_parts[(t - 1) * j->dm_stride + i];
}

bool ag__k_attention_backward(ag_graph *g, const ag__attn *a, ag_tensor *q, ag_tensor *k, ag_tensor *v,
                              ag_tensor *m, const ag_real *p, const ag_real *y, const ag_real *dy)
{
    const plan *pl = a->plan ? a->plan : make_plan(g, a, false);
    if (!pl) return true;
    ag__mask_map mm[2];
    ag__att_job j = job_of(a, mm, pl, 8, true);
    j.q = q->data, j.k = k->data, j.v = v->data, j.dy = dy;
    if (!rounded(g, a, (const ag_real **[]){&j.q, &j.k, &j.v, &j.dy},
                 (size_t[]){q->size, k->size, v->size, size_of(a, a->Dv, false)}, 4))
        return true;
    /* the flash kernel adds each tile's share, and so do the query heads
     * of a group to their key/value head's: into zeros when fresh */
    bool once = !a->flash, kv_once = once && a->H == a->Hkv;
    j.dq = grad_of(g, q, once && q != k && q != v, &j.beta_q);
    j.dk = grad_of(g, k, kv_once && k != q && k != v, &j.beta_k);
    j.dv = grad_of(g, v, kv_once && v != q && v != k, &j.beta_v);
    if ((q->requires_grad && !j.dq) || (k->requires_grad && !j.dk) || (v->requires_grad && !j.dv)) return true;
    if (!bias_grad_of(g, &j, m)) return true;
    if (a->flash) {
        j.ml = (ag_real *)(uintptr_t)p, j.y = (ag_real *)(uintptr_t)y;
        if (!scratch_of(g, &j, ag__flash_scratch(true))) return true;
        ag__parallel_for(j.nt, (int)j.nt, backward_block, &j);
        bias_grad_sum(&j, m ? m->size : 0);
        return true;
    }
    j.p = (ag_real *)(uintptr_t)p;
    j.head512 = !a->bf16 && ag__head512_plan(&j);
    scratch_of(g, &j, (size_t)a->T * (size_t)a->S * (a->dropout > 0 || a->bf16 ? 2 : 1)); /* dA, and P Z */
    if (!j.scratch) return true;
    ag__parallel_for(j.nt, (int)j.nt, backward_block, &j);
    bias_grad_sum(&j, m ? m->size : 0);
    return true;
}
