/* ops/exp.c: y = exp(x), element-wise.
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = exp(x[i])
 * backward: dx[i] += dy[i] * y[i]        (exp is its own derivative)
 *
 * Large x overflows to +inf and very negative x underflows to 0, as libm
 * (and PyTorch) do. */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

/* The float build takes the vectorised exp (src/kernels/fastmath.c, within
 * 1 ulp); the double build is exactly libm's. */
static void exp_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) y[i] = exp(x[i]);
#else
    ag__exp_floats(n, x, y);
#endif
}

/* y = exp(x)  ->  dy/dx = exp(x) = y, so the saved output is reused. */
static inline ag_real exp_dx(ag_real x, ag_real y, ag_real dy) { return (void)x, dy * y; }

AG_ISA_MAP_GRAD(exp_grad, exp_dx)

static void exp_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                    const double *farg)
{
    (void)farg;
    exp_grad(n, x, y, dy, dx, fresh);
}

ag_tensor *ag_exp(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_EXP, x, exp_fwd, 0); }

static void exp_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, exp_bwd); }

static ag_tensor *case_exp(ag_graph *g, ag_tensor *const *in) { return ag_exp(g, in[0]); }

static const ag_op_case cases[] = {
    {"exp [2, 3]", 1, {2}, {{2, 3}}, -2, 2, 0, case_exp},
    {"exp [3, 1] size-1", 1, {2}, {{3, 1}}, -2, 2, 0, case_exp},
    {"exp [] scalar", 1, {0}, {{0}}, -2, 2, 0, case_exp},
};

const ag_op_desc ag_op_exp = {.name = "exp", .backward = exp_backward, AG_CASES(cases)};
