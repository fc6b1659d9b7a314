/* ops/clamp.c: y = min(max(x, lo), hi), element-wise (torch.clamp).
 *
 *   x [...] -> y (x's shape); lo and hi are numbers, either may be infinite
 *   (-INFINITY or INFINITY: no bound on that side)
 *
 * forward:  y_i = min(max(x_i, lo), hi)
 * backward: dx_i += (lo <= x_i <= hi) ? dy_i : 0
 *           (PyTorch's clamp_backward: the gradient passes where x is inside
 *           the closed interval, boundaries included, and is 0 outside,
 *           where y is a constant)
 *
 * As PyTorch: lo > hi gives y = hi everywhere, with zero gradient; a NaN in
 * x stays NaN in y and gets zero gradient (NaN <= hi is false).  A NaN
 * bound is an error.  farg[0] = lo, farg[1] = hi. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

ag_tensor *ag_clamp(ag_graph *g, ag_tensor *x, double lo, double hi)
{
    if (!ag__ok(g, "clamp", 1, x)) return NULL;
    if (isnan(lo) || isnan(hi)) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_ARG, "clamp: bounds [%g, %g] for %s: a bound is NaN", lo, hi,
                      ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    ag_tensor *y = ag__node(g, AG_OP_CLAMP, x->ndim, x->shape, 1, &x);
    if (!y) return NULL;
    ag__impl(y)->farg[0] = lo;
    ag__impl(y)->farg[1] = hi;
    ag_real l = (ag_real)lo, h = (ag_real)hi;
    for (size_t i = 0; i < y->size; i++) {
        ag_real v = x->data[i];
        if (v < l) v = l; /* max(x, lo); a NaN passes */
        if (v > h) v = h; /* min(., hi) */
        y->data[i] = v;
    }
    return y;
}

static void clamp_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    ag_real l = (ag_real)ag__impl(y)->farg[0], h = (ag_real)ag__impl(y)->farg[1];
    /* dx += [lo <= x <= hi] dy */
    for (size_t i = 0; i < y->size; i++)
        if (x->data[i] >= l && x->data[i] <= h) dx[i] += y->grad[i];
}

/* clamp(x + c) with c a scramble of 0, 0.25, ..., 1 and x drawn in [0, 0.1]:
 * the values sit in [0, 0.1], [0.25, 0.35], ..., never within 0.05 of the
 * bounds 0.2 and 0.7, so no element crosses one within a finite-difference
 * step. */
static ag_tensor *off_bounds(ag_graph *g, ag_tensor *x)
{
    if (!x) return NULL; /* the op then says that its x is missing */
    ag_tensor *c = ag_tensor_new(g, x->ndim, x->shape);
    if (!c) return NULL;
    for (size_t j = 0; j < c->size; j++) c->data[j] = (ag_real)(0.25 * (double)((j * 3) % 5));
    return ag_add(g, x, c);
}

static ag_tensor *case_both(ag_graph *g, ag_tensor *const *in) { return ag_clamp(g, off_bounds(g, in[0]), .2, .7); }
static ag_tensor *case_lo(ag_graph *g, ag_tensor *const *in) { return ag_clamp(g, off_bounds(g, in[0]), .2, INFINITY); }
static ag_tensor *case_hi(ag_graph *g, ag_tensor *const *in)
{
    return ag_clamp(g, off_bounds(g, in[0]), -INFINITY, .7);
}
static ag_tensor *case_empty(ag_graph *g, ag_tensor *const *in) { return ag_clamp(g, off_bounds(g, in[0]), .7, .2); }

static const ag_op_case cases[] = {
    {"[2, 5] into [0.2, 0.7]", 1, {2}, {{2, 5}}, 0, 0.1, 0, case_both},
    {"[3, 1, 4] into [0.2, inf) size-1 axis", 1, {3}, {{3, 1, 4}}, 0, 0.1, 0, case_lo},
    {"[1, 5] into (-inf, 0.7]", 1, {2}, {{1, 5}}, 0, 0.1, 0, case_hi},
    {"[2, 5] lo 0.7 > hi 0.2: all hi, no grad", 1, {2}, {{2, 5}}, 0, 0.1, 0, case_empty},
};

const ag_op_desc ag_op_clamp = {.name = "clamp", .backward = clamp_backward, AG_CASES(cases), .elementwise = true};
