/* elementwise.c: the loops shared by element-wise ops, so that each op file
 * holds only its math.
 *
 * Broadcasting (NumPy's rule): align shapes on the right; two axes agree
 * when they are equal or one is 1; a missing axis counts as 1.  The output
 * axis is the larger.  An input is read with stride 0 along its stretched
 * axes.  Backward adds the output gradient into the input at the same
 * (stride-0) positions, which sums it over the stretched axes. */
#include "internal.h"

#include <stdio.h>

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

ag_tensor *ag__binary(ag_graph *g, int op, ag_tensor *a, ag_tensor *b, ag_binary_fwd fwd)
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
    size_t run = (size_t)shape[ndim - 1], nruns = y->size / run;
    size_t ra = w.sa[ndim - 1], rb = w.sb[ndim - 1];
    int idx[AG_MAX_DIMS] = {0};
    size_t oa = 0, ob = 0;
    for (size_t r = 0; r < nruns; r++) {
        fwd(run, a->data + oa, ra, b->data + ob, rb, y->data + r * run);
        walk_next(&w, idx, &oa, &ob);
    }
    return y;
}

void ag__binary_backward(ag_graph *g, ag_tensor *y, ag_binary_bwd bwd)
{
    ag_tensor *a = y->src[0], *b = y->src[1];
    ag_real *da = a->requires_grad ? ag__grad(g, a) : NULL;
    ag_real *db = b->requires_grad ? ag__grad(g, b) : NULL;
    if ((a->requires_grad && !da) || (b->requires_grad && !db)) return;
    if (y->size == 0) return;
    if (y->ndim == 0) {
        bwd(1, a->data, 1, b->data, 1, y->data, y->grad, da, db);
        return;
    }
    walk w;
    walk_init(&w, a, b, y->ndim, y->shape);
    int nd = y->ndim;
    size_t run = (size_t)y->shape[nd - 1], nruns = y->size / run;
    size_t ra = w.sa[nd - 1], rb = w.sb[nd - 1];
    int idx[AG_MAX_DIMS] = {0};
    size_t oa = 0, ob = 0;
    for (size_t r = 0; r < nruns; r++) {
        bwd(run, a->data + oa, ra, b->data + ob, rb, y->data + r * run, y->grad + r * run,
            da ? da + oa : NULL, db ? db + ob : NULL);
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
    size_t run = (size_t)from_shape[from_ndim - 1], nruns = n / run, rs = w.sa[from_ndim - 1];
    int idx[AG_MAX_DIMS] = {0};
    size_t o = 0, unused = 0;
    for (size_t r = 0; r < nruns; r++) {
        const ag_real *gr = grad + r * run;
        ag_real *d = dst + o;
        for (size_t i = 0; i < run; i++) d[i * rs] += gr[i];
        walk_next(&w, idx, &o, &unused);
    }
}

ag_tensor *ag__unary(ag_graph *g, int op, ag_tensor *x, ag_unary_fwd fwd, double farg0)
{
    if (!ag__ok(g, ag_op_name(op), 1, x)) return NULL;
    ag_tensor *y = ag__node(g, op, x->ndim, x->shape, 1, &x);
    if (!y) return NULL;
    y->farg[0] = farg0;
    fwd(x->size, x->data, y->data, y->farg);
    return y;
}

void ag__unary_backward(ag_graph *g, ag_tensor *y, ag_unary_bwd bwd)
{
    ag_tensor *x = y->src[0];
    ag_real *dx = ag__grad(g, x);
    if (dx) bwd(y->size, x->data, y->data, y->grad, dx, y->farg);
}
