/* ops/neg.c: y = -x, element-wise.
 *
 *   x [...] -> y [...] */
#include "core/elementwise.h"

/* y = -x */
static ag_real neg_f(ag_real x) { return -x; }

/* dy/dx = -1 */
static ag_real neg_df(ag_real x, ag_real y) { return (void)x, (void)y, -1; }

static ag_tensor *case_neg(ag_graph *g, ag_tensor *const *in) { return ag_neg(g, in[0]); }

static const ag_op_case cases[] = {
    {"-[2, 3]", 1, {2}, {{2, 3}}, -1, 1, 0, case_neg},
    {"-[2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_neg},
    {"-[] scalar", 1, {0}, {{0}}, -1, 1, 0, case_neg},
};

AG_UNARY_OP(neg, AG_OP_NEG)
