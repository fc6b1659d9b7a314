/* ops/masked_fill.c: y = x where mask != 0, value where mask == 0.
 *
 *   x [...], mask broadcast to x's shape -> y (x's shape)
 *
 * forward:  y_i = (mask_i' == 0) ? value : x_i
 *           (i': i with mask's stretched axes at 0, as in src/core/broadcast.c)
 * backward: dx_i += (mask_i' != 0) ? dy_i : 0
 *           (a filled element is a constant: no gradient reaches x there)
 *
 * The mask is data, never differentiated: it is src[1] so that pictures of
 * the graph show it, but y requires grad only when x does and the backward
 * writes only dx.  With value = -INFINITY before a softmax this is the usual
 * attention mask.  farg[0] = value; aux = one byte per element, 1 where x
 * was kept (so the backward does not depend on the mask tensor's data). */
#include "core/internal.h"

#include <math.h>

#include <stdio.h>

ag_tensor *ag_masked_fill(ag_graph *g, ag_tensor *x, ag_tensor *mask, double value)
{
    if (!ag__ok(g, "masked_fill", 2, x, mask)) return NULL;
    if (!ag__mask_fits(g, "masked_fill", x, mask)) return NULL;
    ag_tensor *src[2] = {x, mask};
    ag_tensor *y = ag__node(g, AG_OP_MASKED_FILL, x->ndim, x->shape, 2, src);
    if (!y) return NULL;
    y->requires_grad = x->requires_grad; /* the mask is never differentiated */
    ag__impl(y)->farg[0] = value;
    unsigned char *keep = ag__save(g, y->size ? y->size : 1);
    if (!keep) return NULL;
    ag__impl(y)->aux = keep;

    /* ms[k]: mask's stride along x's axis k (0 where the mask is stretched) */
    size_t ms[AG_MAX_DIMS], s = 1;
    for (int k = x->ndim - 1; k >= 0; k--) {
        int km = mask->ndim - x->ndim + k;
        int dm = km >= 0 ? mask->shape[km] : 1;
        ms[k] = (dm == 1 && x->shape[k] != 1) ? 0 : s;
        s *= (size_t)dm;
    }
    /* walk x in order; idx/mo advance like an odometer */
    int idx[AG_MAX_DIMS] = {0};
    size_t mo = 0;
    for (size_t i = 0; i < y->size; i++) {
        keep[i] = mask->data[mo] != 0;
        y->data[i] = keep[i] ? x->data[i] : (ag_real)value;
        for (int k = x->ndim - 1; k >= 0; k--) {
            idx[k]++;
            mo += ms[k];
            if (idx[k] < x->shape[k]) break;
            mo -= ms[k] * (size_t)x->shape[k];
            idx[k] = 0;
        }
    }
    return y;
}

static void masked_fill_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    if (!x->requires_grad) return;
    ag_real *dx = ag__grad(g, x);
    if (!dx) return;
    const unsigned char *keep = ag__impl(y)->aux;
    /* y_i = keep_i ? x_i : value */
    for (size_t i = 0; i < y->size; i++)
        if (keep[i]) dx[i] += y->grad[i];
}

/* Fixed masks, made inside the builds: they are data, not checked inputs. */
static ag_tensor *case_same_shape(ag_graph *g, ag_tensor *const *in)
{
    static const ag_real m[] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0};
    /* a modest value: with -1e9, L = sum(y w) would be ~1e9 and its finite
     * differences would drown in rounding */
    return ag_masked_fill(g, in[0], ag_tensor_from(g, AG_SHAPE(3, 4), m), -3);
}

static ag_tensor *case_row_mask(ag_graph *g, ag_tensor *const *in)
{
    static const ag_real m[] = {1, 0, 1, 0};
    return ag_masked_fill(g, in[0], ag_tensor_from(g, AG_SHAPE(1, 4), m), 2.5);
}

static ag_tensor *case_column_mask(ag_graph *g, ag_tensor *const *in)
{
    static const ag_real m[] = {0, 1, 1};
    return ag_masked_fill(g, in[0], ag_tensor_from(g, AG_SHAPE(3, 1), m), -0.5);
}

static ag_tensor *case_causal_softmax(ag_graph *g, ag_tensor *const *in)
{
    /* the attention pattern: -inf above the diagonal, then softmax */
    static const ag_real m[] = {1, 0, 0, 1, 1, 0, 1, 1, 1};
    ag_tensor *mask = ag_tensor_from(g, AG_SHAPE(3, 3), m);
    return ag_softmax(g, ag_masked_fill(g, in[0], mask, -INFINITY));
}

static ag_tensor *case_size1(ag_graph *g, ag_tensor *const *in)
{
    static const ag_real m[] = {1};
    return ag_masked_fill(g, in[0], ag_tensor_from(g, AG_SHAPE(1), m), 0);
}

static const ag_op_case cases[] = {
    {"[3, 4] mask [3, 4]", 1, {2}, {{3, 4}}, -1, 1, 0, case_same_shape},
    {"[3, 4] mask [1, 4] broadcast", 1, {2}, {{3, 4}}, -1, 1, 0, case_row_mask},
    {"[2, 3, 5] mask [3, 1] broadcast", 1, {3}, {{2, 3, 5}}, -1, 1, 0, case_column_mask},
    {"[2, 3, 3] causal -inf then softmax", 1, {3}, {{2, 3, 3}}, -2, 2, 0, case_causal_softmax},
    {"[1, 1] mask [1] size-1", 1, {2}, {{1, 1}}, -1, 1, 0, case_size1},
};

const ag_op_desc ag_op_masked_fill = {.name = "masked_fill", .backward = masked_fill_backward, AG_CASES(cases),
                                      .elementwise = true};
