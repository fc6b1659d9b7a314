/* ops/sub.c: y = a - b, with broadcasting.
 *
 *   y[i] = a[i'] - b[i'']   (i', i'': i with the stretched axes at 0)
 *
 * grad_passes_to_src0 as add's (ops/add.c). */
#include "core/elementwise.h"

/* y = a - b */
static ag_real sub_f(ag_real a, ag_real b) { return a - b; }

/* dy/da = 1, dy/db = -1 */
static ag_real sub_da(ag_real a, ag_real b, ag_real y) { return (void)a, (void)b, (void)y, 1; }
static ag_real sub_db(ag_real a, ag_real b, ag_real y) { return (void)a, (void)b, (void)y, -1; }

static ag_tensor *case_sub(ag_graph *g, ag_tensor *const *in) { return ag_sub(g, in[0], in[1]); }
static ag_tensor *case_self(ag_graph *g, ag_tensor *const *in) { return ag_sub(g, in[0], in[0]); }

static const ag_op_case cases[] = {
    {"[2, 3] - [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_sub},
    {"[2, 3, 4] - [4] broadcast", 2, {3, 1}, {{2, 3, 4}, {4}}, -1, 1, 0, case_sub},
    {"[3, 1] - [2, 1, 4] both stretch", 2, {2, 3}, {{3, 1}, {2, 1, 4}}, -1, 1, 0, case_sub},
    {"[1] - [] size-1 and scalar", 2, {1, 0}, {{1}, {0}}, -1, 1, 0, case_sub},
    {"x - x (one input used twice)", 1, {2}, {{2, 3}}, -1, 1, 0, case_self},
};

AG_BINARY_OP(sub, AG_OP_SUB, .grad_passes_to_src0 = true)
