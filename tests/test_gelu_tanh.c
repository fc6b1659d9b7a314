/* tests/test_gelu_tanh.c: GPT-2's tanh form of GELU (ops/gelu_tanh.c).
 *
 * Expected values by hand with Python's math module (the same libm), e.g.
 *   python3 -c "import math; k=math.sqrt(2/math.pi);
 *     print([0.5*x*(1+math.tanh(k*(x+0.044715*x**3))) for x in (-3,-1.5,-0.5,0,0.5,1,2)])"
 * and the derivative 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) the same
 * way.  Gradients by hand come from L = sum(y), so dx is the derivative;
 * the finite-difference cases of the op (double) run too. */
#include "common.h"

Test(gelu_tanh, forward_and_backward_by_hand)
{
    static const ag_real x[] = {-3, -1.5, -0.5, 0, 0.5, 1, 2};
    static const double y[] = {-0.0036373920817729943, -0.10042842301976707, -0.15428599017485606, 0,
                               0.34571400982514394,    0.8411919906082768,   1.954597694087775};
    static const double dy[] = {-0.011584166630969516, -0.1277107931514331, 0.13263009646535764, 0.5,
                                0.8673699035346424,    1.0829640838457826,  1.0860992566236183};
    ag_graph *g = ag_graph_new();
    ag_tensor *t = ag_tensor_from(g, AG_SHAPE(7), x);
    ag_set_requires_grad(t, 1);
    ag_tensor *out = ag_gelu_tanh(g, t);
    cr_assert_not_null(out, "%s", ag_graph_error(g));
    cr_assert_eq(out->op, AG_OP_GELU_TANH);
    cr_assert_str_eq(ag_op_name(AG_OP_GELU_TANH), "gelu_tanh");
    expect_close(out->data, y, 7, TOL(1e-15, 1e-7), TOL(1e-14, 1e-6), "y");
    cr_assert_eq(ag_backward(g, ag_sum_all(g, out)), AG_OK, "%s", ag_graph_error(g));
    expect_close(t->grad, dy, 7, TOL(1e-15, 1e-7), TOL(1e-14, 1e-6), "dx");
    ag_graph_free(g);
}

Test(gelu_tanh, differs_from_the_erf_form_by_less_than_5e_4)
{
    /* the approximation's error peaks near |x| = 2.4 at about 4.7e-4 */
    ag_graph *g = ag_graph_new();
    ag_real x[121];
    for (int i = 0; i < 121; i++) x[i] = (ag_real)(-6 + 0.1 * i);
    ag_tensor *t = ag_tensor_from(g, AG_SHAPE(121), x);
    ag_tensor *a = ag_gelu_tanh(g, t), *b = ag_gelu(g, t);
    cr_assert(a && b, "%s", ag_graph_error(g));
    double worst = 0;
    for (int i = 0; i < 121; i++) worst = worse_of(worst, fabs((double)a->data[i] - (double)b->data[i]));
    cr_assert_lt(worst, 5e-4, "max |gelu_tanh - gelu| = %g", worst);
    cr_assert_gt(worst, 1e-4, "max |gelu_tanh - gelu| = %g: the two forms are not different ops", worst);
    ag_graph_free(g);
}

Test(gelu_tanh, far_from_zero_it_is_x_or_zero_and_its_gradient_finite)
{
    /* x (1 + c x^2) overflows the exponential at |x| = 1e4: y = x (or -0) */
    static const ag_real x[] = {-1e4, -30, 30, 1e4};
    ag_graph *g = ag_graph_new();
    ag_tensor *t = ag_tensor_from(g, AG_SHAPE(4), x);
    ag_set_requires_grad(t, 1);
    ag_tensor *y = ag_gelu_tanh(g, t);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    expect_close(y->data, ((double[]){0, 0, 30, 1e4}), 4, 1e-30, 0, "y");
    expect_close(t->grad, ((double[]){0, 0, 1, 1}), 4, 1e-30, 0, "dx");
    ag_graph_free(g);
}

/* L = sum(gelu_tanh(h)) + sum(h h), h = 2 x: dL/dx = 2 (gelu_tanh'(h) + 2 h).
 * With the gelu_tanh as h's newest consumer, backward gives it h's buffer
 * and it turns dy into dh there (y->grad then reads NULL); built first, it
 * adds into h's own.  The same gradient either way. */
Test(gelu_tanh, backward_in_its_output_buffer_or_into_its_input)
{
    static const ag_real xs[] = {-1.5, -0.5, 0.25, 1, 2.5};
    static const double want[] = {-12.023168333261939, -4.165928167691565, 3.7347398070692845, 10.172198513247237,
                                  22.000003092723976};
    for (int last = 0; last <= 1; last++) {
        ag_graph *g = ag_graph_new();
        ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
        ag_tensor *x = ag_tensor_from(g, AG_SHAPE(5), xs);
        ag_set_requires_grad(x, 1);
        ag_tensor *h = ag_scale(g, x, 2), *sq = last ? ag_mul(g, h, h) : NULL, *y = ag_gelu_tanh(g, h);
        if (!last) sq = ag_mul(g, h, h);
        ag_tensor *loss = ag_add(g, ag_sum_all(g, y), ag_sum_all(g, sq));
        cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
        expect_close(x->grad, want, 5, TOL(1e-13, 1e-5), TOL(1e-14, 1e-6), last ? "dx (gelu_tanh last)" : "dx");
        cr_assert(last ? y->grad == NULL : y->grad != NULL, "y->grad %s", y->grad ? "kept" : "NULL");
        ag_graph_free(g);
    }
}

Test(gelu_tanh, null_input_names_the_op)
{
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag_gelu_tanh(g, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "gelu_tanh: input 0 is NULL");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(gelu_tanh, gradcheck) { expect_op_gradcheck("gelu_tanh"); }
#endif
