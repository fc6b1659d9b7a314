/* ops/softmax.c: y = softmax(x) over the last axis.
 *
 *   x [..., N] -> y [..., N]
 *
 * forward:  m = max_j x_j;  y_i = exp(x_i - m) / sum_j exp(x_j - m)
 *           (subtracting the row max changes nothing mathematically and
 *           keeps exp from overflowing).  A row that is all -inf (every key
 *           masked) gives zeros, never NaN; a row holding a NaN or +inf
 *           gives NaN everywhere, as in PyTorch.
 * backward: dx_i = y_i * (dy_i - sum_j dy_j y_j)
 *           (the Jacobian diag(y) - y y^T applied to dy) */
#include "core/blocks.h"
#include "core/internal.h"

#include <math.h>

ag_tensor *ag_softmax(ag_graph *g, ag_tensor *x)
{
    if (!ag__ok(g, "softmax", 1, x)) return NULL;
    ag_tensor *y = ag__node(g, AG_OP_SOFTMAX, x->ndim, x->shape, 1, &x);
    if (!y || y->size == 0) return y;
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1;
    ag__softmax_rows(x->size / n, n, x->data, y->data);
    return y;
}

/* dx_i (+)= y_i (dy_i - sum_j dy_j y_j) over `rows` rows of n: stored into
 * a fresh dx (ag__grad_fresh: no zero-fill, no read), else added; in blocks
 * of 16 that -O2 vectorises (core/blocks.h), then the rest; one clone per
 * instruction set (AG_ISA_CLONES), all giving the same bits. */
#define ROWS_PARAMS (size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
static inline AG_ALWAYS_INLINE void backward_rows ROWS_PARAMS
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real *dxr = dx + r * n, dot = ag__dot(n, dyr, yr); /* sum_j dy_j y_j */
        size_t i = 0;
        for (; i + AG_BLOCK <= n; i += AG_BLOCK) {
            ag_real t[AG_BLOCK];
            if (fresh)
                for (int l = 0; l < AG_BLOCK; l++) t[l] = yr[i + l] * (dyr[i + l] - dot);
            else
                for (int l = 0; l < AG_BLOCK; l++) t[l] = dxr[i + l] + yr[i + l] * (dyr[i + l] - dot);
            memcpy(dxr + i, t, sizeof t);
        }
        for (; i < n; i++) dxr[i] = fresh ? yr[i] * (dyr[i] - dot) : dxr[i] + yr[i] * (dyr[i] - dot);
    }
}
AG_ISA_CLONES(void, backward_rows, ROWS_PARAMS, backward_rows(rows, n, y, dy, dx, fresh))

static void softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1;
    AG_ISA_CALL(backward_rows, (y->size / n, n, y->data, y->grad, dx, fresh));
}

static ag_tensor *case_softmax(ag_graph *g, ag_tensor *const *in) { return ag_softmax(g, in[0]); }

static const ag_op_case cases[] = {
    {"[3, 5]", 1, {2}, {{3, 5}}, -3, 3, 0, case_softmax},
    {"[2, 2, 4]", 1, {3}, {{2, 2, 4}}, -3, 3, 0, case_softmax},
    {"[4, 1] size-1 rows", 1, {2}, {{4, 1}}, -3, 3, 0, case_softmax},
};

const ag_op_desc ag_op_softmax = {.name = "softmax", .backward = softmax_backward, AG_CASES(cases)};
