/* ops/div.c: y = a / b (element-wise), with broadcasting.
 *
 *   y[i] = a[i'] / b[i'']   (i', i'': i with the stretched axes at 0)
 *
 * Division by zero follows IEEE 754, as in PyTorch: x / 0 is +-inf (0 / 0 is
 * NaN), and so are the gradients there. */
#include "core/elementwise.h"

/* y = a / b */
static ag_real div_f(ag_real a, ag_real b) { return a / b; }

/* dy/da = 1 / b;  dy/db = -a / b^2 = -y / b, from the saved output (b * b
 * could overflow where y / b does not) */
static ag_real div_da(ag_real a, ag_real b, ag_real y) { return (void)a, (void)y, 1 / b; }
static ag_real div_db(ag_real a, ag_real b, ag_real y) { return (void)a, -y / b; }

static ag_tensor *case_div(ag_graph *g, ag_tensor *const *in) { return ag_div(g, in[0], in[1]); }
static ag_tensor *case_self(ag_graph *g, ag_tensor *const *in) { return ag_div(g, in[0], in[0]); }

/* Inputs in [-2, -0.5] u [0.5, 2] (gap 0.5): b stays away from 0, where
 * 1 / b blows up and finite differences say nothing. */
static const ag_op_case cases[] = {
    {"[2, 3] / [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -2, 2, 0.5, case_div},
    {"[2, 3, 4] / [3, 1] broadcast", 2, {3, 2}, {{2, 3, 4}, {3, 1}}, -2, 2, 0.5, case_div},
    {"[4] / [2, 1, 1] both stretch", 2, {1, 3}, {{4}, {2, 1, 1}}, -2, 2, 0.5, case_div},
    {"[1, 4] / [] size-1 and scalar", 2, {2, 0}, {{1, 4}, {0}}, -2, 2, 0.5, case_div},
    {"x / x (one input used twice)", 1, {2}, {{3, 2}}, -2, 2, 0.5, case_self},
};

AG_BINARY_OP(div, AG_OP_DIV)
