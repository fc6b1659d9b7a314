/* ops/mean.c: y = mean of x over one axis (or over all of it).
 *
 *   x [outer, N, inner] -> y [outer, inner]    (or [outer, 1, inner] keepdim)
 *
 * forward:  y[o, i] = (1/N) sum_n x[o, n, i]
 * backward: dx[o, n, i] += dy[o, i] / N          (every term gets 1/N of dy)
 *
 * The _all form treats x as one axis of N = size elements and gives a scalar.
 * A mean over nothing (N = 0) is an error, "mean: axis of size 0", where
 * PyTorch would return NaN: an empty axis in a model is a bug to report.
 *
 * iarg[0] = axis (-1 for all axes: y is a scalar), iarg[1] = keepdim (the
 * same convention as ops/sum.c). */
#include "internal.h"

#include <stdio.h>

/* Split x's shape around axis: outer * n * inner = size. */
static void split(const ag_tensor *x, int axis, size_t *outer, size_t *n, size_t *inner)
{
    *outer = ag__numel(axis, x->shape);
    *n = (size_t)x->shape[axis];
    *inner = ag__numel(x->ndim - axis - 1, x->shape + axis + 1);
}

ag_tensor *ag_mean(ag_graph *g, ag_tensor *x, int axis, int keepdim)
{
    if (!ag__ok(g, "mean", 1, x)) return NULL;
    int a = ag__axis(g, "mean", x, axis);
    if (a < 0) return NULL;
    if (x->shape[a] == 0) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "mean: axis of size 0: axis %d of %s", axis, ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    int shape[AG_MAX_DIMS], nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) shape[nd++] = x->shape[i];
        else if (keepdim) shape[nd++] = 1;
    }
    ag_tensor *y = ag__node(g, AG_OP_MEAN, nd, shape, 1, &x);
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
        for (size_t i = 0; i < inner; i++) yo[i] /= (ag_real)n;
    }
    return y;
}

ag_tensor *ag_mean_all(ag_graph *g, ag_tensor *x)
{
    if (!ag__ok(g, "mean", 1, x)) return NULL;
    if (x->size == 0) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "mean: axis of size 0: mean of all of %s", ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    ag_tensor *y = ag__node(g, AG_OP_MEAN, 0, NULL, 1, &x);
    if (!y) return NULL;
    y->iarg[0] = -1;
    ag_real s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < x->size; i++) s += x->data[i];
    y->data[0] = s / (ag_real)x->size;
    return y;
}

static void mean_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    if (y->iarg[0] < 0) {
        /* y = (1/N) sum_i x[i]  ->  dx[i] += dy / N */
        ag_real d = y->grad[0] / (ag_real)x->size;
#pragma omp simd
        for (size_t i = 0; i < x->size; i++) dx[i] += d;
        return;
    }
    size_t outer, n, inner;
    split(x, y->iarg[0], &outer, &n, &inner);
    /* y[o, i] = (1/N) sum_n x[o, n, i]  ->  dx[o, n, i] += dy[o, i] / N */
    for (size_t o = 0; o < outer; o++)
        for (size_t k = 0; k < n; k++) {
            ag_real *dxk = dx + (o * n + k) * inner;
            const ag_real *dyo = y->grad + o * inner;
            for (size_t i = 0; i < inner; i++) dxk[i] += dyo[i] / (ag_real)n;
        }
}

static ag_tensor *case_axis0(ag_graph *g, ag_tensor *const *in) { return ag_mean(g, in[0], 0, 0); }
static ag_tensor *case_mid_keep(ag_graph *g, ag_tensor *const *in) { return ag_mean(g, in[0], 1, 1); }
static ag_tensor *case_last(ag_graph *g, ag_tensor *const *in) { return ag_mean(g, in[0], -1, 0); }
static ag_tensor *case_all(ag_graph *g, ag_tensor *const *in) { return ag_mean_all(g, in[0]); }

static const ag_op_case cases[] = {
    {"[3, 4] axis 0", 1, {2}, {{3, 4}}, -1, 1, 0, case_axis0},
    {"[2, 3, 4] axis 1 keepdim", 1, {3}, {{2, 3, 4}}, -1, 1, 0, case_mid_keep},
    {"[2, 1, 3] axis -1", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_last},
    {"[2, 1, 3] axis 1 keepdim size-1", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_mid_keep},
    {"[2, 3] all", 1, {2}, {{2, 3}}, -1, 1, 0, case_all},
    {"[1, 1] axis 0 size-1", 1, {2}, {{1, 1}}, -1, 1, 0, case_axis0},
};

const ag_op_desc ag_op_mean = {.name = "mean", .backward = mean_backward, AG_CASES(cases)};
