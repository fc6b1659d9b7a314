/* ops/linear.c: the dense layer y = x W^T + b, as one op (PyTorch's
 * F.linear), and linear_add, the dense layer with a residual r added to
 * its output: y = r + (x W^T + b), a pre-norm block's x + proj(...).
 *
 *   x [..., I], W [O, I], b [O] or NULL -> y [..., O];  r, if any: y's shape
 *   (x is read as N = size / I rows of I values)
 *
 * forward:  y[n, o] = (sum_i x[n, i] W[o, i] + b[o]) + r[n, o]
 * backward: dr[n, o] += dy[n, o]
 *           dx[n, i] += sum_o dy[n, o] W[o, i]     dx = dy W      [N, O] x [O, I]
 *           dW[o, i] += sum_n dy[n, o] x[n, i]     dW = dy^T x    [O, N] x [N, I]
 *           db[o]    += sum_n dy[n, o]
 *
 * linear_add rounds as linear followed by add does: the product's sum,
 * then b, then r, and its backward runs add's part (dr) before linear's,
 * as the two nodes' backward would.  It saves add's pass
 * over y and, since r is its first input, the copy of dy: r may take dy's
 * buffer as its gradient, as add's first operand does (see
 * grad_passes_to_src0), unless r is also x, W or b of the op.
 *
 * The same as reshape(add(matmul(reshape(x, [N, I]), transpose(W)), b)),
 * without the copies of the two reshapes and of W^T, and without a
 * broadcasting add.  The fast code is src/kernels/linear.c.
 *
 * linear: src = {x, W, b};  linear_add: src = {r, x, W, b};  b may be NULL. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

/* The reference forward: y[n, o] = (sum_i x[n, i] W[o, i] + b[o]) + r[n, o]. */
static void forward_ref(int N, int I, int O, const ag_real *x, const ag_real *w, const ag_real *b,
                        const ag_real *r, ag_real *y)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            ag_real s = 0;
            for (int i = 0; i < I; i++) s += x[(size_t)n * I + i] * w[(size_t)o * I + i];
            if (b) s += b[o];
            y[(size_t)n * O + o] = r ? s + r[(size_t)n * O + o] : s;
        }
}

/* The reference backward, adding into dx, dW, db (NULL: not wanted). */
static void backward_ref(int N, int I, int O, const ag_real *dy, const ag_real *x, const ag_real *w, ag_real *dx,
                         ag_real *dw, ag_real *db)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            ag_real d = dy[(size_t)n * O + o];
            if (db) db[o] += d;
            for (int i = 0; i < I; i++) {
                if (dx) dx[(size_t)n * I + i] += d * w[(size_t)o * I + i];
                if (dw) dw[(size_t)o * I + i] += d * x[(size_t)n * I + i];
            }
        }
}

/* x [..., I], W [O, I], b [O] or NULL fit, and r (if given) has the
 * output's shape [..., O]; otherwise the error names them. */
static bool dense_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *w, const ag_tensor *b,
                       const ag_tensor *r)
{
    char sx[96], sw[96], sb[96], sr[96];
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: x %s, weight %s and bias %s do not fit x [..., I], W [O, I], b [O]", op,
                      ag_shape_str(x, sx, sizeof sx), ag_shape_str(w, sw, sizeof sw),
                      b ? ag_shape_str(b, sb, sizeof sb) : "none");
        return false;
    }
    bool same = r && r->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++)
        same = r->shape[d] == (d == x->ndim - 1 ? w->shape[0] : x->shape[d]);
    if (r && !same) {
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: the residual %s is not the shape of x %s times W^T %s", op,
                      ag_shape_str(r, sr, sizeof sr), ag_shape_str(x, sx, sizeof sx),
                      ag_shape_str(w, sw, sizeof sw));
        return false;
    }
    return true;
}

/* The node y [..., O] of op with inputs src, filled with x W^T + b (+ r). */
static ag_tensor *dense_node(ag_graph *g, int op, int nsrc, ag_tensor **src, ag_tensor *x, ag_tensor *w,
                             ag_tensor *b, ag_tensor *r)
{
    int I = w->shape[1], O = w->shape[0], shape[AG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = O;
    ag_tensor *y = ag__node(g, op, x->ndim, shape, nsrc, src);
    if (!y) return NULL;
    int N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    const ag_real *bd = b ? b->data : NULL, *rd = r ? r->data : NULL;
    if (ag__fast() && ag__k_linear_forward(g, N, I, O, x->data, w->data, bd, rd, y->data))
        return ag_graph_status(g) == AG_OK ? y : NULL;
    forward_ref(N, I, O, x->data, w->data, bd, rd, y->data);
    return y;
}

ag_tensor *ag__linear(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    if (!ag__ok(g, "linear", 2, x, w) || !dense_fits(g, "linear", x, w, b, NULL)) return NULL;
    ag_tensor *src[3] = {x, w, b};
    return dense_node(g, AG_OP_LINEAR, 3, src, x, w, b, NULL);
}

ag_tensor *ag__linear_add(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b, ag_tensor *r)
{
    if (!ag__ok(g, "linear_add", 3, x, w, r) || !dense_fits(g, "linear_add", x, w, b, r)) return NULL;
    ag_tensor *src[4] = {r, x, w, b};
    return dense_node(g, AG_OP_LINEAR_ADD, 4, src, x, w, b, r);
}

/* dx, dW and db of y = x W^T + b, from dy (y's gradient). */
static void dense_backward(ag_graph *g, const ag_real *dy, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    bool fresh = false, fast = ag__fast(); /* fresh: dx holds nothing yet, the product overwrites it */
    ag_real *dx = !x->requires_grad ? NULL : fast ? ag__grad_fresh(g, x, &fresh) : ag__grad(g, x);
    ag_real *dw = w->requires_grad ? ag__grad(g, w) : NULL;
    ag_real *db = b && b->requires_grad ? ag__grad(g, b) : NULL;
    if (ag_graph_status(g) != AG_OK) return;
    int I = w->shape[1], O = w->shape[0], N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    if (!(fast && ag__k_linear_backward(N, I, O, dy, x->data, w->data, dx, fresh, dw, db)))
        backward_ref(N, I, O, dy, x->data, w->data, dx, dw, db);
}

static void linear_backward(ag_graph *g, ag_tensor *y) { dense_backward(g, y->grad, y->src[0], y->src[1], y->src[2]); }

static void linear_add_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *r = y->src[0];
    /* y = ... + r:  dr += dy, before the rest, as add's backward runs
     * before linear's.  Nothing to do when r took dy's buffer. */
    if (r->requires_grad && r->grad != y->grad) {
        bool fresh = false, fast = ag__fast();
        ag_real *dr = fast ? ag__grad_fresh(g, r, &fresh) : ag__grad(g, r);
        if (!dr) return;
        if (fast) ag__grad_pass(y->size, y->grad, dr, fresh);
        else
            for (size_t i = 0; i < y->size; i++) dr[i] += y->grad[i];
    }
    dense_backward(g, y->grad, y->src[1], y->src[2], y->src[3]);
}

static ag_tensor *case_bias(ag_graph *g, ag_tensor *const *in) { return ag__linear(g, in[0], in[1], in[2]); }
static ag_tensor *case_nobias(ag_graph *g, ag_tensor *const *in) { return ag__linear(g, in[0], in[1], NULL); }

static const ag_op_case cases[] = {
    {"[3, 4] W [2, 4] b [2]", 3, {2, 2, 1}, {{3, 4}, {2, 4}, {2}}, -1, 1, 0, case_bias},
    {"[2, 3, 4] W [5, 4] b [5] batch axes", 3, {3, 2, 1}, {{2, 3, 4}, {5, 4}, {5}}, -1, 1, 0, case_bias},
    {"[4, 3] W [2, 3] no bias", 2, {2, 2}, {{4, 3}, {2, 3}}, -1, 1, 0, case_nobias},
    {"[1, 1] W [1, 1] b [1] size-1", 3, {2, 2, 1}, {{1, 1}, {1, 1}, {1}}, -1, 1, 0, case_bias},
    {"[13, 24] W [40, 24] b [40] packed kernel", 3, {2, 2, 1}, {{13, 24}, {40, 24}, {40}}, -1, 1, 0, case_bias},
};

const ag_op_desc ag_op_linear = {.name = "linear", .backward = linear_backward, AG_CASES(cases)};

/* inputs {x, W, b, r}, {x, W, r}, or {x, W, b} with r = x or r = W */
static ag_tensor *case_res(ag_graph *g, ag_tensor *const *in) { return ag__linear_add(g, in[0], in[1], in[2], in[3]); }
static ag_tensor *case_res_nobias(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], NULL, in[2]);
}
static ag_tensor *case_res_is_x(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], in[2], in[0]);
}
static ag_tensor *case_res_is_w(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], in[2], in[1]);
}

static const ag_op_case add_cases[] = {
    {"[3, 4] W [2, 4] b [2] + r [3, 2]", 4, {2, 2, 1, 2}, {{3, 4}, {2, 4}, {2}, {3, 2}}, -1, 1, 0, case_res},
    {"[2, 3, 4] W [5, 4] b [5] + r [2, 3, 5] batch axes", 4, {3, 2, 1, 3}, {{2, 3, 4}, {5, 4}, {5}, {2, 3, 5}},
     -1, 1, 0, case_res},
    {"[4, 3] W [2, 3] + r [4, 2] no bias", 3, {2, 2, 2}, {{4, 3}, {2, 3}, {4, 2}}, -1, 1, 0, case_res_nobias},
    {"[1, 1] W [1, 1] b [1] + r [1, 1] size-1", 4, {2, 2, 1, 2}, {{1, 1}, {1, 1}, {1}, {1, 1}}, -1, 1, 0,
     case_res},
    {"[2, 1, 3] W [3, 3] b [3] + r = x", 3, {3, 2, 1}, {{2, 1, 3}, {3, 3}, {3}}, -1, 1, 0, case_res_is_x},
    {"[3, 3] W [3, 3] b [3] + r = W", 3, {2, 2, 1}, {{3, 3}, {3, 3}, {3}}, -1, 1, 0, case_res_is_w},
    {"[2, 8] W [12, 8] b [12] + r [2, 12] a few rows", 4, {2, 2, 1, 2}, {{2, 8}, {12, 8}, {12}, {2, 12}}, -1, 1,
     0, case_res},
    {"[13, 24] W [40, 24] b [40] + r [13, 40] packed kernel", 4, {2, 2, 1, 2},
     {{13, 24}, {40, 24}, {40}, {13, 40}}, -1, 1, 0, case_res},
};

const ag_op_desc ag_op_linear_add = {.name = "linear_add", .backward = linear_add_backward,
                                     .grad_passes_to_src0 = true, AG_CASES(add_cases)};
