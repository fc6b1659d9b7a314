/* ops/log_softmax.c: y = log(softmax(x)) over the last axis, computed
 * directly (never as log of a softmax that may have underflowed to 0).
 *
 *   x [..., N] -> y [..., N]
 *
 * forward:  m = max_j x_j;  y_i = x_i - m - log(sum_j exp(x_j - m))
 *           (the row max keeps exp from overflowing; the largest term of the
 *           sum is exp(0) = 1, so the log is finite).  A row that is all
 *           -inf gives -inf everywhere, never NaN; a row holding a NaN or
 *           +inf gives NaN everywhere (as in PyTorch).
 * backward: dx_i = dy_i - softmax(x)_i * sum_j dy_j,  softmax(x)_i = exp(y_i)
 *           (y_i = x_i - lse(x) and d lse / d x_i = softmax(x)_i).  A row
 *           that was all -inf gets a zero gradient. */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

/* y_i = x_i - m - lse for i < n, in blocks of 16 that -O2 vectorises
 * (core/blocks.h), then the rest; one clone per instruction set
 * (AG_ISA_CLONES), all giving the same bits. */
#define SHIFT_PARAMS (size_t n, const ag_real *x, ag_real m, ag_real lse, ag_real *y)
static inline AG_ALWAYS_INLINE void shift_row SHIFT_PARAMS
{
    size_t i = 0;
    for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
        ag_real t[AG_BLOCK];
        for (int l = 0; l < AG_BLOCK; l++) t[l] = x[i + l] - m - lse;
        memcpy(y + i, t, sizeof t);
    }
    for (; i < n; i++) y[i] = x[i] - m - lse;
}
AG_ISA_CLONES(void, shift_row, SHIFT_PARAMS, shift_row(n, x, m, lse, y))

ag_tensor *ag_log_softmax(ag_graph *g, ag_tensor *x)
{
    if (!ag__ok(g, "log_softmax", 1, x)) return NULL;
    ag_tensor *y = ag__node(g, AG_OP_LOG_SOFTMAX, x->ndim, x->shape, 1, &x);
    if (!y || y->size == 0) return y;
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1, rows = x->size / n;
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x->data + r * n;
        ag_real *yr = y->data + r * n;
        ag_real m = ag__row_max(n, xr);
        if (m == -INFINITY) { /* fully masked row: log(0) */
            for (size_t i = 0; i < n; i++) yr[i] = -INFINITY;
            continue;
        }
        /* sum_j exp(x_j - m), >= 1 (yr holds the terms for a moment), and
         * its log: log-sum-exp minus m, one libm call a row */
        ag_real lse = (ag_real)log(ag__exp_sum(n, xr, m, yr));
        AG_ISA_CALL(shift_row, (n, xr, m, lse, yr));
    }
    return y;
}

static void log_softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1;
    ag__log_softmax_grad_rows(y->size / n, n, y->data, y->grad, dx, fresh);
}

static ag_tensor *case_log_softmax(ag_graph *g, ag_tensor *const *in) { return ag_log_softmax(g, in[0]); }

static const ag_op_case cases[] = {
    {"[3, 5]", 1, {2}, {{3, 5}}, -3, 3, 0, case_log_softmax},
    {"[2, 2, 4]", 1, {3}, {{2, 2, 4}}, -3, 3, 0, case_log_softmax},
    {"[4, 1] size-1 rows", 1, {2}, {{4, 1}}, -3, 3, 0, case_log_softmax},
    {"[1, 6] one row", 1, {2}, {{1, 6}}, -3, 3, 0, case_log_softmax},
};

const ag_op_desc ag_op_log_softmax = {.name = "log_softmax", .backward = log_softmax_backward, AG_CASES(cases)};
