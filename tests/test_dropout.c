/* tests/test_dropout.c: inverted dropout, its mask and its modes. */
#include "common.h"

#define N 10000

static ag_tensor *ones(ag_graph *g, int n)
{
    ag_tensor *x = ag_tensor_new(g, 1, &n);
    for (int i = 0; i < n; i++) x->data[i] = 1;
    return x;
}

Test(dropout, training_zeroes_about_p_and_scales_the_rest)
{
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, 123);
    ag_tensor *x = ones(g, N);
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_dropout(g, x, 0.3);
    expect_shape(y, N);
    int dropped = 0;
    for (int i = 0; i < N; i++) {
        if (y->data[i] == 0) dropped++;
        else cr_assert_float_eq((double)y->data[i], 1 / 0.7, TOL(1e-15, 1e-6), "y[%d] = %g", i, (double)y->data[i]);
    }
    /* binomial(10000, 0.3): sd 46, so +-300 is 6.5 sd */
    cr_assert(dropped > 3000 - 300 && dropped < 3000 + 300, "%d of %d dropped", dropped, N);
    /* y = x * scale with x = 1, so dx = dy * scale = y when dy = 1 */
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < N; i++) cr_assert_eq(x->grad[i], y->data[i], "dx[%d]", i);
    ag_graph_free(g);
}

Test(dropout, same_seed_same_mask)
{
    ag_graph *g1 = ag_graph_new(), *g2 = ag_graph_new();
    ag_graph_seed(g1, 42);
    ag_graph_seed(g2, 42);
    ag_tensor *y1 = ag_dropout(g1, ones(g1, 1000), 0.5);
    ag_tensor *y2 = ag_dropout(g2, ones(g2, 1000), 0.5);
    for (int i = 0; i < 1000; i++) cr_assert_eq(y1->data[i], y2->data[i], "element %d", i);
    /* the stream moves on: a second dropout on the same graph differs */
    ag_tensor *y3 = ag_dropout(g1, ones(g1, 1000), 0.5);
    int same = 0;
    for (int i = 0; i < 1000; i++) same += y1->data[i] == y3->data[i];
    cr_assert_lt(same, 900, "second mask repeats the first (%d of 1000 equal)", same);
    /* a different seed gives a different mask */
    ag_graph_reset(g2);
    ag_graph_seed(g2, 43);
    y2 = ag_dropout(g2, ones(g2, 1000), 0.5);
    same = 0;
    for (int i = 0; i < 1000; i++) same += y1->data[i] == y2->data[i];
    cr_assert_lt(same, 900, "seeds 42 and 43 agree on %d of 1000", same);
    /* saving and restoring the stream repeats the mask */
    uint64_t saved[4];
    for (int k = 0; k < 4; k++) saved[k] = ag_graph_rng(g2)[k];
    ag_tensor *a = ag_dropout(g2, ones(g2, 100), 0.2);
    for (int k = 0; k < 4; k++) ag_graph_rng(g2)[k] = saved[k];
    ag_tensor *b = ag_dropout(g2, ones(g2, 100), 0.2);
    for (int i = 0; i < 100; i++) cr_assert_eq(a->data[i], b->data[i], "element %d", i);
    ag_graph_free(g1);
    ag_graph_free(g2);
}

Test(dropout, eval_mode_and_p0_are_the_identity)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, -2, 3, 0.5, 7, -1}));
    ag_set_requires_grad(x, 1);
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    uint64_t before = ag_graph_rng(g)[0];

    ag_tensor *y0 = ag_dropout(g, x, 0); /* training, p = 0 */
    expect_shape(y0, 2, 3);
    cr_assert_neq(y0, x, "still a node of its own");
    expect_close(y0->data, ((double[]){1, -2, 3, 0.5, 7, -1}), 6, 0, 0, "p = 0");

    ag_graph_set_training(g, 0);
    cr_assert_eq(ag_graph_training(g), 0);
    ag_tensor *y = ag_dropout(g, x, 0.9);
    expect_close(y->data, ((double[]){1, -2, 3, 0.5, 7, -1}), 6, 0, 0, "eval");
    cr_assert_eq(ag_graph_rng(g)[0], before, "identity draws no random numbers");

    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, ag_add(g, y, y0), w))), AG_OK, "%s", ag_graph_error(g));
    expect_close(x->grad, ((double[]){2, 4, 6, 8, 10, 12}), 6, 0, 0, "dx");
    ag_graph_free(g);
}

Test(dropout, bad_p_is_an_error)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_null(ag_dropout(g, x, 1));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "dropout: p = 1 must be in [0, 1)");
    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_null(ag_dropout(g, x, -0.1));
    cr_assert_str_eq(ag_graph_error(g), "dropout: p = -0.1 must be in [0, 1)");
    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_null(ag_dropout(g, x, NAN));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    ag_graph_reset(g);
    cr_assert_null(ag_dropout(g, NULL, 0.1));
    cr_assert_str_eq(ag_graph_error(g), "dropout: input 0 is NULL");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(dropout, gradcheck) { expect_op_gradcheck("dropout"); }
#endif
