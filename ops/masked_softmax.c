/* ops/masked_softmax.c: attention's scale, mask and softmax as one op.
 *
 *   x [..., S], mask (broadcast to x's shape) or NULL -> y [..., S]
 *
 * forward, per row:  z_j = mask_j != 0 ? scale * x_j : fill
 *                    y_j = exp(z_j - max_k z_k) / sum_k exp(z_k - max_k z_k)
 *                    (a row whose z are all -inf gives zeros, never NaN; a
 *                    NaN or +inf z makes the row NaN)
 * backward, per row: dz_j = y_j (dy_j - sum_k dy_k y_k)     (softmax's)
 *                    dx_j += mask_j != 0 ? scale * dz_j : 0
 *                    (z_j = scale x_j where the mask keeps j; elsewhere z_j
 *                    is the constant fill)
 *
 * The same values as softmax(masked_fill(scale(x, scale), mask, fill)), the
 * composition src/nn/attention.c used to build, in one pass over the scores
 * instead of three, and with one saved tensor instead of three.
 *
 * src = {x, mask}; the mask is data, never differentiated.  farg[0] = scale,
 * farg[1] = fill.  The fast rows are src/kernels/masked_softmax.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>

/* Whether row r of x keeps value j (no mask: every one). */
static bool kept(const ag_tensor *mask, const ag__mask_map *mm, size_t r, size_t j)
{
    return !mask || mask->data[ag__mask_row(mm, r) + j * mm->along] != 0;
}

/* The reference forward, row by row: z into y's row, then its softmax. */
static void forward_ref(size_t rows, size_t n, const ag_real *x, const ag_tensor *mask, const ag__mask_map *mm,
                        ag_real scale, ag_real fill, ag_real *y)
{
    for (size_t r = 0; r < rows; r++) {
        for (size_t j = 0; j < n; j++) y[r * n + j] = kept(mask, mm, r, j) ? scale * x[r * n + j] : fill;
        ag__softmax_row_ref(n, y + r * n, y + r * n);
    }
}

/* The reference backward, adding into dx. */
static void backward_ref(size_t rows, size_t n, const ag_real *y, const ag_real *dy, const ag_tensor *mask,
                         const ag__mask_map *mm, ag_real scale, ag_real *dx)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real dot = 0; /* sum_k dy_k y_k */
        for (size_t k = 0; k < n; k++) dot += dyr[k] * yr[k];
        for (size_t j = 0; j < n; j++) dx[r * n + j] += kept(mask, mm, r, j) ? scale * (yr[j] * (dyr[j] - dot)) : 0;
    }
}

ag_tensor *ag__masked_softmax(ag_graph *g, ag_tensor *x, double scale, ag_tensor *mask, double fill)
{
    if (!ag__ok(g, "masked_softmax", 1, x)) return NULL;
    if (mask && !ag__mask_fits(g, "masked_softmax", x, mask)) return NULL;
    ag_tensor *src[2] = {x, mask};
    ag_tensor *y = ag__node(g, AG_OP_MASKED_SOFTMAX, x->ndim, x->shape, 2, src);
    if (!y) return NULL;
    y->requires_grad = x->requires_grad; /* the mask is never differentiated */
    ag__impl(y)->farg[0] = scale;
    ag__impl(y)->farg[1] = fill;
    if (y->size == 0) return y;
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1;
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, x->ndim, x->shape, mask);
    ag_real sc = (ag_real)scale, fl = (ag_real)fill;
    if (ag__fast() && ag__k_masked_softmax_forward(g, x, mask, &mm, sc, fl, y))
        return ag_graph_status(g) == AG_OK ? y : NULL;
    forward_ref(x->size / n, n, x->data, mask, &mm, sc, fl, y->data);
    return y;
}

static void masked_softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *mask = y->src[1];
    ag_real *dx = ag__grad(g, x);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1;
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, x->ndim, x->shape, mask);
    ag_real sc = (ag_real)ag__impl(y)->farg[0];
    if (!(ag__fast() && ag__k_masked_softmax_backward(y, mask, &mm, sc, dx)))
        backward_ref(y->size / n, n, y->data, y->grad, mask, &mm, sc, dx);
}

/* Fixed masks, made inside the builds: they are data, not checked inputs. */
static ag_tensor *causal(ag_graph *g, int T)
{
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(T, T));
    if (m)
        for (int t = 0; t < T; t++)
            for (int s = 0; s <= t; s++) m->data[t * T + s] = 1;
    return m;
}
static ag_tensor *case_causal(ag_graph *g, ag_tensor *const *in)
{
    return ag__masked_softmax(g, in[0], 0.5, causal(g, 3), -1e9);
}
static ag_tensor *case_padding(ag_graph *g, ag_tensor *const *in)
{
    /* [B, 1, 1, S] keys 0..len-1 of each batch entry; entry 1 has none (-inf: zeros) */
    ag_tensor *m = ag_tensor_from(g, AG_SHAPE(2, 1, 1, 4), (ag_real[]){1, 1, 1, 0, 0, 0, 0, 0});
    return ag__masked_softmax(g, in[0], 0.7, m, -INFINITY);
}
static ag_tensor *case_unmasked(ag_graph *g, ag_tensor *const *in)
{
    return ag__masked_softmax(g, in[0], 1.3, NULL, 0);
}

static const ag_op_case cases[] = {
    {"[2, 3, 3] causal [3, 3], fill -1e9", 1, {3}, {{2, 3, 3}}, -3, 3, 0, case_causal},
    {"[2, 2, 3, 4] padding [2, 1, 1, 4], empty row", 1, {4}, {{2, 2, 3, 4}}, -3, 3, 0, case_padding},
    {"[4, 1] no mask, size-1 rows", 1, {2}, {{4, 1}}, -3, 3, 0, case_unmasked},
    {"[3, 5] no mask", 1, {2}, {{3, 5}}, -3, 3, 0, case_unmasked},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"logits in [-80, 80]", 1, {3}, {{2, 3, 3}}, -80, 80, 0, case_causal},
    {"logits in [-1e4, 1e4]", 1, {3}, {{2, 3, 3}}, -1e4, 1e4, 0, case_causal},
};

const ag_op_desc ag_op_masked_softmax = {
    .name = "masked_softmax", .backward = masked_softmax_backward, AG_CASES(cases), AG_EDGES(edges)};
