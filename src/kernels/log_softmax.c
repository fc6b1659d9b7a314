/* kernels/log_softmax.c: log-softmax's rows, fast (the math and the
 * reference are ops/log_softmax.c): the row max and the sum of exps by
 * the shared row kernels (kernels/rows.c), then the shift in blocks of
 * 16 that -O2 vectorises (core/blocks.h), one clone per instruction set
 * (AG_ISA_CLONES), all giving the same bits. */
#include "core/blocks.h"
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

/* y_i = x_i - m - lse for i < n */
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

bool ag__k_log_softmax_forward(size_t rows, size_t n, const ag_real *x, ag_real *y)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * n;
        ag_real *yr = y + r * n;
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
    return true;
}

bool ag__k_log_softmax_backward(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
{
    ag__log_softmax_grad_rows(rows, n, y, dy, dx, fresh);
    return true;
}
