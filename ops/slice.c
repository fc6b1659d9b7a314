/* ops/slice.c: a contiguous range of one axis, x[..., start:start+len, ...].
 *
 * Seen around the axis, x is [outer, N, inner] and y is [outer, len, inner]:
 *
 * forward:  y[o, j, i] = x[o, start + j, i]          (0 <= j < len)
 * backward: dx[o, start + j, i] += dy[o, j, i]
 *           (dy scattered back into the slice; the rest of dx gets nothing)
 *
 * Needs 0 <= start, 0 <= len, start + len <= N; len 0 gives an empty
 * tensor.  iarg[0] = axis (non-negative), iarg[1] = start, iarg[2] = len.
 * y is a copy (attograd has no views). */
#include "core/internal.h"

#include <stdio.h>

ag_tensor *ag_slice(ag_graph *g, ag_tensor *x, int axis, int start, int len)
{
    if (!ag__ok(g, "slice", 1, x)) return NULL;
    int a = ag__axis(g, "slice", x, axis);
    if (a < 0) return NULL;
    int N = x->shape[a];
    if (start < 0 || len < 0 || start > N || len > N - start) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_ARG, "slice: start %d, len %d out of range for axis %d of size %d in %s", start, len,
                      a, N, ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    int shape[AG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[a] = len;
    ag_tensor *y = ag__node(g, AG_OP_SLICE, x->ndim, shape, 1, &x);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = a;
    ag__impl(y)->iarg[1] = start;
    ag__impl(y)->iarg[2] = len;
    size_t outer = ag__numel(a, x->shape), inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    size_t run = (size_t)len * inner;
    for (size_t o = 0; o < outer && run; o++)
        memcpy(y->data + o * run, x->data + (o * (size_t)N + (size_t)start) * inner, run * sizeof(ag_real));
    return y;
}

static void slice_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    int a = ag__impl(y)->iarg[0];
    size_t start = (size_t)ag__impl(y)->iarg[1], N = (size_t)x->shape[a];
    size_t outer = ag__numel(a, x->shape), inner = ag__numel(x->ndim - a - 1, x->shape + a + 1);
    size_t run = (size_t)ag__impl(y)->iarg[2] * inner;
    /* y[o, j, i] = x[o, start + j, i]  ->  dx[o, start + j, i] += dy[o, j, i] */
    for (size_t o = 0; o < outer; o++) {
        ag_real *dxo = dx + (o * N + start) * inner;
        const ag_real *dyo = y->grad + o * run;
        for (size_t j = 0; j < run; j++) dxo[j] += dyo[j];
    }
}

static ag_tensor *case_mid(ag_graph *g, ag_tensor *const *in) { return ag_slice(g, in[0], 1, 1, 3); }
static ag_tensor *case_last(ag_graph *g, ag_tensor *const *in) { return ag_slice(g, in[0], -1, 2, 2); }
static ag_tensor *case_first(ag_graph *g, ag_tensor *const *in) { return ag_slice(g, in[0], 0, 2, 1); }
static ag_tensor *case_whole(ag_graph *g, ag_tensor *const *in) { return ag_slice(g, in[0], 1, 0, 1); }

static const ag_op_case cases[] = {
    {"[2, 5, 3] axis 1 [1:4] middle", 1, {3}, {{2, 5, 3}}, -1, 1, 0, case_mid},
    {"[3, 4] axis -1 [2:4]", 1, {2}, {{3, 4}}, -1, 1, 0, case_last},
    {"[3, 1, 2] axis 0 [2:3]", 1, {3}, {{3, 1, 2}}, -1, 1, 0, case_first},
    {"[2, 1, 3] axis 1 [0:1] size-1 whole", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_whole},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {3}, {{2, 5, 3}}, -1e30, 1e30, 0, case_mid},
};

const ag_op_desc ag_op_slice = {.name = "slice", .backward = slice_backward, AG_CASES(cases), AG_EDGES(edges)};
