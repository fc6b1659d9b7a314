/* tests/test_gradcheck.c: the gradient checker's own contract: the double
 * build only, a store checked in one call, the break option that proves it
 * can fail, and a message naming what failed. */
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
