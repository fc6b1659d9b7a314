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
 * input entry it read, and += does the sum.
 *
 * The loops walk a plan of the products (core/products.c: where each
 * matrix starts, its rows' stride), so the same loops serve the nodes of
 * ag__matmul_heads (ops/matmul_heads.c), whose operands are attention's
 * heads read or written in place.
 *
 * Under AG_PRECISION_BF16 the same loops run on operands rounded to
 * bf16 (ops/bf16.c): a, b forward; dy, b and a, dy backward (the kernels
 * round them themselves).
 *
 * iarg[0] = 1 for b transposed; iarg[1] = the operands in heads layout
 * (AG__MM_A | AG__MM_B | AG__MM_Y).  The fast code, each product by the
 * blocked gemm, is src/kernels/matmul.c and gemm.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdio.h>

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

/* Under AG_PRECISION_BF16 (ops/bf16.c) the products' operands are rounded
 * to bf16, and the same loops (or kernels) multiply the rounded values:
 * the bf16 products are exact in ag_real and summed in it.  Attention's
 * heads (ops/matmul_heads.c) too: Q K^T of the unscaled scores, P V of
 * the weights after dropout, as ops/attention.c rounds them. */
static bool bf16_products(const ag_graph *g) { return ag__bf16(g); }

/* *av, *bv: rounded copies of a's and b's values (false: no memory, the
 * failure on g). */
static bool bf16_operands(ag_graph *g, const ag_tensor *a, const ag_tensor *b, const ag_real **av,
                          const ag_real **bv)
{
    *av = ag__bf16_operand(g, a->data, a->size);
    *bv = ag__bf16_operand(g, b->data, b->size);
    return *av && *bv;
}

/* y = a b (b^T when tb), a and b read as la, lb (their shapes, or for
 * heads those of ops/matmul_heads.c): the node and its values, or NULL
 * with the error recorded when the inner sizes differ or the batch axes
 * do not broadcast (with heads: do not match). */
ag_tensor *ag__matmul_node(ag_graph *g, const char *who, ag_tensor *a, ag_tensor *b, int tb, int heads,
                           const int *la, const int *lb)
{
    char s1[96], s2[96];
    int M = la[a->ndim - 2], K = la[a->ndim - 1];
    int K2 = lb[b->ndim - (tb ? 1 : 2)], N = lb[b->ndim - (tb ? 2 : 1)];
    if (K != K2) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: inner dims differ: %s x %s%s", who, ag_shape_str(a, s1, sizeof s1),
                      ag_shape_str(b, s2, sizeof s2), tb ? "^T" : "");
        return NULL;
    }
    int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2, shape[AG_MAX_DIMS]; /* y: batch axes, M, N */
    if (ag__broadcast_dims(a->ndim - 2, la, b->ndim - 2, lb, shape) || (heads && memcmp(la, lb, 2 * sizeof(int)))) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: batch axes do not %s: %s x %s", who, heads ? "match" : "broadcast",
                      ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    shape[nb] = M, shape[nb + 1] = N;
    if (heads & AG__MM_Y) shape[2] = shape[1], shape[1] = M; /* stored [B, M, H, N] */
    ag_tensor *src[2] = {a, b};
    ag_tensor *y = ag__node(g, AG_OP_MATMUL, nb + 2, shape, 2, src);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = tb, ag__impl(y)->iarg[1] = heads;
    ag__products p; /* where the matrices are (core/products.c) */
    ag__products_plan(&p, a, b, y, tb, heads);
    p.bf16 = bf16_products(g);
    if (ag__fast() && ag__k_matmul_forward(g, &p, a, b, y->data)) return ag_graph_status(g) == AG_OK ? y : NULL;
    const ag_real *av = a->data, *bv = b->data;
    if (p.bf16 && !bf16_operands(g, a, b, &av, &bv)) return NULL;
    forward_ref(&p, av, bv, y->data);
    return y;
}

static ag_tensor *matmul(ag_graph *g, ag_tensor *a, ag_tensor *b, int tb)
{
    const char *who = tb ? "matmul_bt" : "matmul";
    if (!ag__ok(g, who, 2, a, b)) return NULL;
    if (a->ndim < 2 || b->ndim < 2) {
        char s1[96], s2[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: both inputs need at least 2 axes: %s x %s", who,
                      ag_shape_str(a, s1, sizeof s1), ag_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    return ag__matmul_node(g, who, a, b, tb, 0, a->shape, b->shape);
}

ag_tensor *ag_matmul(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 0); }

ag_tensor *ag_matmul_bt(ag_graph *g, ag_tensor *a, ag_tensor *b) { return matmul(g, a, b, 1); }

static void matmul_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *a = y->src[0], *b = y->src[1];
    ag__products p;
    ag__products_plan(&p, a, b, y, ag__impl(y)->iarg[0], ag__impl(y)->iarg[1]);
    p.bf16 = bf16_products(g);
    if (ag__fast() && ag__k_matmul_backward(g, &p, a, b, y->grad)) return;
    /* bf16: dy rounded too, as autocast's bf16 output's gradient is bf16 */
    const ag_real *av = a->data, *bv = b->data, *dy = y->grad;
    if (p.bf16 && (!bf16_operands(g, a, b, &av, &bv) || !(dy = ag__bf16_operand(g, dy, y->size)))) return;
    ag_real *da = a->requires_grad ? ag__grad(g, a) : NULL, *db = b->requires_grad ? ag__grad(g, b) : NULL;
    if ((a->requires_grad && !da) || (b->requires_grad && !db)) return;
    backward_ref(&p, av, bv, dy, da, db);
}

static ag_tensor *case_mm(ag_graph *g, ag_tensor *const *in) { return ag_matmul(g, in[0], in[1]); }
static ag_tensor *case_bt(ag_graph *g, ag_tensor *const *in) { return ag_matmul_bt(g, in[0], in[1]); }
/* ops/matmul_heads.c's nodes are matmul's: Q K^T from q, k stored
 * [B, T, H, D]; then P V written as [B, T, H, D] */
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

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e15: products near 1e30", 2, {2, 2}, {{3, 4}, {4, 2}}, -1e15, 1e15, 0, case_mm},
    {"values near 1e-15: products near 1e-30", 2, {2, 2}, {{3, 4}, {4, 2}}, -1e-15, 1e-15, 0, case_mm},
};

const ag_op_desc ag_op_matmul = {.name = "matmul", .backward = matmul_backward, AG_CASES(cases), AG_EDGES(edges)};
