/* gradcheck_model.c: a whole model's gradient checked along random
 * directions, in a number of forward passes that does not grow with the
 * parameter count.
 *
 * For a direction u over every element of the inputs, phi(t) = L(x + t u)
 * has phi'(0) = grad L . u.  The analytic side is one backward and a dot
 * product; the numeric side is the strict stage (gradcheck_strict.c) on
 * phi: central differences at h, h/2, h/4, Richardson extrapolated, judged
 * against a tolerance made of the loss's measured rounding noise and the
 * extrapolation's own spread.  An error e in any one op's backward moves
 * grad L by e times that op's share of the gradient, and grad L . u by e
 * times that share's projection on u: a random u sees it unless the share
 * is orthogonal to u, which a handful of independent directions makes
 * unlikely (docs/testing.md). */
#include "core/gradcheck.h"

#include <math.h>
#include <stdio.h>

/* Every element of the n inputs moved to keep + t u, u direction `dir`. */
static void move_along(ag_tensor *const *in, int n, const ag_real *keep, const double *scale, uint64_t seed,
                       int dir, double t)
{
    ag_rng r;
    ag_rng_seed(&r, seed * 0x9e3779b97f4a7c15ull + (uint64_t)dir);
    for (int k = 0, at = 0; k < n; at += (int)in[k]->size, k++)
        for (size_t e = 0; e < in[k]->size; e++) {
            double v = ag__sign(&r) * scale[k], x = (double)keep[at + e];
            in[k]->data[e] = isfinite(x) ? (ag_real)(x + t * v) : keep[at + e];
        }
}

/* grad . u for direction dir, the gradients of the n inputs being `grads`. */
static double along(ag_tensor *const *in, int n, const ag_real *keep, const ag_real *grads, const double *scale,
                    uint64_t seed, int dir)
{
    ag_rng r;
    ag_rng_seed(&r, seed * 0x9e3779b97f4a7c15ull + (uint64_t)dir);
    double sum = 0;
    for (int k = 0, at = 0; k < n; at += (int)in[k]->size, k++)
        for (size_t e = 0; e < in[k]->size; e++) {
            double v = ag__sign(&r) * scale[k];
            if (isfinite((double)keep[at + e])) sum += (double)grads[at + e] * v;
        }
    return sum;
}

/* One check's state: the probe, the inputs' values (keep) and gradients. */
typedef struct model_check {
    const ag__probe *p;
    ag_tensor *const *in;
    int n;
    ag_real *keep, *grads;
    double *scale;
    const ag_gradcheck_model_opts *o;
    char *why; /* the first failure, said (a build resets g's error) */
} model_check;

/* L at keep + t u (direction dir). */
static ag_status loss_at(const model_check *c, int dir, double t, double *loss)
{
    move_along(c->in, c->n, c->keep, c->scale, c->o->seed, dir, t);
    return ag__probe_loss(c->p, loss);
}

/* (L(t) - L(-t)) / 2t along direction dir. */
static ag_status central(const model_check *c, int dir, double t, double *d, double *even)
{
    double lp, lm;
    ag_status st = loss_at(c, dir, t, &lp);
    if (st == AG_OK) st = loss_at(c, dir, -t, &lm);
    if (st != AG_OK) return st;
    *d = (lp - lm) / (2 * t);
    *even = lp + lm; /* minus 2 L(x): the kink test's */
    return AG_OK;
}

/* The noise of L: 9 points 1e-7 apart along each of the first two
 * directions (as ag__loss_noise, along u instead of signs), pooled. */
static ag_status measure_noise(const model_check *c, double l0, double *sigma)
{
    double sum_count[2] = {0, 0}, f[9];
    for (int dir = 0; dir < c->o->directions && dir < 2; dir++) {
        f[0] = l0;
        for (int j = 1; j < 9; j++) {
            ag_status st = loss_at(c, dir, j * 1e-7, &f[j]);
            if (st != AG_OK) return st;
        }
        ag__noise_add(f, 9, sum_count);
    }
    *sigma = ag__noise_sigma(sum_count, l0);
    return AG_OK;
}

/* The analytic gradients: one build and backward from zeroed input
 * gradients, fresh buffers poisoned, op break_op broken; copied to grads. */
static ag_status analytic(const model_check *c, double *l0)
{
    ag_graph *g = c->p->g;
    bool poisoned = ag__graph_poisoned(g);
    ag__graph_poison(g, true);
    ag__graph_break(g, c->o->break_op, c->o->break_factor);
    for (int k = 0; k < c->n; k++) memset(c->in[k]->grad, 0, c->in[k]->size * sizeof(ag_real));
    ag_tensor *loss;
    ag_status st = ag__build_loss(c->p, &loss);
    if (st == AG_OK) *l0 = (double)loss->data[0], st = ag_backward(g, loss);
    for (int k = 0, at = 0; st == AG_OK && k < c->n; at += (int)c->in[k]->size, k++)
        memcpy(c->grads + at, c->in[k]->grad, c->in[k]->size * sizeof(ag_real));
    ag__graph_break(g, 0, 1);
    ag__graph_poison(g, poisoned);
    return st;
}

/* The strict stage along direction dir with largest step h. */
static ag_status strict_along(const model_check *c, int dir, double h, double sigma, double l0, ag__strict *s)
{
    const double eps = 1e-3 * h;
    double d[3], d_eps, e[3], e_eps;
    ag_status st = central(c, dir, eps, &d_eps, &e_eps);
    for (int k = 0; k < 3 && st == AG_OK; k++) st = central(c, dir, h / (1 << k), &d[k], &e[k]);
    for (int k = 0; k < 3; k++) e[k] -= 2 * l0;
    if (st == AG_OK) ag__strict_from(d, h, sigma, d_eps, eps, s);
    if (st == AG_OK && ag__kink_here(e, h, sigma)) s->rough = true; /* no step resolves it */
    return st;
}

/* Direction dir: its verdict into res; *pass false when it fails.  A kink
 * (a relu's input crossing 0) within the step makes the direction rough,
 * or, short of that, widens the extrapolation's spread: while the spread
 * is most of the tolerance, the step shrinks tenfold (at most
 * SHRINK_STEPS times), since the kinks within it shrink with it; the
 * smallest step that is smooth gives the verdict.  A kink at x itself (a
 * relu's input exactly 0) no step resolves: rough (ag__kink_here). */
enum { SHRINK_STEPS = 3 };
static ag_status check_direction(const model_check *c, int dir, double sigma, double l0, ag_gradcheck_model_result *res,
                                 bool *pass)
{
    ag__strict s = {.rough = true}, t;
    ag_status st = AG_OK;
    double h = c->o->step;
    for (int k = 0; k <= SHRINK_STEPS && st == AG_OK; k++, h /= 10) {
        if ((st = strict_along(c, dir, h, sigma, l0, &t)) != AG_OK) break;
        if (!t.rough) s = t; /* the smallest smooth step: the fewest kinks */
        if (!t.rough && t.spread <= t.tol - t.spread) break; /* noise-bound: a smaller step is worse */
    }
    if (st != AG_OK) return st;
    double a = along(c->in, c->n, c->keep, c->grads, c->scale, c->o->seed, dir), err = fabs(a - s.numeric);
    res->directions++;
    if (s.rough) {
        res->rough++;
        return AG_OK;
    }
    double ratio = err == 0 ? 0 : err / s.tol, rel = err / fabs(s.numeric), vis = s.tol / fabs(s.numeric);
    if (ratio > res->worst || isnan(ratio)) res->worst = isnan(ratio) ? INFINITY : ratio;
    if (rel > res->worst_rel || isnan(rel)) res->worst_rel = isnan(rel) ? INFINITY : rel;
    if (vis > res->visible || isnan(vis)) res->visible = isnan(vis) ? INFINITY : vis;
    if (!(err <= s.tol)) {
        res->failed++;
        if (*pass)
            snprintf(c->why, 512,
                          "gradcheck_model: direction %d: grad . u is %.17g, the loss's slope along u %.17g "
                          "(relative error %.3g, %.3g times the tolerance %.3g)",
                          dir, a, s.numeric, rel, ratio, s.tol);
        *pass = false;
    }
    return AG_OK;
}

static ag_status check_model(const model_check *c, ag_gradcheck_model_result *res)
{
    double l0 = 0, sigma = 0;
    ag_status st = analytic(c, &l0);
    for (int k = 0, at = 0; k < c->n; at += (int)c->in[k]->size, k++)
        memcpy(c->keep + at, c->in[k]->data, c->in[k]->size * sizeof(ag_real));
    if (st == AG_OK) st = measure_noise(c, l0, &sigma);
    res->noise = sigma;
    bool pass = true;
    for (int dir = 0; dir < c->o->directions && st == AG_OK; dir++) st = check_direction(c, dir, sigma, l0, res, &pass);
    for (int k = 0, at = 0; k < c->n; at += (int)c->in[k]->size, k++)
        memcpy(c->in[k]->data, c->keep + at, c->in[k]->size * sizeof(ag_real));
    if (st != AG_OK) return st;
    return pass ? AG_OK : AG_ERR_NUMERIC;
}

ag_status ag_gradcheck_model(ag_graph *g, ag_build_fn build, void *ctx, ag_tensor *const *inputs, int n,
                             const ag_gradcheck_model_opts *opts, ag_gradcheck_model_result *res)
{
    if (!g) return AG_ERR_ARG;
    ag_graph_reset(g);
    if (!build || !res || (n > 0 && !inputs))
        return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_model: %s is NULL",
                             !build ? "build" : !res ? "res" : "inputs");
    if (sizeof(ag_real) != sizeof(double))
        return ag_graph_fail(g, AG_ERR_STATE,
                             "gradcheck_model: needs the double build (compile with -DAG_DOUBLE, link "
                             "libattograd64.a): in float, rounding swamps the finite differences");
    ag_gradcheck_model_opts o = AG_GRADCHECK_MODEL_DEFAULTS;
    if (opts) o = *opts;
    if (o.directions < 1 || !(o.step > 0) || !isfinite(o.step))
        return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_model: directions %d and step %g must be positive",
                             o.directions, o.step);
    *res = (ag_gradcheck_model_result){0};
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        if (!inputs[k] || !inputs[k]->is_param)
            return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_model: input %d is not a store-owned tensor", k);
        total += inputs[k]->size;
    }
    res->elements = total;
    ag_real *keep = ag__malloc((total ? 2 * total : 1) * sizeof *keep);
    double *scale = ag__malloc((n ? (size_t)n : 1) * sizeof *scale);
    if (!keep || !scale) {
        ag__free(keep), ag__free(scale);
        return ag_graph_fail(g, AG_ERR_NOMEM, "gradcheck_model: out of memory for %zu values", 2 * total);
    }
    for (int k = 0; k < n; k++) scale[k] = ag__rms(inputs[k]->data, inputs[k]->size);
    const ag_rng rng0 = *ag__graph_rng(g);
    const ag__probe p = {g, build, ctx, &rng0};
    char why[512] = "";
    const model_check c = {&p, inputs, n, keep, keep + total, scale, &o, why};
    ag_status st = check_model(&c, res);
    ag__free(keep), ag__free(scale);
    *ag__graph_rng(g) = rng0;
    if (st != AG_OK && st != AG_ERR_NUMERIC) return st; /* g holds the build's error */
    ag_graph_reset(g);
    return st == AG_OK ? AG_OK : ag_graph_fail(g, AG_ERR_NUMERIC, "%s", why);
}

ag_status ag_gradcheck_model_store(ag_graph *g, ag_build_fn build, void *ctx, ag_store *s,
                                   const ag_gradcheck_model_opts *opts, ag_gradcheck_model_result *res)
{
    if (!g) return AG_ERR_ARG;
    if (!s) return ag_graph_fail(g, AG_ERR_ARG, "gradcheck_model_store: store is NULL");
    int n = ag_store_count(s);
    ag_tensor **in = ag__calloc(n ? (size_t)n : 1, sizeof *in);
    if (!in) return ag_graph_fail(g, AG_ERR_NOMEM, "gradcheck_model_store: out of memory for %d parameters", n);
    for (int k = 0; k < n; k++) in[k] = ag_store_at(s, k);
    ag_status st = ag_gradcheck_model(g, build, ctx, in, n, opts, res);
    ag__free(in);
    return st;
}
