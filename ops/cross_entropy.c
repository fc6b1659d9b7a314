/* ops/cross_entropy.c: cross-entropy of logits against integer targets:
 * log-softmax and negative log-likelihood fused (and stable), reduced to
 * their mean (the default), their sum, or kept per row (none).
 *
 *   logits [..., V], targets (one int per row) -> loss [] (mean, sum), [...] (none)
 *
 * forward, per row r with target t != ignore_index (ls = label smoothing):
 *   m      = max_v x_v
 *   lse    = m + log(sum_v exp(x_v - m))    (log-sum-exp; -log p_v = lse - x_v)
 *   loss_r = (1 - ls) (lse - x_t) + ls mean_v (lse - x_v)
 *          = lse - (1 - ls) x_t - ls mean_v x_v
 *   mean: sum_r loss_r / count (count: the rows not ignored);  sum: sum_r loss_r;
 *   none: loss[r] = loss_r, 0 for an ignored row
 * backward, per counted row (ignored rows get 0), with w_r the weight of
 * loss_r in the result (mean: dy / count; sum: dy; none: dy[r]):
 *   dx_v += w_r (p_v - (1 - ls) [v == t] - ls / V),   p_v = exp(x_v - lse)
 *   (d lse / d x_v = p_v; the other two terms differentiate -x_t, -mean_v x_v)
 *
 * PyTorch's F.cross_entropy(label_smoothing=ls, reduction=...), except that
 * with every target ignored the mean is 0 and the gradient zero (PyTorch:
 * NaN).  Each row is computed from x - m, so logits of 1e4 lose nothing to
 * cancellation; m and log sum are kept apart, so that the backward's
 * p_v = exp((x_v - m) - log sum) is as exact as the forward.
 *
 * iarg[0] = ignore_index, iarg[1] = reduction, farg[0] = ls; aux = saved.
 * The arguments' rules are core/fits.c's; the fast rows are
 * src/kernels/cross_entropy.c. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

typedef ag__xent saved; /* kernels/kernels.h: what the backward reads */

ag_tensor *ag_cross_entropy(ag_graph *g, ag_tensor *logits, const int *targets, int ignore_index, double ls)
{
    return ag_cross_entropy_ex(g, logits, targets, ignore_index, ls, AG_REDUCTION_MEAN);
}

/* What the backward reads, in g's arena and hung on y: the targets
 * (copied), room for m and log sum per row and for exp(x - m).  NULL when
 * the arena is out of memory. */
static saved *save_for_backward(ag_graph *g, ag_tensor *y, const int *targets, size_t rows, size_t count, int V)
{
    size_t n = rows ? rows : 1; /* no zero-sized saves */
    saved *sv = ag__save(g, sizeof *sv);
    int *tg = sv ? ag__save(g, n * sizeof(int)) : NULL;
    double *mx = tg ? ag__save(g, 2 * n * sizeof(double)) : NULL;
    ag_real *ex = mx ? ag__save(g, n * (size_t)V * sizeof(ag_real)) : NULL;
    if (!ex) return NULL;
    if (rows) memcpy(tg, targets, rows * sizeof(int));
    *sv = (saved){.rows = rows, .count = count, .V = V, .targets = tg, .max = mx, .logsum = mx + n, .expd = ex};
    return ag__impl(y)->aux = sv;
}

/* loss_r = lse - (1 - ls) x_t - ls mean_v x_v of a counted row, each term
 * shifted by m (logsum = lse - m); +inf when every logit is -inf.  A term
 * of weight 0 is left out: a -inf logit (a masked class) makes x_t or the
 * mean -inf, and 0 * -inf would be NaN. */
static double row_loss(const ag_real *xr, int V, int t, double m, double logsum, double ls)
{
    if (m == -INFINITY) return INFINITY; /* -log p_t = +inf, no gradient */
    double loss = logsum, mean = 0;
    if (ls < 1) loss -= (1 - ls) * (xr[t] - m);
    for (int v = 0; ls > 0 && v < V; v++) mean += xr[v] - m;
    if (ls > 0) loss -= ls * (mean / V);
    return loss;
}

/* The reference forward: each row's m, exp(x - m) and log sum kept in sv
 * for the backward (an ignored row: m = -inf), loss_r into loss[r] (unless
 * loss is NULL; 0 for an ignored row), the counted rows' sum returned.
 * NaNs are passed over by the max, unless nothing is above -inf (then m
 * is NaN). */
static double forward_ref(saved *sv, int ignore_index, double ls, const ag_real *x, ag_real *loss)
{
    const size_t V = (size_t)sv->V;
    double total = 0;
    for (size_t r = 0; r < sv->rows; r++) {
        const ag_real *xr = x + r * V;
        ag_real m = -INFINITY, s = 0;
        bool nan = false, counted = sv->targets[r] != ignore_index;
        for (size_t v = 0; v < V; v++) nan |= isnan(xr[v]), m = xr[v] > m ? xr[v] : m;
        if (m == -INFINITY && nan) m = NAN;
        for (size_t v = 0; m > -INFINITY && v < V; v++) s += sv->expd[r * V + v] = (ag_real)exp((double)(xr[v] - m));
        sv->max[r] = counted ? (double)m : -INFINITY;
        sv->logsum[r] = counted ? log((double)s) : 0;
        double loss_r = counted ? row_loss(xr, sv->V, sv->targets[r], sv->max[r], sv->logsum[r], ls) : 0;
        if (loss) loss[r] = (ag_real)loss_r;
        total += loss_r;
    }
    return total;
}

ag_tensor *ag_cross_entropy_ex(ag_graph *g, ag_tensor *logits, const int *targets, int ignore_index,
                               double label_smoothing, ag_reduction reduction)
{
    size_t count; /* the rows not ignored */
    if (!ag__ok(g, "cross_entropy", 1, logits) ||
        !ag__cross_entropy_fits(g, logits, targets, ignore_index, label_smoothing, reduction, &count))
        return NULL;
    int V = logits->shape[logits->ndim - 1], per_row = reduction == AG_REDUCTION_NONE;
    size_t rows = logits->size / (size_t)V;
    /* none: one loss per row, the logits' shape without its last axis */
    ag_tensor *y = ag__node(g, AG_OP_CROSS_ENTROPY, per_row ? logits->ndim - 1 : 0, logits->shape, 1, &logits);
    if (!y) return NULL;
    ag__impl(y)->iarg[0] = ignore_index, ag__impl(y)->iarg[1] = (int)reduction;
    ag__impl(y)->farg[0] = label_smoothing;
    saved *sv = save_for_backward(g, y, targets, rows, count, V);
    if (!sv) return NULL;
    double total; /* sum_r loss_r over the counted rows */
    ag_real *loss = per_row ? y->data : NULL;
    if (!(ag__fast() && ag__k_cross_entropy_forward(sv, ignore_index, label_smoothing, logits->data, loss, &total)))
        total = forward_ref(sv, ignore_index, label_smoothing, logits->data, loss);
    if (reduction == AG_REDUCTION_MEAN) y->data[0] = count ? (ag_real)(total / (double)count) : 0;
    if (reduction == AG_REDUCTION_SUM) y->data[0] = (ag_real)total;
    return y;
}

/* The reference backward, adding into dx: each live row's weight w_r in
 * y (mean: dy / count; sum: dy; none: dy[r]) times
 *   p_v - (1 - ls) [v == t] - ls / V,  p_v = exp(x_v - m - log sum). */
static void backward_ref(const saved *sv, int ignore, ag_reduction reduction, double ls, const ag_real *x,
                         const ag_real *dy, ag_real *dx)
{
    const size_t V = (size_t)sv->V;
    for (size_t r = 0; r < sv->rows; r++) {
        if (sv->targets[r] == ignore || sv->max[r] == -INFINITY) continue; /* no loss, no gradient */
        double w = reduction == AG_REDUCTION_NONE ? (double)dy[r]
                   : reduction == AG_REDUCTION_SUM ? (double)dy[0]
                                                   : (double)dy[0] / (double)sv->count;
        for (size_t v = 0; v < V; v++) {
            double p = exp((double)x[r * V + v] - sv->max[r] - sv->logsum[r]);
            dx[r * V + v] += (ag_real)(w * (p - (1 - ls) * ((int)v == sv->targets[r]) - ls / (double)V));
        }
    }
}

static void cross_entropy_backward(ag_graph *g, ag_tensor *y)
{
    ag_tensor *logits = y->src[0];
    bool fresh = false, fast = ag__fast(); /* fresh: nothing in dx yet, store */
    ag_real *dx = fast ? ag__grad_fresh(g, logits, &fresh) : ag__grad(g, logits);
    if (!dx) return;
    const saved *sv = ag__impl(y)->aux;
    int ignore = ag__impl(y)->iarg[0];
    ag_reduction reduction = (ag_reduction)ag__impl(y)->iarg[1];
    double ls = ag__impl(y)->farg[0];
    if (!(fast && ag__k_cross_entropy_backward(sv, ignore, reduction, ls, y->grad, dx, fresh)))
        backward_ref(sv, ignore, reduction, ls, logits->data, y->grad, dx);
}

/* Each case's targets are fixed data, made inside its build, not a checked
 * input: CASE(name, ignore_index, label smoothing, reduction, targets...). */
#define CASE(name, ignore, ls, reduction, ...)                                         \
    static ag_tensor *name(ag_graph *g, ag_tensor *const *in)                          \
    {                                                                                  \
        static const int t[] = {__VA_ARGS__};                                          \
        return ag_cross_entropy_ex(g, in[0], t, ignore, ls, AG_REDUCTION_##reduction); \
    }
CASE(case_plain, -100, 0, MEAN, 2, 0, 4)
CASE(case_ignored, -100, 0, MEAN, 1, -100, 3, 0)
CASE(case_smooth_leading, -1, 0.1, MEAN, 0, 3, 3, 1, 2, 0)
CASE(case_smooth_ignored, 7, 0.1, MEAN, 0, 7, 2, 7)
CASE(case_one_row, -100, 0.1, MEAN, 2)
CASE(case_one_class, -100, 0, MEAN, 0, 0, 0)
CASE(case_sum, -100, 0.1, SUM, 1, -100, 3, 0)
CASE(case_none, -100, 0, NONE, 0, 3, -100, 1, 2, 0)
CASE(case_none_smooth, -100, 0.2, NONE, 2, 0, 1)

static const ag_op_case cases[] = {
    {"[3, 5]", 1, {2}, {{3, 5}}, -3, 3, 0, case_plain},
    {"[4, 4] one target ignored", 1, {2}, {{4, 4}}, -3, 3, 0, case_ignored},
    {"[2, 3, 4] leading axes, smoothing 0.1", 1, {3}, {{2, 3, 4}}, -3, 3, 0, case_smooth_leading},
    {"[2, 2, 3] smoothing 0.1 and ignored", 1, {3}, {{2, 2, 3}}, -3, 3, 0, case_smooth_ignored},
    {"[1, 3] one row", 1, {2}, {{1, 3}}, -3, 3, 0, case_one_row},
    {"[3, 1] one class", 1, {2}, {{3, 1}}, -3, 3, 0, case_one_class},
    {"[4, 4] sum, smoothing 0.1, one ignored", 1, {2}, {{4, 4}}, -3, 3, 0, case_sum},
    {"[2, 3, 4] none, one ignored", 1, {3}, {{2, 3, 4}}, -3, 3, 0, case_none},
    {"[3, 5] none, smoothing 0.2", 1, {2}, {{3, 5}}, -3, 3, 0, case_none_smooth},
};

/* float-edge cases (tests/edge/float_edges.c): the values where float breaks first */
static const ag_op_case edges[] = {
    {"logits in [70, 90]", 1, {2}, {{3, 5}}, 70, 90, 0, case_plain},
    {"logits in [-90, -70]", 1, {2}, {{3, 5}}, -90, -70, 0, case_plain},
    {"logits in [-80, 80]", 1, {2}, {{3, 5}}, -80, 80, 0, case_plain},
    {"logits in [-1e4, 1e4]", 1, {2}, {{3, 5}}, -1e4, 1e4, 0, case_plain},
};

const ag_op_desc ag_op_cross_entropy = {.name = "cross_entropy", .backward = cross_entropy_backward,
                                        AG_CASES(cases), AG_EDGES(edges)};
