/* ops/max.c: y = max of x over one axis.
 *
 *   x [outer, N, inner] -> y [outer, inner]    (or [outer, 1, inner] keepdim)
 *
 * forward:  k*[o, i] = the first n with x[o, n, i] = max_n x[o, n, i]
 *           y[o, i]  = x[o, k*[o, i], i]
 * backward: dx[o, k*[o, i], i] += dy[o, i]
 *           (max is x[k*] locally, so only the winner gets a gradient; on
 *           a tie the first maximal element takes all of it, like PyTorch's
 *           max(dim) and unlike its amax, which splits it)
 *
 * NaN: a NaN wins.  If the run holds a NaN, y is NaN and k* is the first NaN,
 * which is what torch.max(x, dim) returns, so a NaN is never hidden behind a
 * finite maximum and its gradient goes to where it came from.
 * A max over an axis of size 0 is an error (there is no element to pick).
 *
 * aux = k*, one int per element of y, in the arena.
 * iarg[0] = axis (non-negative), iarg[1] = keepdim. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

ag_tensor *ag_max(ag_graph *g, ag_tensor *x, int axis, int keepdim)
{
    if (!ag__ok(g, "max", 1, x)) return NULL;
    int a = ag__axis(g, "max", x, axis);
    if (a < 0) return NULL;
    if (x->shape[a] == 0) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "max: axis of size 0: axis %d of %s", axis, ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    int shape[AG_MAX_DIMS], nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) shape[nd++] = x->shape[i];
        else if (keepdim) shape[nd++] = 1;
    }
    ag_tensor *y = ag__node(g, AG_OP_MAX, nd, shape, 1, &x);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = a;
    ag__impl(y)->iarg[1] = keepdim != 0;
    int *arg = ag__save(g, (y->size ? y->size : 1) * sizeof *arg);
    if (!arg) return NULL;
    ag__impl(y)->aux = arg;
    size_t outer = ag__numel(a, x->shape), n = (size_t)x->shape[a];
    size_t inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    for (size_t o = 0; o < outer; o++) {
        ag_real *yo = y->data + o * inner;
        int *ao = arg + o * inner;
        const ag_real *x0 = x->data + o * n * inner;
        for (size_t i = 0; i < inner; i++) yo[i] = x0[i], ao[i] = 0;
        for (size_t k = 1; k < n; k++) {
            const ag_real *xk = x0 + k * inner;
            for (size_t i = 0; i < inner; i++) {
                /* strictly greater: the first maximum stays; a NaN replaces a
                 * number, and nothing replaces a NaN (v > NaN is false) */
                if (xk[i] > yo[i] || (isnan(xk[i]) && !isnan(yo[i]))) {
                    yo[i] = xk[i];
                    ao[i] = (int)k;
                }
            }
        }
    }
    return y;
}

static void max_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    const int *arg = ag__impl(y)->aux;
    int a = ag__impl(y)->iarg[0];
    size_t outer = ag__numel(a, x->shape), n = (size_t)x->shape[a];
    size_t inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    /* y[o, i] = x[o, k*, i]  ->  dx[o, k*, i] += dy[o, i] */
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t r = o * inner + i;
            dx[(o * n + (size_t)arg[r]) * inner + i] += y->grad[r];
        }
}

/* max(x + c) with c a fixed scramble of 0, 0.25, 0.5, ...: with x drawn in
 * [0, 0.1] (the cases' range) any two elements differ by at least 0.15, so
 * the maximum never changes hands within a finite-difference step. */
static ag_tensor *distinct(ag_graph *g, ag_tensor *x)
{
    if (!x) return NULL; /* the op then says that its x is missing */
    ag_tensor *c = ag_tensor_new(g, x->ndim, x->shape);
    if (!c) return NULL;
    for (size_t j = 0; j < c->size; j++) c->data[j] = (ag_real)(0.25 * (double)((j * 7919) % c->size));
    return ag_add(g, x, c);
}

static ag_tensor *case_axis0(ag_graph *g, ag_tensor *const *in) { return ag_max(g, distinct(g, in[0]), 0, 0); }
static ag_tensor *case_mid_keep(ag_graph *g, ag_tensor *const *in) { return ag_max(g, distinct(g, in[0]), 1, 1); }
static ag_tensor *case_last(ag_graph *g, ag_tensor *const *in) { return ag_max(g, distinct(g, in[0]), -1, 0); }
static ag_tensor *case_raw(ag_graph *g, ag_tensor *const *in) { return ag_max(g, in[0], -1, 1); }

static const ag_op_case cases[] = {
    {"[3, 4] axis 0", 1, {2}, {{3, 4}}, 0, 0.1, 0, case_axis0},
    {"[2, 3, 4] axis 1 keepdim", 1, {3}, {{2, 3, 4}}, 0, 0.1, 0, case_mid_keep},
    {"[2, 2, 5] axis -1", 1, {3}, {{2, 2, 5}}, 0, 0.1, 0, case_last},
    {"[2, 1, 3] axis 1 keepdim size-1", 1, {3}, {{2, 1, 3}}, 0, 0.1, 0, case_mid_keep},
    {"[3, 1] axis -1 keepdim size-1 (x as drawn)", 1, {2}, {{3, 1}}, -1, 1, 0, case_raw},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{3, 4}}, -1e30, 1e30, 0, case_axis0},
};

const ag_op_desc ag_op_max = {.name = "max", .backward = max_backward, AG_CASES(cases), AG_EDGES(edges)};
