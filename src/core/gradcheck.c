/* gradcheck.c: analytic gradients against finite differences, in two
 * stages.
 *
 * Stage one is PyTorch's gradcheck: the central difference
 *   numeric_i = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)
 * has error O(eps^2) from the Taylor series plus O(u / eps) from rounding
 * (u = unit roundoff), so it means something in double precision (u ~ 1e-16,
 * eps = 1e-6: about 1e-10) and little in float.  Element i passes when
 *   |analytic_i - numeric_i| <= abs_tol + rel_tol * |numeric_i|
 * a fixed tolerance that a backward 0.1% off passes.  The strict stage
 * (gradcheck_strict.c) derives each element's tolerance from the error it
 * measures, and sees a backward 1e-4 off.  Both judge the analytic
 * gradients of two backward runs across a reset, with fresh gradient
 * buffers poisoned (see analytic_twice). */
#include "core/gradcheck.h"

#include <math.h>
#include <stdio.h>

/* The loss node, built afresh. */
ag_status ag__build_loss(const ag__probe *p, ag_tensor **loss)
{
    ag_graph *g = p->g;
    ag_graph_reset(g);
    *ag__graph_rng(g) = *p->rng0; /* same dropout mask every time */
    *loss = p->build(g, p->ctx);
    if (ag_graph_status(g) != AG_OK) return ag_graph_status(g);
    if (!*loss) return ag_graph_fail(g, AG_ERR_ARG, "gradcheck: build returned NULL");
    if ((*loss)->size != 1) {
        char buf[96];
        return ag_graph_fail(g, AG_ERR_SHAPE, "gradcheck: loss must be a scalar, got %s",
                             ag_shape_str(*loss, buf, sizeof buf));
    }
    return AG_OK;
}

ag_status ag__probe_loss(const ag__probe *p, double *loss)
{
    ag_tensor *y;
    ag_status st = ag__build_loss(p, &y);
    if (st == AG_OK) *loss = (double)y->data[0];
    return st;
}

ag_status ag__probe_loss_at(const ag__probe *p, ag_tensor *x, size_t i, ag_real v, double *loss)
{
    ag_real keep = x->data[i];
    x->data[i] = v;
    ag_status st = ag__probe_loss(p, loss);
    x->data[i] = keep;
    return st;
}

/* The worse of two errors: NaN beats any number, so that one NaN element
 * makes a NaN summary, never a quiet 0. */
static double worse(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

/* The deprecated process-wide break (ag_debug_break_backward), used when
 * the options break no op. */
static int legacy_break_op;
static double legacy_break_factor = 1;

void ag_debug_break_backward(int op, double factor)
{
    legacy_break_op = op > 0 ? op : 0;
    legacy_break_factor = factor;
}

/* Each stage judges err against its tolerance; worst_index is the element
 * of the largest err / tolerance of either (a NaN the largest). */
static void note_worst(double ratio, size_t i, double *worst_ratio, ag_gradcheck_result *res)
{
    if (ratio > *worst_ratio || isnan(ratio)) {
        *worst_ratio = isnan(ratio) ? INFINITY : ratio;
        res->worst_index = i;
    }
}

/* Stage one for element i: false when it fails. */
static bool stage_one(const ag_gradcheck_opts *o, double ana, double num, size_t i, ag_gradcheck_result *res,
                      double *worst_ratio)
{
    double err = fabs(ana - num), rel = err / (fabs(num) > o->abs_tol ? fabs(num) : o->abs_tol);
    double bound = o->abs_tol + o->rel_tol * fabs(num);
    res->max_abs_err = worse(res->max_abs_err, err);
    res->max_rel_err = worse(res->max_rel_err, rel);
    note_worst(err / bound, i, worst_ratio, res);
    return err <= bound; /* false for NaN too */
}

/* The strict stage's verdict on element i: false when it fails.  A rough
 * element (L not smooth within the step) is counted, not judged. */
static bool strict_verdict(const ag__strict *s, double ana, size_t i, ag_gradcheck_result *res, double *worst_ratio)
{
    if (s->rough) {
        res->rough++;
        return true;
    }
    double err = fabs(ana - s->numeric), ratio = err == 0 ? 0 : err / s->tol;
    res->strict_worst = worse(res->strict_worst, ratio);
    note_worst(ratio, i, worst_ratio, res);
    if (err <= s->tol) return true; /* false for NaN */
    res->strict_failed++;
    return false;
}

/* Of the two runs' gradients, the one further from num (a NaN is
 * furthest): an element fails once. */
static double further(double a1, double a2, double num)
{
    return isnan(a1) || fabs(a1 - num) > fabs(a2 - num) ? a1 : a2;
}

/* Both stages for every element of x, against both backward runs'
 * gradients: first[i] (the first run's, saved) and x->grad[i].  sigma is
 * the loss's rounding noise (strict stage only). */
static ag_status check_input(const ag__probe *p, const ag_gradcheck_opts *o, double sigma, ag_tensor *x,
                             const ag_real *first, ag_gradcheck_result *res, bool *all_pass)
{
    double worst_ratio = -1;
    for (size_t i = 0; i < x->size; i++) {
        ag_real keep = x->data[i], xp = (ag_real)(keep + o->eps), xm = (ag_real)(keep - o->eps);
        double lp, lm;
        ag_status st = ag__probe_loss_at(p, x, i, xp, &lp);
        if (st == AG_OK) st = ag__probe_loss_at(p, x, i, xm, &lm);
        if (st != AG_OK) return st;
        /* over the step taken: xp - xm is 2 eps up to the rounding of x +- eps */
        double num = (lp - lm) / ((double)xp - (double)xm), a1 = (double)first[i], a2 = (double)x->grad[i];
        bool ok = stage_one(o, further(a1, a2, num), num, i, res, &worst_ratio);
        if (o->strict_step > 0) {
            ag__strict s;
            if ((st = ag__strict_element(p, x, i, o->strict_step, sigma, num, o->eps, &s)) != AG_OK) return st;
            ok = strict_verdict(&s, further(a1, a2, s.numeric), i, res, &worst_ratio) && ok;
        }
        if (!ok) res->failed++, *all_pass = false;
    }
    return AG_OK;
}

/* On a failure, g's error names the worst input (by its error against the
 * tolerance) and its element. */
static void describe_failure(ag_graph *g, ag_tensor *const *inputs, int n, const ag_gradcheck_result *r,
                             const ag_gradcheck_opts *o)
{
    int w = -1;
    double worst = -1;
    for (int k = 0; k < n; k++) {
        if (!r[k].failed) continue;
        double ratio = worse(r[k].max_abs_err / (o->abs_tol + o->rel_tol), r[k].strict_worst);
        if (w < 0 || ratio > worst || isnan(ratio)) w = k, worst = ratio;
    }
    if (w < 0) return;
    char shape[96], strict[128] = "";
    if (r[w].strict_failed)
        snprintf(strict, sizeof strict, "; strict stage: %zu beyond their derived tolerance, the worst %.3g times it",
                 r[w].strict_failed, r[w].strict_worst);
    ag_graph_fail(g, AG_ERR_NUMERIC,
                  "gradcheck: input %d '%s' %s: %zu of %zu elements differ from finite differences "
                  "(worst at flat index %zu; max abs error %.3g, max rel error %.3g%s)",
                  w, inputs[w]->name, ag_shape_str(inputs[w], shape, sizeof shape), r[w].failed,
                  inputs[w]->size, r[w].worst_index, r[w].max_abs_err, r[w].max_rel_err, strict);
}

/* The analytic gradients, twice: build and backward, a reset, build and
 * backward again, each from zeroed input gradients, with fresh gradient
 * buffers poisoned (NaN, ag__graph_poison).  A backward that adds into a
 * fresh buffer gets NaN; one that keeps state from the step before gets
 * another gradient the second time: either fails the check.  The second
 * run drops intermediates' gradients (ag_graph_set_keep_grads), so that
 * their buffers are reused within the call, as training does.  The first
 * run's gradients are saved in `first` (the inputs' sizes, one after
 * another). */
static ag_status analytic_twice(const ag__probe *p, ag_tensor *const *inputs, int n, const ag_gradcheck_opts *o,
                                ag_real *first)
{
    ag_graph *g = p->g;
    ag_status st = AG_OK;
    bool poisoned = ag__graph_poisoned(g);
    int keep = ag_graph_keep_grads(g);
    ag__graph_poison(g, true);
    ag__graph_break(g, o->break_op, o->break_factor);
    for (int run = 0; run < 2 && st == AG_OK; run++) {
        ag_graph_set_keep_grads(g, run == 0);
        for (int k = 0; k < n; k++) memset(inputs[k]->grad, 0, inputs[k]->size * sizeof(ag_real));
        ag_tensor *loss;
        st = ag__build_loss(p, &loss);
        if (st == AG_OK) st = ag_backward(g, loss);
        for (int k = 0, at = 0; run == 0 && st == AG_OK && k < n; at += (int)inputs[k]->size, k++)
            memcpy(first + at, inputs[k]->grad, inputs[k]->size * sizeof(ag_real));
    }
    ag__graph_break(g, 0, 1);
    ag__graph_poison(g, poisoned);
    ag_graph_set_keep_grads(g, keep);
    return st;
}

ag_status ag_gradcheck(ag_graph *g, ag_build_fn build, void *ctx, ag_tensor *const *inputs, int n,
                       const ag_gradcheck_opts *opts, ag_gradcheck_result *results)
{
    if (!g) return AG_ERR_ARG; /* ag_graph_error(NULL) says "graph is NULL" */
    ag_graph_reset(g);
    if (!build || (n > 0 && (!inputs || !results)))
        return ag_graph_fail(g, AG_ERR_ARG, "gradcheck: %s is NULL", !build ? "build" : !inputs ? "inputs" : "results");
    if (sizeof(ag_real) != sizeof(double))
        return ag_graph_fail(g, AG_ERR_STATE,
                             "gradcheck: needs the double build (compile with -DAG_DOUBLE, link "
                             "libattograd64.a): in float, rounding swamps the finite differences");
    ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
    if (opts) o = *opts;
    if (o.break_op <= 0 && legacy_break_op > 0) o.break_op = legacy_break_op, o.break_factor = legacy_break_factor;
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        if (!inputs[k] || !inputs[k]->is_param)
            return ag_graph_fail(g, AG_ERR_ARG, "gradcheck: input %d is not a store-owned tensor", k);
        results[k] = (ag_gradcheck_result){.input = inputs[k]};
        total += inputs[k]->size;
    }
    /* first: the first backward run's gradients; then room for the inputs'
     * values while the noise probe moves them */
    ag_real *first = ag__malloc((total ? 2 * total : 1) * sizeof *first);
    if (!first) return ag_graph_fail(g, AG_ERR_NOMEM, "gradcheck: out of memory for %zu gradients", total);
    const ag_rng rng0 = *ag__graph_rng(g);
    const ag__probe p = {g, build, ctx, &rng0};
    double sigma = 0;
    ag_status st = analytic_twice(&p, inputs, n, &o, first);
    if (st == AG_OK && o.strict_step > 0) st = ag__loss_noise(&p, inputs, n, first + total, &sigma);
    bool all_pass = true;
    for (size_t k = 0, at = 0; k < (size_t)n && st == AG_OK; at += inputs[k]->size, k++) {
        results[k].noise = sigma;
        st = check_input(&p, &o, sigma, inputs[k], first + at, &results[k], &all_pass);
    }
    ag__free(first);
    *ag__graph_rng(g) = rng0;
    if (st != AG_OK) return st; /* g holds the build's error */
    ag_graph_reset(g);
    if (all_pass) return AG_OK;
    describe_failure(g, inputs, n, results, &o);
    return AG_ERR_NUMERIC;
}

ag_status ag_gradcheck_store(ag_graph *g, ag_build_fn build, void *ctx, ag_store *s,
                             const ag_gradcheck_opts *opts, ag_gradcheck_result *results)
{
    if (!g) return AG_ERR_ARG;
    if (!s) return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_store: store is NULL");
    int n = ag_store_count(s);
    ag_tensor **in = ag__calloc(n ? (size_t)n : 1, sizeof *in);
    ag_gradcheck_result *res = results ? results : ag__calloc(n ? (size_t)n : 1, sizeof *res);
    ag_status st = AG_ERR_NOMEM;
    if (!in || !res) {
        ag_graph_fail(g, st, "gradcheck_store: out of memory for %d parameters", n);
    } else {
        for (int k = 0; k < n; k++) in[k] = ag_store_at(s, k);
        st = ag_gradcheck(g, build, ctx, in, n, opts, res);
    }
    ag__free(in);
    if (res != results) ag__free(res);
    return st;
}
