/* tests/test_softmax.c: softmax and log_softmax over the last axis. */
#include <string.h>

#include "common.h"
#include "core/internal.h" /* ag_op_table: to drive one backward with a chosen dy */

Test(softmax, softmax_of_1_2_3)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 0, 0, 0}));
    ag_tensor *y = ag_softmax(g, x);
    expect_shape(y, 2, 3);
    /* exp(i) / (e + e^2 + e^3), then a uniform row */
    const double want[] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748218,
                           1.0 / 3, 1.0 / 3, 1.0 / 3};
    expect_close(y->data, want, 6, TOL(1e-15, 1e-7), TOL(1e-13, 1e-6), "softmax");
    ag_graph_free(g);
}

Test(softmax, log_softmax_of_1_2_3)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 2, 3}));
    ag_tensor *y = ag_log_softmax(g, x);
    expect_shape(y, 3);
    /* x_i - log(e + e^2 + e^3) = x_i - 3.4076059644443806 */
    const double want[] = {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804};
    expect_close(y->data, want, 3, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "log_softmax");
    ag_graph_free(g);
}

Test(softmax, log_softmax_is_stable_for_large_logits)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){1000, 0, -1000}));
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_log_softmax(g, x);
    /* log(softmax) would be log(0) = -inf for the last two; computed
     * directly they are exact */
    const double want[] = {0, -1000, -2000};
    expect_close(y->data, want, 3, TOL(1e-12, 1e-4), TOL(1e-14, 1e-7), "log_softmax");
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    /* dx = 1 - softmax * 3 = {-2, 1, 1} */
    expect_close(x->grad, ((double[]){-2, 1, 1}), 3, TOL(1e-12, 1e-6), 0, "dx");
    ag_graph_free(g);
}

Test(softmax, log_softmax_backward_by_hand)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 2, 3}));
    ag_set_requires_grad(x, 1);
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 2, -1}));
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, ag_log_softmax(g, x), w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    /* dx_i = w_i - softmax_i * sum(w), sum(w) = 2 */
    const double want[] = {1 - 2 * 0.09003057317038046, 2 - 2 * 0.24472847105479764,
                           -1 - 2 * 0.6652409557748218};
    expect_close(x->grad, want, 3, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "dx");
    ag_graph_free(g);
}

Test(softmax, softmax_of_a_fully_masked_row_is_zero_with_finite_grads)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){-INFINITY, -INFINITY, -INFINITY, 0, 1, 2}));
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_softmax(g, x);
    for (int i = 0; i < 3; i++) cr_assert_eq(y->data[i], 0, "y[%d] = %g", i, (double)y->data[i]);
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, -2, 3, 0.5, 1, -1}));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, w))), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert(isfinite(x->grad[i]), "dx[%d] = %g", i, (double)x->grad[i]);
    for (int i = 0; i < 3; i++) cr_assert_eq(x->grad[i], 0, "dx[%d] = %g", i, (double)x->grad[i]);
    ag_graph_free(g);
}

Test(softmax, causal_mask_with_minus_infinity)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 2), ((ag_real[]){5, 7, 1, 1}));
    ag_tensor *mask = ag_tensor_from(g, AG_SHAPE(2, 2), ((ag_real[]){1, 0, 1, 1}));
    ag_tensor *y = ag_softmax(g, ag_masked_fill(g, x, mask, -INFINITY));
    expect_close(y->data, ((double[]){1, 0, 0.5, 0.5}), 4, TOL(1e-15, 1e-7), 0, "softmax");
    ag_tensor *ly = ag_log_softmax(g, ag_masked_fill(g, x, mask, -INFINITY));
    cr_assert_eq(ly->data[0], 0);
    cr_assert(isinf(ly->data[1]) && ly->data[1] < 0, "masked entry is %g", (double)ly->data[1]);
    expect_close(ly->data + 2, ((double[]){-log(2.0), -log(2.0)}), 2, TOL(1e-15, 1e-7), 0, "log_softmax");
    ag_graph_free(g);
}

Test(softmax, log_softmax_of_a_fully_masked_row_is_minus_inf_with_zero_grad)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){-INFINITY, -INFINITY, -INFINITY, 1, 2, 3}));
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_log_softmax(g, x);
    for (int i = 0; i < 3; i++)
        cr_assert(isinf(y->data[i]) && y->data[i] < 0, "y[%d] = %g", i, (double)y->data[i]);
    for (int i = 3; i < 6; i++) cr_assert(isfinite(y->data[i]), "y[%d] = %g", i, (double)y->data[i]);

    /* through the public API: zero the masked row before summing */
    ag_tensor *keep = ag_tensor_from(g, AG_SHAPE(2, 1), ((ag_real[]){0, 1}));
    ag_tensor *loss = ag_sum_all(g, ag_masked_fill(g, y, keep, 0));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert(isfinite(x->grad[i]), "dx[%d] = %g", i, (double)x->grad[i]);
    expect_close(x->grad + 3, ((double[]){1 - 3 * 0.09003057317038046, 1 - 3 * 0.24472847105479764,
                                         1 - 3 * 0.6652409557748218}),
                 3, TOL(1e-14, 1e-6), 0, "dx live row");

    /* and with a nonzero dy on the masked row, straight into the backward:
     * the masked row must still get exactly zero (dy - 0 * sum(dy) would
     * give dy) */
    ag_real dy[6] = {1, 2, 3, 1, 1, 1};
    memset(x->grad, 0, 6 * sizeof(ag_real));
    y->grad = dy;
    ag_op_table[AG_OP_LOG_SOFTMAX]->backward(g, y);
    for (int i = 0; i < 3; i++) cr_assert_eq(x->grad[i], 0, "dx[%d] = %g", i, (double)x->grad[i]);
    expect_close(x->grad + 3, ((double[]){1 - 3 * 0.09003057317038046, 1 - 3 * 0.24472847105479764,
                                         1 - 3 * 0.6652409557748218}),
                 3, TOL(1e-14, 1e-6), 0, "dx live row");
    ag_graph_free(g);
}

/* Rows of every length from 1 to 70: the in-register kernel for 1 to 4
 * vectors of 16 floats (up to 64) and the general one (more), against
 * softmax in double. */
Test(softmax, rows_of_1_to_70_values_against_double)
{
    ag_graph *g = ag_graph_new();
    for (int n = 1; n <= 70; n++) {
        ag_graph_reset(g);
        ag_tensor *x = ag_tensor_new(g, AG_SHAPE(3, n));
        for (int i = 0; i < 3 * n; i++) x->data[i] = (ag_real)(((i * 37) % 23) * 0.25 - 2.5);
        ag_tensor *y = ag_softmax(g, x);
        cr_assert_not_null(y, "n = %d: %s", n, ag_graph_error(g));
        for (int r = 0; r < 3; r++) {
            double m = -INFINITY, s = 0, want[70];
            for (int j = 0; j < n; j++) m = fmax(m, (double)x->data[r * n + j]);
            for (int j = 0; j < n; j++) s += want[j] = exp((double)x->data[r * n + j] - m);
            for (int j = 0; j < n; j++) want[j] /= s;
            expect_close(y->data + r * n, want, (size_t)n, TOL(1e-16, 1e-8), TOL(1e-14, 1e-6), "softmax row");
        }
    }
    ag_graph_free(g);
}

Test(softmax, null_input_is_an_error)
{
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_log_softmax(g, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "log_softmax: input 0 is NULL");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(softmax, softmax_gradcheck) { expect_op_gradcheck("softmax"); }
Test(softmax, log_softmax_gradcheck) { expect_op_gradcheck("log_softmax"); }
#endif
