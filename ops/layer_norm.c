/* ops/layer_norm.c: layer normalisation over the last axis (as PyTorch's
 * F.layer_norm with normalized_shape [C]).
 *
 *   x [..., C], gain [C] or NULL, bias [C] or NULL -> y [..., C]
 *
 * forward, for each row of C values:
 *   mean = sum_i x_i / C
 *   var  = sum_i (x_i - mean)^2 / C              (biased, as PyTorch)
 *   rstd = 1 / sqrt(var + eps)
 *   xhat_i = (x_i - mean) * rstd
 *   y_i  = xhat_i * gain_i + bias_i              (gain 1, bias 0 when NULL)
 * backward (as llm.c's layernorm_backward), per row:
 *   dbias_i += dy_i
 *   dgain_i += dy_i * xhat_i
 *   dxhat_i  = dy_i * gain_i
 *   dx_i    += rstd * (dxhat_i - mean_j dxhat_j - xhat_i * mean_j (dxhat_j xhat_j))
 *              (= where dx is fresh: the rule of backward_ref below)
 *   (the two means are the paths through mean and through rstd: every x_j
 *   moves the row's mean and variance, so each dx_i sees the whole row)
 *
 * src = {x, gain, bias}, NULL entries allowed.  farg[0] = eps.  aux holds
 * mean[0..rows) then rstd[0..rows).  The fast code is
 * src/kernels/layer_norm_forward.c and _backward.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

/* The reference forward: each row's mean and variance (from the centred
 * values, two passes: no cancellation), then y. */
static void forward_ref(size_t rows, size_t C, const ag_real *x, const ag_real *gain, const ag_real *bias,
                        double eps, ag_real *y, ag_real *mean, ag_real *rstd)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * C;
        ag_real m = 0, v = 0;
        for (size_t i = 0; i < C; i++) m += xr[i];
        m /= (ag_real)C;
        for (size_t i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= (ag_real)C;
        ag_real s = (ag_real)(1 / sqrt((double)v + eps));
        for (size_t i = 0; i < C; i++)
            y[r * C + i] = (xr[i] - m) * s * (gain ? gain[i] : 1) + (bias ? bias[i] : 0);
        mean[r] = m, rstd[r] = s;
    }
}

/* The reference backward (dx, dgain, dbias may each be NULL), by the rule
 * of every backward (docs/contributing.md, core/internal.h):
 *
 * Store where fresh, add everywhere else.  A backward that writes every
 * element of an input's gradient takes the buffer from
 * ag__grad_fresh(g, x, &fresh): where fresh, nothing has been written there
 * yet and the buffer holds garbage, so it stores (dx[i] = ...); otherwise
 * the buffer holds other contributions (x is used twice, or is a
 * parameter) and it adds (dx[i] += ...).  A backward that writes only some
 * elements takes ag__grad(g, x), zero-filled, and adds.
 *
 * dx is written whole, so it is stored when fresh; dgain and dbias, sums
 * over the rows, come zero-filled and are added into. */
static void backward_ref(size_t rows, size_t C, const ag_real *x, const ag_real *gain, const ag_real *mean,
                         const ag_real *rstd, const ag_real *dy, ag_real *dx, bool fresh, ag_real *dgain,
                         ag_real *dbias)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * C, *dyr = dy + r * C, m = mean[r], s = rstd[r];
        ag_real a = 0, b = 0; /* mean_j dxhat_j, mean_j dxhat_j xhat_j */
        for (size_t i = 0; i < C; i++) {
            ag_real xhat = (xr[i] - m) * s, dxhat = dyr[i] * (gain ? gain[i] : 1);
            a += dxhat, b += dxhat * xhat;
            if (dbias) dbias[i] += dyr[i];
            if (dgain) dgain[i] += dyr[i] * xhat;
        }
        a /= (ag_real)C, b /= (ag_real)C;
        for (size_t i = 0; dx && i < C; i++) {
            ag_real xhat = (xr[i] - m) * s, d = s * (dyr[i] * (gain ? gain[i] : 1) - a - xhat * b);
            if (fresh) dx[r * C + i] = d; /* nothing there yet: the buffer holds garbage */
            else dx[r * C + i] += d;      /* x's other contributions are there: add */
        }
    }
}

/* A gain or bias must be NULL or exactly [C]. */
static bool check_vec(ag_graph *g, const ag_tensor *x, const ag_tensor *v, const char *what)
{
    int C = x->shape[x->ndim - 1];
    if (!v || (v->ndim == 1 && v->shape[0] == C)) return true;
    char sx[96], sv[96];
    ag_graph_fail(g, AG_ERR_SHAPE, "layer_norm: %s must be [%d] for x %s, got %s", what, C,
                  ag_shape_str(x, sx, sizeof sx), ag_shape_str(v, sv, sizeof sv));
    return false;
}

ag_tensor *ag_layer_norm(ag_graph *g, ag_tensor *x, ag_tensor *gain, ag_tensor *bias, double eps)
{
    if (!ag__ok(g, "layer_norm", 1, x)) return NULL;
    if (x->ndim == 0) {
        ag_graph_fail(g, AG_ERR_SHAPE, "layer_norm: x must have at least 1 axis, got []");
        return NULL;
    }
    if (!check_vec(g, x, gain, "gain") || !check_vec(g, x, bias, "bias")) return NULL;
    if (!(eps >= 0)) {
        ag_graph_fail(g, AG_ERR_ARG, "layer_norm: eps = %g must be >= 0", eps);
        return NULL;
    }
    ag_tensor *src[3] = {x, gain, bias};
    ag_tensor *y = ag__node(g, AG_OP_LAYER_NORM, x->ndim, x->shape, 3, src);
    if (!y) return NULL;
    ag__impl(y)->farg[0] = eps;
    size_t C = (size_t)x->shape[x->ndim - 1];
    if (C == 0) return y; /* no rows to normalise */
    size_t rows = x->size / C;
    ag_real *mean = ag__save(g, (2 * rows + 1) * sizeof(ag_real)), *rstd = mean + rows;
    if (!mean) return NULL;
    ag__impl(y)->aux = mean;
    const ag_real *gd = gain ? gain->data : NULL, *bd = bias ? bias->data : NULL;
    if (!(ag__fast() && ag__k_layer_norm_forward(g, rows, C, x->data, gd, bd, eps, y->data, mean, rstd)))
        forward_ref(rows, C, x->data, gd, bd, eps, y->data, mean, rstd);
    return ag_graph_status(g) == AG_OK ? y : NULL;
}

static void layer_norm_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *gain = y->src[1], *bias = y->src[2];
    bool fresh = false, fast = ag__fast();
    ag_real *dx = x->requires_grad ? ag__grad_fresh(g, x, &fresh) : NULL;
    ag_real *dgain = gain && gain->requires_grad ? ag__grad(g, gain) : NULL;
    ag_real *dbias = bias && bias->requires_grad ? ag__grad(g, bias) : NULL;
    if (ag_graph_status(g) != AG_OK || y->size == 0) return;
    size_t C = (size_t)y->shape[y->ndim - 1], rows = y->size / C;
    const ag_real *mean = ag__impl(y)->aux, *rstd = mean + rows, *gd = gain ? gain->data : NULL;
    if (!(fast && ag__k_layer_norm_backward(g, rows, C, x->data, gd, mean, rstd, y->grad, dx, fresh, dgain, dbias)))
        backward_ref(rows, C, x->data, gd, mean, rstd, y->grad, dx, fresh, dgain, dbias);
}

static ag_tensor *case_affine(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 1e-5); }
static ag_tensor *case_plain(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], NULL, NULL, 1e-5); }
static ag_tensor *case_gain(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], NULL, 1e-5); }
static ag_tensor *case_bias(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], NULL, in[1], 1e-5); }
static ag_tensor *case_big_eps(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 0.5); }

static const ag_op_case cases[] = {
    {"[3, 5] gain [5] bias [5]", 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, -2, 2, 0, case_affine},
    {"[2, 3, 4] no gain, no bias", 1, {3}, {{2, 3, 4}}, -2, 2, 0, case_plain},
    {"[2, 1, 6] gain only", 2, {3, 1}, {{2, 1, 6}, {6}}, -2, 2, 0, case_gain},
    {"[4, 3] bias only", 2, {2, 1}, {{4, 3}, {3}}, -2, 2, 0, case_bias},
    {"[1, 4] one row, eps 0.5", 3, {2, 1, 1}, {{1, 4}, {4}, {4}}, -2, 2, 0, case_big_eps},
    {"[3, 1] size-1 rows", 3, {2, 1, 1}, {{3, 1}, {1}, {1}}, -2, 2, 0, case_affine},
    {"[19, 64] a sixteen-row block, rest rows", 3, {2, 1, 1}, {{19, 64}, {64}, {64}}, -2, 2, 0, case_affine},
    {"[21, 19] edge lanes", 3, {2, 1, 1}, {{21, 19}, {19}, {19}}, -2, 2, 0, case_affine},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"x, gain, bias in [100, 110]: rows far from 0", 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, 100, 110, 0, case_affine},
    {"x, gain, bias in [-1e4, 1e4]", 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, -1e4, 1e4, 0, case_affine},
};

const ag_op_desc ag_op_layer_norm = {.name = "layer_norm", .backward = layer_norm_backward, AG_CASES(cases),
    AG_EDGES(edges)};
