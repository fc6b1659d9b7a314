/* ops/scale.c: y = s * x for a real number s (farg[0]).
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = s * x[i]
 * backward: dx[i] += s * dy[i]
 *
 * In the float build s is rounded to float first, as PyTorch does when a
 * float tensor is multiplied by a Python number. */
#include "core/internal.h"

static void scale_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    ag_real s = (ag_real)farg[0];
    for (size_t i = 0; i < n; i++) y[i] = s * x[i];
}

/* y = s * x  ->  dy/dx = s. */
static void scale_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                      const double *farg)
{
    (void)x, (void)y;
    ag_real s = (ag_real)farg[0];
    if (fresh)
        for (size_t i = 0; i < n; i++) dx[i] = s * dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] += s * dy[i];
}

ag_tensor *ag_scale(ag_graph *g, ag_tensor *x, double s) { return ag__unary(g, AG_OP_SCALE, x, scale_fwd, s); }

static void scale_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, scale_bwd); }

static ag_tensor *case_scale(ag_graph *g, ag_tensor *const *in) { return ag_scale(g, in[0], 2.5); }
static ag_tensor *case_neg_scale(ag_graph *g, ag_tensor *const *in) { return ag_scale(g, in[0], -0.75); }

static const ag_op_case cases[] = {
    {"2.5 * [2, 3]", 1, {2}, {{2, 3}}, -1, 1, 0, case_scale},
    {"-0.75 * [3, 1, 2] size-1", 1, {3}, {{3, 1, 2}}, -1, 1, 0, case_neg_scale},
    {"2.5 * [] scalar", 1, {0}, {{0}}, -1, 1, 0, case_scale},
};

const ag_op_desc ag_op_scale = {.name = "scale", .backward = scale_backward, AG_CASES(cases)};
