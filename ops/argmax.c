/* ops/argmax.c: where the maximum of x lies along one axis.
 *
 *   x [outer, N, inner] -> y [outer, inner]    (or [outer, 1, inner] keepdim)
 *
 * forward:  y[o, i] = the first n with x[o, n, i] = max_n x[o, n, i]
 * backward: none.  y is piecewise constant in x (its derivative is 0 almost
 *           everywhere), so y never requires grad and nothing flows back
 *           through it, as with PyTorch's integer result.
 *
 * The indices are ag_real values holding exact integers 0..N-1 (PyTorch
 * returns int64; attograd's tensors hold ag_real only).  Compare them with
 * integer targets after a cast: (int)y->data[r].  Exact while N - 1 fits in
 * ag_real's mantissa: an axis longer than 2^24 is an error in the float
 * build.  Ties give the first index, as torch.argmax; a NaN counts as the
 * maximum (the first NaN wins), as in torch.argmax and ag_max.
 *
 * iarg[0] = axis (non-negative), iarg[1] = keepdim. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

ag_tensor *ag_argmax(ag_graph *g, ag_tensor *x, int axis, int keepdim)
{
    if (!ag__ok(g, "argmax", 1, x)) return NULL;
    int a = ag__axis(g, "argmax", x, axis);
    if (a < 0) return NULL;
    size_t n = (size_t)x->shape[a];
    if (n == 0 || (size_t)(ag_real)(n - 1) != n - 1) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "argmax: axis %d of %s has %zu elements (needs 1 to 2^%d)", axis,
                      ag_shape_str(x, buf, sizeof buf), n, sizeof(ag_real) == 4 ? 24 : 53);
        return NULL;
    }
    int shape[AG_MAX_DIMS], nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) shape[nd++] = x->shape[i];
        else if (keepdim) shape[nd++] = 1;
    }
    ag_tensor *y = ag__node(g, AG_OP_ARGMAX, nd, shape, 1, &x);
    if (!y) return NULL;
    y->requires_grad = 0; /* indices: no gradient (see the top) */
    ag__impl(y)->iarg[0] = a;
    ag__impl(y)->iarg[1] = keepdim != 0;
    size_t outer = ag__numel(a, x->shape), inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            const ag_real *xs = x->data + o * n * inner + i; /* x[o, k, i] = xs[k * inner] */
            size_t best = 0;
            for (size_t k = 1; k < n; k++) {
                ag_real v = xs[k * inner], m = xs[best * inner];
                /* strictly greater: the first maximum stays; a NaN beats a number */
                if (v > m || (isnan(v) && !isnan(m))) best = k;
            }
            y->data[o * inner + i] = (ag_real)best;
        }
    return y;
}

/* x + c with c a fixed scramble of 0, 0.25, 0.5, ...: with x drawn in
 * [0, 0.1] any two elements differ by at least 0.15, so no index changes
 * within a finite-difference step (the strict stage's is 1e-3). */
static ag_tensor *spaced(ag_graph *g, ag_tensor *x)
{
    if (!x) return NULL; /* the op then says that its x is missing */
    ag_tensor *c = ag_tensor_new(g, x->ndim, x->shape);
    if (!c) return NULL;
    for (size_t j = 0; j < c->size; j++) c->data[j] = (ag_real)(0.25 * (double)((j * 7919) % c->size));
    return ag_add(g, x, c);
}

/* L = sum(w * x * argmax(x)), x spaced: x's gradient is w * argmax(x), with
 * nothing added through the indices. */
static ag_tensor *case_rows(ag_graph *g, ag_tensor *const *in)
{
    ag_tensor *x = spaced(g, in[0]);
    return ag_mul(g, x, ag_argmax(g, x, 1, 1));
}
static ag_tensor *case_cols(ag_graph *g, ag_tensor *const *in)
{
    ag_tensor *x = spaced(g, in[0]);
    return ag_mul(g, x, ag_argmax(g, x, 0, 0));
}

static const ag_op_case cases[] = {
    {"[3, 4] * argmax axis 1 keepdim [3, 1]", 1, {2}, {{3, 4}}, 0, 0.1, 0, case_rows},
    {"[3, 4] * argmax axis 0 [4] broadcast", 1, {2}, {{3, 4}}, 0, 0.1, 0, case_cols},
    {"[2, 3, 1] * argmax axis 1 keepdim size-1", 1, {3}, {{2, 3, 1}}, 0, 0.1, 0, case_rows},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{3, 4}}, -1e30, 1e30, 0, case_rows},
};

const ag_op_desc ag_op_argmax = {.name = "argmax", .backward = NULL, AG_CASES(cases), AG_EDGES(edges)};
