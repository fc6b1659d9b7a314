/* tests/test_reduce.c: sum, mean and max over an axis or over everything:
 * values and gradients by hand, ties and NaN in max, error messages, and
 * (in double) the ops' gradient-check cases. */
#include <string.h>

#include "common.h"
#include "core/internal.h"

/* L = sum(y * w) with w = 1, 2, 3, ...: dL/dy = w. */
static void backward_weighted(ag_graph *g, ag_tensor *y)
{
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    ag_tensor *w = ag_tensor_new(g, y->ndim, y->shape);
    for (size_t i = 0; i < w->size; i++) w->data[i] = (ag_real)(i + 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
}

static void expect_error(ag_graph *g, ag_status st, const char *msg)
{
    cr_assert_eq(ag_graph_status(g), st, "status %d, want %d (%s)", ag_graph_status(g), st, ag_graph_error(g));
    cr_assert_str_eq(ag_graph_error(g), msg);
    ag_graph_reset(g);
}

/* x = [[1, 2, 3], [4, 5, 6]] */
static ag_tensor *x23(ag_graph *g)
{
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), (ag_real[]){1, 2, 3, 4, 5, 6});
    ag_set_requires_grad(x, 1);
    return x;
}

/* ---- sum ----------------------------------------------------------------- */

Test(reduce, sum_by_hand)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = x23(g);
    ag_tensor *y = ag_sum(g, x, 0, 0);
    expect_shape(y, 3);
    expect_close(y->data, ((double[]){5, 7, 9}), 3, 0, 0, "axis 0");
    y = ag_sum(g, x, -1, 1);
    expect_shape(y, 2, 1);
    expect_close(y->data, ((double[]){6, 15}), 2, 0, 0, "axis -1 keepdim");
    y = ag_sum_all(g, x);
    cr_assert_eq(y->ndim, 0);
    cr_assert_eq(y->data[0], 21);
    backward_weighted(g, ag_sum(g, x, 1, 0)); /* dy = {1, 2} */
    expect_close(x->grad, ((double[]){1, 1, 1, 2, 2, 2}), 6, 0, 0, "dx");
    ag_graph_free(g);
}

/* ---- mean ---------------------------------------------------------------- */

Test(reduce, mean_by_hand)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = x23(g);
    ag_tensor *y = ag_mean(g, x, 0, 0);
    expect_shape(y, 3);
    expect_close(y->data, ((double[]){2.5, 3.5, 4.5}), 3, TOL(1e-12, 1e-6), 0, "axis 0");
    y = ag_mean(g, x, -1, 0);
    expect_shape(y, 2);
    expect_close(y->data, ((double[]){2, 5}), 2, TOL(1e-12, 1e-6), 0, "axis -1");
    y = ag_mean(g, x, 1, 1);
    expect_shape(y, 2, 1);
    expect_close(y->data, ((double[]){2, 5}), 2, TOL(1e-12, 1e-6), 0, "axis 1 keepdim");
    y = ag_mean(g, x, 0, 1);
    expect_shape(y, 1, 3);
    y = ag_mean_all(g, x);
    cr_assert_eq(y->ndim, 0);
    expect_close(y->data, ((double[]){3.5}), 1, TOL(1e-12, 1e-6), 0, "all");
    /* the middle axis of [2, 3, 2] = 0..11: mean over j of 6 i + 2 j + k */
    ag_tensor *z = ag_tensor_new(g, AG_SHAPE(2, 3, 2));
    for (size_t i = 0; i < z->size; i++) z->data[i] = (ag_real)i;
    y = ag_mean(g, z, 1, 0);
    expect_shape(y, 2, 2);
    expect_close(y->data, ((double[]){2, 3, 8, 9}), 4, TOL(1e-12, 1e-6), 0, "middle");
    /* a zero-size tensor over a non-empty axis is fine: an empty result */
    y = ag_mean(g, ag_tensor_new(g, AG_SHAPE(0, 3)), 1, 0);
    expect_shape(y, 0);
    ag_graph_free(g);
}

Test(reduce, mean_backward_divides_by_the_count)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = x23(g);
    backward_weighted(g, ag_mean(g, x, 1, 0)); /* dy = {1, 2}, N = 3 */
    expect_close(x->grad, ((double[]){1. / 3, 1. / 3, 1. / 3, 2. / 3, 2. / 3, 2. / 3}), 6, TOL(1e-12, 1e-6), 0,
                 "dx axis 1");
    ag_graph_reset(g);
    x = x23(g);
    backward_weighted(g, ag_mean(g, x, 0, 1)); /* dy = {1, 2, 3}, N = 2 */
    expect_close(x->grad, ((double[]){0.5, 1, 1.5, 0.5, 1, 1.5}), 6, TOL(1e-12, 1e-6), 0, "dx axis 0");
    ag_graph_reset(g);
    x = x23(g);
    cr_assert_eq(ag_backward(g, ag_mean_all(g, x)), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert_float_eq((double)x->grad[i], 1. / 6, TOL(1e-12, 1e-6), "dx[%d]", i);
    ag_graph_free(g);
}

Test(reduce, mean_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 0));
    cr_assert_null(ag_mean(g, x, 1, 0));
    expect_error(g, AG_ERR_SHAPE, "mean: axis of size 0: axis 1 of [2, 0]");
    x = ag_tensor_new(g, AG_SHAPE(2, 0));
    cr_assert_null(ag_mean(g, x, -1, 1));
    expect_error(g, AG_ERR_SHAPE, "mean: axis of size 0: axis -1 of [2, 0]");
    x = ag_tensor_new(g, AG_SHAPE(0, 3));
    cr_assert_null(ag_mean_all(g, x));
    expect_error(g, AG_ERR_SHAPE, "mean: axis of size 0: mean of all of [0, 3]");
    x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_mean(g, x, 2, 0));
    expect_error(g, AG_ERR_ARG, "mean: axis 2 out of range for [2, 3]");
    cr_assert_null(ag_mean(g, NULL, 0, 0));
    expect_error(g, AG_ERR_ARG, "mean: input 0 is NULL");
    cr_assert_null(ag_mean_all(g, NULL));
    expect_error(g, AG_ERR_ARG, "mean: input 0 is NULL");
    ag_graph_free(g);
}

/* ---- max ----------------------------------------------------------------- */

Test(reduce, max_values_and_argmax_gradient)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), (ag_real[]){1, 5, 3, 4, -2, 6});
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_max(g, x, 1, 0);
    expect_shape(y, 2);
    expect_close(y->data, ((double[]){5, 6}), 2, 0, 0, "axis 1");
    backward_weighted(g, y); /* dy = {1, 2} to x[0, 1] and x[1, 2] */
    expect_close(x->grad, ((double[]){0, 1, 0, 0, 0, 2}), 6, 0, 0, "dx axis 1");
    ag_graph_reset(g);

    x = ag_tensor_from(g, AG_SHAPE(2, 3), (ag_real[]){1, 5, 3, 4, -2, 6});
    ag_set_requires_grad(x, 1);
    y = ag_max(g, x, 0, 1);
    expect_shape(y, 1, 3);
    expect_close(y->data, ((double[]){4, 5, 6}), 3, 0, 0, "axis 0 keepdim");
    backward_weighted(g, y); /* dy = {1, 2, 3} to x[1, 0], x[0, 1], x[1, 2] */
    expect_close(x->grad, ((double[]){0, 2, 0, 1, 0, 3}), 6, 0, 0, "dx axis 0");
    ag_graph_reset(g);

    /* the middle axis of [2, 3, 2], all negative */
    x = ag_tensor_from(g, AG_SHAPE(2, 3, 2), (ag_real[]){-5, -1, -3, -4, -2, -6, -9, -8, -7, -9, -8, -7});
    ag_set_requires_grad(x, 1);
    y = ag_max(g, x, -2, 0);
    expect_shape(y, 2, 2);
    expect_close(y->data, ((double[]){-2, -1, -7, -7}), 4, 0, 0, "middle");
    backward_weighted(g, y); /* dy = {1, 2, 3, 4} */
    expect_close(x->grad, ((double[]){0, 2, 0, 0, 1, 0, 0, 0, 3, 0, 0, 4}), 12, 0, 0, "dx middle");
    ag_graph_free(g);
}

Test(reduce, max_tie_goes_to_the_first_maximal_element)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(5), (ag_real[]){3, 1, 3, -1, 3});
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_max(g, x, 0, 0);
    cr_assert_eq(y->ndim, 0);
    cr_assert_eq(y->data[0], 3);
    cr_assert_eq(ag_backward(g, y), AG_OK, "%s", ag_graph_error(g));
    expect_close(x->grad, ((double[]){1, 0, 0, 0, 0}), 5, 0, 0, "dx");
    ag_graph_reset(g);
    /* all -inf: the max is -inf and the first element takes the gradient */
    x = ag_tensor_from(g, AG_SHAPE(3), (ag_real[]){-INFINITY, -INFINITY, -INFINITY});
    ag_set_requires_grad(x, 1);
    y = ag_max(g, x, 0, 1);
    expect_shape(y, 1);
    cr_assert(isinf(y->data[0]) && y->data[0] < 0);
    backward_weighted(g, y);
    expect_close(x->grad, ((double[]){1, 0, 0}), 3, 0, 0, "dx -inf");
    ag_graph_free(g);
}

Test(reduce, max_with_nan_returns_the_first_nan)
{
    ag_graph *g = ag_graph_new();
    /* rows: a NaN after the max, a NaN first, no NaN */
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3, 4), (ag_real[]){1, 7, NAN, NAN, NAN, 9, 2, NAN, 0, 2, 1, 2});
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_max(g, x, 1, 0);
    expect_shape(y, 3);
    cr_assert(isnan(y->data[0]));
    cr_assert(isnan(y->data[1]));
    cr_assert_eq(y->data[2], 2);
    backward_weighted(g, y); /* dy = {1, 2, 3} */
    expect_close(x->grad, ((double[]){0, 0, 1, 0, 2, 0, 0, 0, 0, 3, 0, 0}), 12, 0, 0, "dx");
    ag_graph_free(g);
}

Test(reduce, max_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 0));
    cr_assert_null(ag_max(g, x, 1, 0));
    expect_error(g, AG_ERR_SHAPE, "max: axis of size 0: axis 1 of [2, 0]");
    /* over a non-empty axis of a zero-size tensor: an empty result */
    x = ag_tensor_new(g, AG_SHAPE(2, 0));
    ag_tensor *y = ag_max(g, x, 0, 0);
    expect_shape(y, 0);
    x = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_max(g, x, -3, 0));
    expect_error(g, AG_ERR_ARG, "max: axis -3 out of range for [2, 3]");
    x = ag_scalar(g, 1);
    cr_assert_null(ag_max(g, x, 0, 0));
    expect_error(g, AG_ERR_ARG, "max: axis 0 out of range for []");
    cr_assert_null(ag_max(g, NULL, 0, 0));
    expect_error(g, AG_ERR_ARG, "max: input 0 is NULL");
    ag_graph_free(g);
}

Test(reduce, ops_on_a_graph_in_error_do_nothing)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = x23(g);
    cr_assert_null(ag_max(g, x, 5, 0));
    int nodes = ag_graph_node_count(g);
    cr_assert_null(ag_mean(g, x, 0, 0));
    cr_assert_null(ag_mean_all(g, x));
    cr_assert_null(ag_max(g, x, 0, 0));
    cr_assert_null(ag_sum(g, x, 0, 0));
    cr_assert_eq(ag_graph_node_count(g), nodes);
    cr_assert_str_eq(ag_graph_error(g), "max: axis 5 out of range for [2, 3]");
    ag_graph_free(g);
}

/* A sum over the last axis adds each row in 16 partial sums and a fixed
 * tree, in every instruction set's kernel: each level gives the
 * baseline's bits, for rows shorter than, equal to and longer than 16
 * values, with and without a remainder. */
Test(reduce, sum_rows_give_the_baselines_bits_on_every_level)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512", "neon"};
    static const int lengths[] = {1, 5, 16, 17, 32, 63, 128, 300};
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        int n = lengths[k], rows = 3;
        ag_graph *g = ag_graph_new();
        ag_tensor *x = ag_tensor_new(g, 2, (int[]){rows, n});
        for (int i = 0; i < rows * n; i++) x->data[i] = (ag_real)(sin(1.7 * i + n) * 3 + 0.1 / (1 + i));
        ag_real base[3];
        cr_assert_str_eq(ag__isa_force("baseline"), "baseline");
        memcpy(base, ag_sum(g, x, -1, 0)->data, sizeof base);
        for (int l = 1; l < 4; l++) {
            if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
            ag_tensor *y = ag_sum(g, x, -1, 0);
            cr_assert_not_null(y, "%s", ag_graph_error(g));
            for (int r = 0; r < rows; r++)
                cr_assert(memcmp(&y->data[r], &base[r], sizeof base[r]) == 0, "%s, rows of %d: row %d = %a, baseline %a",
                          levels[l], n, r, (double)y->data[r], (double)base[r]);
        }
        ag__isa_force(NULL);
        ag_graph_free(g);
    }
}

/* ---- gradient checks (double only) ----------------------------------------- */

#ifdef AG_DOUBLE
Test(reduce, gradcheck_sum) { expect_op_gradcheck("sum"); }
Test(reduce, gradcheck_mean) { expect_op_gradcheck("mean"); }
Test(reduce, gradcheck_max) { expect_op_gradcheck("max"); }
#endif
