/* ops/linear_gelu.c: the dense layer followed by GELU, y = gelu(x W^T + b),
 * as one op: the first half of a transformer's MLP.
 *
 *   x [..., I], W [O, I], b [O] or NULL -> y [..., O]
 *
 * forward:  h[n, o] = sum_i x[n, i] W[o, i] + b[o]          (ops/linear.c)
 *           y[n, o] = gelu(h[n, o]),  s[n, o] = gelu'(h[n, o])  (ops/gelu.c)
 * backward: dh[n, o] = dy[n, o] s[n, o],  then linear's dx, dW, db from dh
 *
 * It gives the bits of linear followed by gelu, forward and backward, and
 * keeps less: the backward reads the slope s, never h, so h is not a node
 * of the graph that stays until the reset: the two nodes kept h, y and s,
 * this one keeps y and s (PyTorch keeps h and y).  h is computed where y
 * goes and turned into y in place.  dh is computed where dy lies when the
 * graph drops intermediates' gradients (ag_graph_set_keep_grads(g, 0):
 * nothing reads dy afterwards); otherwise in a buffer of its own.
 *
 * src = {x, W, b};  b may be NULL;  aux = s (only when y requires grad). */
#include "core/elementwise.h"
#include "kernels/kernels.h"

/* The reference: y = h Phi(h) in place of h, and s = Phi(h) + h phi(h)
 * when s is not NULL (ops/gelu.c's functions). */
static void gelu_ref(size_t n, ag_real *y, ag_real *s)
{
    for (size_t i = 0; i < n; i++) {
        if (s) s[i] = ag__gelu_slope(y[i]);
        y[i] = ag__gelu_value(y[i]);
    }
}

ag_tensor *ag__linear_gelu(ag_graph *g, ag_tensor *x, ag_tensor *w, ag_tensor *b)
{
    if (!ag__ok(g, "linear_gelu", 2, x, w) || !ag__linear_fits(g, "linear_gelu", x, w, b, NULL)) return NULL;
    ag_tensor *src[3] = {x, w, b};
    ag_tensor *y = ag__dense_node(g, AG_OP_LINEAR_GELU, 3, src, x, w, b, NULL); /* y holds h */
    if (!y) return NULL;
    ag_real *s = NULL;
    if (y->requires_grad && !(s = ag__save(g, (y->size ? y->size : 1) * sizeof(ag_real)))) return NULL;
    ag__impl(y)->aux = s;
    if (!(ag__fast() && ag__k_gelu_in_place(y->size, y->data, s))) gelu_ref(y->size, y->data, s);
    return y;
}

static void linear_gelu_backward(ag_graph *g, ag_tensor *y)
{
    const ag_real *s = ag__impl(y)->aux;
    ag_real *dh = ag_graph_keep_grads(g) ? ag__alloc(g, (y->size ? y->size : 1) * sizeof(ag_real)) : y->grad;
    if (!dh) return;
    if (ag__fast()) ag__k_slope_mul(y->size, y->grad, s, dh, true);
    else
        for (size_t i = 0; i < y->size; i++) dh[i] = y->grad[i] * s[i];
    ag__dense_backward(g, dh, y->src[0], y->src[1], y->src[2]);
}

static ag_tensor *case_bias(ag_graph *g, ag_tensor *const *in) { return ag__linear_gelu(g, in[0], in[1], in[2]); }
static ag_tensor *case_nobias(ag_graph *g, ag_tensor *const *in) { return ag__linear_gelu(g, in[0], in[1], NULL); }

/* h over both of GELU's sides: inputs in [-1.5, 1.5] */
static const ag_op_case cases[] = {
    {"[3, 5] W [4, 5] b [4]", 3, {2, 2, 1}, {{3, 5}, {4, 5}, {4}}, -1.5, 1.5, 0, case_bias},
    {"[2, 2, 3] W [6, 3] b [6] batch axes", 3, {3, 2, 1}, {{2, 2, 3}, {6, 3}, {6}}, -1.5, 1.5, 0, case_bias},
    {"[5, 2] W [3, 2] no bias", 2, {2, 2}, {{5, 2}, {3, 2}}, -1.5, 1.5, 0, case_nobias},
    {"[1, 1] W [1, 1] b [1] size-1", 3, {2, 2, 1}, {{1, 1}, {1, 1}, {1}}, -1.5, 1.5, 0, case_bias},
    {"[9, 20] W [33, 20] b [33] packed kernel", 3, {2, 2, 1}, {{9, 20}, {33, 20}, {33}}, -1.5, 1.5, 0, case_bias},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e15: products near 1e30", 3, {2, 2, 1}, {{3, 5}, {4, 5}, {4}}, -1e15, 1e15, 0, case_bias},
    {"values in [-10, 10]: GELU's tails", 3, {2, 2, 1}, {{3, 5}, {4, 5}, {4}}, -10, 10, 0, case_bias},
};

const ag_op_desc ag_op_linear_gelu = {.name = "linear_gelu", .backward = linear_gelu_backward, AG_CASES(cases),
    AG_EDGES(edges)};
