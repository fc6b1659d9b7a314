/* tests/test_cross_entropy.c: fused log-softmax + NLL, ignore_index and
 * label smoothing.  Expected values: Python, from log-softmax directly,
 * with PyTorch's label-smoothing formula (1 - ls) nll + ls mean_v(-log p_v). */
#include "common.h"

/* logits [[1, 2, 3], [1, 0, -1]]; log_softmax row 0 = x - 3.40760596...,
 * row 1 = x - 1.40760596... */
static const ag_real L23[] = {1, 2, 3, 1, 0, -1};

static ag_tensor *logits23(ag_graph *g)
{
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), L23);
    ag_set_requires_grad(x, 1);
    return x;
}

/* ag_cross_entropy of logits23 for targets t: the loss, a scalar, and
 * d loss / d logits against the values from Python. */
static void expect_loss23(ag_graph *g, const int t[2], int ignore_index, double label_smoothing, double want,
                          const double dx[6])
{
    ag_tensor *x = logits23(g);
    ag_tensor *loss = ag_cross_entropy(g, x, t, ignore_index, label_smoothing);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    cr_assert_eq(loss->ndim, 0);
    expect_close(loss->data, &want, 1, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "loss");
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    expect_close(x->grad, dx, 6, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "dlogits");
}

Test(cross_entropy, two_rows_by_hand)
{
    ag_graph *g = ag_graph_new();
    /* loss (-log p[0][1] - log p[1][2]) / 2 = (1.40760596 + 2.40760596) / 2;
     * dlogits (softmax - onehot) / 2 */
    const double dx[] = {0.04501528658519023, -0.37763576447260117, 0.3326204778874109,
                         0.3326204778874109,  0.12236423552739882,  -0.4549847134148098};
    expect_loss23(g, (const int[]){1, 2}, -100, 0, 1.9076059644443806, dx);
    ag_graph_free(g);
}

Test(cross_entropy, label_smoothing_matches_pytorch_formula)
{
    ag_graph *g = ag_graph_new();
    /* row 0: 0.9 * 1.4076 + 0.1 * mean(2.4076, 1.4076, 0.4076) = 1.4076...
     * row 1: 0.9 * 2.4076 + 0.1 * 1.4076 = 2.3076...;  mean 1.8576...;
     * dlogits (softmax - 0.9 onehot - 0.1 / 3) / 2 */
    const double dx[] = {0.028348619918523565, -0.34430243113926784, 0.31595381122074423,
                         0.31595381122074423,  0.10569756886073216,  -0.42165138008147646};
    expect_loss23(g, (const int[]){1, 2}, -100, 0.1, 1.8576059644443803, dx);
    ag_graph_free(g);
}

Test(cross_entropy, ignored_rows_do_not_count)
{
    ag_graph *g = ag_graph_new();
    const double dx[] = {0.09003057317038046, -0.7552715289452023, 0.6652409557748218, 0, 0, 0};
    expect_loss23(g, (const int[]){1, -100}, -100, 0, 1.4076059644443804, dx);

    /* any ignore_index value, with smoothing: only row 1 counts */
    ag_graph_reset(g);
    const double dx2[] = {0, 0, 0, 0.6319076224414885, 0.21139513772146432, -0.8433027601629529};
    expect_loss23(g, (const int[]){5, 2}, 5, 0.1, 2.3076059644443805, dx2);
    ag_graph_free(g);
}

Test(cross_entropy, every_target_ignored_gives_zero_loss_and_gradient)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = logits23(g);
    int t[] = {-100, -100};
    ag_tensor *loss = ag_cross_entropy(g, x, t, -100, 0.1);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    cr_assert_eq(loss->data[0], 0);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert_eq(x->grad[i], 0, "dx[%d] = %g", i, (double)x->grad[i]);
    ag_graph_free(g);
}

Test(cross_entropy, huge_logits_stay_finite)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1e4, -1e4, 0, -1e4, 1e4, 1e4}));
    ag_set_requires_grad(x, 1);
    int t[] = {1, 2};
    ag_tensor *loss = ag_cross_entropy(g, x, t, -100, 0);
    /* row 0: lse = 1e4, -log p = 2e4; row 1: lse = 1e4 + log 2, -log p = log 2 */
    cr_assert(isfinite(loss->data[0]), "loss = %g", (double)loss->data[0]);
    expect_close(loss->data, ((double[]){(2e4 + log(2.0)) / 2}), 1, 0, TOL(1e-14, 1e-7), "loss");
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert(isfinite(x->grad[i]), "dx[%d] = %g", i, (double)x->grad[i]);
    expect_close(x->grad, ((double[]){0.5, -0.5, 0, 0, 0.25, -0.25}), 6, TOL(1e-14, 1e-7), 0, "dlogits");
    ag_graph_free(g);
}

Test(cross_entropy, leading_axes_give_a_scalar)
{
    ag_graph *g = ag_graph_new();
    /* [2, 1, 3]: the same two rows as logits23 */
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 1, 3), L23);
    int t[] = {1, 2};
    ag_tensor *loss = ag_cross_entropy(g, x, t, -100, 0);
    cr_assert_eq(loss->ndim, 0);
    cr_assert_eq(loss->size, 1);
    expect_close(loss->data, ((double[]){1.9076059644443806}), 1, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "loss");
    /* one class: log p = 0, the loss is 0 */
    ag_tensor *one = ag_tensor_from(g, AG_SHAPE(3, 1), ((ag_real[]){-5, 0, 7}));
    int z[] = {0, 0, 0};
    loss = ag_cross_entropy(g, one, z, -100, 0);
    cr_assert_float_eq((double)loss->data[0], 0, 1e-12);
    ag_graph_free(g);
}

/* A row's loss and gradient are the same bits whether it comes alone or
 * among others (the forward takes rows sixteen at a time, the backward a
 * piece at a time): 37 rows, two sixteens and a rest, one of them
 * ignored, against each row alone; the gradient both stored and added. */
Test(cross_entropy, a_row_among_others_is_the_row_alone)
{
    enum { R = 37 };
    const int widths[] = {5, 64};
    ag_graph *g = ag_graph_new();
    for (int w = 0; w < 2; w++) {
        int V = widths[w], t[R];
        ag_real x[R * 64];
        uint32_t u = 12345;
        for (int i = 0; i < R * V; i++) u = u * 1664525u + 1013904223u, x[i] = (ag_real)((u >> 8) % 8001) / 1000 - 4;
        for (int r = 0; r < R; r++) t[r] = r == 20 ? -100 : (r * 7) % V;
        ag_graph_reset(g);
        ag_tensor *all = ag_tensor_from(g, AG_SHAPE(R, V), x);
        ag_set_requires_grad(all, 1);
        ag_tensor *each = ag_cross_entropy_ex(g, all, t, -100, 0.1, AG_REDUCTION_NONE);
        /* twice, so that the second backward adds into the first's dx */
        ag_tensor *total = ag_add(g, ag_cross_entropy_ex(g, all, t, -100, 0.1, AG_REDUCTION_SUM),
                                  ag_cross_entropy_ex(g, all, t, -100, 0.1, AG_REDUCTION_SUM));
        cr_assert_not_null(each, "%s", ag_graph_error(g));
        cr_assert_eq(ag_backward(g, total), AG_OK, "%s", ag_graph_error(g));
        for (int r = 0; r < R; r++) {
            ag_tensor *one = ag_tensor_from(g, AG_SHAPE(1, V), x + r * V);
            ag_set_requires_grad(one, 1);
            ag_tensor *loss = ag_cross_entropy_ex(g, one, t + r, -100, 0.1, AG_REDUCTION_SUM);
            ag_tensor *again = ag_cross_entropy_ex(g, one, t + r, -100, 0.1, AG_REDUCTION_SUM);
            cr_assert_eq(ag_backward(g, ag_add(g, loss, again)), AG_OK, "%s", ag_graph_error(g));
            cr_assert(memcmp(&each->data[r], &loss->data[0], sizeof(ag_real)) == 0,
                      "V=%d row %d: loss %.17g among others, %.17g alone", V, r, (double)each->data[r],
                      (double)loss->data[0]);
            cr_assert(memcmp(all->grad + r * V, one->grad, (size_t)V * sizeof(ag_real)) == 0,
                      "V=%d row %d: gradient differs from the row's alone", V, r);
        }
    }
    ag_graph_free(g);
}

Test(cross_entropy, bad_targets_and_shapes_are_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(4, 3));
    int t[] = {0, 2, 7, 1};
    cr_assert_null(ag_cross_entropy(g, x, t, -100, 0));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: target 7 at position 2 out of range [0, 3)");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(4, 3));
    int neg[] = {0, -1, -100, 1}; /* -1 is not the ignore_index here */
    cr_assert_null(ag_cross_entropy(g, x, neg, -100, 0));
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: target -1 at position 1 out of range [0, 3)");

    ag_graph_reset(g);
    cr_assert_null(ag_cross_entropy(g, ag_scalar(g, 1), t, -100, 0));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: logits must be [..., V] with V >= 1, got []");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(4, 3));
    cr_assert_null(ag_cross_entropy(g, x, t, -100, 1.5));
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: label_smoothing = 1.5 must be in [0, 1]");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(4, 3));
    cr_assert_null(ag_cross_entropy(g, x, NULL, -100, 0));
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: targets is NULL for logits [4, 3]");

    ag_graph_reset(g);
    cr_assert_null(ag_cross_entropy(g, NULL, t, -100, 0));
    cr_assert_str_eq(ag_graph_error(g), "cross_entropy: input 0 is NULL");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(cross_entropy, gradcheck) { expect_op_gradcheck("cross_entropy"); }
#endif
