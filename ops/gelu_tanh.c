/* ops/gelu_tanh.c: y = gelu_tanh(x), GELU's tanh approximation (PyTorch's
 * nn.GELU(approximate='tanh'), GPT-2's), element-wise.
 *
 *   x [...] -> y [...]
 *
 *   y = 0.5 x (1 + tanh(u)),   u = k (x + c x^3),   k = sqrt(2 / pi), c = 0.044715
 *
 * 0.5 (1 + tanh(u)) is written 1 / (1 + exp(-2u)), which is the same
 * number and saturates without overflow: exp(-2u) goes to +inf for very
 * negative x, and 1 / inf is 0.  grad_in_place as GELU's (ops/gelu.c). */
#include "core/elementwise.h"

#include <math.h>

#define SQRT_2_OVER_PI 0.79788456080286535588 /* k = sqrt(2 / pi) */
#define COEF 0.044715                         /* c */

/* h = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) */
static double half_one_plus_tanh(double x) { return 1 / (1 + exp(-2 * (SQRT_2_OVER_PI * (x + COEF * x * x * x)))); }

/* y = x h */
static ag_real gelu_tanh_f(ag_real x) { return (ag_real)(x * half_one_plus_tanh(x)); }

/* dy/dx = h                          (the factor x differentiated)
 *       + x 2 h (1 - h) du/dx        (dh/du = 0.5 tanh'(u) = 0.5 (1 - t^2) = 2 h (1 - h))
 * du/dx = k (1 + 3 c x^2) */
static ag_real gelu_tanh_df(ag_real x, ag_real y)
{
    (void)y;
    double v = x, h = half_one_plus_tanh(v);
    return (ag_real)(h + v * 2 * h * (1 - h) * (SQRT_2_OVER_PI * (1 + 3 * COEF * v * v)));
}

static ag_tensor *case_gelu_tanh(ag_graph *g, ag_tensor *const *in) { return ag_gelu_tanh(g, in[0]); }

static const ag_op_case cases[] = {
    {"gelu_tanh [3, 4]", 1, {2}, {{3, 4}}, -4, 4, 0, case_gelu_tanh},
    {"gelu_tanh [2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -4, 4, 0, case_gelu_tanh},
    {"gelu_tanh [] scalar", 1, {0}, {{0}}, -4, 4, 0, case_gelu_tanh},
};

AG_UNARY_OP(gelu_tanh, AG_OP_GELU_TANH, .grad_in_place = true)
