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
 * farg[1] = fill. */
#include "core/internal.h"

/* Let the compiler turn the selects below (mask ? a : b) into vector blends:
 * nothing here reads the floating-point exception flags, which is all that
 * -ftrapping-math protects, and it keeps GCC from if-converting them. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdio.h>

/* src/core/elementwise.c: y_i = exp(x_i - shift), returns the sum; src/core/threads.c:
 * threads for a loop touching about `work` values. */

/* Where row r of x (rows of S values) starts in the mask, and the mask's
 * stride along a row (0 when the mask is stretched there): ag__mask_map,
 * internal.h.  x has ndim axes of the given shape. */
void ag__mask_map_init(ag__mask_map *mm, int ndim, const int *shape, const ag_tensor *mask)
{
    size_t s = 1;
    mm->nd = ndim - 1;
    for (int k = ndim - 1; k >= 0; k--) {
        int km = mask->ndim - ndim + k;
        int dm = km >= 0 ? mask->shape[km] : 1;
        size_t stride = (dm == 1 && shape[k] != 1) ? 0 : s;
        if (k == ndim - 1) mm->along = stride;
        else mm->st[k] = stride, mm->shape[k] = shape[k];
        s *= (size_t)dm;
    }
}

size_t ag__mask_row(const ag__mask_map *mm, size_t r)
{
    size_t off = 0;
    for (int k = mm->nd - 1; k >= 0; k--) {
        off += (r % (size_t)mm->shape[k]) * mm->st[k];
        r /= (size_t)mm->shape[k];
    }
    return off;
}

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

void ag__masked_softmax_rows(size_t r0, size_t rows, size_t n, size_t ld, const ag_real *x, const ag_tensor *mask,
                             const ag__mask_map *mm, ag_real scale, ag_real fill, ag_real *z, ag_real *y)
{
    AG_ISA_CALL(fill_rows, FILL_ARGS);
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
    size_t n = x->ndim ? (size_t)x->shape[x->ndim - 1] : 1, rows = x->size / n;
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, x->ndim, x->shape, mask);
    ag_real sc = (ag_real)scale, fl = (ag_real)fill;
    ag_real *z = ag__alloc(g, x->size * sizeof(ag_real));
    if (!z) return NULL;
    int nt = ag__threads_for(x->size); /* rows are independent: a block of them per thread */
    ms_job j = {.x = x, .mask = mask, .y = y, .mm = &mm, .rows = rows, .n = n, .nt = (size_t)nt, .scale = sc,
                .fill = fl, .z = z};
    ag__parallel_for((size_t)nt, nt, forward_block, &j);
    return y;
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

static void masked_softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *mask = y->src[1];
    ag_real *dx = ag__grad(g, x);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1, rows = y->size / n;
    ag__mask_map mm = {0};
    if (mask) ag__mask_map_init(&mm, x->ndim, x->shape, mask);
    ag_real sc = (ag_real)ag__impl(y)->farg[0];
    ms_job j = {.mask = mask, .y = y, .mm = &mm, .n = n, .scale = sc, .dx = dx};
    ag__parallel_for(rows, ag__threads_for(y->size), row_backward, &j);
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

const ag_op_desc ag_op_masked_softmax = {
    .name = "masked_softmax", .backward = masked_softmax_backward, AG_CASES(cases)};
