/* ops/linear.c: the dense layer y = x W^T + b, as one op (PyTorch's
 * F.linear).
 *
 *   x [..., I], W [O, I], b [O] or NULL -> y [..., O]
 *   (x is read as N = size / I rows of I values)
 *
 * forward:  y[n, o] = sum_i x[n, i] W[o, i] + b[o]
 * backward: dx[n, i] += sum_o dy[n, o] W[o, i]     dx = dy W      [N, O] x [O, I]
 *           dW[o, i] += sum_n dy[n, o] x[n, i]     dW = dy^T x    [O, N] x [N, I]
 *           db[o]    += sum_n dy[n, o]
 *
 * The same as reshape(add(matmul(reshape(x, [N, I]), transpose(W)), b)),
 * without the copies of the two reshapes and of W^T, and without a
 * broadcasting add.  linear_add (ops/linear_add.c), this op with a
 * residual r added to its output, shares its forward (+ r) and backward.
 * The shapes' rules: core/fits.c.  The fast code is src/kernels/linear.c.
 * Under AG_PRECISION_BF16 the same code runs on x, W (and dy) rounded to
 * bf16 (ops/bf16.c); b, r and db stay fp32.
 *
 * src = {x, W, b};  b may be NULL. */
#include "core/internal.h"
#include "kernels/kernels.h"

/* The reference forward: y[n, o] = sum_i x[n, i] W[o, i] + b[o], then
 * + r[n, o] when r is not NULL (linear_add's). */
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

void ag__dense_rows(ag_graph *g, int N, int I, int O, const ag_real *x, const ag_real *w, const ag_real *b,
                    const ag_real *r, ag_real *y)
{
    bool bf16 = ag__bf16(g);
    if (ag__fast() && ag__k_linear_forward(g, N, I, O, x, w, b, r, y, bf16)) return;
    /* bf16 products: x and W rounded (ops/bf16.c), b and r not */
    if (bf16 && (!(x = ag__bf16_operand(g, x, (size_t)N * I)) || !(w = ag__bf16_operand(g, w, (size_t)O * I))))
        return;
    forward_ref(N, I, O, x, w, b, r, y);
}

ag_tensor *ag__dense_node(ag_graph *g, int op, int nsrc, ag_tensor **src, ag_tensor *x, ag_tensor *w, ag_tensor *b,
                          ag_tensor *r)
{
    int I = w->shape[1], O = w->shape[0], shape[AG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = O;
    ag_tensor *y = ag__node(g, op, x->ndim, shape, nsrc, src);
    if (!y) return NULL;
    int N = (int)ag__numel(x->ndim - 1, x->shape); /* rows */
    ag__dense_rows(g, N, I, O, x->data, w->data, b ? b->data : NULL, r ? r->data : NULL, y->data);
    return ag_graph_status(g) == AG_OK ? y : NULL;
}

ag_tensor *ag__linear(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    if (!ag__ok(g, "linear", 2, x, w) || !ag__linear_fits(g, "linear", x, w, b, NULL)) return NULL;
    ag_tensor *src[3] = {x, w, b};
    return ag__dense_node(g, AG_OP_LINEAR, 3, src, x, w, b, NULL);
}

void ag__dense_grads(ag_graph *g, int N, const ag_real *dy, const ag_real *x, ag_tensor *w, ag_tensor *b, ag_real *dx,
                     bool fresh)
{
    ag_real *dw = w->requires_grad ? ag__grad(g, w) : NULL;
    ag_real *db = b && b->requires_grad ? ag__grad(g, b) : NULL;
    if (ag_graph_status(g) != AG_OK) return;
    int I = w->shape[1], O = w->shape[0];
    bool bf16 = ag__bf16(g);
    if (ag__fast() && ag__k_linear_backward(g, N, I, O, dy, x, w->data, dx, fresh, dw, db, bf16)) return;
    if (!bf16) {
        backward_ref(N, I, O, dy, x, w->data, dx, dw, db);
        return;
    }
    /* bf16 products (ops/bf16.c): dx and dW from dy, W and x rounded; db,
     * a sum and no product, from dy itself */
    const ag_real *dyr = ag__bf16_operand(g, dy, (size_t)N * O), *wr = ag__bf16_operand(g, w->data, (size_t)O * I),
                  *xr = ag__bf16_operand(g, x, (size_t)N * I);
    if (!dyr || !wr || !xr) return;
    backward_ref(N, I, O, dyr, xr, wr, dx, dw, NULL);
    if (db) backward_ref(N, I, O, dy, NULL, NULL, NULL, NULL, db);
}

void ag__dense_backward(ag_graph *g, const ag_real *dy, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    bool fresh = false; /* fresh: dx holds nothing yet, the product overwrites it */
    ag_real *dx = !x->requires_grad ? NULL : ag__fast() ? ag__grad_fresh(g, x, &fresh) : ag__grad(g, x);
    if (ag_graph_status(g) != AG_OK) return;
    ag__dense_grads(g, (int)ag__numel(x->ndim - 1, x->shape), dy, x->data, w, b, dx, fresh);
}

static void linear_backward(ag_graph *g, ag_tensor *y)
{
    ag__dense_backward(g, y->grad, y->src[0], y->src[1], y->src[2]);
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

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e15: products near 1e30", 3, {2, 2, 1}, {{3, 4}, {2, 4}, {2}}, -1e15, 1e15, 0, case_bias},
};

const ag_op_desc ag_op_linear = {.name = "linear", .backward = linear_backward, AG_CASES(cases), AG_EDGES(edges)};
