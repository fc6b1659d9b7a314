/* ops/shift.c: y = x + c for a real number c, element-wise.
 *
 *   x [...] -> y [...]
 *
 * In the float build c is rounded to float first, as PyTorch does when a
 * Python number is added to a float tensor. */
#include "core/elementwise.h"

/* y = x + c */
static ag_real shift_f(ag_real x, ag_real c) { return x + c; }

/* dy/dx = 1 */
static ag_real shift_df(ag_real x, ag_real y, ag_real c) { return (void)x, (void)y, (void)c, 1; }

static ag_tensor *case_shift(ag_graph *g, ag_tensor *const *in) { return ag_shift(g, in[0], 1.5); }

static const ag_op_case cases[] = {
    {"[2, 3] + 1.5", 1, {2}, {{2, 3}}, -1, 1, 0, case_shift},
    {"[1, 4] + 1.5 size-1", 1, {2}, {{1, 4}}, -1, 1, 0, case_shift},
    {"[] + 1.5 scalar", 1, {0}, {{0}}, -1, 1, 0, case_shift},
};

AG_UNARY_OP_ARG(shift, AG_OP_SHIFT)
