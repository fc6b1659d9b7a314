/* elementwise.c: the loops shared by element-wise ops, so that each op file
 * holds only its math; softmax's rows (exps by kernels/fastmath.h), the row
 * max (and cross-entropy's maxima and exps, sixteen rows at a time) and
 * the reductions.  The float build's exp, log, tanh and GELU
 * kernels are kernels/fastmath.c.
 *
 * Broadcasting (NumPy's rule): align shapes on the right; two axes agree
 * when they are equal or one is 1; a missing axis counts as 1.  The output
 * axis is the larger.  An input is read with stride 0 along its stretched
 * axes.  Backward adds the output gradient into the input at the same
 * (stride-0) positions, which sums it over the stretched axes.
 *
 * Threads (ag_set_threads) take pieces of a long run, or of the rows of a
 * binary op with one input stretched along them; a backward whose
 * inputs were stretched stays on one thread, since many outputs add into
 * one input element. */

#include "core/internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* Let the compiler turn selects (c ? a : b) into vector blends: nothing here
 * reads the floating-point exception flags, which is all that
 * -ftrapping-math protects, and it keeps GCC from if-converting them.  Set
 * before core/blocks.h, whose loops must share their callers' options. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "core/blocks.h"
#include "kernels/fastmath.h"

bool ag__broadcast_shape(ag_graph *g, const char *op, const ag_tensor *a,
                         const ag_tensor *b, int *ndim, int *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            ag_graph_fail(g, AG_ERR_SHAPE, "%s: shapes do not broadcast: %s and %s (axis %d: %d vs %d)", op,
                          ag_shape_str(a, sa, sizeof sa), ag_shape_str(b, sb, sizeof sb), i - n, da, db);
            return false;
        }
        shape[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return true;
}

bool ag__mask_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *mask)
{
    int nd, shape[AG_MAX_DIMS];
    if (!ag__broadcast_shape(g, op, x, mask, &nd, shape)) return false;
    bool fits = nd == x->ndim;
    for (int i = 0; fits && i < nd; i++) fits = shape[i] == x->shape[i];
    if (!fits) {
        char sx[96], sm[96];
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: mask %s does not broadcast to x's shape %s", op,
                      ag_shape_str(mask, sm, sizeof sm), ag_shape_str(x, sx, sizeof sx));
    }
    return fits;
}

/* src/core/threads.c: threads for a loop touching about `work` values. */

/* Start of piece t of nt of n elements, on a 16-element boundary (a cache
 * line of floats: threads never write the same line).  Element-wise ops
 * give the same values however the pieces fall. */
static size_t piece(size_t n, int t, int nt)
{
    size_t at = n / 16 * (size_t)t / (size_t)nt * 16;
    return t == nt ? n : at;
}

/* Strides (in elements) to read x as if it had out's shape: 0 on stretched
 * or missing axes. */
static void bcast_strides(const ag_tensor *x, int ndim, const int *shape, size_t *st)
{
    size_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        int ix = x->ndim - ndim + i;
        int dx = ix >= 0 ? x->shape[ix] : 1;
        st[i] = (dx == 1 && shape[i] != 1) ? 0 : s;
        s *= (size_t)dx;
    }
}

/* Walk the output in runs along its last axis; for run r, call visit with the
 * offsets of a and b.  Offsets advance like an odometer over the outer axes. */
typedef struct walk {
    int ndim;
    int shape[AG_MAX_DIMS];
    size_t sa[AG_MAX_DIMS], sb[AG_MAX_DIMS];
} walk;

static void walk_init(walk *w, const ag_tensor *a, const ag_tensor *b, int ndim, const int *shape)
{
    w->ndim = ndim;
    for (int i = 0; i < ndim; i++) w->shape[i] = shape[i];
    bcast_strides(a, ndim, shape, w->sa);
    bcast_strides(b, ndim, shape, w->sb);
    /* Fold an axis into the one after it wherever both inputs continue
     * their run across the boundary (same shapes fold into one run of the
     * whole tensor; [B, T, C] + [T, C] into runs of T C): fewer, longer
     * runs, the same elements in the same order. */
    int n = ndim;
    while (n > 1 && w->sa[n - 2] == w->sa[n - 1] * (size_t)w->shape[n - 1] &&
           w->sb[n - 2] == w->sb[n - 1] * (size_t)w->shape[n - 1]) {
        w->shape[n - 2] *= w->shape[n - 1];
        w->sa[n - 2] = w->sa[n - 1], w->sb[n - 2] = w->sb[n - 1];
        n--;
    }
    w->ndim = n;
}

/* Advance idx over axes [0, ndim-1) (the last axis is the run). */
static void walk_next(const walk *w, int *idx, size_t *oa, size_t *ob)
{
    for (int k = w->ndim - 2; k >= 0; k--) {
        idx[k]++;
        *oa += w->sa[k];
        *ob += w->sb[k];
        if (idx[k] < w->shape[k]) return;
        *oa -= w->sa[k] * (size_t)w->shape[k];
        *ob -= w->sb[k] * (size_t)w->shape[k];
        idx[k] = 0;
    }
}

/* A binary op's forward over one long run, or over rows, cut in nt
 * pieces (each piece's outputs its own: any count gives the same values). */
typedef struct binary_run {
    ag_binary_fwd fwd;
    ag_binary_rows rows_fwd;
    const ag_tensor *a, *b, *y;
    size_t run, ra, rb; /* run: values in the run, or in a row; ra, rb: strides in it */
    size_t rows, rsa, rsb; /* rows: how many; rsa, rsb: a's and b's row strides */
    int nt;
} binary_run;

static void binary_piece(void *ctx, size_t t)
{
    const binary_run *j = ctx;
    size_t i0 = piece(j->run, (int)t, j->nt), i1 = piece(j->run, (int)t + 1, j->nt);
    j->fwd(i1 - i0, j->a->data + i0 * j->ra, j->ra, j->b->data + i0 * j->rb, j->rb, j->y->data + i0);
}

static void binary_rows_piece(void *ctx, size_t t)
{
    const binary_run *j = ctx;
    size_t r0 = j->rows * t / (size_t)j->nt, r1 = j->rows * (t + 1) / (size_t)j->nt;
    j->rows_fwd(r1 - r0, j->run, j->a->data + r0 * j->rsa, j->rsa, j->b->data + r0 * j->rsb, j->rsb,
                j->y->data + r0 * j->run);
}

ag_tensor *ag__binary(ag_graph *g, int op, ag_tensor *a, ag_tensor *b, ag_binary_fwd fwd)
{
    return ag__binary_rows(g, op, a, b, fwd, NULL);
}

ag_tensor *ag__binary_rows(ag_graph *g, int op, ag_tensor *a, ag_tensor *b, ag_binary_fwd fwd,
                           ag_binary_rows rows_fwd)
{
    const char *name = ag_op_name(op);
    if (!ag__ok(g, name, 2, a, b)) return NULL;
    int ndim, shape[AG_MAX_DIMS];
    if (!ag__broadcast_shape(g, name, a, b, &ndim, shape)) return NULL;
    ag_tensor *src[2] = {a, b};
    ag_tensor *y = ag__node(g, op, ndim, shape, 2, src);
    if (!y || y->size == 0) return y;
    if (ndim == 0) {
        fwd(1, a->data, 1, b->data, 1, y->data);
        return y;
    }
    walk w;
    walk_init(&w, a, b, ndim, shape);
    size_t run = (size_t)w.shape[w.ndim - 1], nruns = y->size / run;
    size_t ra = w.sa[w.ndim - 1], rb = w.sb[w.ndim - 1];
    if (nruns == 1) { /* one long run (inputs of y's shape): a piece per thread */
        binary_run j = {.fwd = fwd, .a = a, .b = b, .y = y, .run = run, .ra = ra, .rb = rb,
                        .nt = ag__threads_for(y->size)};
        ag__parallel_for((size_t)j.nt, j.nt, binary_piece, &j);
        return y;
    }
    if (rows_fwd && w.ndim == 2 && ra == 1 && rb == 1) {
        /* rows of contiguous values, one input the same row each time (a
         * bias): one call for all of them, pieces of rows to the threads */
        binary_run j = {.rows_fwd = rows_fwd, .a = a, .b = b, .y = y, .run = run, .rows = nruns,
                        .rsa = w.sa[0], .rsb = w.sb[0], .nt = ag__threads_for(y->size)};
        ag__parallel_for((size_t)j.nt, j.nt, binary_rows_piece, &j);
        return y;
    }
    int idx[AG_MAX_DIMS] = {0};
    size_t oa = 0, ob = 0;
    for (size_t r = 0; r < nruns; r++) {
        fwd(run, a->data + oa, ra, b->data + ob, rb, y->data + r * run);
        walk_next(&w, idx, &oa, &ob);
    }
    return y;
}

/* bwd over elements [i0, i1) of inputs of y's shape: a fresh gradient
 * (ag__grad_fresh: reserved, nothing written yet) is stored, not added to. */
static void binary_bwd_range(ag_binary_bwd bwd, const ag_tensor *a, const ag_tensor *b, const ag_tensor *y,
                             ag_real *da, bool fa, ag_real *db, bool fb, size_t i0, size_t i1)
{
    bwd(i1 - i0, a->data + i0, 1, b->data + i0, 1, y->data + i0, y->grad + i0, da ? da + i0 : NULL, fa,
        db ? db + i0 : NULL, fb);
}

/* The backward of one long run, cut in nt pieces. */
typedef struct binary_bwd_run {
    ag_binary_bwd bwd;
    const ag_tensor *a, *b, *y;
    ag_real *da, *db;
    bool fa, fb;
    size_t run;
    int nt;
} binary_bwd_run;

static void binary_bwd_piece(void *ctx, size_t t)
{
    const binary_bwd_run *j = ctx;
    binary_bwd_range(j->bwd, j->a, j->b, j->y, j->da, j->fa, j->db, j->fb, piece(j->run, (int)t, j->nt),
                     piece(j->run, (int)t + 1, j->nt));
}

void ag__binary_backward(ag_graph *g, ag_tensor *y, ag_binary_bwd bwd)
{
    ag_tensor *a = y->src[0], *b = y->src[1];
    /* a's buffer may be y's own (ag_backward, for add and sub): then da is
     * dy already, and only b's part is computed */
    bool fa = false, fb = false, shared = a->grad && a->grad == y->grad;
    ag_real *da = a->requires_grad && !shared ? ag__grad_fresh(g, a, &fa) : NULL;
    ag_real *db = b->requires_grad ? ag__grad_fresh(g, b, &fb) : NULL;
    /* a + a: the second ag__grad_fresh finds the buffer taken (fb false),
     * so it is zeroed once, piece by piece, and both parts add into it */
    if ((a->requires_grad && !shared && !da) || (b->requires_grad && !db)) return;
    if (y->size == 0 || (!da && !db)) return; /* nothing left to compute */
    walk w;
    if (y->ndim > 0) walk_init(&w, a, b, y->ndim, y->shape);
    size_t run = y->ndim ? (size_t)w.shape[w.ndim - 1] : 1, nruns = y->size / run;
    size_t ra = y->ndim ? w.sa[w.ndim - 1] : 1, rb = y->ndim ? w.sb[w.ndim - 1] : 1;
    if (nruns == 1 && ra == 1 && rb == 1) {
        /* one long run in which no input is stretched: each element of da
         * and db has one contribution, so pieces can go to threads */
        binary_bwd_run j = {bwd, a, b, y, da, db, fa, fb, run, ag__threads_for(y->size)};
        ag__parallel_for((size_t)j.nt, j.nt, binary_bwd_piece, &j);
        return;
    }
    /* broadcast: many outputs add into one input element; zero first */
    if (fa) memset(da, 0, a->size * sizeof(ag_real));
    if (fb) memset(db, 0, b->size * sizeof(ag_real));
    int idx[AG_MAX_DIMS] = {0};
    size_t oa = 0, ob = 0;
    for (size_t r = 0; r < nruns; r++) {
        bwd(run, a->data + oa, ra, b->data + ob, rb, y->data + r * run, y->grad + r * run,
            da ? da + oa : NULL, false, db ? db + ob : NULL, false);
        walk_next(&w, idx, &oa, &ob);
    }
}

void ag__reduce_broadcast_add(const ag_real *grad, int from_ndim, const int *from_shape,
                              ag_real *dst, int to_ndim, const int *to_shape)
{
    ag_tensor to = {0};
    to.ndim = to_ndim;
    for (int i = 0; i < to_ndim; i++) to.shape[i] = to_shape[i];
    size_t n = ag__numel(from_ndim, from_shape);
    if (n == 0) return;
    if (from_ndim == 0) {
        dst[0] += grad[0];
        return;
    }
    walk w;
    walk_init(&w, &to, &to, from_ndim, from_shape);
    size_t run = (size_t)w.shape[w.ndim - 1], nruns = n / run, rs = w.sa[w.ndim - 1];
    int idx[AG_MAX_DIMS] = {0};
    size_t o = 0, unused = 0;
    for (size_t r = 0; r < nruns; r++) {
        const ag_real *gr = grad + r * run;
        ag_real *d = dst + o;
        for (size_t i = 0; i < run; i++) d[i * rs] += gr[i];
        walk_next(&w, idx, &o, &unused);
    }
}

/* A unary op's forward or backward, cut in nt pieces. */
typedef struct unary_run {
    ag_unary_fwd fwd;
    ag_unary_fwd_slope fwd_slope;
    ag_unary_bwd bwd;
    const ag_tensor *x, *y;
    ag_real *dx, *slope; /* slope: dy/dx, or NULL */
    bool fresh;
    int nt;
} unary_run;

static void unary_piece(void *ctx, size_t t)
{
    const unary_run *j = ctx;
    size_t i0 = piece(j->x->size, (int)t, j->nt), i1 = piece(j->x->size, (int)t + 1, j->nt);
    if (j->fwd_slope)
        j->fwd_slope(i1 - i0, j->x->data + i0, j->y->data + i0, j->slope ? j->slope + i0 : NULL);
    else
        j->fwd(i1 - i0, j->x->data + i0, j->y->data + i0, ag__impl(j->y)->farg);
}

ag_tensor *ag__unary(ag_graph *g, int op, ag_tensor *x, ag_unary_fwd fwd, double farg0)
{
    if (!ag__ok(g, ag_op_name(op), 1, x)) return NULL;
    ag_tensor *y = ag__node(g, op, x->ndim, x->shape, 1, &x);
    if (!y) return NULL;
    ag__impl(y)->farg[0] = farg0;
    unary_run j = {.fwd = fwd, .x = x, .y = y, .nt = ag__threads_for(x->size)}; /* a piece per thread */
    ag__parallel_for((size_t)j.nt, j.nt, unary_piece, &j);
    return y;
}

/* bwd over elements [i0, i1): a fresh dx is stored, not added to. */
static void unary_bwd_range(ag_unary_bwd bwd, const ag_tensor *x, const ag_tensor *y, ag_real *dx, bool fresh,
                            size_t i0, size_t i1)
{
    bwd(i1 - i0, x->data + i0, y->data + i0, y->grad + i0, dx + i0, fresh, ag__impl(y)->farg);
}

static void unary_bwd_piece(void *ctx, size_t t)
{
    const unary_run *j = ctx;
    unary_bwd_range(j->bwd, j->x, j->y, j->dx, j->fresh, piece(j->y->size, (int)t, j->nt),
                    piece(j->y->size, (int)t + 1, j->nt));
}

void ag__unary_backward(ag_graph *g, ag_tensor *y, ag_unary_bwd bwd)
{
    ag_tensor *x = y->src[0];
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    unary_run j = {.bwd = bwd, .x = x, .y = y, .dx = dx, .fresh = fresh, .nt = ag__threads_for(y->size)};
    ag__parallel_for((size_t)j.nt, j.nt, unary_bwd_piece, &j);
}

/* The slope dy/dx saved by the forward (aux) when y will be differentiated:
 * y requires grad, which it never does in no-grad mode.  Then nothing is
 * kept, and the forward computes y alone. */
ag_tensor *ag__unary_slope(ag_graph *g, int op, ag_tensor *x, ag_unary_fwd_slope fwd)
{
    if (!ag__ok(g, ag_op_name(op), 1, x)) return NULL;
    ag_tensor *y = ag__node(g, op, x->ndim, x->shape, 1, &x);
    if (!y) return NULL;
    ag_real *slope = NULL;
    if (y->requires_grad && !(slope = ag__save(g, (x->size ? x->size : 1) * sizeof(ag_real)))) return NULL;
    ag__impl(y)->aux = slope;
    unary_run j = {.fwd_slope = fwd, .x = x, .y = y, .slope = slope, .nt = ag__threads_for(x->size)};
    ag__parallel_for((size_t)j.nt, j.nt, unary_piece, &j);
    return y;
}

/* dx (+)= dy * s over n elements, one clone per instruction set */
#define SLOPE_PARAMS (size_t n, const ag_real *dy, const ag_real *s, ag_real *dx, bool fresh)
AG_INLINE void slope_loop SLOPE_PARAMS
{
    if (fresh) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] = dy[i] * s[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += dy[i] * s[i];
    }
}
AG_ISA_CLONES(void, slope_loop, SLOPE_PARAMS, slope_loop(n, dy, s, dx, fresh))

static void slope_bwd_piece(void *ctx, size_t t)
{
    const unary_run *j = ctx;
    size_t i0 = piece(j->y->size, (int)t, j->nt), i1 = piece(j->y->size, (int)t + 1, j->nt);
    AG_ISA_CALL(slope_loop, (i1 - i0, j->y->grad + i0, j->slope + i0, j->dx + i0, j->fresh));
}

void ag__unary_slope_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh = true; /* dx = dy * s in place, in one buffer for both (grad_in_place) */
    ag_real *dx = x->grad && x->grad == y->grad ? x->grad : ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    unary_run j = {.y = y, .dx = dx, .slope = ag__impl(y)->aux, .fresh = fresh, .nt = ag__threads_for(y->size)};
    ag__parallel_for((size_t)j.nt, j.nt, slope_bwd_piece, &j);
}

/* ---- exp over a row (softmax and its fused forms) ----------------------- */

/* NaN and +inf in a row of softmax, log-softmax or cross-entropy: the row
 * max passes NaNs over (one vector max an element), and the exps still
 * see them: exp(NaN - max) is NaN, and so is exp(inf - inf) when the max
 * is +inf; the row's sum is then NaN and so is every output, as in
 * PyTorch.  The one row this misses is one with nothing above -inf but a
 * NaN, whose max is -inf, the mark of a fully masked row: there, and only
 * there (a rare branch), the row is searched for a NaN. */
static bool has_nan(size_t n, const ag_real *x)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != x[i]) return true;
    return false;
}

#ifndef AG_DOUBLE
/* Here only, a * b + c may be one fused multiply-add where the clone's
 * instruction set has one (the polynomial below is a chain of them): the
 * result stays within exp_core's error bound, and the same on every run. */
AG_FUSED_BEGIN
#endif

/* The largest of n values, in 16 running maxima (vector lanes): the max
 * does not depend on the order, so this is the same value as a plain
 * loop.  NaNs are passed over, but a row of nothing above -inf that holds
 * a NaN gives NaN: it is not a fully masked row (see has_nan).
 * max_lanes keeps the running maxima of the whole vectors in lane and
 * returns the rest's max; row_max folds the lanes in pairs. */
static inline AG_ALWAYS_INLINE ag_real max_lanes(size_t n, const ag_real *x, ag_real lane[16])
{
    ag_real m = -INFINITY;
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            ag_real v = x[i + l];
            lane[l] = v > lane[l] ? v : lane[l];
        }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static inline AG_ALWAYS_INLINE ag_real row_max(size_t n, const ag_real *x)
{
    ag_real lane[16], m = max_lanes(n, x, lane);
    for (int w = 8; w >= 1; w /= 2) /* the lanes in pairs: 4 vector steps */
#pragma GCC unroll 8
        for (int l = 0; l < w; l++) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
    m = lane[0] > m ? lane[0] : m;
    return m == -INFINITY && has_nan(n, x) ? NAN : m;
}

AG_ISA_CLONES(ag_real, row_max, (size_t n, const ag_real *x), return row_max(n, x))
ag_real ag__row_max(size_t n, const ag_real *x) { return AG_ISA_CALL(row_max, (n, x)); }

#ifndef AG_DOUBLE
/* y_i = exp(x_i - shift) for i < n (y may be x), added up in 16 partial
 * sums (vector lanes), lane l of the sum of the y_i with i % 16 = l.  The
 * last piece of fewer than 16 (a whole row of a toy model's attention)
 * goes through a padded copy, so that it is a vector step too: its
 * padding is -inf, whose exp is 0. */
static inline AG_ALWAYS_INLINE void exp_lanes(size_t n, const ag_real *x, ag_real shift, ag_real *y, ag_real lane[16])
{
    ag_real lane2[16] = {0};
    for (int l = 0; l < 16; l++) lane[l] = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) { /* two independent vectors in flight */
#pragma omp simd
        for (int l = 0; l < 16; l++) lane[l] += y[i + l] = exp_core(x[i + l] - shift, 0);
#pragma omp simd
        for (int l = 0; l < 16; l++) lane2[l] += y[i + 16 + l] = exp_core(x[i + 16 + l] - shift, 0);
    }
    for (; i + 16 <= n; i += 16)
#pragma omp simd
        for (int l = 0; l < 16; l++) lane[l] += y[i + l] = exp_core(x[i + l] - shift, 0);
    for (int l = 0; l < 16; l++) lane[l] += lane2[l];
    if (i < n) {
        ag_real xt[16], yt[16];
        for (int l = 0; l < 16; l++) xt[l] = i + l < n ? x[i + l] : -INFINITY;
#pragma omp simd
        for (int l = 0; l < 16; l++) lane[l] += yt[l] = exp_core(xt[l] - shift, 0);
        for (size_t l = 0; i + l < n; l++) y[i + l] = yt[l];
    }
}
#endif

/* y_i = exp(x_i - shift) for i < n (y may be x); returns sum_i y_i.  The
 * float build vectorises for the machine (one clone per instruction set,
 * picked by ag__isa): exp_lanes, then the lanes in a fixed order. */
static inline AG_ALWAYS_INLINE ag_real exp_sum(size_t n, const ag_real *x, ag_real shift, ag_real *y)
{
    ag_real s = 0;
#ifdef AG_DOUBLE
    for (size_t i = 0; i < n; i++) s += y[i] = exp(x[i] - shift);
#else
    ag_real lane[16];
    exp_lanes(n, x, shift, y, lane);
    /* the lanes in pairs: 8 + 4 + 2 + 1 additions in 4 vector steps */
    for (int l = 0; l < 8; l++) lane[l] += lane[l + 8];
    for (int l = 0; l < 4; l++) lane[l] += lane[l + 4];
    for (int l = 0; l < 2; l++) lane[l] += lane[l + 2];
    s = lane[0] + lane[1];
#endif
    return s;
}
AG_ISA_CLONES(ag_real, exp_sum, (size_t n, const ag_real *x, ag_real shift, ag_real *y), return exp_sum(n, x, shift, y))
ag_real ag__exp_sum(size_t n, const ag_real *x, ag_real shift, ag_real *y)
{
    return AG_ISA_CALL(exp_sum, (n, x, shift, y));
}

/* ---- row max and exps, sixteen rows side by side ------------------------ */

#ifndef AG_DOUBLE
typedef float lanes16 __attribute__((vector_size(64))); /* GCC and Clang */

/* The last steps of row_max (max) and exp_sum (sum) for one pair of
 * halves: lane l of lo with lane l of hi, which was lane l + w of its row.
 * (Vectors by address: a 64-byte one by value is an ABI matter.) */
static inline AG_ALWAYS_INLINE void fold_pair(lanes16 *out, const lanes16 *lo, const lanes16 *hi, bool max)
{
    if (!max) {
        *out = *lo + *hi;
        return;
    }
    for (int l = 0; l < 16; l++) (*out)[l] = (*hi)[l] > (*lo)[l] ? (*hi)[l] : (*lo)[l];
}

/* Of two vectors each holding rows of 2w lanes, one after another: the
 * first halves of their rows (h = 0) or the second halves (h = w), in
 * order, w lanes each.  Lane i of the result is lane i % w of half i / w. */
#define HALF_LANE(i, w, h) ((i) / (w) * 2 * (w) + (i) % (w) + (h))
#define HALVES(a, b, w, h)                                                                                   \
    __builtin_shufflevector(a, b, HALF_LANE(0, w, h), HALF_LANE(1, w, h), HALF_LANE(2, w, h),                \
                            HALF_LANE(3, w, h), HALF_LANE(4, w, h), HALF_LANE(5, w, h), HALF_LANE(6, w, h),  \
                            HALF_LANE(7, w, h), HALF_LANE(8, w, h), HALF_LANE(9, w, h), HALF_LANE(10, w, h), \
                            HALF_LANE(11, w, h), HALF_LANE(12, w, h), HALF_LANE(13, w, h),                   \
                            HALF_LANE(14, w, h), HALF_LANE(15, w, h))

/* Lane r of the result: the 16 lanes of row r (a[r]) folded in pairs, l
 * with l + w for w = 8, 4, 2, 1, as row_max and exp_sum fold one row's.
 * Each step packs twice as many rows into a vector, half as many lanes
 * each, so that sixteen rows take 15 vector steps where one row took 4. */
static inline AG_ALWAYS_INLINE void fold16(const lanes16 a[16], bool max, float out[16])
{
    lanes16 b[8], c[4], d[2], e, lo, hi;
    for (int k = 0; k < 8; k++) { /* rows 2k, 2k + 1: 8 lanes each */
        lo = HALVES(a[2 * k], a[2 * k + 1], 8, 0), hi = HALVES(a[2 * k], a[2 * k + 1], 8, 8);
        fold_pair(&b[k], &lo, &hi, max);
    }
    for (int k = 0; k < 4; k++) { /* rows 4k..4k + 3: 4 lanes each */
        lo = HALVES(b[2 * k], b[2 * k + 1], 4, 0), hi = HALVES(b[2 * k], b[2 * k + 1], 4, 4);
        fold_pair(&c[k], &lo, &hi, max);
    }
    for (int k = 0; k < 2; k++) { /* rows 8k..8k + 7: 2 lanes each */
        lo = HALVES(c[2 * k], c[2 * k + 1], 2, 0), hi = HALVES(c[2 * k], c[2 * k + 1], 2, 2);
        fold_pair(&d[k], &lo, &hi, max);
    }
    lo = HALVES(d[0], d[1], 1, 0), hi = HALVES(d[0], d[1], 1, 1);
    fold_pair(&e, &lo, &hi, max);
    memcpy(out, &e, sizeof e);
}
#undef HALF_LANE
#undef HALVES

/* max_exp_sum_rows for 16 rows: every row's lanes, then one fold16. */
static inline AG_ALWAYS_INLINE void max_exp_sum16(size_t n, const float *x, float *max, float *sum, float *y)
{
    lanes16 a[16];
    float rest[16], lane[16];
    for (int r = 0; r < 16; r++) {
        rest[r] = max_lanes(n, x + r * n, lane);
        memcpy(&a[r], lane, sizeof lane);
    }
    float m[16], s[16];
    fold16(a, true, m);
    for (int r = 0; r < 16; r++) { /* row_max's last step */
        float mr = m[r] > rest[r] ? m[r] : rest[r];
        max[r] = mr == -INFINITY && has_nan(n, x + r * n) ? NAN : mr;
    }
    for (int r = 0; r < 16; r++) {
        if (max[r] == -INFINITY) { /* nothing above -inf: no exps, sum 0 */
            a[r] = (lanes16){0};
            continue;
        }
        exp_lanes(n, x + r * n, max[r], y + r * n, lane);
        memcpy(&a[r], lane, sizeof lane);
    }
    fold16(a, false, s);
    memcpy(sum, s, sizeof s);
}
#endif

/* Over `rows` rows of n values x (row stride n): max[r] = row_max(row r),
 * and when that is above -inf, y's row r = exp(x - max[r]) and sum[r] =
 * their sum (exp_sum), else sum[r] = 0 (y's row left as it was).  Bit for
 * bit row_max's and exp_sum's: each row's lanes fold in their order, but
 * the float build folds sixteen rows side by side (fold16), whose chains
 * of folds overlap instead of waiting one after another. */
static inline AG_ALWAYS_INLINE void max_exp_sum_rows(size_t rows, size_t n, const ag_real *x, ag_real *max,
                                                     ag_real *sum, ag_real *y)
{
    size_t r = 0;
#ifndef AG_DOUBLE
    for (; r + 16 <= rows; r += 16)
        if (n == 64) /* the GPT's vocabulary: a constant width, loops unrolled */
            max_exp_sum16(64, x + r * n, max + r, sum + r, y + r * n);
        else
            max_exp_sum16(n, x + r * n, max + r, sum + r, y + r * n);
#endif
    for (; r < rows; r++) {
        max[r] = row_max(n, x + r * n);
        sum[r] = max[r] == -INFINITY ? 0 : exp_sum(n, x + r * n, max[r], y + r * n);
    }
}
#define MAX_EXP_SUM_PARAMS (size_t rows, size_t n, const ag_real *x, ag_real *max, ag_real *sum, ag_real *y)
AG_ISA_CLONES(void, max_exp_sum_rows, MAX_EXP_SUM_PARAMS, max_exp_sum_rows(rows, n, x, max, sum, y))
void ag__max_exp_sum_rows MAX_EXP_SUM_PARAMS { AG_ISA_CALL(max_exp_sum_rows, (rows, n, x, max, sum, y)); }

/* The backward's exps are taken this many at a time, into a buffer on the
 * stack. */
enum { EXP_PIECE = 256 };

/* dx_i (+)= dy_i - exp(y_i) s for i < n (stored where `fresh`): a piece's
 * exps into a buffer (exp_sum's vector loop), then the update in blocks of
 * 16 (core/blocks.h), then the rest. */
static inline AG_ALWAYS_INLINE void log_softmax_grad_row(size_t n, const ag_real *y, const ag_real *dy, ag_real s,
                                                         ag_real *dx, bool fresh)
{
    for (size_t j = 0; j < n; j += EXP_PIECE) {
        size_t k = n - j < EXP_PIECE ? n - j : EXP_PIECE, i = 0;
        ag_real e[EXP_PIECE];
        exp_sum(k, y + j, 0, e);
        const ag_real *dyp = dy + j;
        ag_real *dxp = dx + j;
        for (; i + AG_BLOCK <= k; i += AG_BLOCK) {
            ag_real t[AG_BLOCK];
            if (fresh)
                for (int l = 0; l < AG_BLOCK; l++) t[l] = dyp[i + l] - e[i + l] * s;
            else
                for (int l = 0; l < AG_BLOCK; l++) t[l] = dxp[i + l] + (dyp[i + l] - e[i + l] * s);
            memcpy(dxp + i, t, sizeof t);
        }
        for (; i < k; i++) dxp[i] = fresh ? dyp[i] - e[i] * s : dxp[i] + (dyp[i] - e[i] * s);
    }
}

/* log-softmax's backward over `rows` rows of n:
 *   y_i = x_i - m - log(sum_j exp(x_j - m))  ->  dx_i (+)= dy_i - exp(y_i) sum_j dy_j
 * A masked row is -inf throughout and gets nothing; a live row has max_i
 * y_i = -log(sum) > -inf (its first y is most often finite, which settles
 * it); a row with a NaN or +inf input is NaN throughout, and so its dx. */
static inline AG_ALWAYS_INLINE void log_softmax_grad(size_t rows, size_t n, const ag_real *y, const ag_real *dy,
                                                     ag_real *dx, bool fresh)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *yr = y + r * n, *dyr = dy + r * n;
        ag_real *dxr = dx + r * n;
        if (yr[0] == -INFINITY && row_max(n, yr) == -INFINITY) {
            if (fresh) memset(dxr, 0, n * sizeof *dxr); /* nothing flows into it */
            continue;
        }
        log_softmax_grad_row(n, yr, dyr, ag__sum(n, dyr), dxr, fresh); /* sum_j dy_j */
    }
}
#define LSM_GRAD_PARAMS (size_t rows, size_t n, const ag_real *y, const ag_real *dy, ag_real *dx, bool fresh)
AG_ISA_CLONES(void, log_softmax_grad, LSM_GRAD_PARAMS, log_softmax_grad(rows, n, y, dy, dx, fresh))
void ag__log_softmax_grad_rows LSM_GRAD_PARAMS { AG_ISA_CALL(log_softmax_grad, (rows, n, y, dy, dx, fresh)); }

#ifndef AG_DOUBLE
/* softmax of one row of n <= 16 NV floats held in NV vectors of 16 lanes,
 * the padding -inf: the max, the exps and the sum in registers, lanes
 * combined in pairs (8 + 4 + 2 + 1) in a fixed order; then y = e / sum.
 * NV is a constant where it is called, so each width is its own loop. */
static inline __attribute__((always_inline)) void softmax_short(const float *zr, float *yr, size_t n, const int NV)
{
    float e[64], t[16];
#pragma omp simd
    for (size_t l = 0; l < 16 * (size_t)NV; l++) e[l] = l < n ? zr[l] : -INFINITY;
    for (int l = 0; l < 16; l++) t[l] = e[l];
    for (int v = 1; v < NV; v++)
        for (int l = 0; l < 16; l++) t[l] = e[16 * v + l] > t[l] ? e[16 * v + l] : t[l];
    for (int l = 0; l < 8; l++) t[l] = t[l + 8] > t[l] ? t[l + 8] : t[l];
    for (int l = 0; l < 4; l++) t[l] = t[l + 4] > t[l] ? t[l + 4] : t[l];
    for (int l = 0; l < 2; l++) t[l] = t[l + 2] > t[l] ? t[l + 2] : t[l];
    float m = t[1] > t[0] ? t[1] : t[0];
    if (m == -INFINITY) { /* every key masked with -inf, or NaNs among them */
        float fill = has_nan(n, zr) ? NAN : 0;
        for (size_t l = 0; l < n; l++) yr[l] = fill;
        return;
    }
#pragma omp simd
    for (int l = 0; l < 16 * NV; l++) e[l] = exp_core(e[l] - m, 0);
    for (int l = 0; l < 16; l++) t[l] = e[l];
    for (int v = 1; v < NV; v++)
        for (int l = 0; l < 16; l++) t[l] += e[16 * v + l];
    for (int l = 0; l < 8; l++) t[l] += t[l + 8];
    for (int l = 0; l < 4; l++) t[l] += t[l + 4];
    for (int l = 0; l < 2; l++) t[l] += t[l + 2];
    float inv = 1 / (t[0] + t[1]);
#pragma omp simd
    for (size_t l = 0; l < 16 * (size_t)NV; l++)
        if (l < n) yr[l] = e[l] * inv;
}
#endif

/* softmax over each of `rows` rows of n values z (z may be y):
 *   y = exp(z - max) / sum exp(z - max);  a row of all -inf gives zeros;
 *   a NaN or +inf in a row makes the whole row NaN (see has_nan).
 * A row of 64 or fewer floats (attention's rows at toy sizes) stays in
 * vector registers from end to end (softmax_short); longer ones take
 * row_max and exp_sum. */
static inline AG_ALWAYS_INLINE void softmax_rows(size_t rows, size_t n, const ag_real *z, ag_real *y)
{
#ifndef AG_DOUBLE
    if (n <= 64) {
        for (size_t r = 0; r < rows; r++) {
            const float *zr = z + r * n;
            float *yr = y + r * n;
            switch ((n + 15) / 16) {
            case 1: softmax_short(zr, yr, n, 1); break;
            case 2: softmax_short(zr, yr, n, 2); break;
            case 3: softmax_short(zr, yr, n, 3); break;
            default: softmax_short(zr, yr, n, 4); break;
            }
        }
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++) {
        const ag_real *zr = z + r * n;
        ag_real *yr = y + r * n;
        ag_real m = row_max(n, zr);
        if (m == -INFINITY) { /* every key masked with -inf */
            memset(yr, 0, n * sizeof(ag_real));
            continue;
        }
        ag_real inv = 1 / exp_sum(n, zr, m, yr);
#pragma omp simd
        for (size_t j = 0; j < n; j++) yr[j] *= inv;
    }
}
AG_ISA_CLONES(void, softmax_rows, (size_t rows, size_t n, const ag_real *z, ag_real *y), softmax_rows(rows, n, z, y))
void ag__softmax_rows(size_t rows, size_t n, const ag_real *z, ag_real *y)
{
    AG_ISA_CALL(softmax_rows, (rows, n, z, y));
}
#ifndef AG_DOUBLE
AG_FUSED_END
#endif

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
