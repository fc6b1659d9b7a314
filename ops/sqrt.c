/* ops/sqrt.c: y = sqrt(x), element-wise.
 *
 *   x [...] -> y [...]
 *
 * sqrt of a negative number is NaN; at 0 the gradient is +inf, as in
 * PyTorch. */
#include "core/elementwise.h"

#include <math.h>

/* y = sqrt(x), correctly rounded in both precisions */
static ag_real sqrt_f(ag_real x) { return (ag_real)sqrt(x); }

/* dy/dx = 1 / (2 sqrt(x)) = 1 / (2 y), from the saved output */
static ag_real sqrt_df(ag_real x, ag_real y) { return (void)x, 1 / (2 * y); }

static ag_tensor *case_sqrt(ag_graph *g, ag_tensor *const *in) { return ag_sqrt(g, in[0]); }

/* Inputs in [0.5, 2]: inside the domain and away from the kink at 0. */
static const ag_op_case cases[] = {
    {"sqrt [2, 3]", 1, {2}, {{2, 3}}, 0.5, 2, 0, case_sqrt},
    {"sqrt [4, 1] size-1", 1, {2}, {{4, 1}}, 0.5, 2, 0, case_sqrt},
    {"sqrt [] scalar", 1, {0}, {{0}}, 0.5, 2, 0, case_sqrt},
};

AG_UNARY_OP(sqrt, AG_OP_SQRT)
