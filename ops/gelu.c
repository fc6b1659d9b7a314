/* ops/gelu.c: y = gelu(x) = x Phi(x), element-wise, in the exact erf form
 * (PyTorch's default nn.GELU(), not the tanh approximation).
 *
 *   x [...] -> y [...]
 *
 * Phi is the standard normal CDF and phi its density:
 *   Phi(x) = 0.5 (1 + erf(x / sqrt(2))),   phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * Written in PyTorch's order of operations (x * 0.5 * (1 + erf(x / sqrt 2))),
 * so that the double build agrees with torch.float64 to the last bit or
 * two.  grad_in_place: backward may give x and y one gradient buffer,
 * which then turns from dy into dx in place (src/core/graph.c).  The kernel
 * room's GELU keeps dy/dx from the forward, which has erf's exp at hand. */
#include "core/elementwise.h"

#include <math.h>

/* C11 has no M_SQRT1_2 or M_PI (they are POSIX/XSI extensions). */
#define SQRT1_2 0.70710678118654752440      /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */

/* Phi(x) = 0.5 (1 + erf(x / sqrt 2)), for x >= 0 as PyTorch writes it;
 * for x < 0 as 0.5 erfc(-x / sqrt 2), the same number without 1 + erf's
 * cancellation, which leaves 0 below x = -8.3 in double (the float
 * build's GELU kept its tail: tests/edge/float_edges.c compares them). */
static double Phi(double x) { return x >= 0 ? 0.5 * (1 + erf(x * SQRT1_2)) : 0.5 * erfc(-x * SQRT1_2); }

/* y = x Phi(x) */
static ag_real gelu_f(ag_real x) { return (ag_real)(x >= 0 ? x * 0.5 * (1 + erf(x * SQRT1_2)) : x * Phi(x)); }

/* dy/dx = Phi(x) + x Phi'(x) = Phi(x) + x phi(x)   (product rule; Phi' = phi) */
static ag_real gelu_df(ag_real x, ag_real y)
{
    (void)y;
    return (ag_real)(Phi(x) + x * (exp(-0.5 * x * x) * INV_SQRT_2PI));
}

ag_real ag__gelu_value(ag_real x) { return gelu_f(x); }
ag_real ag__gelu_slope(ag_real x) { return gelu_df(x, 0); }

static ag_tensor *case_gelu(ag_graph *g, ag_tensor *const *in) { return ag_gelu(g, in[0]); }

static const ag_op_case cases[] = {
    {"gelu [3, 4]", 1, {2}, {{3, 4}}, -3, 3, 0, case_gelu},
    {"gelu [2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -3, 3, 0, case_gelu},
    {"gelu [] scalar", 1, {0}, {{0}}, -3, 3, 0, case_gelu},
};

AG_UNARY_OP(gelu, AG_OP_GELU, .grad_in_place = true)
