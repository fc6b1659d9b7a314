/* ops/reshape.c: the same values under a new shape.
 *
 *   x [d0, d1, ...] -> y [e0, e1, ...]      with d0 d1 ... = e0 e1 ...
 *
 * forward:  y[i] = x[i]        (i the flat row-major index: the order of the
 *                               values never changes, only how it is read)
 * backward: dx[i] += dy[i]
 *
 * One entry of the new shape may be -1: it is inferred so that the element
 * counts match.  Any other negative entry, a second -1, or counts that do not
 * match is an error.
 *
 * y shares x's values instead of copying them: tensors never change after
 * the op that made them, so nothing can tell the difference, and a reshape
 * costs nothing.  (Backward gives y's gradient buffer to x when y is x's
 * newest consumer, src/core/graph.c; otherwise dx += dy, as every consumer
 * adds its part.) */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <limits.h>
#include <stdio.h>

ag_tensor *ag_reshape(ag_graph *g, ag_tensor *x, int ndim, const int *shape)
{
    if (!ag__ok(g, "reshape", 1, x)) return NULL;
    char s1[96], s2[96];
    if (ndim < 0 || ndim > AG_MAX_DIMS) {
        ag_graph_fail(g, AG_ERR_ARG, "reshape: %d axes, at most %d are supported", ndim, AG_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape) {
        ag_graph_fail(g, AG_ERR_ARG, "reshape: shape is NULL");
        return NULL;
    }
    /* find the -1, check the rest, and count the elements they give */
    int out[AG_MAX_DIMS], infer = -1;
    size_t known = 1;
    bool wraps = false, zero = false; /* the product of the known sizes would wrap around */
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                ag_graph_fail(g, AG_ERR_ARG, "reshape: more than one -1 in %s",
                              ag_shape_str_n(ndim, shape, s2, sizeof s2));
                return NULL;
            }
            infer = i;
        } else if (shape[i] < 0) {
            ag_graph_fail(g, AG_ERR_ARG, "reshape: bad size %d at axis %d in %s", shape[i], i,
                          ag_shape_str_n(ndim, shape, s2, sizeof s2));
            return NULL;
        } else {
            if (shape[i] > 0 && known > SIZE_MAX / sizeof(ag_real) / (size_t)shape[i]) wraps = true;
            zero |= shape[i] == 0;
            known *= (size_t)shape[i];
        }
    }
    if (wraps && !zero) {
        ag_graph_fail(g, AG_ERR_SHAPE, "reshape: cannot reshape %s (%zu elements) to %s",
                      ag_shape_str(x, s1, sizeof s1), x->size, ag_shape_str_n(ndim, shape, s2, sizeof s2));
        return NULL;
    }
    if (zero) known = 0;
    if (infer >= 0) {
        /* with a zero among the known sizes, -1 could be anything */
        if (known == 0 || x->size % known != 0 || x->size / known > INT_MAX) {
            ag_graph_fail(g, AG_ERR_SHAPE, "reshape: cannot reshape %s (%zu elements) to %s",
                          ag_shape_str(x, s1, sizeof s1), x->size, ag_shape_str_n(ndim, shape, s2, sizeof s2));
            return NULL;
        }
        out[infer] = (int)(x->size / known);
        known = x->size;
    }
    if (known != x->size) {
        ag_graph_fail(g, AG_ERR_SHAPE, "reshape: cannot reshape %s (%zu elements) to %s",
                      ag_shape_str(x, s1, sizeof s1), x->size, ag_shape_str_n(ndim, shape, s2, sizeof s2));
        return NULL;
    }
    /* a node with no values of its own (a scalar's worth is allocated),
     * given x's shape count and x's values */
    ag_tensor *y = ag__node(g, AG_OP_RESHAPE, 0, NULL, 1, &x);
    if (!y) return NULL;
    y->ndim = ndim;
    for (int i = 0; i < AG_MAX_DIMS; i++) y->shape[i] = i < ndim ? out[i] : 1;
    y->size = x->size;
    y->data = x->data;
    return y;
}

static void reshape_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    if (x->grad == y->grad) return; /* one buffer for both (ag_backward): dx is dy already */
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    if (ag__fast()) { /* the kernel room's copy or vector add */
        ag__grad_pass(y->size, y->grad, dx, fresh);
        return;
    }
    /* y[i] = x[i]  ->  dx[i] += dy[i]  (stored into an untouched dx) */
    for (size_t i = 0; i < y->size; i++) dx[i] = fresh ? y->grad[i] : dx[i] + y->grad[i];
}

static ag_tensor *case_infer(ag_graph *g, ag_tensor *const *in) { return ag_reshape(g, in[0], AG_SHAPE(4, -1)); }
static ag_tensor *case_split(ag_graph *g, ag_tensor *const *in) { return ag_reshape(g, in[0], AG_SHAPE(3, 1, 2)); }
static ag_tensor *case_scalar(ag_graph *g, ag_tensor *const *in) { return ag_reshape(g, in[0], 0, NULL); }
static ag_tensor *case_heads(ag_graph *g, ag_tensor *const *in)
{
    return ag_reshape(g, in[0], AG_SHAPE(2, 3, 2, -1)); /* [B, T, C] -> [B, T, H, D] */
}

static const ag_op_case cases[] = {
    {"[2, 3, 4] -> [4, -1]", 1, {3}, {{2, 3, 4}}, -1, 1, 0, case_infer},
    {"[1, 6] -> [3, 1, 2] size-1 axes", 1, {2}, {{1, 6}}, -1, 1, 0, case_split},
    {"[1, 1] -> [] scalar", 1, {2}, {{1, 1}}, -1, 1, 0, case_scalar},
    {"[2, 3, 4] -> [2, 3, 2, -1] head split", 1, {3}, {{2, 3, 4}}, -1, 1, 0, case_heads},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {3}, {{2, 3, 4}}, -1e30, 1e30, 0, case_infer},
};

const ag_op_desc ag_op_reshape = {.name = "reshape", .backward = reshape_backward, .grad_passes_to_src0 = true,
    AG_CASES(cases), AG_EDGES(edges)};
