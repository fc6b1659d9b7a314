/* check_finite.c: ag_graph_check_finite and AG_CHECK_FINITE, a debugging
 * aid: the first NaN or infinity that an op made, in its forward values or
 * in a gradient, named with its node, op, position and inputs' shapes. */
#include "core/graph.h"

#include <math.h>
#include <stdio.h>

/* Which non-finite value x is, for messages. */
static const char *nonfinite_name(ag_real x)
{
    return isnan(x) ? "NaN" : x > 0 ? "Inf" : "-Inf";
}

/* "[2, 3]": the position of flat element i of t. */
static const char *index_str(const ag_tensor *t, size_t i, char *buf, size_t len)
{
    int idx[AG_MAX_DIMS];
    for (int k = t->ndim - 1; k >= 0; k--) {
        size_t d = t->shape[k] > 0 ? (size_t)t->shape[k] : 1;
        idx[k] = (int)(i % d);
        i /= d;
    }
    return ag_shape_str_n(t->ndim, idx, buf, len);
}

/* "[4, 5], [5]": the shapes of t's inputs. */
static const char *inputs_str(const ag_tensor *t, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->nsrc && at < len; k++) {
        char one[96];
        const char *s = t->src[k] ? ag_shape_str(t->src[k], one, sizeof one) : "NULL";
        int n = snprintf(buf + at, len - at, "%s%s", k ? ", " : "", s);
        if (n < 0) break;
        at += (size_t)n;
    }
    return t->nsrc ? buf : "none";
}

static bool has_inf(const ag_tensor *t)
{
    if (!t || !t->data) return false;
    for (size_t i = 0; i < t->size; i++)
        if (isinf(t->data[i])) return true;
    return false;
}

/* The first element of t->data that t's op should not have made, or
 * t->size.  NaN is never right.  An infinity is passed over when the op got
 * one from an input (it is carried, not made: a -inf mask fill flowing into
 * a max or a log_softmax), when it is a leaf's (user data, e.g. an additive
 * mask), and when it is masked_fill's fill value. */
static size_t first_bad_value(const ag_tensor *t)
{
    int inputs_inf = -1; /* not looked at yet */
    for (size_t i = 0; i < t->size; i++) {
        ag_real x = t->data[i];
        if (isfinite(x)) continue;
        if (isnan(x)) return i;
        if (t->op == AG_OP_LEAF) continue;
        if (t->op == AG_OP_MASKED_FILL && (double)x == ag__impl(t)->farg[0]) continue;
        if (inputs_inf < 0) {
            inputs_inf = 0;
            for (int k = 0; k < t->nsrc; k++)
                if (has_inf(t->src[k])) inputs_inf = 1;
        }
        if (!inputs_inf) return i;
    }
    return t->size;
}

/* The first NaN or +-Inf of x[0..n), or n. */
static size_t first_nonfinite(const ag_real *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

/* Parameter input k of node i (a store tensor, not on the tape): its values
 * (grad 0) or its gradient (grad 1) must all be finite. */
static ag_status check_param(ag_graph *g, int i, int k, int grad)
{
    const ag_tensor *t = g->nodes[i], *p = t->src[k];
    const ag_real *v = grad ? p->grad : p->data;
    size_t j = v ? first_nonfinite(v, p->size) : p->size;
    if (j == p->size) return AG_OK;
    char shape[96], at[96];
    return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: %sparameter '%s' %s has %s at %s (input %d of node %d, %s)",
                         grad ? "gradient of " : "", p->name, ag_shape_str(p, shape, sizeof shape),
                         nonfinite_name(v[j]), index_str(p, j, at, sizeof at), k, i, ag_op_name(t->op));
}

/* Forward values, oldest node first: each node's parameter inputs, then the
 * node itself. */
ag_status ag__check_values(ag_graph *g)
{
    for (int i = 0; i < g->count; i++) {
        const ag_tensor *t = g->nodes[i];
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->is_param && check_param(g, i, k, 0)) return g->status;
        size_t j = first_bad_value(t);
        if (j == t->size) continue;
        char name[80], shape[96], at[96], ins[320];
        if (t->op == AG_OP_LEAF)
            return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: leaf%s %s has %s at %s (node %d)",
                                 ag__name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                                 nonfinite_name(t->data[j]), index_str(t, j, at, sizeof at), i);
        return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: %s output%s %s has %s at %s (node %d, inputs %s)",
                             ag_op_name(t->op), ag__name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                             nonfinite_name(t->data[j]), index_str(t, j, at, sizeof at), i,
                             inputs_str(t, ins, sizeof ins));
    }
    return AG_OK;
}

/* Gradients, newest node first (the order backward fills them): a node's
 * gradient is complete before its backward adds into its inputs, so the
 * first bad one found was made by the backward of one of its consumers. */
ag_status ag__check_gradients(ag_graph *g)
{
    for (int i = g->count - 1; i >= 0; i--) {
        const ag_tensor *t = g->nodes[i];
        size_t j = t->grad ? first_nonfinite(t->grad, t->size) : t->size;
        if (j < t->size) {
            char name[80], shape[96], at[96], ins[320];
            if (t->op == AG_OP_LEAF)
                return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: gradient of leaf%s %s has %s at %s (node %d)",
                                     ag__name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                                     nonfinite_name(t->grad[j]), index_str(t, j, at, sizeof at), i);
            return ag_graph_fail(g, AG_ERR_NUMERIC,
                                 "check_finite: gradient of %s output%s %s has %s at %s (node %d, inputs %s)",
                                 ag_op_name(t->op), ag__name_str(t, name, sizeof name), ag_shape_str(t, shape, sizeof shape),
                                 nonfinite_name(t->grad[j]), index_str(t, j, at, sizeof at), i,
                                 inputs_str(t, ins, sizeof ins));
        }
        for (int k = 0; k < t->nsrc; k++)
            if (t->src[k] && t->src[k]->is_param && check_param(g, i, k, 1)) return g->status;
    }
    return AG_OK;
}

ag_status ag_graph_check_finite(ag_graph *g)
{
    if (!g) return AG_ERR_ARG;
    if (g->status != AG_OK) return g->status; /* the tape may be half-built */
    if (ag__check_values(g)) return g->status;
    return ag__check_gradients(g);
}

/* AG_CHECK_FINITE's checks of the forward values and of the seed. */
ag_status ag__check_before(ag_graph *g, ag_tensor *y, const ag_real *dy)
{
    if (ag__check_values(g)) return g->status;
    for (size_t j = 0; j < y->size; j++) {
        ag_real v = dy ? dy[j] : y->data[j];
        if (isfinite(v)) continue;
        char ins[320];
        if (dy) return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: dy has %s at flat index %zu", nonfinite_name(v), j);
        return ag_graph_fail(g, AG_ERR_NUMERIC, "check_finite: the loss (%s output) is %s (inputs %s)",
                             ag_op_name(y->op), nonfinite_name(v), inputs_str(y, ins, sizeof ins));
    }
    return AG_OK;
}
