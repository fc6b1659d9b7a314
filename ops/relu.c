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
#include "core/internal.h"

/* Let the compiler turn the selects below (mask ? a : b) into vector blends:
 * nothing here reads the floating-point exception flags, which is all that
 * -ftrapping-math protects, and it keeps GCC from if-converting them. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

static void relu_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    /* written x < 0 (not x > 0) so that a NaN is kept, not turned into 0 */
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] < 0 ? 0 : x[i];
}

/* y = max(x, 0)  ->  dy/dx = 1 where x > 0, and 0 where x <= 0. */
static void relu_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx,
                     const double *farg)
{
    (void)y, (void)farg;
    /* both loads before the select, so it becomes a vector blend, not a
     * branch that mispredicts on half of the elements */
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        ag_real xi = x[i], g = dy[i];
        dx[i] += xi > 0 ? g : 0;
    }
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
