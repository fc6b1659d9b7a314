/* tests/test_masked_fill.c: y = mask ? x : value, with a broadcast mask. */
#include "common.h"

Test(masked_fill, same_shape_mask)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    ag_tensor *m = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 0, 1, 0, 0, 2}));
    ag_tensor *y = ag_masked_fill(g, x, m, -1e9);
    expect_shape(y, 2, 3);
    expect_close(y->data, ((double[]){1, -1e9, 3, -1e9, -1e9, 6}), 6, 0, 0, "y");
    ag_graph_free(g);
}

Test(masked_fill, broadcast_masks)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    ag_tensor *row = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){0, 1, 1}));
    expect_close(ag_masked_fill(g, x, row, 9)->data, ((double[]){9, 2, 3, 9, 5, 6}), 6, 0, 0, "[1, 3] mask");
    ag_tensor *col = ag_tensor_from(g, AG_SHAPE(2, 1), ((ag_real[]){1, 0}));
    expect_close(ag_masked_fill(g, x, col, 9)->data, ((double[]){1, 2, 3, 9, 9, 9}), 6, 0, 0, "[2, 1] mask");
    ag_tensor *vec = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 1, 0}));
    expect_close(ag_masked_fill(g, x, vec, 9)->data, ((double[]){1, 2, 9, 4, 5, 9}), 6, 0, 0, "[3] mask");
    ag_tensor *zero = ag_scalar(g, 0);
    expect_close(ag_masked_fill(g, x, zero, -2)->data, ((double[]){-2, -2, -2, -2, -2, -2}), 6, 0, 0,
                 "scalar mask");
    /* [2, 1, 3] x with a [2, 1] mask: the mask's axes align on the right */
    ag_tensor *x3 = ag_tensor_from(g, AG_SHAPE(2, 2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    ag_tensor *y3 = ag_masked_fill(g, x3, col, 0);
    expect_close(y3->data, ((double[]){1, 2, 3, 0, 0, 0, 7, 8, 9, 0, 0, 0}), 12, 0, 0, "[2, 2, 3] by [2, 1]");
    ag_graph_free(g);
}

Test(masked_fill, gradient_flows_only_where_kept_and_never_into_the_mask)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    ag_tensor *m = ag_tensor_from(g, AG_SHAPE(1, 3), ((ag_real[]){1, 0, 1}));
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_masked_fill(g, x, m, -1e9);
    cr_assert_eq(y->requires_grad, 1);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, w))), AG_OK, "%s", ag_graph_error(g));
    expect_close(x->grad, ((double[]){1, 0, 3, 4, 0, 6}), 6, 0, 0, "dx");
    cr_assert_null(m->grad, "the mask gets no gradient");
    ag_graph_free(g);
}

Test(masked_fill, a_mask_that_requires_grad_does_not_make_y_require_it)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 2, 3}));
    ag_tensor *m = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){1, 0, 1}));
    ag_set_requires_grad(m, 1);
    ag_tensor *y = ag_masked_fill(g, x, m, 0);
    cr_assert_eq(y->requires_grad, 0, "y depends on the mask only as data");
    /* with x requiring grad too, the mask's gradient (if any) stays zero */
    ag_set_requires_grad(x, 1);
    y = ag_masked_fill(g, x, m, 0);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    expect_close(x->grad, ((double[]){1, 0, 1}), 3, 0, 0, "dx");
    if (m->grad)
        for (int i = 0; i < 3; i++) cr_assert_eq(m->grad[i], 0, "dmask[%d]", i);
    ag_graph_free(g);
}

Test(masked_fill, minus_infinity_then_softmax)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){0, 0, 0, 3, 1, 2}));
    ag_tensor *m = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 1, 0, 0, 0, 0}));
    ag_set_requires_grad(x, 1);
    ag_tensor *f = ag_masked_fill(g, x, m, -INFINITY);
    cr_assert(isinf(f->data[2]) && f->data[2] < 0);
    ag_tensor *y = ag_softmax(g, f);
    /* row 0: two live keys share evenly; row 1: every key masked gives zeros */
    expect_close(y->data, ((double[]){0.5, 0.5, 0, 0, 0, 0}), 6, TOL(1e-15, 1e-7), 0, "softmax");
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 3, 5, 1, 1, 1}));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, w))), AG_OK, "%s", ag_graph_error(g));
    /* dx = y (w - y.w) on live entries: 0.5 (1 - 2), 0.5 (3 - 2); 0 elsewhere */
    expect_close(x->grad, ((double[]){-0.5, 0.5, 0, 0, 0, 0}), 6, TOL(1e-15, 1e-7), 0, "dx");
    ag_graph_free(g);
}

Test(masked_fill, shape_errors_name_both_shapes)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 4));
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_null(ag_masked_fill(g, x, m, 0));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "masked_fill: shapes do not broadcast: [2, 4] and [3] (axis -1: 4 vs 3)");

    /* the mask may not stretch x */
    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(1, 4));
    m = ag_tensor_new(g, AG_SHAPE(3, 4));
    cr_assert_null(ag_masked_fill(g, x, m, 0));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "masked_fill: mask [3, 4] does not broadcast to x's shape [1, 4]");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(4));
    m = ag_tensor_new(g, AG_SHAPE(2, 4));
    cr_assert_null(ag_masked_fill(g, x, m, 0));
    cr_assert_str_eq(ag_graph_error(g), "masked_fill: mask [2, 4] does not broadcast to x's shape [4]");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(4));
    cr_assert_null(ag_masked_fill(g, x, NULL, 0));
    cr_assert_str_eq(ag_graph_error(g), "masked_fill: input 1 is NULL");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(masked_fill, gradcheck) { expect_op_gradcheck("masked_fill"); }
#endif
