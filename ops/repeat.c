/* ops/repeat.c: x tiled reps[k] times along each axis k (PyTorch's
 * x.repeat(*reps), NumPy's tile).
 *
 *   x [d_0, ..., d_(n-1)], reps [r_0, ..., r_(m-1)], m >= n:
 *   x is read as [1, ..., 1, d_0, ..., d_(n-1)] (m axes, shapes aligned on
 *   the right) and y [s_0, ..., s_(m-1)] with s_k = d_k r_k.
 *
 * forward:  y[j_0, ..., j_(m-1)] = x[j_0 mod d_0, ..., j_(m-1) mod d_(m-1)]
 * backward: dx[j mod d] += dy[j]       (each element's copies summed)
 *
 * r_k >= 0; a 0 gives an empty y, as in PyTorch.  Unlike expand, an axis of
 * any size repeats, and the copies are laid end to end: repeat([a, b], 2)
 * is [a, b, a, b].  iarg[k] = r_k. */
#include "core/internal.h"

#include <limits.h>
#include <stdio.h>

ag_tensor *ag_repeat(ag_graph *g, ag_tensor *x, int ndim, const int *reps)
{
    if (!ag__ok(g, "repeat", 1, x)) return NULL;
    char sx[96], sr[96];
    if (ndim < x->ndim || ndim > AG_MAX_DIMS || (ndim > 0 && !reps)) {
        ag_graph_fail(g, AG_ERR_ARG, "repeat: %d repeats%s for %s (needs %d to %d, one per axis)", ndim,
                      reps ? "" : " and no array", ag_shape_str(x, sx, sizeof sx), x->ndim, AG_MAX_DIMS);
        return NULL;
    }
    int shape[AG_MAX_DIMS], lead = ndim - x->ndim;
    for (int k = 0; k < ndim; k++) {
        long long d = k < lead ? 1 : x->shape[k - lead];
        if (reps[k] < 0 || d * reps[k] > INT_MAX) {
            ag_graph_fail(g, AG_ERR_ARG, "repeat: repeats %s for %s: axis %d %s",
                          ag_shape_str_n(ndim, reps, sr, sizeof sr), ag_shape_str(x, sx, sizeof sx), k,
                          reps[k] < 0 ? "is negative" : "is too long");
            return NULL;
        }
        shape[k] = (int)(d * reps[k]);
    }
    ag_tensor *y = ag__node(g, AG_OP_REPEAT, ndim, shape, 1, &x);
    if (!y) return NULL;
    for (int k = 0; k < ndim; k++) ag__impl(y)->iarg[k] = reps[k];
    /* y[j] = x[j mod d] */
    for (size_t i = 0; i < y->size; i++) y->data[i] = x->data[ag__wrap_index(x, ndim, shape, i)];
    return y;
}

static void repeat_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    /* dx[j mod d] += dy[j] */
    for (size_t i = 0; i < y->size; i++) dx[ag__wrap_index(x, y->ndim, y->shape, i)] += y->grad[i];
}

static ag_tensor *case_both(ag_graph *g, ag_tensor *const *in) { return ag_repeat(g, in[0], AG_SHAPE(2, 3)); }
static ag_tensor *case_lead(ag_graph *g, ag_tensor *const *in) { return ag_repeat(g, in[0], AG_SHAPE(2, 1, 2)); }
static ag_tensor *case_once(ag_graph *g, ag_tensor *const *in) { return ag_repeat(g, in[0], AG_SHAPE(1, 1)); }
static ag_tensor *case_size1(ag_graph *g, ag_tensor *const *in) { return ag_repeat(g, in[0], AG_SHAPE(3, 1, 2)); }

static const ag_op_case cases[] = {
    {"[2, 3] repeat (2, 3)", 1, {2}, {{2, 3}}, -1, 1, 0, case_both},
    {"[3, 2] repeat (2, 1, 2) new leading axis", 1, {2}, {{3, 2}}, -1, 1, 0, case_lead},
    {"[2, 3] repeat (1, 1) unchanged", 1, {2}, {{2, 3}}, -1, 1, 0, case_once},
    {"[1, 2, 1] repeat (3, 1, 2) size-1 axes", 1, {3}, {{1, 2, 1}}, -1, 1, 0, case_size1},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{2, 3}}, -1e30, 1e30, 0, case_both},
};

const ag_op_desc ag_op_repeat = {.name = "repeat", .backward = repeat_backward, AG_CASES(cases), AG_EDGES(edges)};
