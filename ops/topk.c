/* ops/topk.c: the k largest (or smallest) values of x along one axis, in
 * order, and where they were (PyTorch's torch.topk with sorted=True).
 *
 *   x [outer, N, inner], 0 <= k <= N -> y [outer, k, inner], and the
 *   indices [outer, k, inner] (ag_real values holding exact integers)
 *
 * forward:  p[o, 0..k-1, i] = the positions n of x[o, :, i] in order of
 *           value, largest first (smallest first when !largest)
 *           y[o, j, i] = x[o, p[o, j, i], i]
 * backward: dx[o, p[o, j, i], i] += dy[o, j, i]
 *           (a gather: each picked element gets its output's gradient, the
 *           rest of x none, as torch.topk's backward scatters)
 *
 * Order among equal values: the lower index first (a stable order).
 * PyTorch documents no order for ties, and its CPU kernel may give any.  A
 * NaN counts as larger than any number (as in torch.topk and ag_max): it
 * comes first when largest, last otherwise.
 *
 * Each row is a plain selection, k passes over N values: O(N k) per row.
 * aux = p, one int per element of y.  iarg[0] = axis, iarg[1] = k,
 * iarg[2] = largest. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

/* v comes before u in the order (never for equal values or two NaNs). */
static bool before(ag_real v, ag_real u, int largest)
{
    if (isnan(v) || isnan(u)) return largest ? isnan(v) && !isnan(u) : isnan(u) && !isnan(v);
    return largest ? v > u : v < u;
}

/* One row, x[0], x[step], ... (n values): its first k positions in p. */
static void select_row(const ag_real *x, size_t step, size_t n, int k, int largest, bool *taken, int *p)
{
    for (size_t m = 0; m < n; m++) taken[m] = false;
    for (int j = 0; j < k; j++) {
        size_t best = n;
        for (size_t m = 0; m < n; m++)
            if (!taken[m] && (best == n || before(x[m * step], x[best * step], largest))) best = m;
        taken[best] = true;
        p[(size_t)j * step] = (int)best;
    }
}

ag_tensor *ag_topk(ag_graph *g, ag_tensor *x, int k, int axis, int largest, ag_tensor **indices)
{
    if (indices) *indices = NULL;
    if (!ag__ok(g, "topk", 1, x)) return NULL;
    int a = ag__axis(g, "topk", x, axis);
    if (a < 0) return NULL;
    int N = x->shape[a];
    char buf[96];
    if (k < 0 || k > N || (size_t)(ag_real)N != (size_t)N) {
        ag_graph_fail(g, AG_ERR_ARG, "topk: k = %d out of range for axis %d of size %d in %s", k, axis, N,
                      ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    int shape[AG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = i == a ? k : x->shape[i];
    /* the indices first: in no-grad mode a new tensor reuses the scratch
     * that ag__save hands out */
    ag_tensor *idx = indices ? ag_tensor_new(g, x->ndim, shape) : NULL;
    ag_tensor *y = (idx || !indices) ? ag__node(g, AG_OP_TOPK, x->ndim, shape, 1, &x) : NULL;
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = a;
    ag__impl(y)->iarg[1] = k;
    ag__impl(y)->iarg[2] = largest != 0;
    int *p = ag__save(g, (y->size ? y->size : 1) * sizeof *p);
    bool *taken = ag__save(g, N ? (size_t)N : 1);
    if (!p || !taken) return NULL;
    ag__impl(y)->aux = p;
    size_t outer = ag__numel(a, x->shape), inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t x0 = o * (size_t)N * inner + i, y0 = o * (size_t)k * inner + i;
            select_row(x->data + x0, inner, (size_t)N, k, largest != 0, taken, p + y0);
            /* y[o, j, i] = x[o, p[o, j, i], i] */
            for (int j = 0; j < k; j++) {
                size_t r = y0 + (size_t)j * inner;
                y->data[r] = x->data[x0 + (size_t)p[r] * inner];
                if (idx) idx->data[r] = (ag_real)p[r];
            }
        }
    if (indices) *indices = idx;
    return y;
}

static void topk_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    const int *p = ag__impl(y)->aux;
    int a = ag__impl(y)->iarg[0], k = ag__impl(y)->iarg[1];
    size_t N = (size_t)x->shape[a];
    size_t outer = ag__numel(a, x->shape), inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    /* dx[o, p[o, j, i], i] += dy[o, j, i] */
    for (size_t o = 0; o < outer; o++)
        for (int j = 0; j < k; j++)
            for (size_t i = 0; i < inner; i++) {
                size_t r = (o * (size_t)k + (size_t)j) * inner + i;
                dx[(o * N + (size_t)p[r]) * inner + i] += y->grad[r];
            }
}

/* topk(x + c) with c a fixed scramble of 0, 0.25, 0.5, ...: with x drawn
 * in [0, 0.1] any two elements differ by at least 0.15, so the order never
 * changes within a finite-difference step (the strict stage's is 1e-3). */
static ag_tensor *spaced(ag_graph *g, ag_tensor *x)
{
    if (!x) return NULL; /* the op then says that its x is missing */
    ag_tensor *c = ag_tensor_new(g, x->ndim, x->shape);
    if (!c) return NULL;
    for (size_t j = 0; j < c->size; j++) c->data[j] = (ag_real)(0.25 * (double)((j * 7919) % c->size));
    return ag_add(g, x, c);
}

static ag_tensor *case_last(ag_graph *g, ag_tensor *const *in) { return ag_topk(g, spaced(g, in[0]), 2, -1, 1, NULL); }
static ag_tensor *case_all(ag_graph *g, ag_tensor *const *in) { return ag_topk(g, spaced(g, in[0]), 4, 0, 1, NULL); }
static ag_tensor *case_small(ag_graph *g, ag_tensor *const *in) { return ag_topk(g, spaced(g, in[0]), 2, 1, 0, NULL); }
static ag_tensor *case_one(ag_graph *g, ag_tensor *const *in) { return ag_topk(g, spaced(g, in[0]), 1, 1, 1, NULL); }

static const ag_op_case cases[] = {
    {"[2, 5] k 2 axis -1", 1, {2}, {{2, 5}}, 0, 0.1, 0, case_last},
    {"[4, 3] k 4 axis 0 (a sort)", 1, {2}, {{4, 3}}, 0, 0.1, 0, case_all},
    {"[2, 4, 3] k 2 axis 1 smallest", 1, {3}, {{2, 4, 3}}, 0, 0.1, 0, case_small},
    {"[3, 1, 2] k 1 axis 1 size-1", 1, {3}, {{3, 1, 2}}, 0, 0.1, 0, case_one},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{2, 5}}, -1e30, 1e30, 0, case_last},
};

const ag_op_desc ag_op_topk = {.name = "topk", .backward = topk_backward, AG_CASES(cases), AG_EDGES(edges)};
