/* gradcheck.c: analytic gradients against central finite differences.
 *
 *   numeric_i = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)
 *
 * has error O(eps^2) from the Taylor series plus O(u / eps) from rounding
 * (u = unit roundoff), so it means something in double precision (u ~ 1e-16,
 * eps = 1e-6: about 1e-10) and little in float.  Element i passes when
 *   |analytic_i - numeric_i| <= abs_tol + rel_tol * |numeric_i|. */
#include "core/internal.h"

#include <math.h>

static ag_status build_loss(ag_graph *g, ag_build_fn build, void *ctx, const ag_rng *rng0,
                            ag_tensor **loss)
{
    ag_graph_reset(g);
    *ag__graph_rng(g) = *rng0; /* same dropout mask every time */
    *loss = build(g, ctx);
    if (ag_graph_status(g) != AG_OK) return ag_graph_status(g);
    if (!*loss) return ag_graph_fail(g, AG_ERR_ARG, "gradcheck: build returned NULL");
    if ((*loss)->size != 1) {
        char buf[96];
        return ag_graph_fail(g, AG_ERR_SHAPE, "gradcheck: loss must be a scalar, got %s",
                             ag_shape_str(*loss, buf, sizeof buf));
    }
    return AG_OK;
}

ag_status ag_gradcheck(ag_graph *g, ag_build_fn build, void *ctx, ag_tensor *const *inputs, int n,
                       const ag_gradcheck_opts *opts, ag_gradcheck_result *results)
{
    if (!g || !build || (n > 0 && (!inputs || !results))) return AG_ERR_ARG;
    ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
    if (opts) o = *opts;
    for (int k = 0; k < n; k++) {
        if (!inputs[k] || !inputs[k]->is_param) {
            ag_graph_reset(g);
            return ag_graph_fail(g, AG_ERR_ARG, "gradcheck: input %d is not a store-owned tensor", k);
        }
        results[k] = (ag_gradcheck_result){.input = inputs[k]};
        memset(inputs[k]->grad, 0, inputs[k]->size * sizeof(ag_real));
    }
    const ag_rng rng0 = *ag__graph_rng(g);
    ag_tensor *loss;
    ag_status st = build_loss(g, build, ctx, &rng0, &loss);
    if (st == AG_OK) st = ag_backward(g, loss);
    if (st != AG_OK) return st;

    ag_status verdict = AG_OK;
    for (int k = 0; k < n && verdict != AG_ERR_NOMEM; k++) {
        ag_tensor *x = inputs[k];
        ag_gradcheck_result *res = &results[k];
        double worst_ratio = -1;
        for (size_t i = 0; i < x->size; i++) {
            ag_real keep = x->data[i];
            double lp, lm;
            x->data[i] = (ag_real)(keep + o.eps);
            if ((st = build_loss(g, build, ctx, &rng0, &loss)) != AG_OK) goto fail;
            lp = (double)loss->data[0];
            x->data[i] = (ag_real)(keep - o.eps);
            if ((st = build_loss(g, build, ctx, &rng0, &loss)) != AG_OK) goto fail;
            lm = (double)loss->data[0];
            x->data[i] = keep;
            double num = (lp - lm) / (2 * o.eps), ana = (double)x->grad[i];
            double err = fabs(ana - num), rel = err / (fabs(num) > o.abs_tol ? fabs(num) : o.abs_tol);
            double bound = o.abs_tol + o.rel_tol * fabs(num);
            if (!(err <= bound)) { /* also catches NaN */
                res->failed++;
                verdict = AG_ERR_NUMERIC;
            }
            if (err > res->max_abs_err || isnan(err)) res->max_abs_err = err;
            if (rel > res->max_rel_err || isnan(rel)) res->max_rel_err = rel;
            double ratio = err / bound;
            if (ratio > worst_ratio || isnan(ratio)) {
                worst_ratio = isnan(ratio) ? INFINITY : ratio;
                res->worst_index = i;
            }
            continue;
        fail:
            x->data[i] = keep;
            ag_graph_reset(g);
            *ag__graph_rng(g) = rng0;
            return st;
        }
    }
    ag_graph_reset(g);
    *ag__graph_rng(g) = rng0;
    return verdict;
}
