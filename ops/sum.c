/* ops/sum.c: y = sum of x over one axis (or over all of it).
 *
 *   x [outer, N, inner] -> y [outer, inner]    (or [outer, 1, inner] keepdim)
 *
 * forward:  y[o, i] = sum_n x[o, n, i]
 * backward: dx[o, n, i] += dy[o, i]             (every summand gets dy)
 *
 * iarg[0] = axis (-1 for all axes: y is a scalar), iarg[1] = keepdim. */
#include "internal.h"

#include <stdio.h>

/* Split x's shape around axis: outer * n * inner = size. */
static void split(const ag_tensor *x, int axis, size_t *outer, size_t *n, size_t *inner)
{
    *outer = ag__numel(axis, x->shape);
    *n = (size_t)x->shape[axis];
    *inner = ag__numel(x->ndim - axis - 1, x->shape + axis + 1);
}

ag_tensor *ag_sum(ag_graph *g, ag_tensor *x, int axis, int keepdim)
{
    if (!ag__ok(g, "sum", 1, x)) return NULL;
    int a = ag__axis(g, "sum", x, axis);
    if (a < 0) return NULL;
    int shape[AG_MAX_DIMS], nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) shape[nd++] = x->shape[i];
        else if (keepdim) shape[nd++] = 1;
    }
    ag_tensor *y = ag__node(g, AG_OP_SUM, nd, shape, 1, &x);
    if (!y) return NULL;
    y->iarg[0] = a;
    y->iarg[1] = keepdim != 0;
    size_t outer, n, inner;
    split(x, a, &outer, &n, &inner);
    for (size_t o = 0; o < outer; o++) {
        ag_real *yo = y->data + o * inner;
        for (size_t i = 0; i < inner; i++) yo[i] = 0;
        for (size_t k = 0; k < n; k++) {
            const ag_real *xk = x->data + (o * n + k) * inner;
            for (size_t i = 0; i < inner; i++) yo[i] += xk[i];
        }
    }
    return y;
}

ag_tensor *ag_sum_all(ag_graph *g, ag_tensor *x)
{
    if (!ag__ok(g, "sum", 1, x)) return NULL;
    ag_tensor *y = ag__node(g, AG_OP_SUM, 0, NULL, 1, &x);
    if (!y) return NULL;
    y->iarg[0] = -1;
    ag_real s = 0;
    for (size_t i = 0; i < x->size; i++) s += x->data[i];
    y->data[0] = s;
    return y;
}

static void sum_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    if (y->iarg[0] < 0) {
        for (size_t i = 0; i < x->size; i++) dx[i] += y->grad[0];
        return;
    }
    size_t outer, n, inner;
    split(x, y->iarg[0], &outer, &n, &inner);
    for (size_t o = 0; o < outer; o++)
        for (size_t k = 0; k < n; k++) {
            ag_real *dxk = dx + (o * n + k) * inner;
            const ag_real *dyo = y->grad + o * inner;
            for (size_t i = 0; i < inner; i++) dxk[i] += dyo[i];
        }
}

static ag_tensor *case_axis0(ag_graph *g, ag_tensor *const *in) { return ag_sum(g, in[0], 0, 0); }
static ag_tensor *case_mid_keep(ag_graph *g, ag_tensor *const *in) { return ag_sum(g, in[0], 1, 1); }
static ag_tensor *case_last(ag_graph *g, ag_tensor *const *in) { return ag_sum(g, in[0], -1, 0); }
static ag_tensor *case_all(ag_graph *g, ag_tensor *const *in) { return ag_sum_all(g, in[0]); }

static const ag_op_case cases[] = {
    {"[3, 4] axis 0", 1, {2}, {{3, 4}}, -1, 1, 0, case_axis0},
    {"[2, 3, 4] axis 1 keepdim", 1, {3}, {{2, 3, 4}}, -1, 1, 0, case_mid_keep},
    {"[2, 1, 3] axis -1", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_last},
    {"[2, 3] all", 1, {2}, {{2, 3}}, -1, 1, 0, case_all},
    {"[1, 1] axis 0 size-1", 1, {2}, {{1, 1}}, -1, 1, 0, case_axis0},
};

const ag_op_desc ag_op_sum = {.name = "sum", .backward = sum_backward, AG_CASES(cases)};
