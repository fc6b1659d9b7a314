/* ops/matmul.c: batched matrix product with broadcast batch axes, and the
 * same with the second matrix transposed (Q K^T without a copy of K^T).
 *
 *   ag_matmul:    a [..., M, K] @ b [..., K, N]   -> y [..., M, N]
 *   ag_matmul_bt: a [..., M, K] @ b [..., N, K]^T -> y [..., M, N]
 *
 * forward:  y[m, n] = sum_k a[m, k] b[k, n]            (b[n, k] for _bt)
 * backward: da = dy b^T    [M, N] x [N, K] -> [M, K]   (da = dy b for _bt)
 *           db = a^T dy    [K, M] x [M, N] -> [K, N]   (db = dy^T a for _bt)
 * A batch axis of a or b that was stretched (size 1 against larger) receives
 * the sum over that axis: the batch loop maps each output batch entry to the
 * input entry it read, and += does the sum.  The gemm reads b either way
 * (src/gemm.c packs a transposed operand itself).  iarg[0] = 1 for _bt. */
#include "internal.h"

#include <stdio.h>


/* Offsets (in matrices) of a's and b's batch entries for each of y's. */
typedef struct batch {
    int nb;                 /* batch axes of y */
    int shape[AG_MAX_DIMS]; /* y's batch shape */
    size_t sa[AG_MAX_DIMS], sb[AG_MAX_DIMS];
    size_t count;
} batch;

static void batch_strides(const ag_tensor *x, int nb, const int *shape, size_t *st)
{
    size_t s = 1;
    int xb = x->ndim - 2; /* x's batch axes */
    for (int i = nb - 1; i >= 0; i--) {
        int ix = xb - nb + i;
        int d = ix >= 0 ? x->shape[ix] : 1;
        st[i] = (d == 1 && shape[i] != 1) ? 0 : s;
        s *= (size_t)d;
    }
}

/* Batch entry r of y -> matrix offsets into a and b. */
static void batch_at(const batch *bt, size_t r, size_t *ia, size_t *ib)
{
    *ia = *ib = 0;
    for (int i = bt->nb - 1; i >= 0; i--) {
        size_t k = r % (size_t)bt->shape[i];
        r /= (size_t)bt->shape[i];
        *ia += k * bt->sa[i];
        *ib += k * bt->sb[i];
    }
}

static void batch_init(batch *bt, const ag_tensor *a, const ag_tensor *b, const ag_tensor *y)
{
    bt->nb = y->ndim - 2;
    bt->count = 1;
    for (int i = 0; i < bt->nb; i++) {
        bt->shape[i] = y->shape[i];
        bt->count *= (size_t)y->shape[i];
    }
    batch_strides(a, bt->nb, bt->shape, bt->sa);
    batch_strides(b, bt->nb, bt->shape, bt->sb);
}

/* Batch entry r of the forward: y[r] = a[ia] b[ib] (b[ib]^T when tb). */
static void matmul_entry(const batch *bt, size_t r, int M, int N, int K, const ag_real *a, const ag_real *b,
                         ag_real *y, int tb)
{
    size_t ia, ib, ma = (size_t)M * K, mb = (size_t)K * N, my = (size_t)M * N;
    batch_at(bt, r, &ia, &ib);
    ag__gemm(0, tb, M, N, K, a + ia * ma, K, b + ib * mb, tb ? K : N, 0, y + r * my, N);
}

static ag_tensor *matmul(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb)
{
    const char *who = tb ? "matmul_bt" : "matmul";
    if (!ag__ok(g, who, 2, a, b)) return NULL;
    char s1[96], s2[96];
    if (a->ndim < 2 || b->ndim < 2) {
        ag_graph_fail(g, AG_ERR_SHAPE, "matmul: both inputs need at least 2 axes: %s x %s",
                      ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    int M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int K2 = b->shape[b->ndim - (tb ? 1 : 2)], N = b->shape[b->ndim - (tb ? 2 : 1)];
    if (K != K2) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: inner dims differ: %s x %s%s", who, ag_shape_str(a, s1, sizeof s1),
                      ag_shape_str(b, s2, sizeof s2), tb ? "^T" : "");
        return NULL;
    }
    /* batch axes broadcast like element-wise ops */
    int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2, shape[AG_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int ia = a->ndim - 2 - nb + i, ib = b->ndim - 2 - nb + i;
        int da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            ag_graph_fail(g, AG_ERR_SHAPE, "%s: batch axes do not broadcast: %s x %s", who,
                          ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
            return NULL;
        }
        shape[i] = da == 1 ? db : da;
    }
    shape[nb] = M;
    shape[nb + 1] = N;
    ag_tensor *src[2] = {a, b};
    ag_tensor *y = ag__node(g, AG_OP_MATMUL, nb + 2, shape, 2, src);
    if (!y) return NULL;
    y->iarg[0] = tb;
    batch bt;
    batch_init(&bt, a, b, y);
    size_t my = (size_t)M * N;
    /* many small products (attention's heads): one per thread at a time;
     * a large one is split inside ag__gemm instead */
    int nt = bt.count > 1 ? ag__threads_for(bt.count * my * (size_t)K / 16) : 1;
    if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (size_t r = 0; r < bt.count; r++) matmul_entry(&bt, r, M, N, K, a->data, b->data, y->data, tb);
    } else {
        for (size_t r = 0; r < bt.count; r++) matmul_entry(&bt, r, M, N, K, a->data, b->data, y->data, tb);
    }
    return y;
}

ag_tensor *ag_matmul(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 0); }

ag_tensor *ag_matmul_bt(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 1); }

/* Batch entry r of the backward.  beta_a = 0 (beta_b = 0) when da (db) held
 * nothing yet and this entry is the only one to write its matrix: the
 * product is stored, not added. */
static void matmul_entry_backward(const batch *bt, size_t r, int M, int N, int K, const ag_real *a, const ag_real *b,
                                  const ag_real *dy, ag_real *da, ag_real *db, ag_real beta_a, ag_real beta_b, int tb)
{
    size_t ia, ib, ma = (size_t)M * K, mb = (size_t)K * N, my = (size_t)M * N;
    batch_at(bt, r, &ia, &ib);
    dy += r * my;
    if (!tb) {
        /* y = a b:  da += dy b^T  [M, N] x [N, K] */
        if (da) ag__gemm(0, 1, M, K, N, dy, N, b + ib * mb, N, beta_a, da + ia * ma, K);
        /* y = a b:  db += a^T dy  [K, M] x [M, N] */
        if (db) ag__gemm(1, 0, K, N, M, a + ia * ma, K, dy, N, beta_b, db + ib * mb, N);
    } else {
        /* y = a b^T:  da += dy b  [M, N] x [N, K] */
        if (da) ag__gemm(0, 0, M, K, N, dy, N, b + ib * mb, K, beta_a, da + ia * ma, K);
        /* y = a b^T:  db += dy^T a  [N, M] x [M, K] */
        if (db) ag__gemm(1, 0, N, K, M, dy, N, a + ia * ma, K, beta_b, db + ib * mb, K);
    }
}

/* x's gradient for a product in which each batch entry of x is read `own`
 * (once) or not: fresh and own, the entries store into it (*beta = 0);
 * otherwise they add (*beta = 1), into zeros if it was fresh. */
static ag_real *grad_for(ag_graph *g, ag_tensor *x, bool own, ag_real *beta)
{
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    *beta = fresh && own ? 0 : 1;
    if (dx && fresh && !own) memset(dx, 0, x->size * sizeof(ag_real));
    return dx;
}

static void matmul_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *a = y->src[0], *b = y->src[1];
    int M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = y->shape[y->ndim - 1];
    batch bt;
    batch_init(&bt, a, b, y);
    size_t ma = (size_t)M * K, mb = (size_t)K * N, my = (size_t)M * N;
    /* an operand is its own when no batch axis of it was stretched: then
     * each batch entry writes its own matrix of da (db), and threads may
     * share the batch (a stretched one sums over r) */
    bool own_a = a->size / (ma ? ma : 1) == bt.count, own_b = b->size / (mb ? mb : 1) == bt.count;
    ag_real beta_a = 1, beta_b = 1;
    ag_real *da = a->requires_grad ? grad_for(g, a, own_a, &beta_a) : NULL;
    ag_real *db = b->requires_grad ? grad_for(g, b, own_b, &beta_b) : NULL;
    if ((a->requires_grad && !da) || (b->requires_grad && !db)) return;
    int nt = own_a && own_b && bt.count > 1 ? ag__threads_for(bt.count * my * (size_t)K / 8) : 1;
    if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (size_t r = 0; r < bt.count; r++)
            matmul_entry_backward(&bt, r, M, N, K, a->data, b->data, y->grad, da, db, beta_a, beta_b, y->iarg[0]);
    } else {
        for (size_t r = 0; r < bt.count; r++)
            matmul_entry_backward(&bt, r, M, N, K, a->data, b->data, y->grad, da, db, beta_a, beta_b, y->iarg[0]);
    }
}

static ag_tensor *case_mm(ag_graph *g, ag_tensor *const *in) { return ag_matmul(g, in[0], in[1]); }
static ag_tensor *case_bt(ag_graph *g, ag_tensor *const *in) { return ag_matmul_bt(g, in[0], in[1]); }

static const ag_op_case cases[] = {
    {"[3, 4] @ [4, 2]", 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, case_mm},
    {"[2, 3, 4] @ [2, 4, 5] batched", 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}, -1, 1, 0, case_mm},
    {"[2, 1, 3, 4] @ [3, 4, 2] batch broadcast", 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, -1, 1, 0, case_mm},
    {"[1, 1] @ [1, 3] size-1", 2, {2, 2}, {{1, 1}, {1, 3}}, -1, 1, 0, case_mm},
    {"[13, 24] @ [24, 40] packed kernel", 2, {2, 2}, {{13, 24}, {24, 40}}, -1, 1, 0, case_mm},
    {"[3, 4] @ [2, 4]^T (bt)", 2, {2, 2}, {{3, 4}, {2, 4}}, -1, 1, 0, case_bt},
    {"[2, 1, 3, 4] @ [3, 5, 4]^T batch broadcast (bt)", 2, {4, 3}, {{2, 1, 3, 4}, {3, 5, 4}}, -1, 1, 0, case_bt},
    {"[2, 13, 24] @ [2, 40, 24]^T packed kernel (bt)", 2, {3, 3}, {{2, 13, 24}, {2, 40, 24}}, -1, 1, 0, case_bt},
};

const ag_op_desc ag_op_matmul = {.name = "matmul", .backward = matmul_backward, AG_CASES(cases)};
