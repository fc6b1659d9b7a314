/* ops/tanh.c: y = tanh(x), element-wise.
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = tanh(x[i])
 * backward: dx[i] += dy[i] * (1 - y[i]^2)
 *
 * tanh saturates to +-1 for large |x| (no overflow), where the gradient
 * goes to 0. */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

/* The float build takes the vectorised tanh (src/kernels/fastmath.c, within
 * 2 ulp); the double build is libm's. */
static void tanh_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) y[i] = tanh(x[i]);
#else
    ag__tanh_floats(n, x, y);
#endif
}

/* y = tanh(x)  ->  dy/dx = 1 - tanh(x)^2 = 1 - y^2, from the saved output. */
static inline ag_real tanh_dx(ag_real x, ag_real y, ag_real dy) { return (void)x, dy * (1 - y * y); }

AG_ISA_MAP_GRAD(tanh_grad, tanh_dx)

static void tanh_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                     const double *farg)
{
    (void)farg;
    tanh_grad(n, x, y, dy, dx, fresh);
}

ag_tensor *ag_tanh(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_TANH, x, tanh_fwd, 0); }

static void tanh_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, tanh_bwd); }

static ag_tensor *case_tanh(ag_graph *g, ag_tensor *const *in) { return ag_tanh(g, in[0]); }

static const ag_op_case cases[] = {
    {"tanh [2, 3]", 1, {2}, {{2, 3}}, -2, 2, 0, case_tanh},
    {"tanh [2, 1, 2] size-1", 1, {3}, {{2, 1, 2}}, -2, 2, 0, case_tanh},
    {"tanh [] scalar", 1, {0}, {{0}}, -2, 2, 0, case_tanh},
};

const ag_op_desc ag_op_tanh = {.name = "tanh", .backward = tanh_backward, AG_CASES(cases)};
