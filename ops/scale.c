/* ops/scale.c: y = c x for a real number c, element-wise.
 *
 *   x [...] -> y [...]
 *
 * In the float build c is rounded to float first, as PyTorch does when a
 * float tensor is multiplied by a Python number. */
#include "core/elementwise.h"

/* y = c x */
static ag_real scale_f(ag_real x, ag_real c) { return c * x; }

/* dy/dx = c */
static ag_real scale_df(ag_real x, ag_real y, ag_real c) { return (void)x, (void)y, c; }

static ag_tensor *case_scale(ag_graph *g, ag_tensor *const *in) { return ag_scale(g, in[0], 2.5); }
static ag_tensor *case_neg_scale(ag_graph *g, ag_tensor *const *in) { return ag_scale(g, in[0], -0.75); }

static const ag_op_case cases[] = {
    {"2.5 * [2, 3]", 1, {2}, {{2, 3}}, -1, 1, 0, case_scale},
    {"-0.75 * [3, 1, 2] size-1", 1, {3}, {{3, 1, 2}}, -1, 1, 0, case_neg_scale},
    {"2.5 * [] scalar", 1, {0}, {{0}}, -1, 1, 0, case_scale},
};

AG_UNARY_OP_ARG(scale, AG_OP_SCALE)
