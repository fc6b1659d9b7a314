/* ops/sqrt.c: y = sqrt(x), element-wise.
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = sqrt(x[i])
 * backward: dx[i] += dy[i] / (2 y[i])
 *
 * At x = 0 the derivative is infinite: y = 0 and dy / (2 y) gives +-inf
 * (NaN when dy is 0 too), as in PyTorch.  sqrt(x < 0) is NaN (libm), and so
 * is its gradient.  Nothing is recorded as an error.  Keep inputs off 0
 * (add an eps first) when a finite gradient is needed. */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

/* sqrt is correctly rounded in both precisions, and one vector instruction
 * (the library is built with -fno-math-errno, so that sqrt of a negative
 * need not call libm to set errno). */
#ifdef AG_DOUBLE
static inline ag_real sqrt_of(ag_real x) { return sqrt(x); }
#else
static inline ag_real sqrt_of(ag_real x) { return sqrtf(x); }
#endif

AG_ISA_MAP(sqrt_map, sqrt_of)

static void sqrt_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    sqrt_map(n, x, y);
}

/* y = sqrt(x)  ->  dy/dx = 1 / (2 sqrt(x)) = 1 / (2 y), from the saved output. */
static inline ag_real sqrt_dx(ag_real x, ag_real y, ag_real dy) { return (void)x, dy / (2 * y); }

AG_ISA_MAP_GRAD(sqrt_grad, sqrt_dx)

static void sqrt_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                     const double *farg)
{
    (void)farg;
    sqrt_grad(n, x, y, dy, dx, fresh);
}

ag_tensor *ag_sqrt(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_SQRT, x, sqrt_fwd, 0); }

static void sqrt_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, sqrt_bwd); }

static ag_tensor *case_sqrt(ag_graph *g, ag_tensor *const *in) { return ag_sqrt(g, in[0]); }

/* Inputs in [0.5, 2]: inside the domain and away from the kink at 0. */
static const ag_op_case cases[] = {
    {"sqrt [2, 3]", 1, {2}, {{2, 3}}, 0.5, 2, 0, case_sqrt},
    {"sqrt [4, 1] size-1", 1, {2}, {{4, 1}}, 0.5, 2, 0, case_sqrt},
    {"sqrt [] scalar", 1, {0}, {{0}}, 0.5, 2, 0, case_sqrt},
};

const ag_op_desc ag_op_sqrt = {.name = "sqrt", .backward = sqrt_backward, AG_CASES(cases)};
