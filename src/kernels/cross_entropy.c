/* kernels/cross_entropy.c: cross-entropy's rows, fast (the math and the
 * reference are ops/cross_entropy.c): the rows' max and exps by the
 * shared row kernel that folds sixteen rows' lanes side by side
 * (ag__max_exp_sum_rows, kernels/rows.c), then each row's loss (label
 * smoothing's mean in lanes); and the backward's rows of dx a piece at a
 * time, one clone per instruction set. */
#include "core/internal.h"
#include "kernels/kernels.h"

#include <math.h>

/* Of every row, m and exp(x - m), and their sum in logsum (until row_loss
 * takes its log); -inf and 0 for an ignored row. */
static void exps(ag__xent *sv, int ignore_index, const ag_real *x)
{
    const int V = sv->V;
    enum { PIECE = 256 };
    for (size_t r0 = 0; r0 < sv->rows; r0 += PIECE) {
        size_t n = sv->rows - r0 < PIECE ? sv->rows - r0 : PIECE;
        ag_real m[PIECE], s[PIECE];
        ag__max_exp_sum_rows(n, (size_t)V, x + r0 * (size_t)V, m, s, sv->expd + r0 * (size_t)V);
        for (size_t r = 0; r < n; r++) {
            bool counted = sv->targets[r0 + r] != ignore_index;
            sv->max[r0 + r] = counted ? (double)m[r] : -INFINITY;
            sv->logsum[r0 + r] = counted ? (double)s[r] : 0;
        }
    }
}

/* loss_r of counted row r (ops/cross_entropy.c's row_loss, the mean in
 * lanes), from s = sum_v exp(x_v - m) in logsum, which keeps log s. */
static double row_loss(ag__xent *sv, size_t r, const ag_real *xr, double ls)
{
    const int V = sv->V;
    double m = sv->max[r], mean_shifted = 0;
    if (m == -INFINITY) return INFINITY; /* every logit -inf: -log p_t = +inf, no gradient */
    if (ls > 0) { /* only label smoothing needs the row's mean (x - m) */
#pragma omp simd reduction(+ : mean_shifted)
        for (int v = 0; v < V; v++) mean_shifted += xr[v] - m;
        mean_shifted /= V;
    }
    sv->logsum[r] = log(sv->logsum[r]);
    double loss_r = sv->logsum[r]; /* a term of weight 0 left out: 0 * -inf is NaN */
    if (ls < 1) loss_r -= (1 - ls) * (xr[sv->targets[r]] - m);
    if (ls > 0) loss_r -= ls * mean_shifted;
    return loss_r;
}

bool ag__k_cross_entropy_forward(ag__xent *sv, int ignore_index, double ls, const ag_real *x, ag_real *loss,
                                 double *total)
{
    /* Every row's exps first, then every row's log and loss: rows are
     * independent, and the CPU overlaps one row's log with the next's. */
    exps(sv, ignore_index, x);
    double sum = 0;
    for (size_t r = 0; r < sv->rows; r++) {
        double loss_r = 0;
        if (sv->targets[r] != ignore_index) sum += loss_r = row_loss(sv, r, x + r * (size_t)sv->V, ls);
        if (loss) loss[r] = (ag_real)loss_r;
    }
    *total = sum;
    return true;
}

/* dx's rows r < rows of V (row stride V), from the exps e kept by the
 * forward and each row's scalars c[r] = w_r / sum_v e_v, off[r] = w_r ls / V:
 *   dx_v (+)= c e_v - off          (stored where fresh, else added)
 * a row with live[r] false gets nothing (zeros where fresh).  One clone
 * per instruction set: the same products and differences, more lanes. */
static inline AG_ALWAYS_INLINE void grad_rows(size_t rows, size_t V, const ag_real *e, const bool *live,
                                              const ag_real *c, const ag_real *off, ag_real *dx, bool fresh)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *er = e + r * V;
        ag_real *dxr = dx + r * V, cr = c[r], offr = off[r];
        if (!live[r]) {
            if (fresh) memset(dxr, 0, V * sizeof(ag_real));
        } else if (fresh) {
#pragma omp simd
            for (size_t v = 0; v < V; v++) dxr[v] = cr * er[v] - offr;
        } else {
#pragma omp simd
            for (size_t v = 0; v < V; v++) dxr[v] += cr * er[v] - offr;
        }
    }
}
#define GRAD_ROWS_PARAMS                                                                                   \
    (size_t rows, size_t V, const ag_real *e, const bool *live, const ag_real *c, const ag_real *off, ag_real *dx, \
     bool fresh)
AG_ISA_CLONES(void, grad_rows, GRAD_ROWS_PARAMS, grad_rows(rows, V, e, live, c, off, dx, fresh))

bool ag__k_cross_entropy_backward(const ag__xent *sv, int ignore, ag_reduction reduction, double ls,
                                   const ag_real *dy, ag_real *dx, bool fresh)
{
    const int V = sv->V;
    /* the weight of each row's loss in y: 1 / count (mean), 1 (sum), or y's own row (none) */
    double dloss = reduction == AG_REDUCTION_SUM    ? (double)dy[0]
                   : reduction == AG_REDUCTION_MEAN ? (sv->count ? (double)dy[0] / (double)sv->count : 0)
                                                    : 0;
    /* loss_r = lse - (1-ls) x_t - ls mean_v x_v, weighed by dloss in y:
     *   dx_v += dloss (p_v - (1-ls) [v == t] - ls / V),  p_v = expd_v / exp(logsum)
     * A piece of rows at a time: its scalars (one exp a row), then its
     * rows of dx in one call (grad_rows), then the targets' terms. */
    enum { PIECE = 64 };
    for (size_t r0 = 0; r0 < sv->rows; r0 += PIECE) {
        size_t n = sv->rows - r0 < PIECE ? sv->rows - r0 : PIECE;
        bool live[PIECE]; /* a row with a loss: counted, and not every logit -inf */
        ag_real c[PIECE], off[PIECE], hit[PIECE]; /* hit: the target's own term */
        for (size_t r = 0; r < n; r++) {
            if (reduction == AG_REDUCTION_NONE) dloss = (double)dy[r0 + r];
            live[r] = sv->targets[r0 + r] != ignore && sv->max[r0 + r] != -INFINITY;
            c[r] = live[r] ? (ag_real)(dloss * exp(-sv->logsum[r0 + r])) : 0;
            off[r] = (ag_real)(dloss * ls / V);
            hit[r] = (ag_real)(dloss * (1 - ls));
        }
        ag_real *dxp = dx + r0 * (size_t)V;
        AG_ISA_CALL(grad_rows, (n, (size_t)V, sv->expd + r0 * (size_t)V, live, c, off, dxp, fresh));
        for (size_t r = 0; r < n; r++)
            if (live[r]) dxp[r * (size_t)V + sv->targets[r0 + r]] -= hit[r];
    }
    return true;
}
