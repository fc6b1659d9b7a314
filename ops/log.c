/* ops/log.c: y = log(x), the natural logarithm, element-wise.
 *
 *   x [...] -> y [...]
 *
 * Outside the domain it follows IEEE 754, as libm and PyTorch: log(0) is
 * -inf, log of a negative number is NaN. */
#include "core/elementwise.h"

#include <math.h>

/* y = ln x */
static ag_real log_f(ag_real x) { return log(x); }

/* dy/dx = 1 / x */
static ag_real log_df(ag_real x, ag_real y) { return (void)y, 1 / x; }

static ag_tensor *case_log(ag_graph *g, ag_tensor *const *in) { return ag_log(g, in[0]); }

/* Inputs in [0.5, 2]: inside the domain and away from the pole at 0. */
static const ag_op_case cases[] = {
    {"log [2, 3]", 1, {2}, {{2, 3}}, 0.5, 2, 0, case_log},
    {"log [1, 3, 1] size-1", 1, {3}, {{1, 3, 1}}, 0.5, 2, 0, case_log},
    {"log [] scalar", 1, {0}, {{0}}, 0.5, 2, 0, case_log},
};

AG_UNARY_OP(log, AG_OP_LOG)
