/* ops/relu.c: y = max(x, 0), element-wise.
 *
 *   x [...] -> y [...]
 *
 * At exactly x = 0 relu has a kink; its gradient there is taken as 0, as
 * PyTorch does.  A NaN input passes through as NaN (also as PyTorch). */
#include "core/elementwise.h"

/* y = max(x, 0), written x < 0 (not x > 0) so that a NaN is kept */
static ag_real relu_f(ag_real x) { return x < 0 ? 0 : x; }

/* dy/dx = 1 where x > 0, and 0 where x <= 0 */
static ag_real relu_df(ag_real x, ag_real y) { return (void)y, x > 0 ? 1 : 0; }

static ag_tensor *case_relu(ag_graph *g, ag_tensor *const *in) { return ag_relu(g, in[0]); }

/* gap 0.1: inputs stay at least 0.1 from the kink at 0, far beyond the
 * finite-difference step. */
static const ag_op_case cases[] = {
    {"relu [3, 4]", 1, {2}, {{3, 4}}, -1, 1, 0.1, case_relu},
    {"relu [1, 5] size-1", 1, {2}, {{1, 5}}, -1, 1, 0.1, case_relu},
    {"relu [] scalar", 1, {0}, {{0}}, -1, 1, 0.1, case_relu},
};

AG_UNARY_OP(relu, AG_OP_RELU)
