/* tests/test_layer_norm.c: layer normalisation over the last axis. */
#include "common.h"

Test(layer_norm, normalises_1_2_3_4)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 4), ((ag_real[]){1, 2, 3, 4}));
    ag_tensor *y = ag_layer_norm(g, x, NULL, NULL, 1e-5);
    expect_shape(y, 1, 4);
    /* mean 2.5, biased var 1.25: (x - 2.5) / sqrt(1.25 + 1e-5) */
    double r = 1 / sqrt(1.25 + 1e-5);
    const double want[] = {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r};
    expect_close(y->data, want, 4, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "y");
    expect_close(y->data, ((double[]){-1.3416354199689269, -0.447211806656309, 0.447211806656309,
                                      1.3416354199689269}),
                 4, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "y");
    ag_graph_free(g);
}

Test(layer_norm, gain_and_bias)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){1, 2, 3, 4}));
    ag_tensor *gain = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){2, 1, 0.5, -1}));
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){0, 1, 0, 1}));
    double r = 1 / sqrt(1.25 + 1e-5);
    ag_tensor *y = ag_layer_norm(g, x, gain, bias, 1e-5);
    expect_close(y->data, ((double[]){-3 * r, 1 - 0.5 * r, 0.25 * r, 1 - 1.5 * r}), 4, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "y");
    /* gain only, bias only */
    y = ag_layer_norm(g, x, gain, NULL, 1e-5);
    expect_close(y->data, ((double[]){-3 * r, -0.5 * r, 0.25 * r, -1.5 * r}), 4, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "y gain only");
    y = ag_layer_norm(g, x, NULL, bias, 1e-5);
    expect_close(y->data, ((double[]){-1.5 * r, 1 - 0.5 * r, 0.5 * r, 1 + 1.5 * r}), 4, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "y bias only");
    ag_graph_free(g);
}

Test(layer_norm, backward_matches_the_jacobian)
{
    /* dx from the explicit Jacobian
     *   d xhat_j / d x_i = rstd (delta_ij - 1/C - xhat_i xhat_j / C)
     * summed by Python over j with weights w_j gain_j; dgain = sum_rows w xhat,
     * dbias = sum_rows w. */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 4), ((ag_real[]){1, 2, 3, 4, 0, -1, 0, 3}));
    ag_tensor *gain = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){2, 1, 0.5, -1}));
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){0, 1, 0, 1}));
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 4), ((ag_real[]){0.5, -1, 2, 0.25, 1, 1, -2, 0}));
    ag_set_requires_grad(x, 1);
    ag_set_requires_grad(gain, 1);
    ag_set_requires_grad(bias, 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, ag_layer_norm(g, x, gain, bias, 1e-5), w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    const double dx[] = {0.49193486559650174, -1.1403894808820674, 0.8049806258898358, -0.15652601060426996,
                         0.9259241975355281,  0.11111185184609057, -1.0740713580348422, 0.03703530865322348};
    const double dgain[] = {-1.004150302579525, -0.5527859711288762, 1.5610887985027415, 0.3354088549922317};
    expect_close(x->grad, dx, 8, TOL(1e-12, 1e-5), TOL(1e-10, 1e-5), "dx");
    expect_close(gain->grad, dgain, 4, TOL(1e-12, 1e-5), TOL(1e-10, 1e-5), "dgain");
    expect_close(bias->grad, ((double[]){1.5, 0, 0, 0.25}), 4, TOL(1e-15, 1e-6), 0, "dbias");
    ag_graph_free(g);
}

Test(layer_norm, gradient_sums_to_zero_over_a_row)
{
    /* y does not change when a constant is added to a row, so sum_i dx_i = 0 */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3, 5), ((ag_real[]){1, -2, 0.5, 4, 3, 0, 0, 1, 0, 0, 7, 7.5, 6, 8, 7}));
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(3, 5), ((ag_real[]){1, 2, 3, 4, 5, -1, 0, 1, 0, -1, 3, -3, 2, -2, 1}));
    ag_set_requires_grad(x, 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, ag_layer_norm(g, x, NULL, NULL, 1e-5), w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    for (int r = 0; r < 3; r++) {
        double s = 0, a = 0;
        for (int i = 0; i < 5; i++) s += x->grad[r * 5 + i], a += fabs(x->grad[r * 5 + i]);
        cr_assert_gt(a, 0.1, "row %d has no gradient", r);
        cr_assert_lt(fabs(s), TOL(1e-12, 1e-5), "row %d: sum dx = %g", r, s);
    }
    ag_graph_free(g);
}

Test(layer_norm, constant_row_gives_bias_and_finite_gradients)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){5, 5, 5, 1, 2, 3}));
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){0.5, -1, 2}));
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_layer_norm(g, x, NULL, bias, 1e-5);
    expect_close(y->data, ((double[]){0.5, -1, 2}), 3, TOL(1e-15, 1e-6), 0, "y of constant row");
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 1, 2, 3}));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, w))), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert(isfinite(x->grad[i]), "dx[%d] = %g", i, (double)x->grad[i]);
    ag_graph_free(g);
}

Test(layer_norm, bad_shapes_are_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 4));
    ag_tensor *g3 = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_null(ag_layer_norm(g, x, g3, NULL, 1e-5));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: gain must be [4] for x [2, 4], got [3]");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(2, 4));
    ag_tensor *b14 = ag_tensor_new(g, AG_SHAPE(1, 4));
    cr_assert_null(ag_layer_norm(g, x, NULL, b14, 1e-5));
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: bias must be [4] for x [2, 4], got [1, 4]");

    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm(g, ag_scalar(g, 1), NULL, NULL, 1e-5));
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: x must have at least 1 axis, got []");

    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm(g, NULL, NULL, NULL, 1e-5));
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: input 0 is NULL");

    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm(g, ag_tensor_new(g, AG_SHAPE(2)), NULL, NULL, -1));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: eps = -1 must be >= 0");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(layer_norm, gradcheck) { expect_op_gradcheck("layer_norm"); }
#endif
