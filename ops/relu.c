/* ops/relu.c: y = max(x, 0), element-wise.
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = x[i] < 0 ? 0 : x[i]
 * backward: dx[i] += x[i] > 0 ? dy[i] : 0
 *
 * At exactly x = 0 relu has a kink; its gradient there is taken as 0, as
 * PyTorch does.  A NaN input passes through as NaN (also as PyTorch), and
 * gets no gradient. */
/* Let the compiler turn the selects below (mask ? a : b) into vector blends:
 * nothing here reads the floating-point exception flags, which is all that
 * -ftrapping-math protects, and it keeps GCC from if-converting them (before
 * core/blocks.h, whose loops must be compiled with the same options). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "core/blocks.h"
#include "core/internal.h"

/* written x < 0 (not x > 0) so that a NaN is kept, not turned into 0 */
static inline ag_real relu_of(ag_real x) { return x < 0 ? 0 : x; }

/* y = max(x, 0)  ->  dy/dx = 1 where x > 0, and 0 where x <= 0. */
static inline ag_real relu_dx(ag_real x, ag_real y, ag_real dy) { return (void)y, x > 0 ? dy : 0; }

/* one clone of each loop per instruction set, as wide as the CPU's vectors */
AG_ISA_MAP(relu_map, relu_of)
AG_ISA_MAP_GRAD(relu_grad, relu_dx)

static void relu_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    relu_map(n, x, y);
}

static void relu_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                     const double *farg)
{
    (void)farg;
    relu_grad(n, x, y, dy, dx, fresh);
}

ag_tensor *ag_relu(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_RELU, x, relu_fwd, 0); }

static void relu_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, relu_bwd); }

static ag_tensor *case_relu(ag_graph *g, ag_tensor *const *in) { return ag_relu(g, in[0]); }

/* gap 0.1: inputs stay at least 0.1 from the kink at 0, far beyond the
 * finite-difference step. */
static const ag_op_case cases[] = {
    {"relu [3, 4]", 1, {2}, {{3, 4}}, -1, 1, 0.1, case_relu},
    {"relu [1, 5] size-1", 1, {2}, {{1, 5}}, -1, 1, 0.1, case_relu},
    {"relu [] scalar", 1, {0}, {{0}}, -1, 1, 0.1, case_relu},
};

const ag_op_desc ag_op_relu = {.name = "relu", .backward = relu_backward, AG_CASES(cases)};
