/* ops/dropout.c: inverted dropout.
 *
 *   x [...] -> y [...]
 *
 * forward:  in training, for each element draw u from the graph's random
 *           stream (32 bits: two elements per 64-bit draw):
 *           scale_i = (u < p) ? 0 : 1 / (1 - p);  y_i = x_i * scale_i
 *           (scaling the survivors by 1/(1-p) keeps E[y] = x, so eval mode
 *           needs no rescaling).  In eval mode, or with p == 0, y = x (a
 *           copy, still a node of the graph) and no number is drawn.
 * backward: dx_i += dy_i * scale_i               (1 in eval mode)
 *
 * farg[0] = p.  aux = one byte per element, 1 where it was kept (scale_i =
 * 1 / (1 - p)) and 0 where dropped, or NULL for the identity.  The stream is the graph's (ag_graph_seed), so the
 * same seed gives the same mask. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <string.h>

ag_tensor *ag_dropout(ag_graph *g, ag_tensor *x, double p)
{
    if (!ag__ok(g, "dropout", 1, x)) return NULL;
    if (!(p >= 0 && p < 1)) {
        ag_graph_fail(g, AG_ERR_ARG, "dropout: p = %g must be in [0, 1)", p);
        return NULL;
    }
    ag_tensor *y = ag__node(g, AG_OP_DROPOUT, x->ndim, x->shape, 1, &x);
    if (!y) return NULL;
    ag__impl(y)->farg[0] = p;
    if (!ag_graph_training(g) || p == 0) {
        memcpy(y->data, x->data, x->size * sizeof(ag_real));
        return y;
    }
    unsigned char *kept = ag__save(g, x->size ? x->size : 1);
    if (!kept) return NULL;
    ag__impl(y)->aux = kept;
    ag_rng *r = ag__graph_rng(g);
    ag__rng_keep(r, p, x->size, kept); /* kept[i] = !(u_i < p) */
    ag_real keep = (ag_real)(1 / (1 - p));
    if (!(ag__fast() && ag__k_dropout_forward(x->size, x->data, kept, keep, y->data)))
        for (size_t i = 0; i < x->size; i++) y->data[i] = x->data[i] * (kept[i] ? keep : 0);
    return y;
}

static void dropout_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0];
    bool fresh; /* nothing in dx yet: store instead of adding */
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    if (!dx) return;
    const unsigned char *kept = ag__impl(y)->aux; /* NULL: y = x */
    ag_real keep = (ag_real)(1 / (1 - ag__impl(y)->farg[0]));
    if (ag__fast() && ag__k_dropout_backward(y->size, y->grad, kept, keep, dx, fresh)) return;
    /* y_i = x_i scale_i  ->  dx_i += dy_i scale_i  (stored into an untouched dx) */
    for (size_t i = 0; i < y->size; i++) {
        ag_real d = y->grad[i] * (kept ? (kept[i] ? keep : 0) : 1);
        dx[i] = fresh ? d : dx[i] + d;
    }
}

/* The checker rewinds the graph's stream before every build: same mask. */
static ag_tensor *case_train(ag_graph *g, ag_tensor *const *in) { return ag_dropout(g, in[0], 0.3); }
static ag_tensor *case_p0(ag_graph *g, ag_tensor *const *in) { return ag_dropout(g, in[0], 0); }
static ag_tensor *case_eval(ag_graph *g, ag_tensor *const *in)
{
    ag_graph_set_training(g, 0); /* this case's own graph: eval throughout */
    return ag_dropout(g, in[0], 0.5);
}

static const ag_op_case cases[] = {
    {"[4, 5] p 0.3 training", 1, {2}, {{4, 5}}, -1, 1, 0, case_train},
    {"[2, 1, 3] p 0.3 training", 1, {3}, {{2, 1, 3}}, -1, 1, 0, case_train},
    {"[3, 2] p 0 identity", 1, {2}, {{3, 2}}, -1, 1, 0, case_p0},
    {"[1, 4] p 0.5 eval identity", 1, {2}, {{1, 4}}, -1, 1, 0, case_eval},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"values up to 1e30", 1, {2}, {{4, 5}}, -1e30, 1e30, 0, case_train},
};

const ag_op_desc ag_op_dropout = {.name = "dropout", .backward = dropout_backward, AG_CASES(cases), AG_EDGES(edges)};
