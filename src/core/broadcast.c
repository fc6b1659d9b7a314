/* broadcast.c: the binary element-wise engine (y = f(a, b) with
 * broadcasting, and its backward), and the broadcasting rules it shares
 * with the ops that take a mask.
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
#include "core/elementwise.h"
#include "kernels/kernels.h"

#include <stdio.h>

int ag__broadcast_dims(int na, const int *a, int nb, const int *b, int *shape)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1) return i - n;
        shape[i] = da == 1 ? db : da;
    }
    return 0;
}

bool ag__broadcast_shape(ag_graph *g, const char *op, const ag_tensor *a,
                         const ag_tensor *b, int *ndim, int *shape)
{
    int bad = ag__broadcast_dims(a->ndim, a->shape, b->ndim, b->shape, shape); /* -1: the last axis */
    if (bad) {
        char sa[96], sb[96];
        int ia = a->ndim + bad, ib = b->ndim + bad, da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        ag_graph_fail(g, AG_ERR_SHAPE, "%s: shapes do not broadcast: %s and %s (axis %d: %d vs %d)", op,
                      ag_shape_str(a, sa, sizeof sa), ag_shape_str(b, sb, sizeof sb), bad, da, db);
        return false;
    }
    *ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    return true;
}

bool ag__mask_fits(ag_graph *g, const char *op, const ag_tensor *x, const ag_tensor *mask)
{
    int nd, shape[AG_MAX_DIMS];
    return ag__broadcast_shape(g, op, x, mask, &nd, shape) &&
           ag__mask_fits_shape(g, op, mask, "x's shape", x->ndim, x->shape);
}

bool ag__mask_fits_shape(ag_graph *g, const char *op, const ag_tensor *mask, const char *what, int nd,
                         const int *shape)
{
    for (int i = 0; i < mask->ndim; i++) {
        int it = nd - mask->ndim + i, d = mask->shape[i]; /* against shape's axis it (none: it < 0) */
        if (d != 1 && (it < 0 || d != shape[it])) {
            char sm[96], ss[96];
            ag_graph_fail(g, AG_ERR_SHAPE, "%s: mask %s does not broadcast to %s %s", op,
                          ag_shape_str(mask, sm, sizeof sm), what, ag_shape_str_n(nd, shape, ss, sizeof ss));
            return false;
        }
    }
    return true;
}

void ag__broadcast_strides(int nx, const int *xs, int n, const int *shape, size_t unit, size_t *st)
{
    size_t s = unit;
    for (int i = n - 1; i >= 0; i--) {
        int ix = nx - n + i, dx = ix >= 0 ? xs[ix] : 1;
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
    ag__broadcast_strides(a->ndim, a->shape, ndim, shape, 1, w->sa);
    ag__broadcast_strides(b->ndim, b->shape, ndim, shape, 1, w->sb);
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
    size_t i0 = ag__piece(j->run, (int)t, j->nt), i1 = ag__piece(j->run, (int)t + 1, j->nt);
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
    binary_bwd_range(j->bwd, j->a, j->b, j->y, j->da, j->fa, j->db, j->fb, ag__piece(j->run, (int)t, j->nt),
                     ag__piece(j->run, (int)t + 1, j->nt));
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

/* The kernel room's entry for op, when ag__fast() */
static const ag__binary_kernel *kernel(int op) { return ag__fast() ? ag__binary_kernel_of(op) : NULL; }

ag_tensor *ag__binary_op(ag_graph *g, int op, ag_tensor *a, ag_tensor *b, const ag__binary_ref *ref)
{
    const ag__binary_kernel *k = kernel(op);
    return k ? ag__binary_rows(g, op, a, b, k->fwd, k->rows_fwd) : ag__binary(g, op, a, b, ref->fwd);
}

void ag__binary_op_backward(ag_graph *g, ag_tensor *y, const ag__binary_ref *ref)
{
    const ag__binary_kernel *k = kernel(y->op);
    ag__binary_backward(g, y, k ? k->bwd : ref->bwd);
}
