/* kernels/permute.c: permute's walk when y's innermost axis is x's own
 * (the math and the reference are ops/permute.c): then each run of y's
 * last axis is a run of adjacent values of x too, copied (or added) by a
 * vector loop.  Runs are short (a head's 16 values): plain loops, no
 * calls.  Copies and single adds: the reference's bits. */
#include "core/internal.h"
#include "kernels/kernels.h"

/* What the walk does with each run: y = x (forward), dx = dy or dx += dy. */
enum { GATHER, SCATTER, ADD };

/* Walk y (shape[0..nd), row-major) in runs of its last axis, x's offset
 * kept by an odometer over the outer axes (stride st[k] along axis k).
 * GATHER reads src = x and writes dst = y; SCATTER and ADD read src = dy
 * and write dst = dx. */
static void walk_runs(int nd, const int *shape, const size_t *st, const ag_real *src, ag_real *dst, int mode)
{
    size_t size = ag__numel(nd, shape), n = (size_t)shape[nd - 1], off = 0;
    int idx[AG_MAX_DIMS] = {0};
    for (size_t r = 0; n && r < size; r += n) {
        const ag_real *s = src + (mode == GATHER ? off : r);
        ag_real *d = dst + (mode == GATHER ? r : off);
        if (mode == ADD)
#pragma omp simd
            for (size_t j = 0; j < n; j++) d[j] += s[j];
        else
#pragma omp simd
            for (size_t j = 0; j < n; j++) d[j] = s[j];
        for (int k = nd - 2; k >= 0; k--) { /* the next run: the last outer axis fastest */
            off += st[k];
            if (++idx[k] < shape[k]) break;
            off -= st[k] * (size_t)shape[k], idx[k] = 0;
        }
    }
}

bool ag__k_permute_forward(int nd, const int *shape, const size_t *st, const ag_real *x, ag_real *y)
{
    if (nd == 0 || st[nd - 1] != 1) return false;
    walk_runs(nd, shape, st, x, y, GATHER);
    return true;
}

bool ag__k_permute_backward(int nd, const int *shape, const size_t *st, const ag_real *dy, ag_real *dx, bool fresh)
{
    if (nd == 0 || st[nd - 1] != 1) return false;
    walk_runs(nd, shape, st, dy, dx, fresh ? SCATTER : ADD);
    return true;
}
