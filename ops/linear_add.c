/* ops/linear_add.c: the dense layer with a residual r added to its output,
 * y = r + (x W^T + b), as one op: a pre-norm block's x + proj(...).
 *
 *   x [..., I], W [O, I], b [O] or NULL, r [..., O] -> y [..., O]
 *
 * forward:  y[n, o] = (sum_i x[n, i] W[o, i] + b[o]) + r[n, o]
 * backward: dr[n, o] += dy[n, o], then linear's dx, dW, db (ops/linear.c)
 *
 * It rounds as linear followed by add does: the product's sum, then b,
 * then r, and its backward runs add's part (dr) before linear's, as the
 * two nodes' backward would.  It saves add's pass over y and, since r is
 * its first input, the copy of dy: r may take dy's buffer as its gradient,
 * as add's first operand does (see grad_passes_to_src0), unless r is also
 * x, W or b of the op.  Its forward and the rest of its backward are
 * linear's; the shapes' rules are core/fits.c's.
 *
 * src = {r, x, W, b};  b may be NULL. */
#include "core/internal.h"
#include "kernels/kernels.h"

ag_tensor *ag__linear_add(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b, ag_tensor *r)
{
    if (!ag__ok(g, "linear_add", 3, x, w, r) || !ag__linear_fits(g, "linear_add", x, w, b, r)) return NULL;
    ag_tensor *src[4] = {r, x, w, b};
    return ag__dense_node(g, AG_OP_LINEAR_ADD, 4, src, x, w, b, r);
}

bool ag__residual_grad(ag_graph *g, ag_tensor *r, const ag_tensor *y)
{
    /* y = ... + r:  dr += dy.  Nothing to do when r took dy's buffer. */
    if (!r->requires_grad || r->grad == y->grad) return true;
    bool fresh = false, fast = ag__fast();
    ag_real *dr = fast ? ag__grad_fresh(g, r, &fresh) : ag__grad(g, r);
    if (!dr) return false;
    if (fast) ag__grad_pass(y->size, y->grad, dr, fresh);
    else
        for (size_t i = 0; i < y->size; i++) dr[i] += y->grad[i];
    return true;
}

/* dr first, as add's backward runs before linear's, then linear's */
static void linear_add_backward(ag_graph *g, ag_tensor *y)
{
    if (ag__residual_grad(g, y->src[0], y))
        ag__dense_backward(g, y->grad, y->src[1], y->src[2], y->src[3]);
}

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

static const ag_op_case cases[] = {
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

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e15: products near 1e30", 4, {2, 2, 1, 2}, {{3, 4}, {2, 4}, {2}, {3, 2}},
     -1e15, 1e15, 0, case_res},
};

const ag_op_desc ag_op_linear_add = {.name = "linear_add", .backward = linear_add_backward,
                                     .grad_passes_to_src0 = true, AG_CASES(cases), AG_EDGES(edges)};
