/* ops/add.c: y = a + b, with broadcasting.
 *
 *   y[i] = a[i'] + b[i'']   (i', i'': i with the stretched axes at 0)
 *
 * grad_passes_to_src0: dy/da is the identity, so backward may give a (of
 * y's shape) and y one gradient buffer (src/core/graph.c). */
#include "core/elementwise.h"

/* y = a + b */
static ag_real add_f(ag_real a, ag_real b) { return a + b; }

/* dy/da = 1, dy/db = 1 */
static ag_real add_da(ag_real a, ag_real b, ag_real y) { return (void)a, (void)b, (void)y, 1; }
static ag_real add_db(ag_real a, ag_real b, ag_real y) { return (void)a, (void)b, (void)y, 1; }

static ag_tensor *case_add(ag_graph *g, ag_tensor *const *in) { return ag_add(g, in[0], in[1]); }

static const ag_op_case cases[] = {
    {"[2, 3] + [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_add},
    {"[2, 3, 4] + [4] broadcast", 2, {3, 1}, {{2, 3, 4}, {4}}, -1, 1, 0, case_add},
    {"[2, 1, 4] + [3, 1] both stretch", 2, {3, 2}, {{2, 1, 4}, {3, 1}}, -1, 1, 0, case_add},
    {"[1] + [] size-1 and scalar", 2, {1, 0}, {{1}, {0}}, -1, 1, 0, case_add},
};

AG_BINARY_OP(add, AG_OP_ADD, .grad_passes_to_src0 = true)
