/* ops/where.c: y = a where cond != 0, b elsewhere (torch.where), with
 * broadcasting.
 *
 *   cond, a, b broadcast together (NumPy's rule, shapes aligned on the
 *   right) -> y of the broadcast shape
 *
 * forward:  y[i] = cond[i'] != 0 ? a[i''] : b[i''']
 *           (i', i'', i''': i with each input's stretched axes at 0)
 * backward: da[i''] += cond[i'] != 0 ? dy[i] : 0
 *           db[i'''] += cond[i'] != 0 ? 0 : dy[i]
 *           (summed over the axes along which a or b was stretched)
 *
 * cond is data, as masked_fill's mask: any nonzero value is true (PyTorch
 * takes a bool tensor), and it is never differentiated.  It is src[0] so
 * that pictures of the graph show it; y requires grad when a or b does.
 * aux = one byte per element of y, 1 where a was taken, so the backward does
 * not read cond again. */
#include "core/internal.h"

#include <stdio.h>

/* The broadcast shape of cond, a and b; false (error recorded, naming the
 * three shapes) when they do not broadcast. */
static bool where_shape(ag_graph *g, ag_tensor *const *in, int *ndim, int *shape)
{
    int n = 0;
    for (int k = 0; k < 3; k++) n = in[k]->ndim > n ? in[k]->ndim : n;
    for (int i = 0; i < n; i++) {
        shape[i] = 1;
        for (int k = 0; k < 3; k++) {
            int ik = in[k]->ndim - n + i, d = ik >= 0 ? in[k]->shape[ik] : 1;
            if (d != 1 && shape[i] != 1 && d != shape[i]) {
                char sc[96], sa[96], sb[96];
                ag_graph_fail(g, AG_ERR_SHAPE, "where: shapes do not broadcast: cond %s, a %s, b %s (axis %d)",
                              ag_shape_str(in[0], sc, sizeof sc), ag_shape_str(in[1], sa, sizeof sa),
                              ag_shape_str(in[2], sb, sizeof sb), i - n);
                return false;
            }
            if (d != 1) shape[i] = d;
        }
    }
    *ndim = n;
    return true;
}

ag_tensor *ag_where(ag_graph *g, ag_tensor *cond, ag_tensor *a, ag_tensor *b)
{
    if (!ag__ok(g, "where", 3, cond, a, b)) return NULL;
    ag_tensor *src[3] = {cond, a, b};
    int nd, shape[AG_MAX_DIMS];
    if (!where_shape(g, src, &nd, shape)) return NULL;
    ag_tensor *y = ag__node(g, AG_OP_WHERE, nd, shape, 3, src);
    if (!y) return NULL;
    y->requires_grad = y->requires_grad && (a->requires_grad || b->requires_grad); /* never through cond */
    unsigned char *take_a = ag__save(g, y->size ? y->size : 1);
    if (!take_a) return NULL;
    ag__impl(y)->aux = take_a;
    /* y[i] = cond[i'] != 0 ? a[i''] : b[i'''] */
    for (size_t i = 0; i < y->size; i++) {
        take_a[i] = cond->data[ag__wrap_index(cond, nd, shape, i)] != 0;
        y->data[i] = take_a[i] ? a->data[ag__wrap_index(a, nd, shape, i)] : b->data[ag__wrap_index(b, nd, shape, i)];
    }
    return y;
}

static void where_backward(ag_graph *g, ag_tensor *y)
{
    const unsigned char *take_a = ag__impl(y)->aux;
    for (int k = 1; k <= 2; k++) { /* a where take_a, b where not */
        ag_tensor *x = y->src[k];
        if (!x->requires_grad) continue;
        ag_real *dx = ag__grad(g, x);
        if (!dx) return;
        for (size_t i = 0; i < y->size; i++)
            if (take_a[i] == (k == 1)) dx[ag__wrap_index(x, y->ndim, y->shape, i)] += y->grad[i];
    }
}

/* Fixed conditions, made inside the builds: they are data, not checked inputs. */
static ag_tensor *cond_of(ag_graph *g, int ndim, const int *shape)
{
    ag_tensor *c = ag_tensor_new(g, ndim, shape);
    if (!c) return NULL;
    for (size_t j = 0; j < c->size; j++) c->data[j] = (ag_real)((j * 5 + 1) % 3 != 0); /* 1, 1, 0, 1, 1, 0, ... */
    return c;
}

static ag_tensor *case_same(ag_graph *g, ag_tensor *const *in)
{
    return ag_where(g, cond_of(g, AG_SHAPE(2, 3)), in[0], in[1]);
}
static ag_tensor *case_bcast(ag_graph *g, ag_tensor *const *in)
{
    return ag_where(g, cond_of(g, AG_SHAPE(2, 1, 4)), in[0], in[1]);
}
static ag_tensor *case_scalar_b(ag_graph *g, ag_tensor *const *in)
{
    return ag_where(g, cond_of(g, AG_SHAPE(3, 1)), in[0], in[1]);
}
static ag_tensor *case_self(ag_graph *g, ag_tensor *const *in)
{
    return ag_where(g, cond_of(g, AG_SHAPE(4)), in[0], in[0]);
}

static const ag_op_case cases[] = {
    {"cond [2, 3], a [2, 3], b [2, 3]", 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0, case_same},
    {"cond [2, 1, 4], a [3, 1], b [4] broadcast", 2, {2, 1}, {{3, 1}, {4}}, -1, 1, 0, case_bcast},
    {"cond [3, 1], a [1, 2], b [] scalar", 2, {2, 0}, {{1, 2}, {0}}, -1, 1, 0, case_scalar_b},
    {"where(cond [4], x, x) one input twice", 1, {2}, {{2, 4}}, -1, 1, 0, case_self},
};

const ag_op_desc ag_op_where = {.name = "where", .backward = where_backward, AG_CASES(cases), .elementwise = true};
