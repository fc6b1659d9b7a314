/* ops/tanh.c: y = tanh(x), element-wise.
 *
 *   x [...] -> y [...]
 *
 * tanh saturates to +-1 for large |x| (no overflow), where the gradient
 * goes to 0. */
#include "core/elementwise.h"

#include <math.h>

/* y = tanh(x) */
static ag_real tanh_f(ag_real x) { return tanh(x); }

/* dy/dx = 1 - tanh(x)^2 = 1 - y^2, from the saved output */
static ag_real tanh_df(ag_real x, ag_real y) { return (void)x, 1 - y * y; }

static ag_tensor *case_tanh(ag_graph *g, ag_tensor *const *in) { return ag_tanh(g, in[0]); }

static const ag_op_case cases[] = {
    {"tanh [2, 3]", 1, {2}, {{2, 3}}, -2, 2, 0, case_tanh},
    {"tanh [2, 1, 2] size-1", 1, {3}, {{2, 1, 2}}, -2, 2, 0, case_tanh},
    {"tanh [] scalar", 1, {0}, {{0}}, -2, 2, 0, case_tanh},
};

AG_UNARY_OP(tanh, AG_OP_TANH)
