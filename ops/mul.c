/* ops/mul.c: y = a * b (element-wise), with broadcasting.
 *
 *   y[i] = a[i'] * b[i'']   (i', i'': i with the stretched axes at 0) */
#include "core/elementwise.h"

/* y = a b */
static ag_real mul_f(ag_real a, ag_real b) { return a * b; }

/* dy/da = b, dy/db = a */
static ag_real mul_da(ag_real a, ag_real b, ag_real y) { return (void)a, (void)y, b; }
static ag_real mul_db(ag_real a, ag_real b, ag_real y) { return (void)b, (void)y, a; }

static ag_tensor *case_mul(ag_graph *g, ag_tensor *const *in) { return ag_mul(g, in[0], in[1]); }
static ag_tensor *case_square(ag_graph *g, ag_tensor *const *in) { return ag_mul(g, in[0], in[0]); }

static const ag_op_case cases[] = {
    {"[2, 3] * [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_mul},
    {"[2, 3, 4] * [3, 1] broadcast", 2, {3, 2}, {{2, 3, 4}, {3, 1}}, -1, 1, 0, case_mul},
    {"[1, 4] * [] scalar", 2, {2, 0}, {{1, 4}, {0}}, -1, 1, 0, case_mul},
    {"x * x (one input used twice)", 1, {2}, {{3, 2}}, -1, 1, 0, case_square},
};

AG_BINARY_OP(mul, AG_OP_MUL)
