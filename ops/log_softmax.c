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
 *           that was all -inf gets a zero gradient.
 *
 * The fast rows are src/kernels/log_softmax.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

/* The reference forward, row by row (a NaN or +inf anywhere in a row
 * makes m or the sum NaN or inf, and so the whole row NaN). */
static void forward_ref(size_t rows, size_t n, const ag_real *x, ag_real *y)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * n;
        ag_real m = -INFINITY, sum = 0;
        bool nan = false;
        for (size_t i = 0; i < n; i++) nan |= isnan(xr[i]) || xr[i] == INFINITY, m = xr[i] > m ? xr[i] : m;
        for (size_t i = 0; i < n; i++) sum += (ag_real)exp((double)(xr[i] - m));
        ag_real lse = (ag_real)log((double)sum);
        for (size_t i = 0; i < n; i++) y[r * n + i] = nan ? NAN : m == -INFINITY ? -INFINITY : xr[i] - m - lse;
    }
}

/* The reference backward, adding into dx; a row all -inf (masked: y is
 * -inf throughout) gets nothing. */
static void backward_ref(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real sum = 0;
        bool masked = true;
        for (size_t j = 0; j < n; j++) sum += dyr[j], masked &= yr[j] == -INFINITY;
        for (size_t i = 0; !masked && i < n; i++) dx[r * n + i] += dyr[i] - (ag_real)exp((double)yr[i]) * sum;
    }
}

ag_tensor *ag_log_softmax(ag_graph *g, ag_tensor *x)
{
    if (!ag__ok(g, "log_softmax", 1, x)) return NULL;
    ag_tensor *y = ag__node(g, AG_OP_LOG_SOFTMAX, x->ndim, x->shape, 1, &x);
    if (!y || y->size == 0) return y;
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1;
    if (!(ag__fast() && ag__k_log_softmax_forward(x->size / n, n, x->data, y->data)))
        forward_ref(x->size / n, n, x->data, y->data);
    return y;
}

static void log_softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh = false, fast = ag__fast();
    ag_real *dx = fast ? ag__grad_fresh(g, x, &fresh) : ag__grad(g, x);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1;
    if (!(fast && ag__k_log_softmax_backward(y->size / n, n, y->data, y->grad, dx, fresh)))
        backward_ref(y->size / n, n, y->data, y->grad, dx);
}

static ag_tensor *case_log_softmax(ag_graph *g, ag_tensor *const *in) { return ag_log_softmax(g, in[0]); }

static const ag_op_case cases[] = {
    {"[3, 5]", 1, {2}, {{3, 5}}, -3, 3, 0, case_log_softmax},
    {"[2, 2, 4]", 1, {3}, {{2, 2, 4}}, -3, 3, 0, case_log_softmax},
    {"[4, 1] size-1 rows", 1, {2}, {{4, 1}}, -3, 3, 0, case_log_softmax},
    {"[1, 6] one row", 1, {2}, {{1, 6}}, -3, 3, 0, case_log_softmax},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"logits in [70, 90]", 1, {2}, {{3, 5}}, 70, 90, 0, case_log_softmax},
    {"logits in [-90, -70]", 1, {2}, {{3, 5}}, -90, -70, 0, case_log_softmax},
    {"logits in [-80, 80]", 1, {2}, {{3, 5}}, -80, 80, 0, case_log_softmax},
    {"logits in [-1e4, 1e4]", 1, {2}, {{3, 5}}, -1e4, 1e4, 0, case_log_softmax},
};

const ag_op_desc ag_op_log_softmax = {.name = "log_softmax", .backward = log_softmax_backward, AG_CASES(cases),
    AG_EDGES(edges)};
