/* ops/gelu.c: y = gelu(x) = x * Phi(x), element-wise, in the exact erf form
 * (PyTorch's default nn.GELU(), not the tanh approximation).
 *
 *   x [...] -> y [...]
 *
 * Phi is the standard normal CDF and phi its density:
 *   Phi(x) = 0.5 * (1 + erf(x / sqrt(2))),   phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * forward:  y[i] = x[i] * Phi(x[i]);  when y requires grad, also
 *           s[i] = Phi(x[i]) + x[i] * phi(x[i])   (= dy[i] / dx[i])
 * backward: dx[i] += dy[i] * s[i]
 *
 * aux = s, one value per element, kept only when y requires grad (never in
 * no-grad mode): the forward holds the costly parts of both terms already
 * (erf's exp is phi's), so that backward is one pass that recomputes
 * nothing.  grad_in_place: backward may give x and y one gradient buffer,
 * which then turns from dy into dx in place (src/core/graph.c).
 *
 * Written in PyTorch's order of operations (x * 0.5 * (1 + erf(x / sqrt 2))),
 * so that the double build agrees with torch.float64 to the last bit or
 * two. */
#include "core/internal.h"

#include <math.h>

/* C11 has no M_SQRT1_2 or M_PI (they are POSIX/XSI extensions). */
#define SQRT1_2 0.70710678118654752440       /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794  /* 1 / sqrt(2 pi) */

/* y = x * Phi(x)  ->  dy/dx = Phi(x) + x * Phi'(x) = Phi(x) + x * phi(x)
 * (product rule; Phi' = phi), computed here, beside y, when s is not NULL:
 * in training, where backward will need it.  The float build takes the
 * vectorised kernel (src/kernels/fastmath.c): phi from one exp(-x^2 / 2),
 * and Phi's left tail as phi times the Mills ratio, so that it keeps its
 * relative precision.  The double build is libm's erf and exp, as PyTorch's
 * float64. */
static void gelu_fwd(size_t n, const ag_real *x, ag_real *y, ag_real *s)
{
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) {
        double e = erf(x[i] * SQRT1_2);
        y[i] = x[i] * 0.5 * (1 + e);
        if (s) s[i] = 0.5 * (1 + e) + x[i] * (exp(-0.5 * x[i] * x[i]) * INV_SQRT_2PI);
    }
#else
    if (s) ag__gelu_slope_floats(n, x, y, s);
    else ag__gelu_floats(n, x, y);
#endif
}

ag_tensor *ag_gelu(ag_graph *g, ag_tensor *x) { return ag__unary_slope(g, AG_OP_GELU, x, gelu_fwd); }

/* dx += dy * s, from the slope the forward kept; in place (dy's buffer
 * becomes dx's) where backward gave y and x one buffer */
static void gelu_backward(ag_graph *g, ag_tensor *y) { ag__unary_slope_backward(g, y); }

static ag_tensor *case_gelu(ag_graph *g, ag_tensor *const *in) { return ag_gelu(g, in[0]); }

static const ag_op_case cases[] = {
    {"gelu [3, 4]", 1, {2}, {{3, 4}}, -3, 3, 0, case_gelu},
    {"gelu [2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -3, 3, 0, case_gelu},
    {"gelu [] scalar", 1, {0}, {{0}}, -3, 3, 0, case_gelu},
};

const ag_op_desc ag_op_gelu = {.name = "gelu", .backward = gelu_backward, .grad_in_place = true, AG_CASES(cases)};
