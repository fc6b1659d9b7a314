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
 * input entry it read, and += does the sum.
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
 * (AG__MM_A | AG__MM_B | AG__MM_Y).  The fast code, each product by the
 * blocked gemm, is src/kernels/matmul.c and gemm.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdio.h>

/* x's strides st[0..nb): along y's batch axes (batch: their sizes; 0 where
 * x was stretched), then st[nb]: between its rows.  Heads: stored
 * [B, T, H, D], read as [B, H, T, D]. */
static void strides(const ag_tensor *x, int heads, int nb, const int *batch, size_t *st)
{
    if (heads) {
        size_t T = (size_t)x->shape[1], H = (size_t)x->shape[2], D = (size_t)x->shape[3];
        st[0] = T * H * D, st[1] = D, st[2] = H * D;
        return;
    }
    size_t s = (size_t)x->shape[x->ndim - 1];
    st[nb] = s;
    s *= (size_t)x->shape[x->ndim - 2];
    for (int i = nb - 1; i >= 0; i--) {
        int ix = x->ndim - 2 - nb + i, d = ix >= 0 ? x->shape[ix] : 1;
        st[i] = d == 1 && batch[i] != 1 ? 0 : s;
        s *= (size_t)d;
    }
}

/* The products of y = a b (b^T when tb) and where their matrices are. */
static void layout(ag__products *p, const ag_tensor *a, const ag_tensor *b, const ag_tensor *y)
{
    int tb = ag__impl(y)->iarg[0], heads = ag__impl(y)->iarg[1], nb = y->ndim - 2;
    *p = (ag__products){.tb = tb, .nb = nb, .count = 1, .K = a->shape[a->ndim - 1]};
    for (int i = 0; i < nb; i++) p->shape[i] = y->shape[i];
    p->M = y->shape[nb], p->N = y->shape[nb + 1];
    if (heads & AG__MM_Y) p->shape[1] = y->shape[2], p->M = y->shape[1]; /* stored [B, M, H, N] */
    for (int i = 0; i < nb; i++) p->count *= (size_t)p->shape[i];
    strides(a, heads & AG__MM_A, nb, p->shape, p->a);
    strides(b, heads & AG__MM_B, nb, p->shape, p->b);
    strides(y, heads & AG__MM_Y, nb, p->shape, p->y);
}

/* Element (k, n) of b[r], stored [K, N] or (tb) [N, K]. */
static size_t at_b(const ag__products *p, int k, int n)
{
    return p->tb ? (size_t)n * p->b[p->nb] + (size_t)k : (size_t)k * p->b[p->nb] + (size_t)n;
}

/* The reference forward: y[m, n] = sum_k a[m, k] b[k, n], each product. */
static void forward_ref(const ag__products *p, const ag_real *a, const ag_real *b, ag_real *y)
{
    const size_t lda = p->a[p->nb], ldy = p->y[p->nb];
    for (size_t r = 0; r < p->count; r++) {
        const ag_real *ar = a + ag__products_at(p, p->a, r), *br = b + ag__products_at(p, p->b, r);
        ag_real *yr = y + ag__products_at(p, p->y, r);
        for (int m = 0; m < p->M; m++)
            for (int n = 0; n < p->N; n++) {
                ag_real s = 0;
                for (int k = 0; k < p->K; k++) s += ar[m * lda + k] * br[at_b(p, k, n)];
                yr[m * ldy + n] = s;
            }
    }
}

/* The reference backward: da[m, k] += dy[m, n] b[k, n], db[k, n] +=
 * a[m, k] dy[m, n] (da, db NULL when not wanted). */
static void backward_ref(const ag__products *p, const ag_real *a, const ag_real *b, const ag_real *dy, ag_real *da,
                         ag_real *db)
{
    const size_t lda = p->a[p->nb], ldy = p->y[p->nb];
    for (size_t r = 0; r < p->count; r++) {
        size_t ia = ag__products_at(p, p->a, r), ib = ag__products_at(p, p->b, r), iy = ag__products_at(p, p->y, r);
        for (int m = 0; m < p->M; m++)
            for (int n = 0; n < p->N; n++)
                for (int k = 0; k < p->K; k++) {
                    ag_real d = dy[iy + m * ldy + n];
                    if (da) da[ia + m * lda + k] += d * b[ib + at_b(p, k, n)];
                    if (db) db[ib + at_b(p, k, n)] += a[ia + m * lda + k] * d;
                }
    }
}

/* The logical shape of an operand: [B, H, T, D] for one stored [B, T, H, D]
 * in heads layout. */
static void logical(const ag_tensor *x, int heads, int *shape)
{
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    if (heads) shape[1] = x->shape[2], shape[2] = x->shape[1];
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
    ag__products p;
    layout(&p, a, b, y);
    if (!(ag__fast() && ag__k_matmul_forward(&p, a->data, b->data, y->data))) forward_ref(&p, a->data, b->data, y->data);
    return y;
}

ag_tensor *ag_matmul(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 0, 0); }

ag_tensor *ag_matmul_bt(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 1, 0); }

ag_tensor *ag__matmul_heads(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb, int heads)
{
    return matmul(g, a, b, tb, heads);
}

static void matmul_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *a = y->src[0], *b = y->src[1];
    ag__products p;
    layout(&p, a, b, y);
    if (ag__fast() && ag__k_matmul_backward(g, &p, a, b, y->grad)) return;
    ag_real *da = a->requires_grad ? ag__grad(g, a) : NULL, *db = b->requires_grad ? ag__grad(g, b) : NULL;
    if ((a->requires_grad && !da) || (b->requires_grad && !db)) return;
    backward_ref(&p, a->data, b->data, y->grad, da, db);
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
