/* ops/gelu_linear_add.c: GELU, then the dense layer, then a residual r,
 * y = r + (gelu(h) W^T + b), as one op: a pre-norm transformer MLP's second
 * half, x + dense2(gelu(dense1(x))), that keeps nothing but h.
 *
 *   h [..., I], W [O, I], b [O] or NULL, r [..., O] -> y [..., O]
 *
 * forward:  a[n, i] = gelu(h[n, i])                          (ops/gelu.c)
 *           y[n, o] = (sum_i a[n, i] W[o, i] + b[o]) + r[n, o]  (ops/linear_add.c)
 * backward: a = gelu(h) and s = gelu'(h), computed again
 *           dr += dy;  dW += dy^T a;  db += sum_n dy;  da = dy W
 *           dh += da s
 *
 * linear_gelu followed by linear_add (the two ops this one replaces in
 * the MLP) keep a and s, two [..., I] buffers, for their backward; this op
 * keeps only its input h, which the dense layer before it made anyway, and
 * recomputes a and s in one pass over h in its backward (a and s live in
 * the graph's scratch buffer, ag__temp, for the length of the call).  At GPT-2 small's width
 * (I = 4 C) that is 8 C of the 18 C values a layer keeps per token.  It
 * rounds as gelu, linear and add do, in that order, so it gives their bits.
 *
 * src = {r, h, W, b};  b may be NULL. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <string.h>

/* a = gelu(h) and, when s is not NULL, s = gelu'(h), over n values */
static void gelu_rows(size_t n, const ag_real *h, ag_real *a, ag_real *s)
{
    memcpy(a, h, n * sizeof *a);
    if (ag__fast() && ag__k_gelu_in_place(n, a, s)) return;
    for (size_t i = 0; i < n; i++) {
        if (s) s[i] = ag__gelu_slope(h[i]);
        a[i] = ag__gelu_value(h[i]);
    }
}

ag_tensor *ag__gelu_linear_add(ag_graph *g, ag_tensor *h, ag_tensor *w, ag_tensor *b, ag_tensor *r)
{
    if (!ag__ok(g, "gelu_linear_add", 3, h, w, r) || !ag__linear_fits(g, "gelu_linear_add", h, w, b, r)) return NULL;
    ag_tensor *src[4] = {r, h, w, b};
    ag_tensor *y = ag__node(g, AG_OP_GELU_LINEAR_ADD, r->ndim, r->shape, 4, src);
    ag_real *a = y ? ag__temp(g, (h->size ? h->size : 1) * sizeof *a) : NULL; /* a = gelu(h), not kept */
    if (!a) return NULL;
    int N = (int)ag__numel(h->ndim - 1, h->shape); /* rows */
    gelu_rows(h->size, h->data, a, NULL);
    ag__dense_rows(g, N, w->shape[1], w->shape[0], a, w->data, b ? b->data : NULL, r->data, y->data);
    return ag_graph_status(g) == AG_OK ? y : NULL;
}

/* dh (+)= (dy W) s, with a and s made again from h.  da is made where dh
 * goes when that is fresh (the fast path), then turned into dh in place. */
static void gelu_linear_add_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *r = y->src[0], *h = y->src[1], *w = y->src[2], *b = y->src[3];
    if (!ag__residual_grad(g, r, y)) return; /* y = ... + r:  dr += dy first, as linear_add's */
    size_t n = h->size ? h->size : 1;
    bool fresh = false, fast = ag__fast();
    ag_real *dh = !h->requires_grad ? NULL : fast ? ag__grad_fresh(g, h, &fresh) : ag__grad(g, h);
    bool own_da = dh && !fresh; /* da in a buffer of its own, or in dh's */
    ag_real *a = ag_graph_status(g) == AG_OK ? ag__temp(g, (own_da ? 3 : 2) * n * sizeof *a) : NULL;
    if (!a) return;
    ag_real *s = a + n, *da = own_da ? s + n : dh; /* a, s (and da): n values each */
    if (own_da) memset(da, 0, n * sizeof *da);    /* the reference adds into it */
    gelu_rows(h->size, h->data, a, s);
    ag__dense_grads(g, (int)ag__numel(h->ndim - 1, h->shape), y->grad, a, w, b, da, true);
    if (dh && fast) ag__k_slope_mul(h->size, da, s, dh, fresh);
    else if (dh)
        for (size_t i = 0; i < h->size; i++) dh[i] += da[i] * s[i];
}

/* inputs {h, W, b, r}, {h, W, r} */
static ag_tensor *case_res(ag_graph *g, ag_tensor *const *in)
{
    return ag__gelu_linear_add(g, in[0], in[1], in[2], in[3]);
}
static ag_tensor *case_res_nobias(ag_graph *g, ag_tensor *const *in)
{
    return ag__gelu_linear_add(g, in[0], in[1], NULL, in[2]);
}

/* h over both of GELU's sides: inputs in [-1.5, 1.5] */
static const ag_op_case cases[] = {
    {"[3, 4] W [2, 4] b [2] + r [3, 2]", 4, {2, 2, 1, 2}, {{3, 4}, {2, 4}, {2}, {3, 2}}, -1.5, 1.5, 0, case_res},
    {"[2, 3, 4] W [5, 4] b [5] + r [2, 3, 5] batch axes", 4, {3, 2, 1, 3}, {{2, 3, 4}, {5, 4}, {5}, {2, 3, 5}},
     -1.5, 1.5, 0, case_res},
    {"[4, 3] W [2, 3] + r [4, 2] no bias", 3, {2, 2, 2}, {{4, 3}, {2, 3}, {4, 2}}, -1.5, 1.5, 0, case_res_nobias},
    {"[1, 1] W [1, 1] b [1] + r [1, 1] size-1", 4, {2, 2, 1, 2}, {{1, 1}, {1, 1}, {1}, {1, 1}}, -1.5, 1.5, 0,
     case_res},
    {"[13, 24] W [40, 24] b [40] + r [13, 40] packed kernel", 4, {2, 2, 1, 2},
     {{13, 24}, {40, 24}, {40}, {13, 40}}, -1.5, 1.5, 0, case_res},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e15: products near 1e30", 4, {2, 2, 1, 2}, {{3, 4}, {2, 4}, {2}, {3, 2}},
     -1e15, 1e15, 0, case_res},
    {"values in [-10, 10]: GELU's tails", 4, {2, 2, 1, 2}, {{3, 4}, {2, 4}, {2}, {3, 2}}, -10, 10, 0, case_res},
};

const ag_op_desc ag_op_gelu_linear_add = {.name = "gelu_linear_add", .backward = gelu_linear_add_backward,
                                          .grad_passes_to_src0 = true, AG_CASES(cases), AG_EDGES(edges)};
