/* tests/test_reduction.c: cross-entropy's reduction none | mean | sum
 * (ag_cross_entropy_ex).  The per-row losses by hand (Python, from
 * log-softmax); mean and sum must be their mean and sum; a bad reduction
 * is an error naming it.  PyTorch parity: tests/test_parity_options.c. */
#include "common.h"

/* logits [[1, 2, 3], [1, 0, -1], [0, 0, 0]], targets (1, 2, ignored) */
static const ag_real X[] = {1, 2, 3, 1, 0, -1, 0, 0, 0};
static const int TARGETS[] = {1, 2, -100};

static ag_tensor *logits(ag_graph *g)
{
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3, 3), X);
    ag_set_requires_grad(x, 1);
    return x;
}

Test(reduction, none_gives_per_row_losses_and_their_gradients)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = logits(g);
    ag_tensor *y = ag_cross_entropy_ex(g, x, TARGETS, -100, 0, AG_REDUCTION_NONE);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    expect_shape(y, 3);
    /* -log p: row 0 target 1: 3.40760596 - 2; row 1 target 2: 1.40760596 + 1; row 2 ignored */
    expect_close(y->data, ((double[]){1.4076059644443804, 2.4076059644443806, 0}), 3, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "loss");
    /* weigh row 0 by 2 and row 1 by -1: dx = 2 (p0 - e1) and -(p1 - e2) */
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(3), (ag_real[]){2, -1, 5});
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, w))), AG_OK, "%s", ag_graph_error(g));
    const double dx[] = {2 * 0.09003057317038046, 2 * (0.24472847105479764 - 1), 2 * 0.6652409557748219,
                         -0.6652409557748219,     -0.24472847105479764,         -(0.09003057317038046 - 1),
                         0,                       0,                            0};
    expect_close(x->grad, dx, 9, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "dlogits");
    ag_graph_free(g);
}

Test(reduction, mean_and_sum_of_the_rows)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *none = ag_cross_entropy_ex(g, logits(g), TARGETS, -100, 0.1, AG_REDUCTION_NONE);
    ag_tensor *mean = ag_cross_entropy_ex(g, logits(g), TARGETS, -100, 0.1, AG_REDUCTION_MEAN);
    ag_tensor *sum = ag_cross_entropy_ex(g, logits(g), TARGETS, -100, 0.1, AG_REDUCTION_SUM);
    ag_tensor *old = ag_cross_entropy(g, logits(g), TARGETS, -100, 0.1);
    cr_assert(none && mean && sum && old, "%s", ag_graph_error(g));
    cr_assert_eq(mean->ndim, 0);
    cr_assert_eq(sum->ndim, 0);
    double total = (double)none->data[0] + (double)none->data[1];
    cr_assert_float_eq((double)sum->data[0], total, TOL(1e-14, 1e-6));
    cr_assert_float_eq((double)mean->data[0], total / 2, TOL(1e-14, 1e-6)); /* 2 rows count */
    cr_assert_eq(old->data[0], mean->data[0], "ag_cross_entropy is the mean");
    ag_graph_free(g);
}

Test(reduction, a_bad_reduction_is_an_error)
{
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_cross_entropy_ex(g, logits(g), TARGETS, -100, 0, (ag_reduction)9));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: reduction 9 is not mean (0), sum (1) or none (2)");
    ag_graph_free(g);
}
