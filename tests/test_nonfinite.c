/* tests/test_nonfinite.c: NaN, +inf and -inf in the rows of softmax,
 * log-softmax, masked softmax and cross-entropy.
 *
 * What PyTorch does, and what attograd must do (never undefined behaviour,
 * which `make asan` turns into a failure):
 *   - a row holding a NaN or a +inf gives NaN in every output of that row
 *     (softmax, log-softmax) or a NaN loss (cross-entropy), and NaN in every
 *     element of that row's gradient;
 *   - a -inf among finite values is an exp of 0: the row stays finite
 *     (log-softmax gives -inf at that place);
 *   - a row of nothing but -inf (every key masked) gives zeros (softmax),
 *     -inf (log-softmax), +inf (cross-entropy), and a zero gradient.
 * Rows of 3, 16, 17, 64, 65 and 100 values reach every kernel: the
 * in-register softmax for rows of up to 64 floats, the vector loop in
 * pieces of 16 and 32, and the padded tail. */
#include "common.h"
#include "core/internal.h" /* ag__masked_softmax */

/* The rows every test feeds in; p is where the odd value sits. */
enum { FINITE, ONE_NAN, ONE_PINF, ONE_NINF, ALL_NAN, ALL_PINF, PINF_AND_NINF, ALL_NINF, NROWS };
static const char *const row_name[NROWS] = {"finite",   "one NaN",  "one +inf",      "one -inf",
                                            "all NaN", "all +inf", "+inf and -inf", "all -inf"};
static const int lengths[] = {3, 16, 17, 64, 65, 100};

/* x [NROWS, n]: row r of kind r, its odd value at column p. */
static ag_tensor *odd_rows(ag_graph *g, int n, int p)
{
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(NROWS, n));
    cr_assert_not_null(x);
    for (int r = 0; r < NROWS; r++)
        for (int j = 0; j < n; j++) {
            ag_real v = (ag_real)(((r * 7 + j * 5) % 11) * 0.5 - 2.5), odd = 0;
            switch (r) {
            case ONE_NAN: odd = NAN; break;
            case ONE_PINF: odd = INFINITY; break;
            case ONE_NINF: odd = -INFINITY; break;
            case ALL_NAN: v = odd = NAN; break;
            case ALL_PINF: v = odd = INFINITY; break;
            case PINF_AND_NINF: v = -INFINITY, odd = INFINITY; break;
            case ALL_NINF: v = odd = -INFINITY; break;
            default: odd = v;
            }
            x->data[r * n + j] = j == p ? odd : v;
        }
    ag_set_requires_grad(x, 1);
    return x;
}

static bool nan_row(int r) { return r == ONE_NAN || r == ONE_PINF || r == ALL_NAN || r == ALL_PINF || r == PINF_AND_NINF; }

/* Every value of row r (n of them) is NaN. */
static void expect_all_nan(const ag_real *v, int n, int r, const char *what)
{
    for (int j = 0; j < n; j++)
        cr_assert(isnan(v[j]), "%s, row '%s' of %d: [%d] = %g, want NaN", what, row_name[r], n, j, (double)v[j]);
}

/* Row r (n values, -inf at p for ONE_NINF) of softmax: probabilities that
 * sum to 1, or zeros for a row of all -inf. */
static void expect_softmax_row(const ag_real *y, int n, int r, int p, const char *what)
{
    if (nan_row(r)) return expect_all_nan(y, n, r, what);
    double s = 0;
    for (int j = 0; j < n; j++) {
        cr_assert(y[j] >= 0 && y[j] <= 1, "%s, row '%s' of %d: [%d] = %g", what, row_name[r], n, j, (double)y[j]);
        s += y[j];
    }
    if (r == ONE_NINF) cr_assert_eq(y[p], 0, "%s, row '%s' of %d: y at the -inf = %g", what, row_name[r], n, (double)y[p]);
    if (r == ALL_NINF) cr_assert_eq(s, 0, "%s, row of all -inf: sum %g, want 0", what, s);
    else cr_assert(fabs(s - 1) < TOL(1e-12, 1e-5), "%s, row '%s' of %d: sum %.9g", what, row_name[r], n, s);
}

/* dx of row r: NaN everywhere for a NaN row, zero for a row of all -inf,
 * finite otherwise. */
static void expect_grad_row(const ag_real *dx, int n, int r, const char *what)
{
    if (nan_row(r)) return expect_all_nan(dx, n, r, what);
    for (int j = 0; j < n; j++) {
        cr_assert(isfinite(dx[j]), "%s, row '%s' of %d: dx[%d] = %g", what, row_name[r], n, j, (double)dx[j]);
        if (r == ALL_NINF) cr_assert_eq(dx[j], 0, "%s, row of all -inf: dx[%d] = %g", what, j, (double)dx[j]);
    }
}

/* sum(y * w) with w a fixed pattern of nonzero weights: every dy nonzero. */
static ag_tensor *weighted_sum(ag_graph *g, ag_tensor *y)
{
    ag_tensor *w = ag_tensor_new(g, y->ndim, y->shape);
    for (size_t i = 0; i < w->size; i++) w->data[i] = (ag_real)((int)(i % 5) - 2) + (ag_real)0.25;
    return ag_sum_all(g, ag_mul(g, y, w));
}

typedef ag_tensor *(*row_op)(ag_graph *g, ag_tensor *x);
typedef void (*row_check)(const ag_real *y, int n, int r, int p, const char *what);

static ag_tensor *op_softmax(ag_graph *g, ag_tensor *x) { return ag_softmax(g, x); }
static ag_tensor *op_masked_all_kept(ag_graph *g, ag_tensor *x)
{
    ag_tensor *keep = ag_tensor_new(g, AG_SHAPE(1, x->shape[1]));
    for (size_t i = 0; i < keep->size; i++) keep->data[i] = 1;
    return ag__masked_softmax(g, x, 0.5, keep, -1e9);
}
static ag_tensor *op_masked_no_mask(ag_graph *g, ag_tensor *x) { return ag__masked_softmax(g, x, 2, NULL, 0); }
static ag_tensor *op_log_softmax(ag_graph *g, ag_tensor *x) { return ag_log_softmax(g, x); }

/* Row r of log-softmax: -inf where the input is -inf, finite values <= 0
 * elsewhere. */
static void expect_log_softmax_row(const ag_real *y, int n, int r, int p, const char *what)
{
    if (nan_row(r)) return expect_all_nan(y, n, r, what);
    for (int j = 0; j < n; j++) {
        bool ninf = r == ALL_NINF || (r == ONE_NINF && j == p);
        cr_assert(ninf ? y[j] == -INFINITY : isfinite(y[j]) && y[j] <= 0, "%s, row '%s' of %d: [%d] = %g", what,
                  row_name[r], n, j, (double)y[j]);
    }
}

/* Forward and backward of a row-wise op over the odd rows, with the odd
 * value at several places of rows of each length; loss = sum(w * f(y)):
 * f is the identity, or exp for log-softmax (whose -inf outputs times a
 * weight would make the loss itself -inf or NaN; exp(y) is 0 there). */
static void check_rows(row_op op, row_check expect_row, bool exp_first, const char *what)
{
    ag_graph *g = ag_graph_new();
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
        for (int p = 0; p < lengths[k]; p += lengths[k] > 3 ? lengths[k] / 3 : 1) {
            int n = lengths[k];
            ag_graph_reset(g);
            ag_tensor *x = odd_rows(g, n, p), *y = op(g, x);
            cr_assert_not_null(y, "%s: %s", what, ag_graph_error(g));
            for (int r = 0; r < NROWS; r++) expect_row(y->data + r * n, n, r, p, what);
            ag_tensor *loss = weighted_sum(g, exp_first ? ag_exp(g, y) : y);
            cr_assert_eq(ag_backward(g, loss), AG_OK, "%s: %s", what, ag_graph_error(g));
            for (int r = 0; r < NROWS; r++) expect_grad_row(x->grad + r * n, n, r, what);
        }
    ag_graph_free(g);
}

Test(nonfinite, softmax_rows) { check_rows(op_softmax, expect_softmax_row, false, "softmax"); }
Test(nonfinite, masked_softmax_rows_with_a_mask)
{
    check_rows(op_masked_all_kept, expect_softmax_row, false, "masked_softmax");
}
Test(nonfinite, masked_softmax_rows_without_a_mask)
{
    check_rows(op_masked_no_mask, expect_softmax_row, false, "masked_softmax");
}
Test(nonfinite, log_softmax_rows) { check_rows(op_log_softmax, expect_log_softmax_row, true, "log_softmax"); }

/* A masked-out NaN is replaced by the fill before the softmax, as
 * masked_fill would: the row stays finite. */
Test(nonfinite, masked_softmax_drops_a_masked_nan)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){1, NAN, 2}));
    ag_tensor *keep = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){1, 0, 1}));
    ag_tensor *y = ag__masked_softmax(g, x, 1, keep, -INFINITY);
    /* softmax(1, -inf, 2) = (1, 0, e) / (1 + e) */
    expect_close(y->data, ((double[]){0.2689414213699951, 0, 0.7310585786300049}), 3, TOL(1e-15, 1e-7),
                 TOL(1e-14, 1e-6), "masked_softmax");
    ag_graph_free(g);
}

/* One row at a time (the loss is a mean over rows), each with the target at
 * the odd value and away from it. */
Test(nonfinite, cross_entropy_rows)
{
    ag_graph *g = ag_graph_new();
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
        for (int r = 0; r < NROWS; r++)
            for (int on_odd = 0; on_odd < 2; on_odd++)
                for (int ls10 = 0; ls10 <= 1; ls10++) {
                    int n = lengths[k], p = n / 2, t = on_odd ? p : (p + 1) % n;
                    ag_graph_reset(g);
                    ag_tensor *all = odd_rows(g, n, p);
                    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, n), all->data + r * n);
                    ag_set_requires_grad(x, 1);
                    ag_tensor *loss = ag_cross_entropy(g, x, &t, -100, ls10 * 0.1);
                    cr_assert_not_null(loss, "%s", ag_graph_error(g));
                    double l = loss->data[0];
                    const char *what = "cross_entropy";
                    if (nan_row(r)) cr_assert(isnan(l), "row '%s' of %d: loss %g, want NaN", row_name[r], n, l);
                    else if (r == ALL_NINF || (r == ONE_NINF && on_odd))
                        cr_assert(l == INFINITY, "row '%s' of %d, target %d: loss %g, want +inf", row_name[r], n, t, l);
                    else if (r == ONE_NINF && ls10)
                        /* smoothing spreads weight over the -inf class too */
                        cr_assert(l == INFINITY, "row '%s' of %d, smoothing: loss %g, want +inf", row_name[r], n, l);
                    else cr_assert(isfinite(l) && l >= 0, "row '%s' of %d: loss %g", row_name[r], n, l);
                    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
                    expect_grad_row(x->grad, n, r, what);
                }
    ag_graph_free(g);
}
