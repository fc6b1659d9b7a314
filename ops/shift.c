/* ops/shift.c: y = x + c for a real number c (farg[0]).
 *
 *   x [...] -> y [...]
 *
 * forward:  y[i] = x[i] + c
 * backward: dx[i] += dy[i]
 *
 * In the float build c is rounded to float first, as PyTorch does when a
 * Python number is added to a float tensor. */
#include "core/internal.h"

static void shift_fwd(size_t n, const ag_real *x, ag_real *y, const double *farg)
{
    ag_real c = (ag_real)farg[0];
    for (size_t i = 0; i < n; i++) y[i] = x[i] + c;
}

/* y = x + c  ->  dy/dx = 1. */
static void shift_bwd(size_t n, const ag_real *x, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh,
                      const double *farg)
{
    (void)x, (void)y, (void)farg;
    if (fresh)
        memcpy(dx, dy, n * sizeof *dx);
    else
        for (size_t i = 0; i < n; i++) dx[i] += dy[i];
}

ag_tensor *ag_shift(ag_graph *g, ag_tensor *x, double c) { return ag__unary(g, AG_OP_SHIFT, x, shift_fwd, c); }

static void shift_backward(ag_graph *g, ag_tensor *y) { ag__unary_backward(g, y, shift_bwd); }

static ag_tensor *case_shift(ag_graph *g, ag_tensor *const *in) { return ag_shift(g, in[0], 1.5); }

static const ag_op_case cases[] = {
    {"[2, 3] + 1.5", 1, {2}, {{2, 3}}, -1, 1, 0, case_shift},
    {"[1, 4] + 1.5 size-1", 1, {2}, {{1, 4}}, -1, 1, 0, case_shift},
    {"[] + 1.5 scalar", 1, {0}, {{0}}, -1, 1, 0, case_shift},
};

const ag_op_desc ag_op_shift = {.name = "shift", .backward = shift_backward, AG_CASES(cases)};
