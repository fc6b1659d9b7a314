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
 *           (the Jacobian diag(y) - y y^T applied to dy)
 *
 * The fast rows are src/kernels/softmax.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

/* The reference forward of one row (y may be x); attention's and
 * masked_softmax's references use it too. */
void ag__softmax_row_ref(size_t n, const ag_real *x, ag_real *y)
{
    ag_real m = -INFINITY, sum = 0;
    bool nan = false;
    for (size_t i = 0; i < n; i++) nan |= isnan(x[i]) || x[i] == INFINITY, m = x[i] > m ? x[i] : m;
    for (size_t i = 0; i < n; i++) {
        y[i] = nan ? NAN : m == -INFINITY ? 0 : (ag_real)exp((double)(x[i] - m));
        sum += y[i];
    }
    for (size_t i = 0; sum > 0 && i < n; i++) y[i] /= sum;
}

/* The reference backward, adding into dx. */
static void backward_ref(size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real dot = 0;
        for (size_t j = 0; j < n; j++) dot += dyr[j] * yr[j];
        for (size_t i = 0; i < n; i++) dx[r * n + i] += yr[i] * (dyr[i] - dot);
    }
}

ag_tensor *ag_softmax(ag_graph *g, ag_tensor *x)
{
    if (!ag__ok(g, "softmax", 1, x)) return NULL;
    ag_tensor *y = ag__node(g, AG_OP_SOFTMAX, x->ndim, x->shape, 1, &x);
    if (!y || y->size == 0) return y;
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1;
    if (!(ag__fast() && ag__k_softmax_forward(x->size / n, n, x->data, y->data)))
        for (size_t r = 0; r < x->size / n; r++) ag__softmax_row_ref(n, x->data + r * n, y->data + r * n);
    return y;
}

static void softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh = false, fast = ag__fast();
    ag_real *dx = fast ? ag__grad_fresh(g, x, &fresh) : ag__grad(g, x);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1;
    if (!(fast && ag__k_softmax_backward(y->size / n, n, y->data, y->grad, dx, fresh)))
        backward_ref(y->size / n, n, y->data, y->grad, dx);
}

static ag_tensor *case_softmax(ag_graph *g, ag_tensor *const *in) { return ag_softmax(g, in[0]); }

static const ag_op_case cases[] = {
    {"[3, 5]", 1, {2}, {{3, 5}}, -3, 3, 0, case_softmax},
    {"[2, 2, 4]", 1, {3}, {{2, 2, 4}}, -3, 3, 0, case_softmax},
    {"[4, 1] size-1 rows", 1, {2}, {{4, 1}}, -3, 3, 0, case_softmax},
    {"[3, 37] blocks of 16 and a rest", 1, {2}, {{3, 37}}, -3, 3, 0, case_softmax},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"logits in [70, 90]", 1, {2}, {{3, 5}}, 70, 90, 0, case_softmax},
    {"logits in [-90, -70]", 1, {2}, {{3, 5}}, -90, -70, 0, case_softmax},
    {"logits in [-80, 80]", 1, {2}, {{3, 5}}, -80, 80, 0, case_softmax},
    {"logits in [-1e4, 1e4]", 1, {2}, {{3, 5}}, -1e4, 1e4, 0, case_softmax},
};

const ag_op_desc ag_op_softmax = {.name = "softmax", .backward = softmax_backward, AG_CASES(cases), AG_EDGES(edges)};
