/* ops/gelu.c: y = gelu(x) = x * Phi(x), element-wise, in the exact erf form
 * (PyTorch's default nn.GELU(), not the tanh approximation).
 *
 *   x [...] -> y [...]
 *
 * Phi is the standard normal CDF and phi its density:
 *   Phi(x) = 0.5 * (1 + erf(x / sqrt(2))),   phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * forward:  y[i] = x[i] * Phi(x[i])
 * backward: dx[i] += dy[i] * (Phi(x[i]) + x[i] * phi(x[i]))
 *
 * Written in PyTorch's order of operations (x * 0.5 * (1 + erf(x / sqrt 2))),
 * so that the double build agrees with torch.float64 to the last bit or
 * two. */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

/* C11 has no M_SQRT1_2 or M_PI (they are POSIX/XSI extensions). */
#define SQRT1_2 0.70710678118654752440       /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794  /* 1 / sqrt(2 pi) */

/* The float build takes the vectorised kernel (src/core/fastmath.c):
 * Phi through erfc, so that the left tail keeps its relative precision;
 * the double build is libm's erf, as PyTorch's float64. */
static void gelu_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) y[i] = x[i] * 0.5 * (1 + erf(x[i] * SQRT1_2));
#else
    ag__gelu_floats(n, x, y);
#endif
}

/* y = x * Phi(x)  ->  dy/dx = Phi(x) + x * Phi'(x) = Phi(x) + x * phi(x)
 * (product rule; Phi' = phi).  The float build reads Phi(x) = y / x off the
 * forward's output and computes only phi (one exp); the double build
 * computes both again from x, at full precision. */
#ifdef AG_DOUBLE
static inline ag_real gelu_dx(ag_real x, ag_real y, ag_real dy)
{
    (void)y;
    double cdf = 0.5 * (1 + erf(x * SQRT1_2)), pdf = exp(-0.5 * x * x) * INV_SQRT_2PI;
    return dy * (cdf + x * pdf);
}
AG_ISA_MAP_GRAD(gelu_grad, gelu_dx)
#endif

static void gelu_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                     const double *farg)
{
    (void)farg;
#ifdef AG_DOUBLE
    gelu_grad(n, x, y, dy, dx, fresh);
#else
    ag__gelu_grad_floats(n, x, y, dy, dx, fresh);
#endif
}

ag_tensor *ag_gelu(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_GELU, x, gelu_fwd, 0); }

static void gelu_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, gelu_bwd); }

static ag_tensor *case_gelu(ag_graph *g, ag_tensor *const *in) { return ag_gelu(g, in[0]); }

static const ag_op_case cases[] = {
    {"gelu [3, 4]", 1, {2}, {{3, 4}}, -3, 3, 0, case_gelu},
    {"gelu [2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -3, 3, 0, case_gelu},
    {"gelu [] scalar", 1, {0}, {{0}}, -3, 3, 0, case_gelu},
};

const ag_op_desc ag_op_gelu = {.name = "gelu", .backward = gelu_backward, AG_CASES(cases)};
