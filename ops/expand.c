/* ops/expand.c: x stretched along its size-1 axes (PyTorch's x.expand,
 * NumPy's broadcast_to).
 *
 *   x [d_0, ..., d_(n-1)] -> y [s_0, ..., s_(m-1)],  m >= n, shapes aligned
 *   on the right.  Each axis of x keeps its size (s = d, or s = -1: "keep"),
 *   or has size 1 and stretches to any s >= 0.  The m - n new leading axes
 *   take any size s >= 0 (-1 there is an error: there is nothing to keep).
 *
 * forward:  y[i] = x[i']          (i': i with the stretched and new axes at 0)
 * backward: dx[i'] += dy[i]       (dy summed over the stretched and new axes,
 *                                  as ag_add's backward sums a broadcast input)
 *
 * PyTorch's expand is a view that copies nothing; y here is a copy (attograd
 * has no strided views).  The typical use: a learned class token [1, 1, C]
 * expanded to [B, 1, C] before a concat with [B, N, C] (ag_prepend_token).
 *
 * Also here: ag__wrap_index, the index map that expand, repeat and where
 * share. */
#include "core/internal.h"

#include <stdio.h>

/* The element of x read by element i of a tensor of `shape` when x is
 * broadcast (expand, where) or tiled (repeat) to it, shapes aligned on the
 * right: along each axis the index is taken modulo x's size there (0 on a
 * size-1 axis, itself on an axis of the same size); missing axes add 0. */
size_t ag__wrap_index(const ag_tensor *x, int ndim, const int *shape, size_t i)
{
    size_t at = 0, stride = 1;
    for (int k = ndim - 1; k >= 0 && x->ndim - ndim + k >= 0; k--) {
        size_t d = (size_t)x->shape[x->ndim - ndim + k];
        at += (i % (size_t)shape[k]) % d * stride;
        i /= (size_t)shape[k];
        stride *= d;
    }
    return at;
}

ag_tensor *ag_expand(ag_graph *g, ag_tensor *x, int ndim, const int *shape)
{
    if (!ag__ok(g, "expand", 1, x)) return NULL;
    char sx[96], st[96];
    if (ndim < 0 || ndim > AG_MAX_DIMS || (ndim > 0 && !shape)) {
        ag_graph_fail(g, AG_ERR_ARG, "expand: %s %d axes for %s (0..%d, and a shape for them)",
                      shape ? "bad count of" : "no shape for", ndim, ag_shape_str(x, sx, sizeof sx), AG_MAX_DIMS);
        return NULL;
    }
    ag_shape_str_n(ndim, shape, st, sizeof st);
    if (ndim < x->ndim) {
        ag_graph_fail(g, AG_ERR_SHAPE, "expand: cannot expand %s to %s: fewer axes than the input's %d",
                      ag_shape_str(x, sx, sizeof sx), st, x->ndim);
        return NULL;
    }
    int out[AG_MAX_DIMS], lead = ndim - x->ndim;
    for (int k = 0; k < ndim; k++) {
        int d = k < lead ? -1 : x->shape[k - lead]; /* -1: a new axis */
        out[k] = (shape[k] == -1 && d >= 0) ? d : shape[k];
        if (out[k] < 0 || (d >= 0 && d != 1 && out[k] != d)) {
            ag_graph_fail(g, AG_ERR_SHAPE, "expand: cannot expand %s to %s: axis %d %s", ag_shape_str(x, sx, sizeof sx),
                          st, k, d < 0 ? "is new and needs a size >= 0" : d == 1 ? "needs a size >= 0 or -1"
                                                                             : "has a size that is not 1");
            return NULL;
        }
    }
    ag_tensor *y = ag__node(g, AG_OP_EXPAND, ndim, out, 1, &x);
    if (!y) return NULL;
    /* y[i] = x[i'] */
    for (size_t i = 0; i < y->size; i++) y->data[i] = x->data[ag__wrap_index(x, ndim, out, i)];
    return y;
}

static void expand_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    /* dx[i'] += dy[i] */
    for (size_t i = 0; i < y->size; i++) dx[ag__wrap_index(x, y->ndim, y->shape, i)] += y->grad[i];
}

static ag_tensor *case_mid(ag_graph *g, ag_tensor *const *in) { return ag_expand(g, in[0], AG_SHAPE(2, -1, 4)); }
static ag_tensor *case_lead(ag_graph *g, ag_tensor *const *in) { return ag_expand(g, in[0], AG_SHAPE(2, 3, 3)); }
static ag_tensor *case_token(ag_graph *g, ag_tensor *const *in) { return ag_expand(g, in[0], AG_SHAPE(3, 1, 4)); }
static ag_tensor *case_scalar(ag_graph *g, ag_tensor *const *in) { return ag_expand(g, in[0], AG_SHAPE(2, 2)); }
static ag_tensor *case_same(ag_graph *g, ag_tensor *const *in) { return ag_expand(g, in[0], AG_SHAPE(-1, -1)); }

static const ag_op_case cases[] = {
    {"[1, 3, 1] to [2, -1, 4] size-1 axes stretch", 1, {3}, {{1, 3, 1}}, -1, 1, 0, case_mid},
    {"[3] to [2, 3, 3] new leading axes", 1, {1}, {{3}}, -1, 1, 0, case_lead},
    {"[1, 1, 4] to [3, 1, 4] class token", 1, {3}, {{1, 1, 4}}, -1, 1, 0, case_token},
    {"[] to [2, 2] scalar", 1, {0}, {{0}}, -1, 1, 0, case_scalar},
    {"[2, 1] to [-1, -1] unchanged", 1, {2}, {{2, 1}}, -1, 1, 0, case_same},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {3}, {{1, 3, 1}}, -1e30, 1e30, 0, case_mid},
};

const ag_op_desc ag_op_expand = {.name = "expand", .backward = expand_backward, AG_CASES(cases), AG_EDGES(edges)};
