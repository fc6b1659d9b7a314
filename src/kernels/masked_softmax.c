/* kernels/masked_softmax.c: masked_softmax's rows, fast (the math and the
 * reference are ops/masked_softmax.c): the fill vectorised per
 * instruction set, the softmax by the shared row kernel
 * (ag__softmax_rows), the backward's row sum in 8 lanes; rows shared among
 * the threads.  kernels/attention.c runs its heads' rows through the same
 * two row functions. */
#include "core/internal.h"
#include "kernels/kernels.h"

/* Let the compiler turn the selects below (mask ? a : b) into vector blends:
 * nothing here reads the floating-point exception flags, which is all that
 * -ftrapping-math protects, and it keeps GCC from if-converting them. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* Rows r0, r0 + 1, ... in turn: the mask's row for each, found with a
 * division per run of the innermost leading axis, not per row. */
typedef struct mask_rows {
    const ag_tensor *mask;
    const ag__mask_map *mm;
    size_t r, i, off; /* row r, index i along the innermost leading axis, its offset */
} mask_rows;

static mask_rows mask_rows_at(const ag_tensor *mask, const ag__mask_map *mm, size_t r0)
{
    mask_rows it = {mask, mm, r0, 0, 0};
    if (mask && mm->nd > 0) it.i = r0 % (size_t)mm->shape[mm->nd - 1], it.off = ag__mask_row(mm, r0);
    return it;
}

/* This row's mask values (stride mm->along), or NULL without a mask; then
 * on to the next row. */
static inline AG_ALWAYS_INLINE const ag_real *mask_rows_next(mask_rows *it)
{
    if (!it->mask) return NULL;
    const ag__mask_map *mm = it->mm;
    if (mm->nd == 0) return it->mask->data;
    const ag_real *m = it->mask->data + it->off;
    it->r++;
    if (++it->i == (size_t)mm->shape[mm->nd - 1]) it->i = 0, it->off = ag__mask_row(mm, it->r);
    else it->off += mm->st[mm->nd - 1];
    return m;
}

/* z = mask ? scale x : fill for the `rows` rows of x and z (z may be x),
 * ld apart, that are rows r0.. of the whole */
static inline AG_ALWAYS_INLINE void fill_rows(size_t r0, size_t rows, size_t n, size_t ld, const ag_real *x,
                                              const ag_tensor *mask, const ag__mask_map *mm, ag_real scale,
                                              ag_real fill, ag_real *z)
{
    mask_rows it = mask_rows_at(mask, mm, r0);
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * ld, *mr = mask_rows_next(&it);
        ag_real *yr = z + r * ld;
        if (mr && mm->along == 1) { /* the usual mask: a row of its own */
#pragma omp simd
            for (size_t j = 0; j < n; j++) {
                ag_real z = scale * xr[j], keep = mr[j];
                yr[j] = keep != 0 ? z : fill;
            }
        } else if (mr) { /* a mask broadcast along the row */
            for (size_t j = 0; j < n; j++) {
                ag_real z = scale * xr[j];
                yr[j] = mr[j * mm->along] != 0 ? z : fill;
            }
        } else {
#pragma omp simd
            for (size_t j = 0; j < n; j++) yr[j] = scale * xr[j];
        }
    }
}

/* the loops above with the widest vectors the CPU has */
#define FILL_PARAMS                                                                                               \
    (size_t r0, size_t rows, size_t n, size_t ld, const ag_real *x, const ag_tensor *mask,                         \
     const ag__mask_map *mm, ag_real scale, ag_real fill, ag_real *z)
#define FILL_ARGS (r0, rows, n, ld, x, mask, mm, scale, fill, z)
AG_ISA_CLONES(void, fill_rows, FILL_PARAMS, fill_rows FILL_ARGS)

void ag__masked_fill_rows FILL_PARAMS { AG_ISA_CALL(fill_rows, FILL_ARGS); }

void ag__masked_softmax_rows(size_t r0, size_t rows, size_t n, size_t ld, const ag_real *x, const ag_tensor *mask,
                             const ag__mask_map *mm, ag_real scale, ag_real fill, ag_real *z, ag_real *y)
{
    ag__masked_fill_rows FILL_ARGS;
    if (ld == n) ag__softmax_rows(rows, n, z, y);
    else
        for (size_t r = 0; r < rows; r++) ag__softmax_rows(1, n, z + r * ld, y + r * ld);
}

/* What the rows of a forward (nt blocks of rows) or a backward share. */
typedef struct ms_job {
    const ag_tensor *x, *mask, *y;
    const ag__mask_map *mm;
    size_t rows, n, nt;
    ag_real scale, fill, *z, *dx;
} ms_job;

/* Block t of the forward's rows: z = mask ? scale x : fill, then
 * y = softmax(z).  z is a scratch buffer: a row read from it was written
 * rows ago, and never shares a cache line with the stores of y. */
static void forward_block(void *ctx, size_t t)
{
    const ms_job *j = ctx;
    size_t r0 = j->rows * t / j->nt, r1 = j->rows * (t + 1) / j->nt, n = j->n;
    ag__masked_softmax_rows(r0, r1 - r0, n, n, j->x->data + r0 * n, j->mask, j->mm, j->scale, j->fill, j->z + r0 * n,
                            j->y->data + r0 * n);
}

/* One row of dx:  y = softmax(z), z_j = scale x_j where the mask keeps j.
 * add: dx += the row's gradient; otherwise dx = it (dx may then be dy). */
static inline AG_ALWAYS_INLINE void softmax_row_backward(size_t n, const ag_real *yr, const ag_real *dyr, ag_real *dxr,
                                                         ag_real scale, const ag_real *mr, size_t along, bool add)
{
    /* dot = sum_k dy_k y_k, in 8 partial sums (no chain of n additions) */
    ag_real lane[8] = {0}, dot = 0;
    size_t j0 = 0;
    for (; j0 + 8 <= n; j0 += 8)
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) lane[l] += dyr[j0 + l] * yr[j0 + l];
    for (size_t j = j0; j < n; j++) dot += dyr[j] * yr[j];
    dot += ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    ag_real keep_old = add ? 1 : 0; /* dx_j = keep_old dx_j + its gradient (0 dx_j: dx may be dy) */
    /* dz_j = y_j (dy_j - dot) */
    if (mr && along == 1) {
#pragma omp simd
        for (size_t j = 0; j < n; j++) {
            ag_real keep = mr[j], d = scale * (yr[j] * (dyr[j] - dot));
            dxr[j] = (keep_old != 0 ? dxr[j] : 0) + (keep != 0 ? d : 0);
        }
    } else if (mr) {
        for (size_t j = 0; j < n; j++)
            dxr[j] = (keep_old != 0 ? dxr[j] : 0) + (mr[j * along] != 0 ? scale * (yr[j] * (dyr[j] - dot)) : 0);
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++) dxr[j] = (keep_old != 0 ? dxr[j] : 0) + scale * (yr[j] * (dyr[j] - dot));
    }
}

#define BACKWARD_PARAMS                                                                                           \
    (size_t r0, size_t rows, size_t n, size_t ld, const ag_real *y, const ag_real *dy, ag_real *dx,                \
     const ag_tensor *mask, const ag__mask_map *mm, ag_real scale, bool add)
#define BACKWARD_ARGS (r0, rows, n, ld, y, dy, dx, mask, mm, scale, add)
static inline AG_ALWAYS_INLINE void backward_rows BACKWARD_PARAMS
{
    mask_rows it = mask_rows_at(mask, mm, r0);
    for (size_t r = 0; r < rows; r++)
        softmax_row_backward(n, y + r * ld, dy + r * ld, dx + r * ld, scale, mask_rows_next(&it), mm->along, add);
}
AG_ISA_CLONES(void, backward_rows, BACKWARD_PARAMS, backward_rows BACKWARD_ARGS)

void ag__masked_softmax_rows_backward BACKWARD_PARAMS { AG_ISA_CALL(backward_rows, BACKWARD_ARGS); }

static void row_backward(void *ctx, size_t r)
{
    const ms_job *j = ctx;
    size_t n = j->n;
    ag__masked_softmax_rows_backward(r, 1, n, n, j->y->data + r * n, j->y->grad + r * n, j->dx + r * n, j->mask, j->mm,
                                     j->scale, true);
}

bool ag__k_masked_softmax_forward(ag_graph *g, const ag_tensor *x, const ag_tensor *mask, const ag__mask_map *mm,
                                  ag_real scale, ag_real fill, ag_tensor *y)
{
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1, rows = x->size / n;
    ag_real *z = ag__alloc(g, x->size * sizeof(ag_real));
    if (!z) return true; /* the graph holds the failure */
    int nt = ag__threads_for(x->size); /* rows are independent: a block of them per thread */
    ms_job j = {.x = x, .mask = mask, .y = y, .mm = mm, .rows = rows, .n = n, .nt = (size_t)nt, .scale = scale,
                .fill = fill, .z = z};
    ag__parallel_for((size_t)nt, nt, forward_block, &j);
    return true;
}

bool ag__k_masked_softmax_backward(const ag_tensor *y, const ag_tensor *mask, const ag__mask_map *mm, ag_real scale,
                                   ag_real *dx)
{
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1, rows = y->size / n;
    ms_job j = {.mask = mask, .y = y, .mm = mm, .n = n, .scale = scale, .dx = dx};
    ag__parallel_for(rows, ag__threads_for(y->size), row_backward, &j);
    return true;
}
