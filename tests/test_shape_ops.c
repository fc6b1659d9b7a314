/* tests/test_shape_ops.c: reshape, permute / transpose, concat and slice:
 * values by hand, gradients by hand, error messages, and (in double) the
 * ops' gradient-check cases. */
#include <string.h>

#include "common.h"

/* A leaf [ndim, shape] holding start, start + 1, ... */
static ag_tensor *arange(ag_graph *g, int ndim, const int *shape, double start)
{
    ag_tensor *t = ag_tensor_new(g, ndim, shape);
    cr_assert_not_null(t, "%s", ag_graph_error(g));
    for (size_t i = 0; i < t->size; i++) t->data[i] = (ag_real)(start + (double)i);
    return t;
}

/* L = sum(y * w) with w = 1, 2, 3, ...: dL/dy = w, so each input's
 * gradient shows where every element of y came from. */
static void backward_weighted(ag_graph *g, ag_tensor *y)
{
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    ag_tensor *w = arange(g, y->ndim, y->shape, 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
}

static void expect_error(ag_graph *g, ag_status st, const char *msg)
{
    cr_assert_eq(ag_graph_status(g), st, "status %d, want %d (%s)", ag_graph_status(g), st, ag_graph_error(g));
    cr_assert_str_eq(ag_graph_error(g), msg);
    ag_graph_reset(g);
}

/* ---- reshape ------------------------------------------------------------- */

Test(shape, reshape_keeps_row_major_order_and_infers_minus_one)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    ag_tensor *y = ag_reshape(g, x, AG_SHAPE(3, -1));
    expect_shape(y, 3, 2);
    expect_close(y->data, ((double[]){0, 1, 2, 3, 4, 5}), 6, 0, 0, "y");
    cr_assert_eq(y->data, x->data, "reshape shares its input's values");
    ag_tensor *z = ag_reshape(g, x, AG_SHAPE(1, -1, 1, 3));
    expect_shape(z, 1, 2, 1, 3);
    expect_close(z->data, ((double[]){0, 1, 2, 3, 4, 5}), 6, 0, 0, "z");
    ag_tensor *s = ag_reshape(g, ag_tensor_from(g, AG_SHAPE(1, 1), (ag_real[]){7}), 0, NULL);
    cr_assert_not_null(s, "%s", ag_graph_error(g));
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(s->data[0], 7);
    /* a zero-size tensor reshapes as long as the counts agree */
    ag_tensor *e = ag_reshape(g, ag_tensor_new(g, AG_SHAPE(0, 3)), AG_SHAPE(3, 0, 2));
    expect_shape(e, 3, 0, 2);
    ag_graph_free(g);
}

Test(shape, reshape_backward_is_the_same_flat_order)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    ag_set_requires_grad(x, 1);
    backward_weighted(g, ag_reshape(g, x, AG_SHAPE(3, 2)));
    expect_close(x->grad, ((double[]){1, 2, 3, 4, 5, 6}), 6, 0, 0, "dx");
    ag_graph_free(g);
}

Test(shape, reshape_errors_name_the_shapes)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(4, 2)));
    expect_error(g, AG_ERR_SHAPE, "reshape: cannot reshape [2, 3] (6 elements) to [4, 2]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(4, -1)));
    expect_error(g, AG_ERR_SHAPE, "reshape: cannot reshape [2, 3] (6 elements) to [4, -1]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(0, -1)));
    expect_error(g, AG_ERR_SHAPE, "reshape: cannot reshape [2, 3] (6 elements) to [0, -1]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(-1, -1)));
    expect_error(g, AG_ERR_ARG, "reshape: more than one -1 in [-1, -1]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(-2, -3)));
    expect_error(g, AG_ERR_ARG, "reshape: bad size -2 at axis 0 in [-2, -3]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, 2, NULL));
    expect_error(g, AG_ERR_ARG, "reshape: shape is NULL");
    ag_graph_free(g);
}

/* ---- permute and transpose ----------------------------------------------- */

Test(shape, permute_of_an_arange_moves_each_element)
{
    ag_graph *g = ag_graph_new();
    /* x[i, j, k] = 12 i + 4 j + k */
    ag_tensor *x = arange(g, AG_SHAPE(2, 3, 4), 0);
    ag_tensor *y = ag_permute(g, x, (const int[]){2, 0, 1});
    expect_shape(y, 4, 2, 3);
    /* y[k, i, j] = x[i, j, k], at flat index 6 k + 3 i + j */
    cr_assert_eq(y->data[0], 0);       /* y[0, 0, 0] = x[0, 0, 0] */
    cr_assert_eq(y->data[1], 4);       /* y[0, 0, 1] = x[0, 1, 0] */
    cr_assert_eq(y->data[3], 12);      /* y[0, 1, 0] = x[1, 0, 0] */
    cr_assert_eq(y->data[6], 1);       /* y[1, 0, 0] = x[0, 0, 1] */
    cr_assert_eq(y->data[8], 9);       /* y[1, 0, 2] = x[0, 2, 1] */
    cr_assert_eq(y->data[15], 14);     /* y[2, 1, 0] = x[1, 0, 2] */
    cr_assert_eq(y->data[23], 23);     /* y[3, 1, 2] = x[1, 2, 3] */
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                cr_assert_eq(y->data[6 * k + 3 * i + j], 12 * i + 4 * j + k, "y[%d, %d, %d]", k, i, j);
    cr_assert_eq(ag_tensor_iarg(y, 0), 2);
    cr_assert_eq(ag_tensor_iarg(y, 1), 0);
    cr_assert_eq(ag_tensor_iarg(y, 2), 1);
    ag_graph_free(g);
}

Test(shape, permute_of_four_axes_matches_the_index_formula)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3, 4, 5), 0); /* x[a, b, c, d] = 60a + 20b + 5c + d */
    ag_tensor *y = ag_permute(g, x, (const int[]){3, 1, 0, 2});
    expect_shape(y, 5, 3, 2, 4);
    size_t at = 0;
    for (int d = 0; d < 5; d++)
        for (int b = 0; b < 3; b++)
            for (int a = 0; a < 2; a++)
                for (int c = 0; c < 4; c++, at++)
                    cr_assert_eq(y->data[at], 60 * a + 20 * b + 5 * c + d, "y[%d, %d, %d, %d]", d, b, a, c);
    ag_graph_free(g);
}

Test(shape, permute_backward_applies_the_inverse_permutation)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    ag_set_requires_grad(x, 1);
    /* y = x^T [3, 2]; dy = [[1, 2], [3, 4], [5, 6]]; dx = dy^T */
    backward_weighted(g, ag_permute(g, x, (const int[]){1, 0}));
    expect_close(x->grad, ((double[]){1, 3, 5, 2, 4, 6}), 6, 0, 0, "dx");
    ag_graph_reset(g);
    /* 3 axes: y[k, i, j] = x[i, j, k] with x [2, 1, 2]: y [2, 2, 1], dy = 1..4
     * dx[i, 0, k] = dy[k, i, 0] = 1 + 2k + i */
    x = arange(g, AG_SHAPE(2, 1, 2), 0);
    ag_set_requires_grad(x, 1);
    backward_weighted(g, ag_permute(g, x, (const int[]){2, 0, 1}));
    expect_close(x->grad, ((double[]){1, 3, 2, 4}), 4, 0, 0, "dx 3-d");
    ag_graph_free(g);
}

Test(shape, transpose_swaps_two_axes_and_counts_negative_axes_from_the_end)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    ag_tensor *y = ag_transpose(g, x, 0, 1);
    expect_shape(y, 3, 2);
    expect_close(y->data, ((double[]){0, 3, 1, 4, 2, 5}), 6, 0, 0, "y");
    ag_tensor *z = ag_transpose(g, x, -1, -2);
    expect_shape(z, 3, 2);
    expect_close(z->data, ((double[]){0, 3, 1, 4, 2, 5}), 6, 0, 0, "z");
    cr_assert_eq(z->op, AG_OP_PERMUTE);
    /* [2, 3, 4] transpose(0, -1) -> [4, 3, 2]: y[k, j, i] = x[i, j, k] */
    ag_tensor *x3 = arange(g, AG_SHAPE(2, 3, 4), 0);
    ag_tensor *y3 = ag_transpose(g, x3, 0, -1);
    expect_shape(y3, 4, 3, 2);
    cr_assert_eq(y3->data[(3 * 3 + 2) * 2 + 1], 12 * 1 + 4 * 2 + 3); /* y[3, 2, 1] = x[1, 2, 3] */
    /* the same axis twice is a copy */
    ag_tensor *c = ag_transpose(g, x, 1, -1);
    expect_shape(c, 2, 3);
    expect_close(c->data, ((double[]){0, 1, 2, 3, 4, 5}), 6, 0, 0, "copy");
    ag_graph_free(g);
}

Test(shape, permute_and_transpose_errors_name_the_perm_and_shape)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_permute(g, x, (const int[]){0, 0}));
    expect_error(g, AG_ERR_ARG, "permute: perm [0, 0] is not a permutation of the axes of [2, 3]");
    x = arange(g, AG_SHAPE(2, 3, 4), 0);
    cr_assert_null(ag_permute(g, x, (const int[]){0, 3, 1}));
    expect_error(g, AG_ERR_ARG, "permute: perm [0, 3, 1] is not a permutation of the axes of [2, 3, 4]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_permute(g, x, (const int[]){-1, 0}));
    expect_error(g, AG_ERR_ARG, "permute: perm [-1, 0] is not a permutation of the axes of [2, 3]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_permute(g, x, NULL));
    expect_error(g, AG_ERR_ARG, "permute: perm is NULL");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_transpose(g, x, 0, 2));
    expect_error(g, AG_ERR_ARG, "transpose: axes (0, 2): axis 2 out of range for [2, 3]");
    x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_transpose(g, x, -3, 1));
    expect_error(g, AG_ERR_ARG, "transpose: axes (-3, 1): axis -3 out of range for [2, 3]");
    ag_graph_free(g);
}

Test(shape, reshape_permute_reshape_round_trip_restores_values_and_gradient)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3, 4), -3);
    ag_set_requires_grad(x, 1);
    /* the attention head split [B, T, C] -> [B, T, H, D] -> [B, H, T, D] and back */
    ag_tensor *h = ag_permute(g, ag_reshape(g, x, AG_SHAPE(2, 3, 2, 2)), (const int[]){0, 2, 1, 3});
    expect_shape(h, 2, 2, 3, 2);
    ag_tensor *back = ag_reshape(g, ag_permute(g, h, (const int[]){0, 2, 1, 3}), AG_SHAPE(2, 3, 4));
    expect_shape(back, 2, 3, 4);
    for (size_t i = 0; i < x->size; i++) cr_assert_eq(back->data[i], x->data[i], "element %zu", i);
    /* a permutation that is not its own inverse: (2, 0, 3, 1) then (1, 3, 0, 2) */
    ag_tensor *p = ag_permute(g, ag_reshape(g, x, AG_SHAPE(2, 3, 2, 2)), (const int[]){2, 0, 3, 1});
    expect_shape(p, 2, 2, 2, 3);
    ag_tensor *q = ag_reshape(g, ag_permute(g, p, (const int[]){1, 3, 0, 2}), AG_SHAPE(-1));
    expect_shape(q, 24);
    for (size_t i = 0; i < x->size; i++) cr_assert_eq(q->data[i], x->data[i], "element %zu", i);
    /* the whole chain is the identity, so dx = dy = 1, 2, 3, ... */
    backward_weighted(g, back);
    for (size_t i = 0; i < x->size; i++) cr_assert_eq(x->grad[i], (ag_real)(i + 1), "dx[%zu]", i);
    ag_graph_free(g);
}

/* ---- concat -------------------------------------------------------------- */

Test(shape, concat_joins_known_values_along_an_axis)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(2, 2), (ag_real[]){1, 2, 3, 4});
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2, 1), (ag_real[]){5, 6});
    ag_tensor *c = ag_tensor_from(g, AG_SHAPE(1, 2), (ag_real[]){7, 8});
    ag_tensor *y = ag_concat(g, 2, (ag_tensor *[]){a, b}, 1);
    expect_shape(y, 2, 3);
    expect_close(y->data, ((double[]){1, 2, 5, 3, 4, 6}), 6, 0, 0, "axis 1");
    y = ag_concat(g, 2, (ag_tensor *[]){b, a}, -1);
    expect_shape(y, 2, 3);
    expect_close(y->data, ((double[]){5, 1, 2, 6, 3, 4}), 6, 0, 0, "axis -1");
    y = ag_concat(g, 3, (ag_tensor *[]){a, c, a}, 0);
    expect_shape(y, 5, 2);
    expect_close(y->data, ((double[]){1, 2, 3, 4, 7, 8, 1, 2, 3, 4}), 10, 0, 0, "axis 0");
    /* one input: a copy */
    y = ag_concat(g, 1, &a, 0);
    expect_shape(y, 2, 2);
    cr_assert_neq(y->data, a->data);
    expect_close(y->data, ((double[]){1, 2, 3, 4}), 4, 0, 0, "one input");
    /* along the middle axis of [2, 1, 2] and [2, 2, 2] */
    ag_tensor *m = arange(g, AG_SHAPE(2, 1, 2), 0);
    ag_tensor *n = arange(g, AG_SHAPE(2, 2, 2), 10);
    y = ag_concat(g, 2, (ag_tensor *[]){m, n}, 1);
    expect_shape(y, 2, 3, 2);
    expect_close(y->data, ((double[]){0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17}), 12, 0, 0, "middle");
    ag_graph_free(g);
}

Test(shape, concat_backward_gives_each_input_its_slice)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(2, 2), (ag_real[]){1, 2, 3, 4});
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2, 1), (ag_real[]){5, 6});
    ag_set_requires_grad(a, 1);
    ag_set_requires_grad(b, 1);
    /* dy = [[1, 2, 3], [4, 5, 6]] */
    backward_weighted(g, ag_concat(g, 2, (ag_tensor *[]){a, b}, 1));
    expect_close(a->grad, ((double[]){1, 2, 4, 5}), 4, 0, 0, "da");
    expect_close(b->grad, ((double[]){3, 6}), 2, 0, 0, "db");
    ag_graph_reset(g);
    /* a tensor given twice gets both slices */
    a = ag_tensor_from(g, AG_SHAPE(1, 2), (ag_real[]){1, 2});
    ag_set_requires_grad(a, 1);
    backward_weighted(g, ag_concat(g, 2, (ag_tensor *[]){a, a}, 0)); /* dy = [[1, 2], [3, 4]] */
    expect_close(a->grad, ((double[]){4, 6}), 2, 0, 0, "da twice");
    ag_graph_free(g);
}

Test(shape, concat_of_more_than_three_inputs_differentiates_every_input)
{
    ag_graph *g = ag_graph_new();
    /* x_k [2, 1] = {k, 100 + k}, k = 0..6, joined along axis 1 -> [2, 7] */
    ag_tensor *xs[7];
    for (int k = 0; k < 7; k++) xs[k] = ag_tensor_from(g, AG_SHAPE(2, 1), (ag_real[]){(ag_real)k, (ag_real)(100 + k)});
    /* only inputs that a node with at most 3 inputs could not hold need grad */
    ag_set_requires_grad(xs[4], 1);
    ag_set_requires_grad(xs[6], 1);
    ag_tensor *y = ag_concat(g, 7, xs, 1);
    expect_shape(y, 2, 7);
    expect_close(y->data, ((double[]){0, 1, 2, 3, 4, 5, 6, 100, 101, 102, 103, 104, 105, 106}), 14, 0, 0, "y");
    cr_assert_eq(y->op, AG_OP_CONCAT);
    cr_assert(y->requires_grad);
    /* dy[r, c] = 7 r + c + 1 */
    backward_weighted(g, y);
    expect_close(xs[4]->grad, ((double[]){5, 12}), 2, 0, 0, "dx4");
    expect_close(xs[6]->grad, ((double[]){7, 14}), 2, 0, 0, "dx6");
    for (int k = 0; k < 7; k++)
        if (k != 4 && k != 6) cr_assert_null(xs[k]->grad, "x%d needs no gradient", k);
    ag_graph_reset(g);

    /* 4 inputs, one of them twice, along the middle axis */
    ag_tensor *a = arange(g, AG_SHAPE(1, 1, 2), 0);
    ag_tensor *b = arange(g, AG_SHAPE(1, 2, 2), 10);
    ag_tensor *c = arange(g, AG_SHAPE(1, 1, 2), 20);
    ag_set_requires_grad(a, 1);
    ag_set_requires_grad(c, 1);
    y = ag_concat(g, 4, (ag_tensor *[]){a, b, c, a}, 1);
    expect_shape(y, 1, 5, 2);
    expect_close(y->data, ((double[]){0, 1, 10, 11, 12, 13, 20, 21, 0, 1}), 10, 0, 0, "y4");
    backward_weighted(g, y); /* dy = 1..10 */
    expect_close(a->grad, ((double[]){1 + 9, 2 + 10}), 2, 0, 0, "da");
    expect_close(c->grad, ((double[]){7, 8}), 2, 0, 0, "dc");
    cr_assert_null(b->grad);
    ag_graph_free(g);
}

Test(shape, concat_errors_name_the_input_and_both_shapes)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 3));
    ag_tensor *b = ag_tensor_new(g, AG_SHAPE(3, 3));
    cr_assert_null(ag_concat(g, 2, (ag_tensor *[]){a, b}, 1));
    expect_error(g, AG_ERR_SHAPE, "concat: input 1 is [3, 3] but input 0 is [2, 3]: every axis but 1 must agree");
    a = ag_tensor_new(g, AG_SHAPE(2, 3));
    b = ag_tensor_new(g, AG_SHAPE(2, 3, 1));
    cr_assert_null(ag_concat(g, 5, (ag_tensor *[]){a, a, a, a, b}, 0));
    expect_error(g, AG_ERR_SHAPE, "concat: input 4 is [2, 3, 1] but input 0 is [2, 3]: every axis but 0 must agree");
    a = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_concat(g, 2, (ag_tensor *[]){a, NULL}, 0));
    expect_error(g, AG_ERR_ARG, "concat: input 1 is NULL");
    cr_assert_null(ag_concat(g, 0, (ag_tensor *[]){NULL}, 0));
    expect_error(g, AG_ERR_ARG, "concat: needs at least one input (n = 0)");
    cr_assert_null(ag_concat(g, 2, NULL, 0));
    expect_error(g, AG_ERR_ARG, "concat: needs at least one input (n = 2, xs is NULL)");
    a = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_concat(g, 2, (ag_tensor *[]){a, a}, 2));
    expect_error(g, AG_ERR_ARG, "concat: axis 2 out of range for [2, 3]");
    ag_graph_free(g);
}

/* ---- slice --------------------------------------------------------------- */

Test(shape, slice_copies_a_range_and_scatters_the_gradient_back)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 5), 0);
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_slice(g, x, 1, 1, 3);
    expect_shape(y, 2, 3);
    expect_close(y->data, ((double[]){1, 2, 3, 6, 7, 8}), 6, 0, 0, "y");
    backward_weighted(g, y); /* dy = [[1, 2, 3], [4, 5, 6]] */
    expect_close(x->grad, ((double[]){0, 1, 2, 3, 0, 0, 4, 5, 6, 0}), 10, 0, 0, "dx");
    ag_graph_reset(g);
    /* the middle axis of [2, 3, 2] */
    x = arange(g, AG_SHAPE(2, 3, 2), 0);
    ag_set_requires_grad(x, 1);
    y = ag_slice(g, x, 1, 1, 1);
    expect_shape(y, 2, 1, 2);
    expect_close(y->data, ((double[]){2, 3, 8, 9}), 4, 0, 0, "middle");
    backward_weighted(g, y);
    expect_close(x->grad, ((double[]){0, 0, 1, 2, 0, 0, 0, 0, 3, 4, 0, 0}), 12, 0, 0, "dx middle");
    /* negative axis, the first rows of axis 0 */
    y = ag_slice(g, x, -1, 1, 1);
    expect_shape(y, 2, 3, 1);
    expect_close(y->data, ((double[]){1, 3, 5, 7, 9, 11}), 6, 0, 0, "last axis");
    y = ag_slice(g, x, 0, 1, 1);
    expect_shape(y, 1, 3, 2);
    expect_close(y->data, ((double[]){6, 7, 8, 9, 10, 11}), 6, 0, 0, "axis 0");
    /* length 0 is an empty tensor, also at the very end */
    y = ag_slice(g, x, 1, 3, 0);
    expect_shape(y, 2, 0, 2);
    cr_assert_eq(y->size, 0);
    ag_graph_free(g);
}

Test(shape, slice_errors_give_the_values)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 5));
    cr_assert_null(ag_slice(g, x, 1, 3, 3));
    expect_error(g, AG_ERR_ARG, "slice: start 3, len 3 out of range for axis 1 of size 5 in [2, 5]");
    x = ag_tensor_new(g, AG_SHAPE(2, 5));
    cr_assert_null(ag_slice(g, x, -1, -1, 2));
    expect_error(g, AG_ERR_ARG, "slice: start -1, len 2 out of range for axis 1 of size 5 in [2, 5]");
    x = ag_tensor_new(g, AG_SHAPE(2, 5));
    cr_assert_null(ag_slice(g, x, 0, 0, -1));
    expect_error(g, AG_ERR_ARG, "slice: start 0, len -1 out of range for axis 0 of size 2 in [2, 5]");
    x = ag_tensor_new(g, AG_SHAPE(2, 5));
    cr_assert_null(ag_slice(g, x, 0, 6, 0));
    expect_error(g, AG_ERR_ARG, "slice: start 6, len 0 out of range for axis 0 of size 2 in [2, 5]");
    x = ag_tensor_new(g, AG_SHAPE(2, 5));
    cr_assert_null(ag_slice(g, x, 2, 0, 1));
    expect_error(g, AG_ERR_ARG, "slice: axis 2 out of range for [2, 5]");
    ag_graph_free(g);
}

/* ---- NULL inputs and failed graphs ----------------------------------------- */

Test(shape, null_input_gives_null_and_names_the_op)
{
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_reshape(g, NULL, AG_SHAPE(2)));
    expect_error(g, AG_ERR_ARG, "reshape: input 0 is NULL");
    cr_assert_null(ag_permute(g, NULL, (const int[]){0}));
    expect_error(g, AG_ERR_ARG, "permute: input 0 is NULL");
    cr_assert_null(ag_transpose(g, NULL, 0, 1));
    expect_error(g, AG_ERR_ARG, "transpose: input 0 is NULL");
    cr_assert_null(ag_slice(g, NULL, 0, 0, 1));
    expect_error(g, AG_ERR_ARG, "slice: input 0 is NULL");
    ag_graph_free(g);
}

Test(shape, ops_on_a_graph_in_error_do_nothing)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = arange(g, AG_SHAPE(2, 3), 0);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(5)));
    const char *first = "reshape: cannot reshape [2, 3] (6 elements) to [5]";
    cr_assert_str_eq(ag_graph_error(g), first);
    int nodes = ag_graph_node_count(g);
    cr_assert_null(ag_reshape(g, x, AG_SHAPE(3, 2)));
    cr_assert_null(ag_permute(g, x, (const int[]){1, 0}));
    cr_assert_null(ag_transpose(g, x, 0, 1));
    cr_assert_null(ag_concat(g, 2, (ag_tensor *[]){x, x}, 0));
    cr_assert_null(ag_slice(g, x, 0, 0, 1));
    cr_assert_eq(ag_graph_node_count(g), nodes);
    cr_assert_str_eq(ag_graph_error(g), first);
    ag_graph_free(g);
}

/* ---- gradient checks (double only) ----------------------------------------- */

#ifdef AG_DOUBLE
Test(shape, gradcheck_reshape) { expect_op_gradcheck("reshape"); }
Test(shape, gradcheck_permute) { expect_op_gradcheck("permute"); }
Test(shape, gradcheck_concat) { expect_op_gradcheck("concat"); }
Test(shape, gradcheck_slice) { expect_op_gradcheck("slice"); }
#endif
