/* ops/matmul.c: batched matrix product with broadcast batch axes; the same
 * with the second matrix transposed (Q K^T without a copy of K^T); and the
 * same reading or writing attention's heads in place.
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
 * (src/kernels/gemm.c packs a transposed operand itself).
 *
 * Heads (ag__matmul_heads, for multi-head attention): an operand stored
 * [B, T, H, D] (the output of a linear layer, reshaped: a view) is read as
 * the [B, H, T, D] that permute(x, {0, 2, 1, 3}) would copy out: head h of
 * sentence b is the T x D matrix at b T H D + h D with rows H D apart.  The
 * output can be written that way too, [B, M, H, N], ready for the
 * reshape back to [B, M, C].  Each gemm just gets other offsets and leading
 * dimensions; nothing is copied.  With heads, all operands are 4-d and
 * their batch axes (B, H) match: no broadcasting.
 *
 * iarg[0] = 1 for b transposed; iarg[1] = the operands in heads layout
 * (AG__MM_A | AG__MM_B | AG__MM_Y). */
#include "core/internal.h"

#include <stdio.h>

/* Where batch entry r's matrix of an operand lives: element strides along
 * y's batch axes (0 where the operand was stretched) and the distance
 * between its rows. */
typedef struct layout {
    size_t st[AG_MAX_DIMS];
    int ld;
} layout;

typedef struct batch {
    int M, N, K;            /* each product: [M, K] x [K, N] */
    int nb;                 /* batch axes of y (logical) */
    int shape[AG_MAX_DIMS]; /* y's logical batch shape */
    size_t count;
    layout a, b, y;
} batch;

/* Element offset of batch entry r in an operand. */
static size_t offset(const batch *bt, const layout *l, size_t r)
{
    size_t off = 0;
    for (int i = bt->nb - 1; i >= 0; i--) {
        off += (r % (size_t)bt->shape[i]) * l->st[i];
        r /= (size_t)bt->shape[i];
    }
    return off;
}

/* The logical shape of an operand: [B, H, T, D] for one stored [B, T, H, D]
 * in heads layout. */
static void logical(const ag_tensor *x, int heads, int *shape)
{
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    if (heads) shape[1] = x->shape[2], shape[2] = x->shape[1];
}

/* A plain operand x (logical shape = stored shape, rows x cols matrices,
 * batch axes aligned on the right with y's, nb of them). */
static void plain_layout(const ag_tensor *x, int nb, const int *shape, int rows, int cols, layout *l)
{
    size_t s = (size_t)rows * (size_t)cols;
    int xb = x->ndim - 2;
    for (int i = nb - 1; i >= 0; i--) {
        int ix = xb - nb + i;
        int d = ix >= 0 ? x->shape[ix] : 1;
        l->st[i] = (d == 1 && shape[i] != 1) ? 0 : s;
        s *= (size_t)d;
    }
    l->ld = cols;
}

/* An operand stored [B, T, H, D], read as [B, H, T, D]. */
static void heads_layout(const int *stored, layout *l)
{
    int T = stored[1], H = stored[2], D = stored[3];
    l->st[0] = (size_t)T * H * D; /* sentence b */
    l->st[1] = (size_t)D;         /* head h */
    l->ld = H * D;
}

static void batch_init(batch *bt, const ag_tensor *a, const ag_tensor *b, const ag_tensor *y)
{
    int tb = ag__impl(y)->iarg[0], heads = ag__impl(y)->iarg[1], ys[AG_MAX_DIMS];
    logical(y, heads & AG__MM_Y, ys);
    bt->nb = y->ndim - 2;
    bt->count = 1;
    for (int i = 0; i < bt->nb; i++) {
        bt->shape[i] = ys[i];
        bt->count *= (size_t)ys[i];
    }
    int M = bt->M = ys[y->ndim - 2], N = bt->N = ys[y->ndim - 1];
    int K = bt->K = heads & AG__MM_A ? a->shape[3] : a->shape[a->ndim - 1];
    if (heads & AG__MM_A) heads_layout(a->shape, &bt->a);
    else plain_layout(a, bt->nb, bt->shape, M, K, &bt->a);
    if (heads & AG__MM_B) heads_layout(b->shape, &bt->b);
    else plain_layout(b, bt->nb, bt->shape, tb ? N : K, tb ? K : N, &bt->b);
    if (heads & AG__MM_Y) {
        heads_layout(y->shape, &bt->y);
    } else {
        size_t s = (size_t)M * N; /* y is dense, row-major */
        for (int i = bt->nb - 1; i >= 0; i--) bt->y.st[i] = s, s *= (size_t)bt->shape[i];
        bt->y.ld = N;
    }
}

/* A product's batch and operands, for its entries on the threads. */
typedef struct mm_job {
    const batch *bt;
    const ag_real *a, *b, *dy;
    ag_real *y, *da, *db;
    ag_real beta_a, beta_b;
    int tb;
} mm_job;

/* Batch entry r of the forward: y[r] = a[r] b[r] (b[r]^T when tb). */
static void matmul_entry(void *ctx, size_t r)
{
    const mm_job *j = ctx;
    const batch *bt = j->bt;
    ag__gemm(0, j->tb, bt->M, bt->N, bt->K, j->a + offset(bt, &bt->a, r), bt->a.ld, j->b + offset(bt, &bt->b, r),
             bt->b.ld, 0, j->y + offset(bt, &bt->y, r), bt->y.ld);
}

static ag_tensor *matmul(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb, int heads)
{
    const char *who = heads ? "matmul_heads" : tb ? "matmul_bt" : "matmul";
    if (!ag__ok(g, who, 2, a, b)) return NULL;
    char s1[96], s2[96];
    if (a->ndim < 2 || b->ndim < 2 || (heads && (a->ndim != 4 || b->ndim != 4))) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: both inputs need %s: %s x %s", who, heads ? "4 axes" : "at least 2 axes",
                      ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    int la[AG_MAX_DIMS], lb[AG_MAX_DIMS]; /* logical shapes */
    logical(a, heads & AG__MM_A, la);
    logical(b, heads & AG__MM_B, lb);
    int M = la[a->ndim - 2], K = la[a->ndim - 1];
    int K2 = lb[b->ndim - (tb ? 1 : 2)], N = lb[b->ndim - (tb ? 2 : 1)];
    if (K != K2) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: inner dims differ: %s x %s%s", who, ag_shape_str(a, s1, sizeof s1),
                      ag_shape_str(b, s2, sizeof s2), tb ? "^T" : "");
        return NULL;
    }
    /* batch axes broadcast like element-wise ops (not with heads) */
    int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2, shape[AG_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int ia = a->ndim - 2 - nb + i, ib = b->ndim - 2 - nb + i;
        int da = ia >= 0 ? la[ia] : 1, db = ib >= 0 ? lb[ib] : 1;
        if (heads ? da != db : (da != db && da != 1 && db != 1)) {
            ag_graph_fail(g, AG_ERR_SHAPE, "%s: batch axes do not %s: %s x %s", who, heads ? "match" : "broadcast",
                          ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
            return NULL;
        }
        shape[i] = da == 1 ? db : da;
    }
    shape[nb] = M;
    shape[nb + 1] = N;
    if (heads & AG__MM_Y) { /* stored [B, M, H, N] */
        int h = shape[1];
        shape[1] = M, shape[2] = h;
    }
    ag_tensor *src[2] = {a, b};
    ag_tensor *y = ag__node(g, AG_OP_MATMUL, nb + 2, shape, 2, src);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = tb;
    ag__impl(y)->iarg[1] = heads;
    batch bt;
    batch_init(&bt, a, b, y);
    size_t my = (size_t)M * N;
    /* many small products (attention's heads): one per thread at a time;
     * a large one is split inside ag__gemm instead */
    int nt = bt.count > 1 ? ag__threads_for(bt.count * my * (size_t)K / 16) : 1;
    mm_job j = {.bt = &bt, .a = a->data, .b = b->data, .y = y->data, .tb = tb};
    ag__parallel_for(bt.count, nt, matmul_entry, &j);
    return y;
}

ag_tensor *ag_matmul(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 0, 0); }

ag_tensor *ag_matmul_bt(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 1, 0); }

ag_tensor *ag__matmul_heads(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb, int heads)
{
    return matmul(g, a, b, tb, heads);
}

/* Batch entry r of the backward.  beta_a = 0 (beta_b = 0) when da (db) held
 * nothing yet and this entry is the only one to write its matrix: the
 * product is stored, not added. */
static void matmul_entry_backward(void *ctx, size_t r)
{
    const mm_job *j = ctx;
    const batch *bt = j->bt;
    const int M = bt->M, N = bt->N, K = bt->K;
    const ag_real *a = j->a, *b = j->b, *dy = j->dy;
    ag_real *da = j->da, *db = j->db, beta_a = j->beta_a, beta_b = j->beta_b;
    size_t ia = offset(bt, &bt->a, r), ib = offset(bt, &bt->b, r), iy = offset(bt, &bt->y, r);
    int lda = bt->a.ld, ldb = bt->b.ld, ldy = bt->y.ld;
    dy += iy;
    if (!j->tb) {
        /* y = a b:  da += dy b^T  [M, N] x [N, K] */
        if (da) ag__gemm(0, 1, M, K, N, dy, ldy, b + ib, ldb, beta_a, da + ia, lda);
        /* y = a b:  db += a^T dy  [K, M] x [M, N] */
        if (db) ag__gemm(1, 0, K, N, M, a + ia, lda, dy, ldy, beta_b, db + ib, ldb);
    } else {
        /* y = a b^T:  da += dy b  [M, N] x [N, K] */
        if (da) ag__gemm(0, 0, M, K, N, dy, ldy, b + ib, ldb, beta_a, da + ia, lda);
        /* y = a b^T:  db += dy^T a  [N, M] x [M, K] */
        if (db) ag__gemm(1, 0, N, K, M, dy, ldy, a + ia, lda, beta_b, db + ib, ldb);
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
    int tb = ag__impl(y)->iarg[0];
    batch bt;
    batch_init(&bt, a, b, y);
    int M = bt.M, N = bt.N, K = bt.K;
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
    mm_job j = {&bt, a->data, b->data, y->grad, NULL, da, db, beta_a, beta_b, tb};
    ag__parallel_for(bt.count, nt, matmul_entry_backward, &j);
}

static ag_tensor *case_mm(ag_graph *g, ag_tensor *const *in) { return ag_matmul(g, in[0], in[1]); }
static ag_tensor *case_bt(ag_graph *g, ag_tensor *const *in) { return ag_matmul_bt(g, in[0], in[1]); }
/* Q K^T from q, k stored [B, T, H, D]; then P V written as [B, T, H, D] */
static ag_tensor *case_qk(ag_graph *g, ag_tensor *const *in) { return ag__matmul_heads(g, in[0], in[1], 1, AG__MM_A | AG__MM_B); }
static ag_tensor *case_pv(ag_graph *g, ag_tensor *const *in) { return ag__matmul_heads(g, in[0], in[1], 0, AG__MM_B | AG__MM_Y); }

static const ag_op_case cases[] = {
    {"[3, 4] @ [4, 2]", 2, {2, 2}, {{3, 4}, {4, 2}}, -1, 1, 0, case_mm},
    {"[2, 3, 4] @ [2, 4, 5] batched", 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}, -1, 1, 0, case_mm},
    {"[2, 1, 3, 4] @ [3, 4, 2] batch broadcast", 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, -1, 1, 0, case_mm},
    {"[1, 1] @ [1, 3] size-1", 2, {2, 2}, {{1, 1}, {1, 3}}, -1, 1, 0, case_mm},
    {"[13, 24] @ [24, 40] packed kernel", 2, {2, 2}, {{13, 24}, {24, 40}}, -1, 1, 0, case_mm},
    {"[3, 4] @ [2, 4]^T (bt)", 2, {2, 2}, {{3, 4}, {2, 4}}, -1, 1, 0, case_bt},
    {"[2, 1, 3, 4] @ [3, 5, 4]^T batch broadcast (bt)", 2, {4, 3}, {{2, 1, 3, 4}, {3, 5, 4}}, -1, 1, 0, case_bt},
    {"[2, 13, 24] @ [2, 40, 24]^T packed kernel (bt)", 2, {3, 3}, {{2, 13, 24}, {2, 40, 24}}, -1, 1, 0, case_bt},
    {"heads: q [2, 3, 2, 4] k [2, 5, 2, 4] -> [2, 2, 3, 5]", 2, {4, 4}, {{2, 3, 2, 4}, {2, 5, 2, 4}}, -1, 1, 0, case_qk},
    {"heads: p [2, 2, 3, 5] v [2, 5, 2, 4] -> [2, 3, 2, 4]", 2, {4, 4}, {{2, 2, 3, 5}, {2, 5, 2, 4}}, -1, 1, 0, case_pv},
    {"heads: q [1, 13, 3, 24] k [1, 40, 3, 24] packed kernel", 2, {4, 4}, {{1, 13, 3, 24}, {1, 40, 3, 24}}, -1, 1, 0, case_qk},
};

const ag_op_desc ag_op_matmul = {.name = "matmul", .backward = matmul_backward, AG_CASES(cases)};
