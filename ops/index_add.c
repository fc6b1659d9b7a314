/* ops/index_add.c: rows added into a zero table at given indices, the
 * adjoint of embedding (which picks rows out of a table).
 *
 *   x [n, C], idx (n ints in [0, N)) -> y [N, C]
 *
 * forward:  y = 0;  y[idx[i], :] += x[i, :]        (i = 0..n-1)
 * backward: dx[i, :] += dy[idx[i], :]              (a gather)
 *
 * PyTorch: torch.zeros(N, C).index_add(0, idx, x).  Rows of y that no index
 * names stay zero; an index named k times receives the sum of its k rows.
 *
 * The translator uses it to put the rows of the real tokens, computed packed
 * [n, C], back into the padded [B * T, C] layout that attention needs, with
 * zeros at the padding (src/nn/seq2seq.c).  The indices are copied into the
 * arena (aux). */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

ag_tensor *ag_index_add(ag_graph *g, ag_tensor *x, const int *idx, int N)
{
    if (!ag__ok(g, "index_add", 1, x)) return NULL;
    char sx[96];
    if (x->ndim != 2) {
        ag_graph_fail(g, AG_ERR_SHAPE, "index_add: x must be [n, C], got %s", ag_shape_str(x, sx, sizeof sx));
        return NULL;
    }
    int n = x->shape[0], C = x->shape[1];
    if (N < 0) {
        ag_graph_fail(g, AG_ERR_ARG, "index_add: %d output rows", N);
        return NULL;
    }
    if (n > 0 && !idx) {
        ag_graph_fail(g, AG_ERR_ARG, "index_add: idx is NULL for %d rows", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= N) {
            ag_graph_fail(g, AG_ERR_ARG, "index_add: index %d of row %d out of range [0, %d)", idx[i], i, N);
            return NULL;
        }
    ag_tensor *y = ag__node(g, AG_OP_INDEX_ADD, 2, (int[]){N, C}, 1, &x);
    if (!y) return NULL;
    int *saved = ag__save(g, (size_t)(n ? n : 1) * sizeof(int));
    if (!saved) return NULL;
    if (n) memcpy(saved, idx, (size_t)n * sizeof(int));
    ag__impl(y)->aux = saved;
    /* distinct rows in order (the translator's): one pass, the fast way */
    if (ag__fast() && ag__increasing(saved, (size_t)n)) {
        ag__scatter_rows(y->data, (size_t)N, (size_t)C, x->data, saved, (size_t)n);
        return y;
    }
    memset(y->data, 0, y->size * sizeof(ag_real));
    for (int i = 0; i < n; i++) {
        ag_real *yr = y->data + (size_t)saved[i] * C;
        const ag_real *xr = x->data + (size_t)i * C;
        for (int c = 0; c < C; c++) yr[c] += xr[c];
    }
    return y;
}

static void index_add_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh; /* nothing in dx yet: store instead of adding */
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    const int *idx = ag__impl(y)->aux;
    size_t n = (size_t)x->shape[0], C = (size_t)x->shape[1];
    for (size_t i = 0; i < n; i++) {
        /* y[idx[i], :] += x[i, :]  ->  dx[i, :] += dy[idx[i], :] */
        const ag_real *dy = y->grad + (size_t)idx[i] * C;
        ag_real *d = dx + i * C;
        if (fresh) memcpy(d, dy, C * sizeof(ag_real));
        else
            for (size_t c = 0; c < C; c++) d[c] += dy[c];
    }
}

/* Rows 0..4 into 6: one row left out, one named twice. */
static ag_tensor *case_repeated(ag_graph *g, ag_tensor *const *in)
{
    static const int idx[] = {4, 0, 2, 4, 1};
    return ag_index_add(g, in[0], idx, 6);
}

/* The translator's use: packed rows back to a padded [B * T] layout. */
static ag_tensor *case_unpack(ag_graph *g, ag_tensor *const *in)
{
    static const int idx[] = {0, 1, 2, 4, 5};
    return ag_index_add(g, in[0], idx, 8);
}

/* Increasing indices with gaps at both ends: the one-pass forward. */
static ag_tensor *case_gaps(ag_graph *g, ag_tensor *const *in)
{
    static const int idx[] = {1, 2, 5};
    return ag_index_add(g, in[0], idx, 7);
}

static ag_tensor *case_size1(ag_graph *g, ag_tensor *const *in)
{
    static const int idx[] = {1};
    return ag_index_add(g, in[0], idx, 3);
}

static const ag_op_case cases[] = {
    {"[5, 3] into [6, 3] repeated", 1, {2}, {{5, 3}}, -1, 1, 0, case_repeated},
    {"[5, 4] into [8, 4] unpack", 1, {2}, {{5, 4}}, -1, 1, 0, case_unpack},
    {"[3, 2] into [7, 2] gaps at both ends", 1, {2}, {{3, 2}}, -1, 1, 0, case_gaps},
    {"[1, 1] into [3, 1] size-1", 1, {2}, {{1, 1}}, -1, 1, 0, case_size1},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{5, 3}}, -1e30, 1e30, 0, case_repeated},
};

const ag_op_desc ag_op_index_add = {.name = "index_add", .backward = index_add_backward, AG_CASES(cases),
    AG_EDGES(edges)};
