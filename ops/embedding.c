/* ops/embedding.c: rows of a table picked by integer ids.
 *
 *   weight [V, C], ids (n ints, laid out as `shape`) -> y [shape..., C]
 *
 * forward:  y[p, :] = weight[ids[p], :]          (p = 0..n-1, row-major)
 * backward: dweight[ids[p], :] += dy[p, :]
 *           (a scatter-add: an id that appears k times receives the sum of
 *           its k rows of dy)
 *
 * The ids are data, never differentiated; they are copied into the arena
 * (aux), so the caller's array may change after the call.  n is the product
 * of y's shape without its last axis.  The fast rows are
 * src/kernels/embedding.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

ag_tensor *ag_embedding(ag_graph *g, ag_tensor *weight, const int *ids, int ndim, const int *shape)
{
    if (!ag__ok(g, "embedding", 1, weight)) return NULL;
    char sw[96], ss[96];
    if (weight->ndim != 2) {
        ag_graph_fail(g, AG_ERR_SHAPE, "embedding: weight must be [V, C], got %s",
                      ag_shape_str(weight, sw, sizeof sw));
        return NULL;
    }
    if (ndim < 0 || ndim + 1 > AG_MAX_DIMS || (ndim > 0 && !shape)) {
        ag_graph_fail(g, AG_ERR_ARG, "embedding: ids need 0..%d axes and a shape, got %d axes%s",
                      AG_MAX_DIMS - 1, ndim, ndim > 0 && !shape ? " and no shape" : "");
        return NULL;
    }
    int V = weight->shape[0], C = weight->shape[1], oshape[AG_MAX_DIMS];
    for (int i = 0; i < ndim; i++) oshape[i] = shape[i];
    oshape[ndim] = C;
    /* the node checks the shape (negative or overflowing sizes) first; on a
     * bad id below the graph is in error, so the half-made node is inert */
    ag_tensor *y = ag__node(g, AG_OP_EMBEDDING, ndim + 1, oshape, 1, &weight);
    if (!y) return NULL;
    size_t n = ag__numel(ndim, shape);
    if (n > 0 && !ids) {
        ag_graph_fail(g, AG_ERR_ARG, "embedding: ids is NULL for shape %s",
                      ag_shape_str_n(ndim, shape, ss, sizeof ss));
        return NULL;
    }
    for (size_t p = 0; p < n; p++) {
        if (ids[p] < 0 || ids[p] >= V) {
            ag_graph_fail(g, AG_ERR_ARG, "embedding: id %d at position %zu out of range [0, %d)", ids[p], p, V);
            return NULL;
        }
    }
    int *saved = ag__save(g, (n ? n : 1) * sizeof(int));
    if (!saved) return NULL;
    if (n) memcpy(saved, ids, n * sizeof(int));
    ag__impl(y)->aux = saved;
    ag__impl(y)->iarg[0] = ag__increasing(saved, n); /* distinct ids in order: backward in one pass */
    if (!(ag__fast() && ag__k_embedding_forward(n, (size_t)C, saved, weight->data, y->data)))
        for (size_t p = 0; p < n; p++) /* y[p, :] = weight[ids[p], :] */
            memcpy(y->data + p * (size_t)C, weight->data + (size_t)saved[p] * (size_t)C, (size_t)C * sizeof(ag_real));
    return y;
}

static void embedding_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *weight = y->src[0];
    bool fresh = false, fast = ag__fast(); /* fresh: nothing in dweight yet */
    ag_real *dweight = fast ? ag__grad_fresh(g, weight, &fresh) : ag__grad(g, weight);
    if (!dweight) return;
    const int *ids = ag__impl(y)->aux;
    size_t V = (size_t)weight->shape[0], C = (size_t)weight->shape[1], n = ag__numel(y->ndim - 1, y->shape);
    if (fast && ag__k_embedding_backward(n, V, C, ids, ag__impl(y)->iarg[0], y->grad, dweight, fresh)) return;
    for (size_t p = 0; p < n; p++) /* dweight[ids[p], :] += dy[p, :] */
        for (size_t c = 0; c < C; c++) dweight[(size_t)ids[p] * C + c] += y->grad[p * C + c];
}

/* Fixed ids, with repeats, so the scatter-add accumulates. */
static ag_tensor *case_repeated(ag_graph *g, ag_tensor *const *in)
{
    static const int ids[] = {2, 0, 2, 4, 1, 2};
    return ag_embedding(g, in[0], ids, AG_SHAPE(2, 3));
}

static ag_tensor *case_flat(ag_graph *g, ag_tensor *const *in)
{
    static const int ids[] = {3, 3, 0, 1};
    return ag_embedding(g, in[0], ids, AG_SHAPE(4));
}

static ag_tensor *case_one_id(ag_graph *g, ag_tensor *const *in)
{
    static const int ids[] = {1};
    return ag_embedding(g, in[0], ids, 0, NULL); /* a scalar id: y is [C] */
}

/* Distinct ids in order, as the translator's packing of real rows picks
 * them: a one-pass backward when the gradient is fresh. */
static ag_tensor *case_increasing(ag_graph *g, ag_tensor *const *in)
{
    static const int ids[] = {1, 2, 4};
    return ag_embedding(g, in[0], ids, AG_SHAPE(3));
}

static ag_tensor *case_size1(ag_graph *g, ag_tensor *const *in)
{
    static const int ids[] = {0, 0, 0};
    return ag_embedding(g, in[0], ids, AG_SHAPE(3, 1));
}

static const ag_op_case cases[] = {
    {"[5, 3] ids [2, 3] repeated", 1, {2}, {{5, 3}}, -1, 1, 0, case_repeated},
    {"[4, 2] ids [4]", 1, {2}, {{4, 2}}, -1, 1, 0, case_flat},
    {"[3, 4] one id, ids []", 1, {2}, {{3, 4}}, -1, 1, 0, case_one_id},
    {"[6, 3] ids [3] increasing", 1, {2}, {{6, 3}}, -1, 1, 0, case_increasing},
    {"[1, 1] ids [3, 1] size-1", 1, {2}, {{1, 1}}, -1, 1, 0, case_size1},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{5, 3}}, -1e30, 1e30, 0, case_repeated},
};

const ag_op_desc ag_op_embedding = {.name = "embedding", .backward = embedding_backward, AG_CASES(cases),
    AG_EDGES(edges)};
