/* tests/docs/op_guide_check.c NAME, built with -DOP_CALL=ag_NAME (a unary
 * op, ag_tensor *ag_NAME(ag_graph *, ag_tensor *)): checks an op added to a scratch copy of
 * the tree as docs/contributing.md says (tests/docs/check_op_guide.sh builds
 * it against that copy's double library).
 *
 *   1. ag_op_check on each of the op's cases, in the fast and in the
 *      reference mode (gradcheck poisons fresh gradient buffers and runs
 *      backward twice across a reset);
 *   2. three steps of training with a reset between them, as a program
 *      trains: loss = sum(OP(x a) w), x and a parameters; at each step
 *      the gradients of x and a against central finite differences
 *      (eps 1e-6, |analytic - numeric| <= 1e-5 + 1e-3 |numeric|), then an
 *      SGD step.  OP's input x a is an intermediate, so its backward meets
 *      a fresh gradient buffer: the arena's memory of the step before.
 *
 * Prints one line per check and "op_guide: OP passes" or "op_guide: OP
 * FAILS" last; exits 0 when every check passes, 1 otherwise. */
#include "attograd.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { R = 3, C = 4, N = R * C, STEPS = 3 };

/* loss = sum(OP_CALL(x a) w) on g, after a reset */
static ag_tensor *loss_of(ag_graph *g, ag_tensor *x, ag_tensor *a, const ag_real *w)
{
    ag_graph_reset(g);
    static const int shape[2] = {R, C};
    ag_tensor *y = OP_CALL(g, ag_mul(g, x, a));
    return ag_sum_all(g, ag_mul(g, y, ag_tensor_from(g, 2, shape, w)));
}

/* Largest error ratio |ana - num| / (1e-5 + 1e-3 |num|) over p's elements
 * (> 1: fails); the loss is rebuilt for each difference. */
static double worst_ratio(ag_graph *g, ag_tensor *x, ag_tensor *a, const ag_real *w, ag_tensor *p,
                          const ag_real *ana)
{
    double worst = 0;
    for (size_t i = 0; i < p->size; i++) {
        ag_real keep = p->data[i];
        p->data[i] = keep + 1e-6;
        ag_tensor *l = loss_of(g, x, a, w);
        double lp = l ? l->data[0] : NAN;
        p->data[i] = keep - 1e-6;
        l = loss_of(g, x, a, w);
        double lm = l ? l->data[0] : NAN;
        p->data[i] = keep;
        double num = (lp - lm) / 2e-6, r = fabs(ana[i] - num) / (1e-5 + 1e-3 * fabs(num));
        if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
    }
    return worst;
}

/* Three steps of training, each checked; the number of failed steps. */
static int train(void)
{
    ag_store *s = ag_store_new();
    static const int shape[2] = {R, C};
    ag_tensor *x = ag_param(s, "x", 2, shape), *a = ag_param(s, "a", 2, shape);
    ag_real w[N], gx[N], ga[N];
    ag_rng r;
    ag_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        x->data[i] = (ag_real)(4 * ag_rng_uniform(&r) - 2);
        a->data[i] = (ag_real)(ag_rng_uniform(&r) + 0.5);
        w[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    }
    ag_graph *g = ag_graph_new();
    int failed = 0;
    for (int step = 1; step <= STEPS; step++) {
        ag_store_zero_grad(s);
        ag_tensor *loss = loss_of(g, x, a, w);
        if (!loss || ag_backward(g, loss) != AG_OK) {
            printf("step %d: %s\n", step, ag_graph_error(g));
            failed++;
            break;
        }
        memcpy(gx, x->grad, sizeof gx);
        memcpy(ga, a->grad, sizeof ga);
        double ex = worst_ratio(g, x, a, w, x, gx), ea = worst_ratio(g, x, a, w, a, ga);
        int ok = ex <= 1 && ea <= 1;
        failed += !ok;
        printf("step %d: gradients against finite differences %s (worst error / tolerance: x %.3g, a %.3g)\n",
               step, ok ? "pass" : "FAIL", ex, ea);
        for (int i = 0; i < N; i++) x->data[i] -= 0.1 * gx[i], a->data[i] -= 0.1 * ga[i];
    }
    ag_graph_free(g);
    ag_store_free(s);
    return failed;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "";
    int op = ag_op_find(name), failed = 0;
    if (op < 0) {
        printf("op_guide: no op '%s' in the table\n", name);
        return 1;
    }
    int cases = ag_op_case_count(op);
    if (cases == 0) printf("op_guide: %s has no gradient-check case\n", name), failed++;
    for (int mode = 0; mode < 2; mode++) {
        ag_set_kernels(mode ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
        for (int i = 0; i < cases; i++) {
            char err[256];
            ag_gradcheck_result res;
            ag_status st = ag_op_check(op, i, 1, NULL, &res, err, sizeof err);
            failed += st != AG_OK;
            printf("ag_op_check %s case %d '%s' (%s mode): %s (max abs error %.3g)\n", name, i,
                   ag_op_case_label(op, i), mode ? "reference" : "fast", st == AG_OK ? "pass" : "FAIL",
                   res.max_abs_err);
        }
    }
    ag_set_kernels(AG_KERNELS_FAST);
    failed += train();
    printf("op_guide: %s %s\n", name, failed ? "FAILS" : "passes");
    return failed != 0;
}
