/* tests/common.h: helpers shared by the Criterion tests.
 *
 * Every test file is compiled twice: against libattograd.a (ag_real float)
 * and against libattograd64.a (-DAG_DOUBLE).  Gradient checks by finite
 * differences only mean something in double, so they sit inside
 * #ifdef AG_DOUBLE; hand-computed forward values run in both. */
#ifndef AG_TESTS_COMMON_H
#define AG_TESTS_COMMON_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

/* Tolerance for comparing with values computed by hand or by PyTorch: the
 * first in double, the second in float. */
#ifdef AG_DOUBLE
#define TOL(f64, f32) (f64)
#else
#define TOL(f64, f32) (f32)
#endif

/* Every element of got within abs + rel * |want| of want. */
static inline void expect_close_(const ag_real *got, const double *want, size_t n, double abs_tol,
                                 double rel_tol, const char *what, const char *file, int line)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= abs_tol + rel_tol * fabs(want[i])))
            cr_assert_fail("%s:%d: %s[%zu] = %.10g, want %.10g (diff %.3g)", file, line, what, i,
                           (double)got[i], want[i], d);
    }
}
#define expect_close(got, want, n, abs_tol, rel_tol, what)                                          \
    expect_close_((got), (want), (n), (abs_tol), (rel_tol), (what), __FILE__, __LINE__)

/* Shape of t equals the given list. */
#define expect_shape(t, ...)                                                                         \
    do {                                                                                             \
        const int want_[] = {__VA_ARGS__};                                                           \
        int nd_ = (int)(sizeof want_ / sizeof want_[0]);                                             \
        cr_assert_not_null((t));                                                                     \
        cr_assert_eq((t)->ndim, nd_, "ndim %d, want %d", (t)->ndim, nd_);                            \
        for (int i_ = 0; i_ < nd_; i_++) cr_assert_eq((t)->shape[i_], want_[i_], "axis %d", i_);     \
    } while (0)

/* The worse of two errors: NaN beats any number, so that a summary of
 * errors with a NaN among them is NaN, never a quiet smaller number
 * (fmax would drop the NaN). */
static inline double worse_of(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

/* Run every gradient-check case of op (by name) and assert each passes. */
static inline void expect_op_gradcheck(const char *name)
{
    int op = ag_op_find(name);
    cr_assert_gt(op, 0, "no op named %s", name);
    int n = ag_op_case_count(op);
    cr_assert_gt(n, 0, "%s has no gradient-check case", name);
    for (int c = 0; c < n; c++) {
        ag_gradcheck_result r;
        char err[256];
        ag_status st = ag_op_check(op, c, 7 + (uint64_t)c, NULL, &r, err, sizeof err);
        cr_assert_eq(st, AG_OK, "%s case '%s': %s (max abs %.3g, max rel %.3g, strict %.3g, %zu failed, worst at %zu)",
                     name, ag_op_case_label(op, c), err, r.max_abs_err, r.max_rel_err, r.strict_worst, r.failed,
                     r.worst_index);
    }
}

/* A fused op's test against the composition it replaces: y and every
 * store gradient after one backward of build's loss (fused 0 or 1, the
 * graph keeping intermediates' gradients or not), as one array of *n
 * values to free; *forward_bytes, what the forward took of the arena. */
typedef ag_tensor *(*fused_build_fn)(ag_graph *g, ag_store *s, int fused, ag_tensor **y);
static inline ag_real *fused_outcome(ag_store *s, fused_build_fn build, int fused, int keep, size_t *n,
                                     size_t *forward_bytes)
{
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, keep);
    ag_store_zero_grad(s);
    size_t before = ag_graph_arena_used(g);
    ag_tensor *y, *loss = build(g, s, fused, &y);
    *forward_bytes = ag_graph_arena_used(g) - before;
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    *n = y->size + ag_store_numel(s);
    ag_real *out = malloc(*n * sizeof *out), *at = out + y->size;
    cr_assert_not_null(out);
    memcpy(out, y->data, y->size * sizeof *out);
    for (int i = 0; i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        memcpy(at, t->grad, t->size * sizeof *out), at += t->size;
    }
    ag_graph_free(g);
    return out;
}

#endif
