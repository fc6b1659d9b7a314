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
 *   (the two means are the paths through mean and through rstd: every x_j
 *   moves the row's mean and variance, so each dx_i sees the whole row)
 *
 * Rows go to the threads (ag_set_threads) for y and dx; the sums over rows
 * of dgain and dbias are split by columns instead, so each is added up in
 * row order by one thread and the result never depends on the count.
 *
 * src = {x, gain, bias}, NULL entries allowed.  farg[0] = eps.  aux holds
 * 2 values per row: mean[0..rows) then rstd[0..rows). */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

/* src/core/threads.c: threads for a loop touching about `work` values. */

/* A gain or bias must be NULL or exactly [C]. */
static bool check_vec(ag_graph *g, const ag_tensor *x, const ag_tensor *v, const char *what)
{
    if (!v) return true;
    int C = x->shape[x->ndim - 1];
    if (v->ndim == 1 && v->shape[0] == C) return true;
    char sx[96], sv[96];
    ag_graph_fail(g, AG_ERR_SHAPE, "layer_norm: %s must be [%d] for x %s, got %s", what, C,
                  ag_shape_str(x, sx, sizeof sx), ag_shape_str(v, sv, sizeof sv));
    return false;
}

/* One row of the forward: y = (x - mean) * rstd * gain + bias.  Sums in
 * ag_real, in vector lanes (partial sums: closer to exact than one running
 * sum); the variance from the centred values (two passes: no cancellation). */
static void norm_row(size_t C, const ag_real *xr, ag_real *yr, const ag_real *gd, const ag_real *bd, double eps,
                     ag_real *mean, ag_real *rstd)
{
    ag_real m = 0, v = 0;
#pragma omp simd reduction(+ : m)
    for (size_t i = 0; i < C; i++) m += xr[i];
    m /= (ag_real)C;
#pragma omp simd reduction(+ : v)
    for (size_t i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
    v /= (ag_real)C;
    ag_real s = (ag_real)(1 / sqrt((double)v + eps));
    *mean = m;
    *rstd = s;
#pragma omp simd
    for (size_t i = 0; i < C; i++) yr[i] = (xr[i] - m) * s * gd[i] + bd[i];
}

/* What the rows of a forward or a backward share; rows are independent. */
typedef struct norm_job {
    size_t rows, C, nt; /* nt: blocks of columns (dgain, dbias) */
    const ag_real *x, *gd, *bd, *dy;
    ag_real *y, *mean, *rstd, *dx, *dgain, *dbias;
    double eps;
    bool fresh;
} norm_job;

static void norm_row_at(void *ctx, size_t r)
{
    const norm_job *j = ctx;
    norm_row(j->C, j->x + r * j->C, j->y + r * j->C, j->gd, j->bd, j->eps, j->mean + r, j->rstd + r);
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
    if (!gd || !bd) { /* gain 1 and bias 0 when NULL: one loop for every case */
        ag_real *unit = ag__alloc(g, 2 * C * sizeof(ag_real));
        if (!unit) return NULL;
        for (size_t i = 0; i < C; i++) unit[i] = 1, unit[C + i] = 0;
        gd = gd ? gd : unit, bd = bd ? bd : unit + C;
    }
    norm_job j = {.C = C, .x = x->data, .gd = gd, .bd = bd, .y = y->data, .mean = mean, .rstd = rstd, .eps = eps};
    ag__parallel_for(rows, ag__threads_for(x->size), norm_row_at, &j);
    return y;
}

/* One row of dx:  xhat = (x - mean) * rstd,  y = xhat * gain + bias. */
static void norm_row_backward(size_t C, const ag_real *xr, const ag_real *dyr, ag_real *dxr, const ag_real *gd,
                              ag_real mean, ag_real rstd, bool fresh)
{
    /* the row's two means */
    ag_real mdxhat = 0, mdxhat_xhat = 0;
#pragma omp simd reduction(+ : mdxhat, mdxhat_xhat)
    for (size_t i = 0; i < C; i++) {
        ag_real xhat = (xr[i] - mean) * rstd;
        ag_real dxhat = dyr[i] * gd[i]; /* y = xhat * gain + bias */
        mdxhat += dxhat;
        mdxhat_xhat += dxhat * xhat;
    }
    ag_real a = mdxhat / (ag_real)C, b = mdxhat_xhat / (ag_real)C;
    /* xhat = (x - mean) * rstd, through mean and through rstd; stored into
     * a fresh dx (nothing in it yet), added otherwise */
    if (fresh) {
#pragma omp simd
        for (size_t i = 0; i < C; i++) {
            ag_real xhat = (xr[i] - mean) * rstd;
            dxr[i] = rstd * (dyr[i] * gd[i] - a - xhat * b);
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < C; i++) {
            ag_real xhat = (xr[i] - mean) * rstd;
            dxr[i] += rstd * (dyr[i] * gd[i] - a - xhat * b);
        }
    }
}

/* Columns [c0, c1) of dgain and dbias: sums over the rows, in row order. */
static void norm_params_backward(size_t rows, size_t C, size_t c0, size_t c1, const ag_real *x, const ag_real *dy,
                                 const ag_real *mean, const ag_real *rstd, ag_real *dgain, ag_real *dbias)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * C, *dyr = dy + r * C;
        ag_real mr = mean[r], sr = rstd[r];
        if (dbias) /* y = ... + bias */
#pragma omp simd
            for (size_t i = c0; i < c1; i++) dbias[i] += dyr[i];
        if (dgain) /* y = xhat * gain */
#pragma omp simd
            for (size_t i = c0; i < c1; i++) dgain[i] += dyr[i] * ((xr[i] - mr) * sr);
    }
}

static void norm_row_backward_at(void *ctx, size_t r)
{
    const norm_job *j = ctx;
    norm_row_backward(j->C, j->x + r * j->C, j->dy + r * j->C, j->dx + r * j->C, j->gd, j->mean[r], j->rstd[r],
                      j->fresh);
}

/* Block t of nt of the columns. */
static void norm_params_backward_at(void *ctx, size_t t)
{
    const norm_job *j = ctx;
    norm_params_backward(j->rows, j->C, j->C * t / j->nt, j->C * (t + 1) / j->nt, j->x, j->dy, j->mean, j->rstd,
                         j->dgain, j->dbias);
}

static void layer_norm_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *x = y->src[0], *gain = y->src[1], *bias = y->src[2];
    bool fresh = false;
    ag_real *dx = x->requires_grad ? ag__grad_fresh(g, x, &fresh) : NULL;
    ag_real *dgain = gain && gain->requires_grad ? ag__grad(g, gain) : NULL;
    ag_real *dbias = bias && bias->requires_grad ? ag__grad(g, bias) : NULL;
    if (ag_graph_status(g) != AG_OK || y->size == 0) return;
    size_t C = (size_t)y->shape[y->ndim - 1], rows = y->size / C;
    ag_real *mean = ag__impl(y)->aux, *rstd = mean + rows;
    const ag_real *gd = gain ? gain->data : NULL;
    if (!gd) { /* gain 1 when NULL */
        ag_real *ones = ag__alloc(g, C * sizeof(ag_real));
        if (!ones) return;
        for (size_t i = 0; i < C; i++) ones[i] = 1;
        gd = ones;
    }
    int nt = ag__threads_for(y->size);
    norm_job j = {.rows = rows, .C = C, .nt = (size_t)nt, .x = x->data, .gd = gd, .dy = y->grad,
                  .mean = mean, .rstd = rstd, .dx = dx, .dgain = dgain, .dbias = dbias,
                  .fresh = fresh};
    /* dx by rows; dgain and dbias by columns, so that each of their sums
     * is made by one thread in row order, whatever the count */
    if (dx) ag__parallel_for(rows, nt, norm_row_backward_at, &j);
    if (dgain || dbias) ag__parallel_for((size_t)nt, nt, norm_params_backward_at, &j);
}

static ag_tensor *case_affine(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 1e-5); }
static ag_tensor *case_plain(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], NULL, NULL, 1e-5); }
static ag_tensor *case_gain_only(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], NULL, 1e-5); }
static ag_tensor *case_bias_only(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], NULL, in[1], 1e-5); }
static ag_tensor *case_big_eps(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 0.5); }

static const ag_op_case cases[] = {
    {"[3, 5] gain [5] bias [5]", 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, -2, 2, 0, case_affine},
    {"[2, 3, 4] no gain, no bias", 1, {3}, {{2, 3, 4}}, -2, 2, 0, case_plain},
    {"[2, 1, 6] gain only", 2, {3, 1}, {{2, 1, 6}, {6}}, -2, 2, 0, case_gain_only},
    {"[4, 3] bias only", 2, {2, 1}, {{4, 3}, {3}}, -2, 2, 0, case_bias_only},
    {"[1, 4] one row, eps 0.5", 3, {2, 1, 1}, {{1, 4}, {4}, {4}}, -2, 2, 0, case_big_eps},
    {"[3, 1] size-1 rows", 3, {2, 1, 1}, {{3, 1}, {1}, {1}}, -2, 2, 0, case_affine},
};

const ag_op_desc ag_op_layer_norm = {.name = "layer_norm", .backward = layer_norm_backward, AG_CASES(cases)};
