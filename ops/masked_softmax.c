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
 * stride along a row (0 when the mask is stretched there). */
typedef struct mask_map {
    int nd;
    int shape[AG_MAX_DIMS]; /* x's leading axes */
    size_t st[AG_MAX_DIMS]; /* the mask's stride along each of them */
    size_t along;           /* and along the row */
} mask_map;

static void mask_map_init(mask_map *mm, const ag_tensor *x, const ag_tensor *mask)
{
    size_t s = 1;
    mm->nd = x->ndim - 1;
    for (int k = x->ndim - 1; k >= 0; k--) {
        int km = mask->ndim - x->ndim + k;
        int dm = km >= 0 ? mask->shape[km] : 1;
        size_t stride = (dm == 1 && x->shape[k] != 1) ? 0 : s;
        if (k == x->ndim - 1) mm->along = stride;
        else mm->st[k] = stride, mm->shape[k] = x->shape[k];
        s *= (size_t)dm;
    }
}

static size_t mask_row(const mask_map *mm, size_t r)
{
    size_t off = 0;
    for (int k = mm->nd - 1; k >= 0; k--) {
        off += (r % (size_t)mm->shape[k]) * mm->st[k];
        r /= (size_t)mm->shape[k];
    }
    return off;
}

/* Row r's mask values (stride mm->along), or NULL without a mask. */
static const ag_real *row_mask(const ag_tensor *mask, const mask_map *mm, size_t r)
{
    return mask ? mask->data + mask_row(mm, r) : NULL;
}

/* z = mask ? scale x : fill for rows r0..r1-1 */
static void fill_rows(size_t r0, size_t r1, size_t n, const ag_tensor *x, const ag_tensor *mask,
                      const mask_map *mm, ag_real scale, ag_real fill, ag_real *y)
{
    for (size_t r = r0; r < r1; r++) {
        const ag_real *xr = x->data + r * n, *mr = row_mask(mask, mm, r);
        ag_real *yr = y + r * n;
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

/* Rows r0..r1-1 of the forward: z = mask ? scale x : fill, then
 * y = softmax(z).  z is a scratch buffer: a row read from it was written
 * rows ago, and never shares a cache line with the stores of y. */
static void forward_rows(size_t r0, size_t r1, size_t n, const ag_tensor *x, const ag_tensor *mask,
                         const mask_map *mm, ag_real scale, ag_real fill, ag_real *z, ag_real *y)
{
    fill_rows(r0, r1, n, x, mask, mm, scale, fill, z);
    ag__softmax_rows(r1 - r0, n, z + r0 * n, y + r0 * n);
}

/* What the rows of a forward (nt blocks of rows) or a backward share. */
typedef struct ms_job {
    const ag_tensor *x, *mask, *y;
    const mask_map *mm;
    size_t rows, n, nt;
    ag_real scale, fill, *z, *dx;
} ms_job;

static void forward_block(void *ctx, size_t t)
{
    const ms_job *j = ctx;
    forward_rows(j->rows * t / j->nt, j->rows * (t + 1) / j->nt, j->n, j->x, j->mask, j->mm, j->scale, j->fill, j->z,
                 j->y->data);
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
    mask_map mm = {0};
    if (mask) mask_map_init(&mm, x, mask);
    ag_real sc = (ag_real)scale, fl = (ag_real)fill;
    ag_real *z = ag__alloc(g, x->size * sizeof(ag_real));
    if (!z) return NULL;
    int nt = ag__threads_for(x->size); /* rows are independent: a block of them per thread */
    ms_job j = {.x = x, .mask = mask, .y = y, .mm = &mm, .rows = rows, .n = n, .nt = (size_t)nt, .scale = sc,
                .fill = fl, .z = z};
    ag__parallel_for((size_t)nt, nt, forward_block, &j);
    return y;
}

/* One row of dx:  y = softmax(z), z_j = scale x_j where the mask keeps j. */
static void softmax_row_backward(size_t n, const ag_real *yr, const ag_real *dyr, ag_real *dxr, ag_real scale,
                                 const ag_real *mr, size_t along)
{
    /* dot = sum_k dy_k y_k, in 8 partial sums (no chain of n additions) */
    ag_real lane[8] = {0}, dot = 0;
    size_t j0 = 0;
    for (; j0 + 8 <= n; j0 += 8)
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) lane[l] += dyr[j0 + l] * yr[j0 + l];
    for (size_t j = j0; j < n; j++) dot += dyr[j] * yr[j];
    dot += ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    /* dz_j = y_j (dy_j - dot) */
    if (mr && along == 1) {
#pragma omp simd
        for (size_t j = 0; j < n; j++) {
            ag_real keep = mr[j], d = scale * (yr[j] * (dyr[j] - dot));
            dxr[j] += keep != 0 ? d : 0;
        }
    } else if (mr) {
        for (size_t j = 0; j < n; j++)
            if (mr[j * along] != 0) dxr[j] += scale * (yr[j] * (dyr[j] - dot));
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++) dxr[j] += scale * (yr[j] * (dyr[j] - dot));
    }
}

static void row_backward(void *ctx, size_t r)
{
    const ms_job *j = ctx;
    size_t n = j->n;
    softmax_row_backward(n, j->y->data + r * n, j->y->grad + r * n, j->dx + r * n, j->scale,
                         row_mask(j->mask, j->mm, r), j->mm->along);
}

static void masked_softmax_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *mask = y->src[1];
    ag_real *dx = ag__grad(g, x);
    if (!dx || y->size == 0) return;
    size_t n = y->ndim ? (size_t)y->shape[y->ndim - 1] : 1, rows = y->size / n;
    mask_map mm = {0};
    if (mask) mask_map_init(&mm, x, mask);
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
static ag_tensor *case_unmasked(ag_graph *g, ag_tensor *const *in) { return ag__masked_softmax(g, in[0], 1.3, NULL, 0); }

static const ag_op_case cases[] = {
    {"[2, 3, 3] causal [3, 3], fill -1e9", 1, {3}, {{2, 3, 3}}, -3, 3, 0, case_causal},
    {"[2, 2, 3, 4] padding [2, 1, 1, 4], empty row", 1, {4}, {{2, 2, 3, 4}}, -3, 3, 0, case_padding},
    {"[4, 1] no mask, size-1 rows", 1, {2}, {{4, 1}}, -3, 3, 0, case_unmasked},
    {"[3, 5] no mask", 1, {2}, {{3, 5}}, -3, 3, 0, case_unmasked},
};

const ag_op_desc ag_op_masked_softmax = {
    .name = "masked_softmax", .backward = masked_softmax_backward, AG_CASES(cases)};
