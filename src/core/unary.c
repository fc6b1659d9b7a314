/* unary.c: the unary element-wise engine: y = f(x) over whole arrays, cut
 * in pieces for the threads, and its backward; and the form whose forward
 * keeps dy/dx (GELU's kernels). */
#include "core/elementwise.h"
#include "kernels/kernels.h"

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
    size_t i0 = ag__piece(j->x->size, (int)t, j->nt), i1 = ag__piece(j->x->size, (int)t + 1, j->nt);
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
    unary_bwd_range(j->bwd, j->x, j->y, j->dx, j->fresh, ag__piece(j->y->size, (int)t, j->nt),
                    ag__piece(j->y->size, (int)t + 1, j->nt));
}

void ag__unary_backward(ag_graph *g, ag_tensor *y, ag_unary_bwd bwd)
{
    ag_tensor *x = y->src[0];
    /* one buffer for dy and dx (grad_in_place, src/core/graph.c): dy turns
     * into dx where it lies, each element read before it is stored */
    bool fresh = true;
    ag_real *dx = x->grad && x->grad == y->grad ? x->grad : ag__grad_fresh(g, x, &fresh);
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

static void slope_bwd_piece(void *ctx, size_t t)
{
    const unary_run *j = ctx;
    size_t i0 = ag__piece(j->y->size, (int)t, j->nt), i1 = ag__piece(j->y->size, (int)t + 1, j->nt);
    ag__k_slope_mul(i1 - i0, j->y->grad + i0, j->slope + i0, j->dx + i0, j->fresh);
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

/* The kernel room's entry for op, when ag__fast() */
static const ag__unary_kernel *kernel(int op) { return ag__fast() ? ag__unary_kernel_of(op) : NULL; }

ag_tensor *ag__unary_op(ag_graph *g, int op, ag_tensor *x, const ag__unary_ref *ref, double c)
{
    const ag__unary_kernel *k = kernel(op);
    if (k && k->fwd_slope) return ag__unary_slope(g, op, x, k->fwd_slope);
    return ag__unary(g, op, x, k ? k->fwd : ref->fwd, c);
}

/* A forward that kept the slope (aux) is differentiated from it, whatever
 * the mode is now; otherwise the kernel's backward, or the reference's. */
void ag__unary_op_backward(ag_graph *g, ag_tensor *y, const ag__unary_ref *ref)
{
    if (ag__impl(y)->aux) {
        ag__unary_slope_backward(g, y);
        return;
    }
    const ag__unary_kernel *k = kernel(y->op);
    ag__unary_backward(g, y, k && k->bwd ? k->bwd : ref->bwd);
}
