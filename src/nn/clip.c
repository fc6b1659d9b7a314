/* clip.c: gradient clipping by the global norm, torch.nn.utils.
 * clip_grad_norm_ (and the norm that ag_optim_step_clip_zero clips by).
 *
 * norm = sqrt(sum over every parameter and element of grad^2); when
 * norm > max_norm the grads are scaled by coef = max_norm / (norm + 1e-6),
 * torch.nn.utils.clip_grad_norm_'s factor, so the clipped norm is a hair
 * below max_norm.  (PyTorch scales by min(coef, 1), which also shrinks a
 * norm within 1e-6 below max_norm; testing norm > max_norm instead makes a
 * second clip a no-op.) */
#include "nn/nn_internal.h"
#include "attograd_optim.h"

#include <math.h>
#include <stdio.h>

/* sum of x_j^2 in double (10^5 squares and more), in 8 partial sums that
 * vector lanes can hold, added up in a fixed order: the same bits on every
 * instruction set.  (Each square of a float is exact in double: only the
 * additions round.)  Each lane is one chain of additions, and a chain runs
 * at the adder's latency, not its throughput: so WAYS arrays are summed
 * side by side, their lanes interleaved over their common length, each
 * array's sums in its own order as if it were alone. */
enum { LANES = 8, WAYS = 4 };

/* lane[l] += x_j^2 for j = l mod LANES in [from, to), to - from a multiple of LANES */
static inline AG_ALWAYS_INLINE void lanes_add(double *lane, const ag_real *x, size_t from, size_t to)
{
    for (size_t j = from; j < to; j += LANES)
#pragma GCC unroll 8
        for (int l = 0; l < LANES; l++) lane[l] += (double)x[j + l] * (double)x[j + l];
}

/* The sum of n squares from its lanes: the last n mod LANES squares, then
 * the lanes in order */
static inline AG_ALWAYS_INLINE double lanes_total(const double *lane, size_t n, const ag_real *x)
{
    double s = 0;
    for (size_t j = n / LANES * LANES; j < n; j++) s += (double)x[j] * (double)x[j];
    for (int l = 0; l < LANES; l++) s += lane[l];
    return s;
}

/* out[w] = the sum of squares of x[w][0 .. n[w]) for w < WAYS */
static inline AG_ALWAYS_INLINE void sum_squares(const size_t *n, const ag_real *const *x, double *out)
{
    double lane[WAYS][LANES] = {{0}};
    size_t common = n[0];
    for (int w = 1; w < WAYS; w++) common = n[w] < common ? n[w] : common;
    common = common / LANES * LANES;
    for (size_t j = 0; j < common; j += LANES)
#pragma GCC unroll 4
        for (int w = 0; w < WAYS; w++)
#pragma GCC unroll 8
            for (int l = 0; l < LANES; l++) lane[w][l] += (double)x[w][j + l] * (double)x[w][j + l];
    for (int w = 0; w < WAYS; w++) {
        lanes_add(lane[w], x[w], common, n[w] / LANES * LANES);
        out[w] = lanes_total(lane[w], n[w], x[w]);
    }
}
#define SQUARES_PARAMS (const size_t *n, const ag_real *const *x, double *out)
AG_ISA_CLONES(void, sum_squares, SQUARES_PARAMS, sum_squares(n, x, out))

/* part[i] = the sum of squares of parameter i0 + i's gradient, for the
 * parameters in groups of WAYS: group k is order[k WAYS ...], the last one
 * padded with its first parameter (summed again, the result dropped) */
typedef struct squares_job {
    ag_store *s;
    int i0, n;
    const int *order;
    double *part;
} squares_job;

static void squares_of(void *ctx, size_t k)
{
    const squares_job *j = ctx;
    size_t n[WAYS];
    const ag_real *x[WAYS];
    int at[WAYS];
    double out[WAYS];
    for (int w = 0; w < WAYS; w++) {
        int r = (int)k * WAYS + w;
        at[w] = j->order[r < j->n ? r : (int)k * WAYS];
        const ag_tensor *t = ag_store_at(j->s, j->i0 + at[w]);
        n[w] = t->size, x[w] = t->grad;
    }
    AG_ISA_CALL(sum_squares, (n, x, out));
    for (int w = 0; w < WAYS && (int)k * WAYS + w < j->n; w++) j->part[at[w]] = out[w];
}

/* order[0 .. n) = 0 .. n-1 by decreasing size of parameter i0 + i, so
 * that each group of WAYS has sizes alike (insertion sort: n <= PART) */
static void by_size(ag_store *s, int i0, int n, int *order)
{
    for (int i = 0; i < n; i++) {
        size_t size = ag_store_at(s, i0 + i)->size;
        int k = i;
        for (; k > 0 && ag_store_at(s, i0 + order[k - 1])->size < size; k--) order[k] = order[k - 1];
        order[k] = i;
    }
}

/* x_j *= coef for j < n, in double */
static inline AG_ALWAYS_INLINE void scale(size_t n, ag_real *x, double coef)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++) x[j] = (ag_real)((double)x[j] * coef);
}
AG_ISA_CLONES(void, scale, (size_t n, ag_real *x, double coef), scale(n, x, coef))

void ag__scale_grad(size_t n, ag_real *grad, double coef) { AG_ISA_CALL(scale, (n, grad, coef)); }

static void scale_piece(void *ctx, int i, ag_tensor *t, size_t a, size_t b)
{
    (void)i;
    ag__scale_grad(b - a, t->grad + a, *(const double *)ctx);
}

double ag__grad_norm(ag_store *s, int *bad)
{
    int np = ag_store_count(s);
    *bad = -1;
    /* one sum per parameter, whichever thread computes it, added up in
     * order: the same norm for any thread count (PART parameters at a time,
     * so that no step allocates) */
    enum { PART = 256 };
    double part[PART], sum = 0;
    int order[PART];
    int nt = ag__threads_for(ag_store_numel(s));
    for (int i0 = 0; i0 < np; i0 += PART) {
        int n = np - i0 < PART ? np - i0 : PART;
        by_size(s, i0, n, order);
        squares_job j = {s, i0, n, order, part};
        ag__parallel_for((size_t)(n + WAYS - 1) / WAYS, nt, squares_of, &j);
        for (int i = 0; i < n; i++) {
            if (*bad < 0 && !isfinite(part[i])) *bad = i0 + i;
            sum += part[i];
        }
    }
    return sqrt(sum);
}

double ag__clip_coef(double max_norm, double norm)
{
    return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1;
}

ag_status ag_clip_grad_norm(ag_store *s, double max_norm, double *total_norm)
{
    if (total_norm) *total_norm = 0;
    if (!s) return ag__optim_fail(NULL, NULL, AG_ERR_ARG, "clip_grad_norm: store is NULL");
    if (isnan(max_norm)) return ag__optim_fail(NULL, s, AG_ERR_ARG, "clip_grad_norm: max_norm is nan");
    int bad;
    double norm = ag__grad_norm(s, &bad);
    if (total_norm) *total_norm = norm;
    if (!isfinite(norm)) return ag__optim_fail(NULL, s, AG_ERR_NUMERIC, "clip_grad_norm: %s", ag__norm_error(s, norm, bad));
    double coef = ag__clip_coef(max_norm, norm);
    if (coef != 1) ag__for_values(s, 2, scale_piece, &coef);
    return AG_OK;
}

const char *ag__norm_error(ag_store *s, double norm, int bad)
{
    static _Thread_local char why[200];
    if (bad >= 0)
        snprintf(why, sizeof why, "gradient norm is %g: parameter '%s' has a non-finite gradient", norm,
                 ag_store_at(s, bad)->name);
    else
        snprintf(why, sizeof why, "gradient norm overflows (sum of squares is %g)", norm * norm);
    return why;
}
