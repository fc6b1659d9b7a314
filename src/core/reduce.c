/* reduce.c: sums and means over an axis (ops/sum.c, ops/mean.c) and their
 * backward, and the row scatter of index_add. */
#include "core/internal.h"

/* the row sums' loops vectorised as core/blocks.h's */
#include "core/blocks.h"

bool ag__increasing(const int *idx, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (idx[i] <= idx[i - 1]) return false;
    return true;
}

void ag__scatter_rows(ag_real *dst, size_t N, size_t C, const ag_real *src, const int *idx, size_t n)
{
    size_t next = 0; /* the first row not yet written */
    for (size_t i = 0; i < n; i++) {
        size_t r = (size_t)idx[i];
        if (r > next) memset(dst + next * C, 0, (r - next) * C * sizeof(ag_real));
        memcpy(dst + r * C, src + i * C, C * sizeof(ag_real));
        next = r + 1;
    }
    if (N > next) memset(dst + next * C, 0, (N - next) * C * sizeof(ag_real));
}

/* ---- reductions ------------------------------------------------------------
 * x is viewed as [outer, N, inner] around the reduced axis (N = every
 * element, outer = inner = 1, for a reduction over all of x). */
static void reduce_split(const ag_tensor *x, int axis, size_t *outer, size_t *n, size_t *inner)
{
    if (axis < 0) {
        *outer = *inner = 1;
        *n = x->size;
        return;
    }
    *outer = ag__numel(axis, x->shape);
    *n = (size_t)x->shape[axis];
    *inner = ag__numel(x->ndim - axis - 1, x->shape + axis + 1);
}

/* y[r] = sum of row r of x, `rows` rows of n (ag__sum, core/blocks.h: its
 * partial sums and tree in vector registers); one clone per instruction
 * set, the same order of additions in each. */
#define SUM_ROWS_PARAMS (size_t rows, size_t n, const ag_real *x, ag_real *y)
static inline AG_ALWAYS_INLINE void sum_rows SUM_ROWS_PARAMS
{
    for (size_t r = 0; r < rows; r++) y[r] = ag__sum(n, x + r * n);
}
AG_ISA_CLONES(void, sum_rows, SUM_ROWS_PARAMS, sum_rows(rows, n, x, y))

/* Its backward: row r of dx (+)= dy[r] (/ n), stored where `fresh`. */
#define SPREAD_PARAMS (size_t rows, size_t n, const ag_real *dy, bool average, ag_real *dx, bool fresh)
static inline AG_ALWAYS_INLINE void spread_rows SPREAD_PARAMS
{
    for (size_t r = 0; r < rows; r++) {
        ag_real v = average ? dy[r] / (ag_real)n : dy[r], *d = dx + r * n;
        if (fresh)
#pragma omp simd
            for (size_t k = 0; k < n; k++) d[k] = v;
        else
#pragma omp simd
            for (size_t k = 0; k < n; k++) d[k] += v;
    }
}
AG_ISA_CLONES(void, spread_rows, SPREAD_PARAMS, spread_rows(rows, n, dy, average, dx, fresh))

ag_tensor *ag__reduce(ag_graph *g, int op, ag_tensor *x, int axis, int keepdim, bool average)
{
    const char *name = ag_op_name(op);
    if (!ag__ok(g, name, 1, x)) return NULL;
    int a = -1, shape[AG_MAX_DIMS], nd = 0;
    char buf[96];
    if (axis != AG__ALL_AXES) {
        if ((a = ag__axis(g, name, x, axis)) < 0) return NULL;
        for (int i = 0; i < x->ndim; i++) {
            if (i != a) shape[nd++] = x->shape[i];
            else if (keepdim) shape[nd++] = 1;
        }
    }
    size_t outer, n, inner;
    reduce_split(x, a, &outer, &n, &inner);
    if (average && n == 0) {
        if (a < 0) ag_graph_fail(g, AG_ERR_SHAPE, "%s: axis of size 0: mean of all of %s", name, ag_shape_str(x, buf, sizeof buf));
        else ag_graph_fail(g, AG_ERR_SHAPE, "%s: axis of size 0: axis %d of %s", name, axis, ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    ag_tensor *y = ag__node(g, op, nd, shape, 1, &x);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = a;
    ag__impl(y)->iarg[1] = a >= 0 && keepdim;
    if (inner == 1) /* contiguous runs: each summed in vector lanes */
        AG_ISA_CALL(sum_rows, (outer, n, x->data, y->data));
    for (size_t o = 0; o < outer; o++) {
        ag_real *yo = y->data + o * inner;
        if (inner > 1) { /* inner sums side by side, each in order */
            for (size_t i = 0; i < inner; i++) yo[i] = 0;
            for (size_t k = 0; k < n; k++) {
                const ag_real *xk = x->data + (o * n + k) * inner;
#pragma omp simd
                for (size_t i = 0; i < inner; i++) yo[i] += xk[i];
            }
        }
        if (average)
            for (size_t i = 0; i < inner; i++) yo[i] /= (ag_real)n;
    }
    return y;
}

void ag__reduce_backward(ag_graph *g, ag_tensor *y, bool average)
{
    ag_tensor *x = y->src[0];
    bool fresh; /* dx untouched: every element is stored once */
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    size_t outer, n, inner;
    reduce_split(x, ag__impl(y)->iarg[0], &outer, &n, &inner);
    /* y[o, i] = sum_k x[o, k, i] (/ n)  ->  dx[o, k, i] += dy[o, i] (/ n) */
    if (inner == 1) { /* one output a row: the same share for every k */
        AG_ISA_CALL(spread_rows, (outer, n, y->grad, average, dx, fresh));
        return;
    }
    for (size_t o = 0; o < outer; o++) {
        const ag_real *dyo = y->grad + o * inner;
        ag_real *dxo = dx + o * n * inner;
        for (size_t k = 0; k < n; k++)
            for (size_t i = 0; i < inner; i++) {
                ag_real v = average ? dyo[i] / (ag_real)n : dyo[i];
                dxo[k * inner + i] = fresh ? v : dxo[k * inner + i] + v;
            }
    }
}
