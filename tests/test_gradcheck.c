/* tests/test_gradcheck.c: the gradient checker's own contract: the double
 * build only, a store checked in one call, the break option that proves it
 * can fail, and a message naming what failed; the strict stage failing
 * every case of every op whose backward is scaled by 1 + 1e-4, in both
 * kernel modes; a NaN reported as the worst error. */
#include <math.h>
#include <string.h>

#include "common.h"

/* L = sum(tanh(x w + b)^2): x fixed [2, 3], w [3, 2], b [2]. */
static ag_tensor *mlp_loss(ag_graph *g, void *ctx)
{
    ag_store *s = ctx;
    ag_real xs[6] = {0.5, -1, 2, 0.25, 1, -0.75};
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), xs);
    ag_tensor *h = ag_tanh(g, ag_add(g, ag_matmul(g, x, ag_store_find(s, "w")), ag_store_find(s, "b")));
    return ag_sum_all(g, ag_mul(g, h, h));
}

static ag_store *mlp_store(void)
{
    ag_store *s = ag_store_new();
    ag_init_uniform(ag_param(s, "w", AG_SHAPE(3, 2)), -1, 1, 3);
    ag_init_uniform(ag_param(s, "b", AG_SHAPE(2)), -1, 1, 4);
    return s;
}

#ifdef AG_DOUBLE
Test(gradcheck, a_whole_store_in_one_call)
{
    ag_store *s = mlp_store();
    ag_graph *g = ag_graph_new();
    ag_gradcheck_result r[2];
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, NULL, r), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(r[0].input, ag_store_find(s, "w"));
    cr_assert_eq(r[1].input, ag_store_find(s, "b"));
    cr_assert_eq(r[0].failed + r[1].failed, 0);
    cr_assert_lt(r[0].max_abs_err, 1e-7);
    /* results may be NULL */
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, NULL, NULL), AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

Test(gradcheck, a_broken_backward_fails_with_a_message_naming_the_input)
{
    ag_store *s = mlp_store();
    ag_graph *g = ag_graph_new();
    ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
    o.break_op = AG_OP_TANH;
    o.break_factor = 1.01;
    ag_gradcheck_result r[2];
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, &o, r), AG_ERR_NUMERIC);
    cr_assert_gt(r[0].failed, 0);
    cr_assert_gt(r[1].failed, 0);
    cr_assert_not_null(strstr(ag_graph_error(g), "gradcheck: input "), "%s", ag_graph_error(g));
    cr_assert_not_null(strstr(ag_graph_error(g), "elements differ from finite differences"), "%s",
                       ag_graph_error(g));
    /* the break is gone after the call: plain backward is exact again */
    ag_graph_reset(g);
    ag_store_zero_grad(s);
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, NULL, r), AG_OK, "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

/* The deprecated process-wide switch still works for the checker. */
Test(gradcheck, the_deprecated_break_switch_still_breaks_the_checker)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ag_debug_break_backward(AG_OP_MATMUL, 1.01);
    ag_gradcheck_result r;
    char err[128];
    ag_status st = ag_op_check(AG_OP_MATMUL, 0, 1, NULL, &r, err, sizeof err);
    ag_debug_break_backward(-1, 1);
#pragma GCC diagnostic pop
    cr_assert_eq(st, AG_ERR_NUMERIC);
    cr_assert_eq(ag_op_check(AG_OP_MATMUL, 0, 1, NULL, &r, err, sizeof err), AG_OK, "%s", err);
}

/* Plain backward never sees the checker's break. */
Test(gradcheck, the_break_stays_inside_the_checker)
{
    ag_store *s = mlp_store();
    ag_graph *g = ag_graph_new();
    ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
    o.break_op = AG_OP_MATMUL;
    o.break_factor = 2;
    ag_gradcheck_result r[2];
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, &o, r), AG_ERR_NUMERIC);
    ag_graph_reset(g);
    ag_store_zero_grad(s);
    cr_assert_eq(ag_backward(g, mlp_loss(g, s)), AG_OK);
    ag_real got[6];
    memcpy(got, ag_store_find(s, "w")->grad, sizeof got);
    ag_graph *h = ag_graph_new(); /* a graph that never met the checker */
    ag_store_zero_grad(s);
    cr_assert_eq(ag_backward(h, mlp_loss(h, s)), AG_OK);
    for (int i = 0; i < 6; i++) cr_assert_eq(got[i], ag_store_find(s, "w")->grad[i]);
    ag_graph_free(h);
    ag_graph_free(g);
    ag_store_free(s);
}

/* ---- the strict stage ---------------------------------------------------- */

/* The cases where the op's backward contributes nothing (its gradient is
 * zero there, exactly): scaling a zero finds nothing to see.  Each one is
 * shown to pass with the backward scaled by 2 as well. */
static const struct {
    const char *op, *label;
} zero_gradient[] = {
    {"sub", "x - x (one input used twice)"},        /* d(x - x)/dx = 1 - 1 */
    {"div", "x / x (one input used twice)"},        /* d(x / x)/dx = 1/x - x/x^2 */
    {"softmax", "[4, 1] size-1 rows"},              /* softmax of one value is 1 */
    {"log_softmax", "[4, 1] size-1 rows"},          /* ... its log 0 */
    {"masked_softmax", "[4, 1] no mask, size-1 rows"},
    {"cross_entropy", "[3, 1] one class"},          /* -log softmax of one value */
    {"clamp", "[2, 5] lo 0.7 > hi 0.2: all hi, no grad"},
};

static bool zero_gradient_case(int op, int c)
{
    for (size_t i = 0; i < sizeof zero_gradient / sizeof *zero_gradient; i++)
        if (!strcmp(zero_gradient[i].op, ag_op_name(op)) && !strcmp(zero_gradient[i].label, ag_op_case_label(op, c)))
            return true;
    return false;
}

/* Every case of every op with a backward, its backward scaled by
 * `factor`: how many cases pass; each failing one must fail in the strict
 * stage.  argmax has no backward (its indices carry no gradient): nothing
 * to scale.  The inputs are build/gradcheck's (seed 1 + case): with
 * others a case could draw a zero gradient (relu's scalar below 0). */
static int mutated_cases_passing(double factor, int *cases, int *ops)
{
    int passing = 0;
    *cases = *ops = 0;
    for (int op = 1; op < AG_OP_COUNT; op++) {
        if (op == AG_OP_ARGMAX) continue;
        ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
        o.break_op = op;
        o.break_factor = factor;
        ++*ops;
        for (int c = 0; c < ag_op_case_count(op); c++, ++*cases) {
            ag_gradcheck_result r;
            char err[256];
            ag_status st = ag_op_check(op, c, 1 + (uint64_t)c, &o, &r, err, sizeof err);
            bool exempt = zero_gradient_case(op, c);
            if (st == AG_OK) {
                passing++;
                cr_expect(exempt, "%s '%s' scaled by %.10g passes (strict %.3g of its tolerance)", ag_op_name(op),
                          ag_op_case_label(op, c), factor, r.strict_worst);
            } else {
                cr_expect_eq(st, AG_ERR_NUMERIC, "%s: %s", ag_op_name(op), err);
                cr_expect(!exempt, "%s '%s' has a zero gradient, yet fails scaled", ag_op_name(op),
                          ag_op_case_label(op, c));
                cr_expect_gt(r.strict_failed, 0, "%s '%s': %s", ag_op_name(op), ag_op_case_label(op, c), err);
            }
        }
    }
    return passing;
}

static void every_op_fails_scaled_by(double factor, ag_kernels mode)
{
    ag_kernels was = ag_get_kernels();
    ag_set_kernels(mode);
    int cases, ops;
    int passing = mutated_cases_passing(factor, &cases, &ops);
    ag_set_kernels(was);
    int exempt = (int)(sizeof zero_gradient / sizeof *zero_gradient);
    cr_assert_eq(passing, exempt);
    cr_assert_eq(ops, AG_OP_COUNT - 2); /* all but the leaf and argmax */
    cr_log_info("%s mode, backward scaled by %.10g: %d ops, %d cases, %d fail (the %d others have a zero gradient)",
                mode == AG_KERNELS_REFERENCE ? "reference" : "fast", factor, ops, cases, cases - passing, passing);
}

/* A backward 1e-4 off fails the strict stage, in every case of every op
 * (but the zero gradients), in both kernel modes. */
Test(strict, every_op_scaled_by_1e_4_fails_fast_kernels) { every_op_fails_scaled_by(1.0001, AG_KERNELS_FAST); }
Test(strict, every_op_scaled_by_1e_4_fails_reference) { every_op_fails_scaled_by(1.0001, AG_KERNELS_REFERENCE); }

/* The cases of zero gradient pass even with their op's backward doubled:
 * their op's backward gives nothing, so the exemption hides no error. */
Test(strict, the_zero_gradient_cases_pass_doubled)
{
    for (size_t i = 0; i < sizeof zero_gradient / sizeof *zero_gradient; i++) {
        int op = ag_op_find(zero_gradient[i].op), c = -1;
        for (int k = 0; k < ag_op_case_count(op); k++)
            if (!strcmp(ag_op_case_label(op, k), zero_gradient[i].label)) c = k;
        cr_assert_geq(c, 0, "%s has no case '%s'", zero_gradient[i].op, zero_gradient[i].label);
        ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
        o.break_op = op;
        o.break_factor = 2;
        ag_gradcheck_result r;
        char err[256];
        cr_expect_eq(ag_op_check(op, c, 1 + (uint64_t)c, &o, &r, err, sizeof err), AG_OK, "%s '%s': %s", zero_gradient[i].op,
                     zero_gradient[i].label, err);
    }
}

/* 0.1% off (the size PyTorch's tolerance lets through): stage one alone
 * passes it, the strict stage fails it, and says so in the message. */
Test(strict, sees_what_stage_one_lets_through)
{
    ag_store *s = mlp_store();
    ag_graph *g = ag_graph_new();
    ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
    o.break_op = AG_OP_TANH;
    o.break_factor = 1.001;
    o.strict_step = 0;
    ag_gradcheck_result r[2];
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, &o, r), AG_OK, "%s", ag_graph_error(g));
    o.strict_step = 1e-3;
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, &o, r), AG_ERR_NUMERIC);
    cr_assert_gt(r[0].strict_failed, 0);
    cr_assert_gt(r[0].strict_worst, 1);
    cr_assert_eq(r[0].rough + r[1].rough, 0);
    cr_assert_gt(r[0].noise, 0);
    cr_assert_not_null(strstr(ag_graph_error(g), "strict stage: "), "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

/* L = sum(relu(x - 0.5)) with x[0] = 0.5004: within the strict step
 * (1e-3) of relu's kink, not within stage one's (1e-6).  The element is
 * rough: counted, not failed; the others are judged. */
static ag_tensor *kinked_loss(ag_graph *g, void *ctx)
{
    return ag_sum_all(g, ag_relu(g, ag_shift(g, ag_store_find(ctx, "x"), -0.5)));
}

Test(strict, a_kink_within_the_step_is_rough_not_failed)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(3));
    x->data[0] = 0.5004, x->data[1] = 0.9, x->data[2] = 0.1;
    ag_graph *g = ag_graph_new();
    ag_gradcheck_result r;
    cr_assert_eq(ag_gradcheck_store(g, kinked_loss, s, s, NULL, &r), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(r.rough, 1);
    cr_assert_eq(r.strict_failed, 0);
    ag_graph_free(g);
    ag_store_free(s);
}

/* ---- no quiet NaN --------------------------------------------------------- */

/* A loss that is NaN wherever it is evaluated. */
static ag_tensor *nan_loss(ag_graph *g, void *ctx)
{
    ag_tensor *x = ag_store_find(ctx, "x");
    return ag_sum_all(g, ag_scale(g, x, NAN));
}

/* Every number NaN: every element fails, and the worst errors are NaN,
 * never 0; the message says NaN too. */
Test(strict, a_nan_loss_fails_with_nan_as_the_worst_error)
{
    ag_store *s = ag_store_new();
    ag_init_uniform(ag_param(s, "x", AG_SHAPE(2, 3)), -1, 1, 5);
    ag_graph *g = ag_graph_new();
    ag_gradcheck_result r;
    cr_assert_eq(ag_gradcheck_store(g, nan_loss, s, s, NULL, &r), AG_ERR_NUMERIC);
    cr_assert_eq(r.failed, 6);
    cr_assert(isnan(r.max_abs_err) && isnan(r.max_rel_err) && isnan(r.strict_worst), "%g %g %g", r.max_abs_err,
              r.max_rel_err, r.strict_worst);
    cr_assert_not_null(strstr(ag_graph_error(g), "max abs error nan"), "%s", ag_graph_error(g));
    ag_graph_free(g);
    ag_store_free(s);
}

/* ag_op_check's summary of a case keeps the NaN too: the backward scaled
 * by NaN makes every analytic gradient NaN. */
Test(strict, an_op_checks_nan_is_its_worst_error)
{
    ag_gradcheck_opts o = AG_GRADCHECK_DEFAULTS;
    o.break_op = AG_OP_LAYER_NORM;
    o.break_factor = NAN;
    ag_gradcheck_result r;
    char err[256];
    cr_assert_eq(ag_op_check(AG_OP_LAYER_NORM, 0, 1, &o, &r, err, sizeof err), AG_ERR_NUMERIC);
    cr_assert_gt(r.failed, 0);
    cr_assert(isnan(r.max_abs_err) && isnan(r.max_rel_err) && isnan(r.strict_worst), "%g %g %g", r.max_abs_err,
              r.max_rel_err, r.strict_worst);
}
#else
/* In float, rounding swamps central differences: the checker refuses and
 * says why, instead of reporting most elements failed. */
Test(gradcheck, refuses_to_run_in_float_and_says_why)
{
    ag_store *s = mlp_store();
    ag_graph *g = ag_graph_new();
    ag_gradcheck_result r[2];
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, s, s, NULL, r), AG_ERR_STATE);
    cr_assert_not_null(strstr(ag_graph_error(g), "needs the double build (compile with -DAG_DOUBLE, link "
                                                 "libattograd64.a)"), "%s", ag_graph_error(g));
    char err[256];
    cr_assert_eq(ag_op_check(AG_OP_MATMUL, 0, 1, NULL, NULL, err, sizeof err), AG_ERR_STATE);
    cr_assert_not_null(strstr(err, "double build"), "%s", err);
    ag_graph_free(g);
    ag_store_free(s);
}
#endif

Test(gradcheck, a_null_store_is_an_argument_error)
{
    ag_graph *g = ag_graph_new();
    cr_assert_eq(ag_gradcheck_store(g, mlp_loss, NULL, NULL, NULL, NULL), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "gradcheck_store: store is NULL");
    ag_graph_free(g);
}
