/* ops/exp.c: y = exp(x), element-wise.
 *
 *   x [...] -> y [...]
 *
 * Large x overflows to +inf and very negative x underflows to 0, as libm
 * (and PyTorch) do. */
#include "core/elementwise.h"

#include <math.h>

/* y = e^x */
static ag_real exp_f(ag_real x) { return exp(x); }

/* dy/dx = e^x = y: exp is its own derivative, the saved output reused */
static ag_real exp_df(ag_real x, ag_real y) { return (void)x, y; }

static ag_tensor *case_exp(ag_graph *g, ag_tensor *const *in) { return ag_exp(g, in[0]); }

static const ag_op_case cases[] = {
    {"exp [2, 3]", 1, {2}, {{2, 3}}, -2, 2, 0, case_exp},
    {"exp [3, 1] size-1", 1, {2}, {{3, 1}}, -2, 2, 0, case_exp},
    {"exp [] scalar", 1, {0}, {{0}}, -2, 2, 0, case_exp},
};

AG_UNARY_OP(exp, AG_OP_EXP)
