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
 * of y's shape without its last axis. */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

/* y[p, :] = weight[ids[p], :] for p < n: rows of C copied by a vector loop
 * inlined for the level (a call to memcpy per row of a few hundred bytes
 * costs more than the copy) */
static inline AG_ALWAYS_INLINE void gather(size_t n, size_t C, const int *ids, const ag_real *weight, ag_real *y)
{
    for (size_t p = 0; p < n; p++) {
        const ag_real *w = weight + (size_t)ids[p] * C;
        ag_real *yp = y + p * C;
#pragma omp simd
        for (size_t c = 0; c < C; c++) yp[c] = w[c];
    }
}
#define GATHER_PARAMS (size_t n, size_t C, const int *ids, const ag_real *weight, ag_real *y)
AG_ISA_CLONES(void, gather, GATHER_PARAMS, gather(n, C, ids, weight, y))

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
    AG_ISA_CALL(gather, (n, (size_t)C, saved, weight->data, y->data));
    return y;
}

/* dweight[ids[p], :] += dy[p, :] for p < n, in order: each element's
 * additions in p's order, whatever the vector width (AG_ISA_CLONES: the
 * same bits on every level) */
static inline AG_ALWAYS_INLINE void scatter_add(size_t n, size_t C, const int *ids, const ag_real *dy,
                                                ag_real *dweight)
{
    for (size_t p = 0; p < n; p++) {
        ag_real *dw = dweight + (size_t)ids[p] * C;
        const ag_real *dyp = dy + p * C;
#pragma omp simd
        for (size_t c = 0; c < C; c++) dw[c] += dyp[c];
    }
}
#define SCATTER_PARAMS (size_t n, size_t C, const int *ids, const ag_real *dy, ag_real *dweight)
AG_ISA_CLONES(void, scatter_add, SCATTER_PARAMS, scatter_add(n, C, ids, dy, dweight))

static void embedding_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *weight = y->src[0];
    bool fresh; /* nothing in dweight yet */
    ag_real *dweight = ag__grad_fresh(g, weight, &fresh);
    if (!dweight) return;
    const int *ids = ag__impl(y)->aux;
    size_t C = (size_t)weight->shape[1], n = ag__numel(y->ndim - 1, y->shape);
    if (fresh && ag__impl(y)->iarg[0]) { /* rows picked once each, in order: store them, zeros between */
        ag__scatter_rows(dweight, (size_t)weight->shape[0], C, y->grad, ids, n);
        return;
    }
    if (fresh) memset(dweight, 0, weight->size * sizeof(ag_real));
    AG_ISA_CALL(scatter_add, (n, C, ids, y->grad, dweight)); /* y[p, :] = weight[ids[p], :] */
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

const ag_op_desc ag_op_embedding = {.name = "embedding", .backward = embedding_backward, AG_CASES(cases)};
