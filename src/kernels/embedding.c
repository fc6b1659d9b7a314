/* kernels/embedding.c: embedding's rows, fast (the math and the reference
 * are ops/embedding.c): the gather and the scatter-add by vector loops
 * inlined per instruction set, and a fresh gradient of distinct ids in
 * order made in one pass (ag__scatter_rows). */
#include "core/internal.h"
#include "kernels/kernels.h"

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

bool ag__k_embedding_forward(size_t n, size_t C, const int *ids, const ag_real *weight, ag_real *y)
{
    AG_ISA_CALL(gather, (n, C, ids, weight, y));
    return true;
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

bool ag__k_embedding_backward(size_t n, size_t V, size_t C, const int *ids, bool increasing, const ag_real *dy,
                             ag_real *dweight, bool fresh)
{
    if (fresh && increasing) { /* rows picked once each, in order: store them, zeros between */
        ag__scatter_rows(dweight, V, C, dy, ids, n);
        return true;
    }
    if (fresh) memset(dweight, 0, V * C * sizeof(ag_real));
    AG_ISA_CALL(scatter_add, (n, C, ids, dy, dweight)); /* y[p, :] = weight[ids[p], :] */
    return true;
}
