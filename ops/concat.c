/* ops/concat.c: join tensors end to end along one axis.
 *
 *   x_0 [..., n_0, ...], ..., x_(m-1) [..., n_(m-1), ...]  (same elsewhere)
 *     -> y [..., n_0 + ... + n_(m-1), ...]
 *
 * Seen around the axis, each x_k is [outer, n_k, inner] and y is
 * [outer, N, inner] with N = sum_k n_k and off_k = n_0 + ... + n_(k-1):
 *
 * forward:  y[o, off_k + j, i] = x_k[o, j, i]
 * backward: dx_k[o, j, i] += dy[o, off_k + j, i]
 *           (each input gets back its own slice of dy)
 *
 * More than AG_MAX_SRC inputs.  A node keeps at most AG_MAX_SRC (3) inputs in
 * src[], and ag_backward (src/core/graph.c) finds the inputs of a live node only
 * through src[]: an input kept anywhere else would never get a gradient
 * buffer in its liveness pass, so it would never be differentiated.  Rather
 * than teach the engine about a side list, ag_concat with n > 3 builds a
 * tree of ordinary concat nodes of at most 3 inputs each: one level joins
 * the inputs in groups of 3 (a group of 1 passes through untouched), the
 * next level joins those results, and so on until at most 3 are left.  The
 * loop is iterative, about log3(n) levels deep, and every node is a plain
 * concat whose inputs all sit in src[]: requires_grad, liveness and
 * backward need nothing special.  The price is that each element is copied
 * once per level, which is cheap next to everything else in a step.
 *
 * iarg[0] = axis (non-negative). */
#include "core/internal.h"

#include <limits.h>
#include <stdio.h>

/* One node joining m (1..3) inputs that are known to fit along axis a. */
static ag_tensor *concat_node(ag_graph *g, int m, ag_tensor *const *xs, int a)
{
    const ag_tensor *x0 = xs[0];
    int shape[AG_MAX_DIMS];
    for (int i = 0; i < x0->ndim; i++) shape[i] = x0->shape[i];
    shape[a] = 0;
    for (int k = 0; k < m; k++) shape[a] += xs[k]->shape[a];
    ag_tensor *y = ag__node(g, AG_OP_CONCAT, x0->ndim, shape, m, xs);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = a;
    size_t outer = ag__numel(a, shape), N = (size_t)shape[a];
    size_t inner = ag__numel(x0->ndim - a - 1, shape + a + 1);
    size_t off = 0;
    for (int k = 0; k < m; k++) {
        size_t nk = (size_t)xs[k]->shape[a], run = nk * inner;
        for (size_t o = 0; o < outer && run; o++)
            memcpy(y->data + (o * N + off) * inner, xs[k]->data + o * run, run * sizeof(ag_real));
        off += nk;
    }
    return y;
}

ag_tensor *ag_concat(ag_graph *g, int n, ag_tensor *const *xs, int axis)
{
    if (!ag__ok(g, "concat", 0)) return NULL;
    if (n < 1 || !xs) {
        ag_graph_fail(g, AG_ERR_ARG, "concat: needs at least one input (n = %d%s)", n, xs ? "" : ", xs is NULL");
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!xs[k]) {
            ag_graph_fail(g, AG_ERR_ARG, "concat: input %d is NULL", k);
            return NULL;
        }
    }
    int a = ag__axis(g, "concat", xs[0], axis);
    if (a < 0) return NULL;
    long long total = 0;
    for (int k = 0; k < n; k++) {
        const ag_tensor *x = xs[k];
        int fits = x->ndim == xs[0]->ndim;
        for (int i = 0; fits && i < x->ndim; i++)
            if (i != a && x->shape[i] != xs[0]->shape[i]) fits = 0;
        if (!fits) {
            char s1[96], s2[96];
            ag_graph_fail(g, AG_ERR_SHAPE, "concat: input %d is %s but input 0 is %s: every axis but %d must agree",
                          k, ag_shape_str(x, s1, sizeof s1), ag_shape_str(xs[0], s2, sizeof s2), a);
            return NULL;
        }
        total += x->shape[a];
        if (total > INT_MAX) {
            ag_graph_fail(g, AG_ERR_SHAPE, "concat: joined axis %d exceeds %d elements", a, INT_MAX);
            return NULL;
        }
    }
    if (n <= AG_MAX_SRC) return concat_node(g, n, xs, a);

    /* a tree of concats of at most 3 (see the top of the file) */
    ag_tensor **level = ag__alloc(g, (size_t)n * sizeof *level);
    if (!level) return NULL;
    for (int k = 0; k < n; k++) level[k] = xs[k];
    int m = n;
    while (m > AG_MAX_SRC) {
        int next = 0;
        for (int k = 0; k < m; k += AG_MAX_SRC) {
            int c = m - k < AG_MAX_SRC ? m - k : AG_MAX_SRC;
            /* next <= k: the slots written were read already */
            level[next] = c == 1 ? level[k] : concat_node(g, c, level + k, a);
            if (!level[next]) return NULL;
            next++;
        }
        m = next;
    }
    return concat_node(g, m, level, a);
}

static void concat_backward(ag_graph *g, ag_tensor *y)
{
    int a = ag__impl(y)->iarg[0];
    size_t outer = ag__numel(a, y->shape), N = (size_t)y->shape[a];
    size_t inner = ag__numel(y->ndim - a - 1, y->shape + a + 1);
    size_t off = 0;
    for (int k = 0; k < y->nsrc; k++) {
        ag_tensor *x = y->src[k];
        size_t nk = (size_t)x->shape[a], run = nk * inner;
        if (x->requires_grad) {
            ag_real *dx = ag__grad(g, x);
            if (!dx) return;
            /* y[o, off_k + j, i] = x_k[o, j, i]  ->  dx_k[o, j, i] += dy[o, off_k + j, i] */
            for (size_t o = 0; o < outer; o++) {
                const ag_real *dyo = y->grad + (o * N + off) * inner;
                ag_real *dxo = dx + o * run;
                for (size_t j = 0; j < run; j++) dxo[j] += dyo[j];
            }
        }
        off += nk;
    }
}

static ag_tensor *case_mid2(ag_graph *g, ag_tensor *const *in) { return ag_concat(g, 2, in, 1); }
static ag_tensor *case_last3(ag_graph *g, ag_tensor *const *in) { return ag_concat(g, 3, in, -1); }
static ag_tensor *case_first(ag_graph *g, ag_tensor *const *in) { return ag_concat(g, 2, in, 0); }
static ag_tensor *case_mid4(ag_graph *g, ag_tensor *const *in)
{
    ag_tensor *xs[4] = {in[0], in[1], in[2], in[0]}; /* in[0] twice: its gradient has two parts */
    return ag_concat(g, 4, xs, 1);
}
static ag_tensor *case_mid7(ag_graph *g, ag_tensor *const *in)
{
    ag_tensor *xs[7] = {in[2], in[0], in[1], in[1], in[2], in[0], in[1]}; /* a tree two levels deep */
    return ag_concat(g, 7, xs, 1);
}

static const ag_op_case cases[] = {
    {"[2, 3, 4] ++ [2, 1, 4] axis 1", 2, {3, 3}, {{2, 3, 4}, {2, 1, 4}}, -1, 1, 0, case_mid2},
    {"[2, 3] ++ [2, 1] ++ [2, 2] axis -1", 3, {2, 2, 2}, {{2, 3}, {2, 1}, {2, 2}}, -1, 1, 0, case_last3},
    {"[1, 3] ++ [2, 3] axis 0 size-1", 2, {2, 2}, {{1, 3}, {2, 3}}, -1, 1, 0, case_first},
    {"4 inputs [2, 1|2|3, 3] axis 1", 3, {3, 3, 3}, {{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}, -1, 1, 0, case_mid4},
    {"7 inputs [2, 1|2|3, 2] axis 1", 3, {3, 3, 3}, {{2, 1, 2}, {2, 2, 2}, {2, 3, 2}}, -1, 1, 0, case_mid7},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 2, {3, 3}, {{2, 3, 4}, {2, 1, 4}}, -1e30, 1e30, 0, case_mid2},
};

const ag_op_desc ag_op_concat = {.name = "concat", .backward = concat_backward, AG_CASES(cases), AG_EDGES(edges)};
