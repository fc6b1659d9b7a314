/* ops/sum.c: y = sum of x over one axis (or over all of it).
 *
 *   x [outer, N, inner] -> y [outer, inner]    (or [outer, 1, inner] keepdim)
 *
 * forward:  y[o, i] = sum_n x[o, n, i]
 * backward: dx[o, n, i] += dy[o, i]             (every summand gets dy)
 *
 * iarg[0] = axis (-1 for all axes: y is a scalar), iarg[1] = keepdim. */
#include "core/internal.h"

/* The loops live in src/core/reduce.c (ag__reduce), shared with ops/mean.c. */
ag_tensor *ag_sum(ag_graph *g, ag_tensor *x, int axis, int keepdim)
{
    return ag__reduce(g, AG_OP_SUM, x, axis, keepdim, false);
}

ag_tensor *ag_sum_all(ag_graph *g, ag_tensor *x) { return ag__reduce(g, AG_OP_SUM, x, AG__ALL_AXES, 0, false); }

/* dx[o, n, i] += dy[o, i] */
static void sum_backward(ag_graph *g, ag_tensor *y) { ag__reduce_backward(g, y, false); }

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

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e36", 1, {2}, {{3, 4}}, -1e+36, 1e+36, 0, case_axis0},
    {"values near 1e4", 1, {2}, {{3, 4}}, 9990, 10010, 0, case_axis0},
};

const ag_op_desc ag_op_sum = {.name = "sum", .backward = sum_backward, AG_CASES(cases), AG_EDGES(edges)};
