/* ops/neg.c: y = -x.
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = -x[i]
 * backward: dx[i] -= dy[i] */
#include "core/internal.h"

static void neg_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    (void)farg;
    for (size_t i = 0; i < n; i++) y[i] = -x[i];
}

/* y = -x  ->  dy/dx = -1. */
static void neg_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                    const double *farg)
{
    (void)x, (void)y, (void)farg;
    if (fresh)
        for (size_t i = 0; i < n; i++) dx[i] = -dy[i];
    else
        for (size_t i = 0; i < n; i++) dx[i] -= dy[i];
}

ag_tensor *ag_neg(ag_graph *g, ag_tensor *x) { return ag__unary(g, AG_OP_NEG, x, neg_fwd, 0); }

static void neg_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, neg_bwd); }

static ag_tensor *case_neg(ag_graph *g, ag_tensor *const *in) { return ag_neg(g, in[0]); }

static const ag_op_case cases[] = {
    {"-[2, 3]", 1, {2}, {{2, 3}}, -1, 1, 0, case_neg},
    {"-[2, 1, 3] size-1", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_neg},
    {"-[] scalar", 1, {0}, {{0}}, -1, 1, 0, case_neg},
};

const ag_op_desc ag_op_neg = {.name = "neg", .backward = neg_backward, AG_CASES(cases)};
