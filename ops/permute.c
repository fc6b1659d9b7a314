/* ops/permute.c: reorder the axes of a tensor (and transpose, a swap of two).
 *
 *   x [d0, ..., d(n-1)] -> y [d(perm[0]), ..., d(perm[n-1])]
 *
 * forward:  y[j0, ..., j(n-1)] = x[i]   where i has i[perm[k]] = j[k]
 *           (output axis k walks input axis perm[k])
 * backward: dx[i] += dy[j0, ..., j(n-1)]  for the same pairs (i, j): the
 *           inverse permutation applied to dy.  Every element of x appears
 *           exactly once in y, so this is a plain scatter, no sums.
 *
 * Both directions walk y in order (row-major) with an odometer over its
 * indices, keeping the matching offset into x up to date by adding and
 * subtracting strides: no division per element.  The innermost axis is a
 * strided loop of its own (the fast walk, kernels/permute.c, copies runs
 * that stay adjacent as vectors).
 *
 * iarg[0..ndim) = perm.  y is a copy (attograd has no views). */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <stdio.h>

/* What a walk does at each pair (x[i], y[j]). */
enum { GATHER, /* forward:  y[j] = x[i] */
       ADD,    /* backward: dx[i] += dy[j] */
       SCATTER /* backward into an untouched dx: dx[i] = dy[j] */ };

/* Walk y (shape[0..nd), row-major) and the elements of x it reads: output
 * axis k moves through x with stride st[k].  (A scalar is one run of 1.) */
static void walk(int nd, const int *shape, const size_t *st, ag_real *x, ag_real *y, int mode)
{
    size_t size = ag__numel(nd, shape), n = nd ? (size_t)shape[nd - 1] : 1, s = nd ? st[nd - 1] : 0;
    int idx[AG_MAX_DIMS] = {0};
    size_t off = 0; /* offset in x of y's current run */
    for (size_t r = 0; n && r < size; r += n) {
        ag_real *xr = x + off, *yr = y + r;
        for (size_t j = 0; j < n; j++) {
            if (mode == GATHER) yr[j] = xr[j * s];
            else if (mode == ADD) xr[j * s] += yr[j];
            else xr[j * s] = yr[j];
        }
        /* odometer: advance the outer indices of y, last one fastest */
        for (int d = nd - 2; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < shape[d]) break;
            off -= st[d] * (size_t)shape[d];
            idx[d] = 0;
        }
    }
}

/* Strides in x of y's axes: st[k] = stride of x's axis perm[k]. */
static void perm_strides(const ag_tensor *x, const int *perm, size_t *st)
{
    size_t xs[AG_MAX_DIMS], s = 1;
    for (int a = x->ndim - 1; a >= 0; a--) {
        xs[a] = s;
        s *= (size_t)x->shape[a];
    }
    for (int k = 0; k < x->ndim; k++) st[k] = xs[perm[k]];
}

ag_tensor *ag_permute(ag_graph *g, ag_tensor *x, const int *perm)
{
    if (!ag__ok(g, "permute", 1, x)) return NULL;
    int nd = x->ndim;
    if (nd > 0 && !perm) {
        ag_graph_fail(g, AG_ERR_ARG, "permute: perm is NULL");
        return NULL;
    }
    int seen[AG_MAX_DIMS] = {0}, shape[AG_MAX_DIMS];
    for (int k = 0; k < nd; k++) {
        if (perm[k] < 0 || perm[k] >= nd || seen[perm[k]]) {
            char s1[96], s2[96];
            ag_graph_fail(g, AG_ERR_ARG, "permute: perm %s is not a permutation of the axes of %s",
                          ag_shape_str_n(nd, perm, s1, sizeof s1), ag_shape_str(x, s2, sizeof s2));
            return NULL;
        }
        seen[perm[k]] = 1;
        shape[k] = x->shape[perm[k]];
    }
    ag_tensor *y = ag__node(g, AG_OP_PERMUTE, nd, shape, 1, &x);
    if (!y) return NULL;
    for (int k = 0; k < nd; k++) ag__impl(y)->iarg[k] = perm[k];
    size_t st[AG_MAX_DIMS];
    perm_strides(x, perm, st);
    if (!(ag__fast() && ag__k_permute_forward(nd, y->shape, st, x->data, y->data)))
        walk(nd, y->shape, st, x->data, y->data, GATHER);
    return y;
}

static void permute_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh; /* dx untouched: each of its elements is stored once */
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    /* y[j] = x[i(j)]  ->  dx[i(j)] += dy[j] */
    size_t st[AG_MAX_DIMS];
    perm_strides(x, ag__impl(y)->iarg, st);
    if (!(ag__fast() && ag__k_permute_backward(y->ndim, y->shape, st, y->grad, dx, fresh)))
        walk(y->ndim, y->shape, st, dx, y->grad, fresh ? SCATTER : ADD);
}

ag_tensor *ag_transpose(ag_graph *g, ag_tensor *x, int axis0, int axis1)
{
    if (!ag__ok(g, "transpose", 1, x)) return NULL;
    int nd = x->ndim;
    int a0 = axis0 < 0 ? axis0 + nd : axis0, a1 = axis1 < 0 ? axis1 + nd : axis1;
    if (a0 < 0 || a0 >= nd || a1 < 0 || a1 >= nd) {
        char buf[96];
        ag_graph_fail(g, AG_ERR_ARG, "transpose: axes (%d, %d): axis %d out of range for %s", axis0, axis1,
                      (a0 < 0 || a0 >= nd) ? axis0 : axis1, ag_shape_str(x, buf, sizeof buf));
        return NULL;
    }
    int perm[AG_MAX_DIMS];
    for (int k = 0; k < nd; k++) perm[k] = k;
    perm[a0] = a1;
    perm[a1] = a0;
    return ag_permute(g, x, perm);
}

static ag_tensor *case_2d(ag_graph *g, ag_tensor *const *in) { return ag_permute(g, in[0], (const int[]){1, 0}); }
static ag_tensor *case_3d(ag_graph *g, ag_tensor *const *in) { return ag_permute(g, in[0], (const int[]){2, 0, 1}); }
static ag_tensor *case_4d(ag_graph *g, ag_tensor *const *in)
{
    return ag_permute(g, in[0], (const int[]){3, 1, 0, 2});
}
static ag_tensor *case_heads(ag_graph *g, ag_tensor *const *in)
{
    return ag_permute(g, in[0], (const int[]){0, 2, 1, 3}); /* [B, T, H, D] -> [B, H, T, D] */
}
static ag_tensor *case_ones(ag_graph *g, ag_tensor *const *in) { return ag_permute(g, in[0], (const int[]){2, 1, 0}); }
static ag_tensor *case_transpose(ag_graph *g, ag_tensor *const *in) { return ag_transpose(g, in[0], -1, -2); }

static const ag_op_case cases[] = {
    {"[3, 4] (1, 0)", 1, {2}, {{3, 4}}, -1, 1, 0, case_2d},
    {"[2, 3, 4] (2, 0, 1)", 1, {3}, {{2, 3, 4}}, -1, 1, 0, case_3d},
    {"[2, 3, 4, 5] (3, 1, 0, 2)", 1, {4}, {{2, 3, 4, 5}}, -1, 1, 0, case_4d},
    {"[2, 3, 2, 2] (0, 2, 1, 3) head split", 1, {4}, {{2, 3, 2, 2}}, -1, 1, 0, case_heads},
    {"[1, 3, 1] (2, 1, 0) size-1 axes", 1, {3}, {{1, 3, 1}}, -1, 1, 0, case_ones},
    {"[2, 3, 4] transpose(-1, -2)", 1, {3}, {{2, 3, 4}}, -1, 1, 0, case_transpose},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{3, 4}}, -1e30, 1e30, 0, case_2d},
};

const ag_op_desc ag_op_permute = {.name = "permute", .backward = permute_backward, AG_CASES(cases), AG_EDGES(edges)};
