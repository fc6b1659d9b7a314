/* opcheck.c: run an op's built-in gradient-check cases.
 *
 * For a case with inputs x_1..x_n and output y = op(x), the scalar checked is
 *   L = sum_i y_i w_i,   w fixed random in [-1, 1]
 * so dL/dy = w: every output element is weighed differently, and a backward
 * that mixes up elements is caught (with w = 1 a permutation bug would not
 * be).  Each case runs twice: on the inputs themselves, parameters whose
 * gradients the op's backward adds into, and on 1 * x_k, intermediates
 * whose gradient buffers reach the op's backward fresh, to be stored into
 * (ag__grad_fresh). */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

typedef struct ctx {
    const ag_op_case *c;
    ag_tensor *in[AG_MAX_SRC];
    bool via; /* the op's inputs are intermediates: 1 * in[k] */
    ag_real *w; /* weights, allocated after the first build */
    size_t wn;
    uint64_t seed;
} ctx;

static ag_tensor *build(ag_graph *g, void *p)
{
    ctx *cx = p;
    ag_tensor *in[AG_MAX_SRC];
    for (int k = 0; k < cx->c->n_in; k++) in[k] = cx->via ? ag_scale(g, cx->in[k], 1) : cx->in[k];
    ag_tensor *y = cx->c->build(g, in);
    if (!y) return NULL;
    if (!cx->w || cx->wn != y->size) {
        ag__free(cx->w);
        cx->wn = y->size;
        cx->w = ag__calloc(y->size ? y->size : 1, sizeof(ag_real));
        if (!cx->w) {
            ag_graph_fail(g, AG_ERR_NOMEM, "opcheck: out of memory");
            return NULL;
        }
        ag_rng r;
        ag_rng_seed(&r, cx->seed ^ 0x5eedull);
        for (size_t i = 0; i < y->size; i++) cx->w[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    }
    ag_tensor *w = ag_tensor_from(g, y->ndim, y->shape, cx->w);
    return ag_sum_all(g, ag_mul(g, y, w));
}

int ag_op_case_count(int op)
{
    return (op > 0 && op < AG_OP_COUNT && ag_op_table[op]) ? ag_op_table[op]->ncases : 0;
}

const char *ag_op_case_label(int op, int i)
{
    if (i < 0 || i >= ag_op_case_count(op)) return "";
    return ag_op_table[op]->cases[i].label;
}

/* The worse of two errors: NaN beats any number (no quiet NaN in a summary). */
static double worse(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

/* Fold the results of one gradient check (n inputs) into *worst: the
 * input and element of the largest absolute error (NaN the largest), the
 * failures of all, the largest of every other error. */
static void worst_of(ag_gradcheck_result *worst, const ag_gradcheck_result *res, int n)
{
    for (int k = 0; k < n; k++) {
        const ag_gradcheck_result *r = &res[k];
        if (isnan(r->max_abs_err) ? !isnan(worst->max_abs_err) : r->max_abs_err >= worst->max_abs_err)
            worst->input = r->input, worst->worst_index = r->worst_index;
        worst->max_abs_err = worse(worst->max_abs_err, r->max_abs_err);
        worst->max_rel_err = worse(worst->max_rel_err, r->max_rel_err);
        worst->strict_worst = worse(worst->strict_worst, r->strict_worst);
        worst->noise = worse(worst->noise, r->noise);
        worst->failed += r->failed;
        worst->strict_failed += r->strict_failed;
        worst->rough += r->rough;
    }
}

ag_status ag_op_check(int op, int i, uint64_t seed, const ag_gradcheck_opts *opts,
                      ag_gradcheck_result *worst, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (i < 0 || i >= ag_op_case_count(op)) {
        if (err) snprintf(err, errlen, "op %d has no case %d", op, i);
        return AG_ERR_ARG;
    }
    const ag_op_case *c = &ag_op_table[op]->cases[i];
    ctx cx = {.c = c, .seed = seed};
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_status st = AG_ERR_NOMEM;
    ag_gradcheck_result res[AG_MAX_SRC];
    if (!s || !g) goto done;
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int k = 0; k < c->n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", k);
        cx.in[k] = ag_param(s, name, c->ndim[k], c->shape[k]);
        if (!cx.in[k]) goto done;
        for (size_t j = 0; j < cx.in[k]->size; j++) {
            double v = c->lo + (c->hi - c->lo) * ag_rng_uniform(&r);
            if (v > -c->gap && v < c->gap) v = v < 0 ? -c->gap : c->gap;
            cx.in[k]->data[j] = (ag_real)v;
        }
    }
    if (worst) *worst = (ag_gradcheck_result){0};
    st = AG_OK;
    for (int via = 0; via < 2 && st == AG_OK; via++) {
        cx.via = via;
        ag_graph_seed(g, seed);
        st = ag_gradcheck(g, build, &cx, cx.in, c->n_in, opts, res);
        if (st != AG_OK && err) snprintf(err, errlen, "%s", ag_graph_error(g));
        if (st != AG_OK && st != AG_ERR_NUMERIC) break;
        if (worst) worst_of(worst, res, c->n_in);
        size_t rough = 0;
        for (int k = 0; k < c->n_in; k++) rough += res[k].rough;
        /* a case is built off kinks: a rough element is the case's bug */
        if (st == AG_OK && rough) {
            st = AG_ERR_NUMERIC;
            if (err) snprintf(err, errlen, "%s: %zu elements where the loss is not smooth within the strict "
                              "step: move the case's values off the kink", c->label, rough);
        }
    }
done:
    if (st == AG_ERR_NOMEM && err && !err[0]) snprintf(err, errlen, "opcheck: out of memory");
    ag__free(cx.w);
    ag_graph_free(g);
    ag_store_free(s);
    return st;
}
