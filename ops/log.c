/* ops/log.c: y = log(x), the natural logarithm, element-wise.
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = log(x[i])
 * backward: dx[i] += dy[i] / x[i]
 *
 * Outside the domain the values are libm's (and PyTorch's): log(0) = -inf,
 * log(x < 0) = NaN.  The gradient there is what dy / x gives (+-inf at 0,
 * a finite number for x < 0); no error is recorded, since checking every
 * element would cost a pass and PyTorch does not either. */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

/* The float build takes the vectorised log (src/kernels/fastmath.c, within
 * 1 ulp, the same values outside the domain); the double build is libm's. */
static void log_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) y[i] = log(x[i]);
#else
    ag__log_floats(n, x, y);
#endif
}

/* y = log(x)  ->  dy/dx = 1 / x. */
static inline ag_real log_dx(ag_real x, ag_real y, ag_real dy) { return (void)y, dy / x; }

AG_ISA_MAP_GRAD(log_grad, log_dx)

static void log_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                    const double *farg)
{
    (void)farg;
    log_grad(n, x, y, dy, dx, fresh);
}

ag_tensor *ag_log(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_LOG, x, log_fwd, 0); }

static void log_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, log_bwd); }

static ag_tensor *case_log(ag_graph *g, ag_tensor *const *in) { return ag_log(g, in[0]); }

/* Inputs in [0.5, 2]: inside the domain and away from the pole at 0. */
static const ag_op_case cases[] = {
    {"log [2, 3]", 1, {2}, {{2, 3}}, 0.5, 2, 0, case_log},
    {"log [1, 3, 1] size-1", 1, {3}, {{1, 3, 1}}, 0.5, 2, 0, case_log},
    {"log [] scalar", 1, {0}, {{0}}, 0.5, 2, 0, case_log},
};

const ag_op_desc ag_op_log = {.name = "log", .backward = log_backward, AG_CASES(cases)};
