/* tests/test_elementwise.c: sub, div, scale, shift, neg, exp, log, sqrt,
 * tanh, relu, gelu.
 *
 * Expected values were computed by hand with Python's math module (the same
 * libm functions), e.g.
 *   python3 -c "import math; print([v*0.5*(1+math.erf(v/math.sqrt(2))) for v in (-1.5,-0.5,0,0.5,1,2)])"
 * Gradients by hand are checked with L = sum(y), so dL/dy = 1 and dx is the
 * derivative itself; finite-difference checks (double only) run each op's
 * built-in cases. */
#include <string.h>

#include "common.h"
#include "core/internal.h"

/* A leaf of the given shape and values that requires grad. */
static ag_tensor *leaf(ag_graph *g, int ndim, const int *shape, const ag_real *v)
{
    ag_tensor *t = ag_tensor_from(g, ndim, shape, v);
    cr_assert_not_null(t, "%s", ag_graph_error(g));
    ag_set_requires_grad(t, 1);
    return t;
}

/* Backward of L = sum(y). */
static void backward_sum(ag_graph *g, ag_tensor *y)
{
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
}

/* ---- sub ----------------------------------------------------------------- */

Test(elementwise, sub_forward_and_backward_broadcast)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = leaf(g, AG_SHAPE(2, 3), (ag_real[]){1.5, -2, 0.25, 4, 3, -1});
    ag_tensor *b = leaf(g, AG_SHAPE(3), (ag_real[]){0.5, 1, -2});
    ag_tensor *y = ag_sub(g, a, b); /* [2, 3] - [3]: b is stretched over rows */
    expect_shape(y, 2, 3);
    cr_assert_eq(y->op, AG_OP_SUB);
    expect_close(y->data, ((double[]){1, -3, 2.25, 3.5, 2, 1}), 6, TOL(1e-15, 1e-6), 0, "y");
    backward_sum(g, y);
    /* dL/da = 1; dL/db = -(number of rows it was stretched over) = -2 */
    expect_close(a->grad, ((double[]){1, 1, 1, 1, 1, 1}), 6, 0, 0, "da");
    expect_close(b->grad, ((double[]){-2, -2, -2}), 3, 0, 0, "db");
    ag_graph_free(g);
}

/* A bias row added to every row, on either side, on one thread and on
 * two (each taking a piece of the rows, however small the tensor): rows
 * of 19 (not a whole number of vectors), 37 of them; and the rows of a
 * [2, 3, 4] + [3, 4] (runs of 12). */
Test(elementwise, add_of_a_row_stretched_over_rows)
{
    enum { R = 37, C = 19 };
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(R, C)), *bias = ag_tensor_new(g, AG_SHAPE(C));
    for (int i = 0; i < R * C; i++) x->data[i] = (ag_real)(0.25 * i - 40);
    for (int c = 0; c < C; c++) bias->data[c] = (ag_real)(1.5 * c + 0.125);
    size_t min_work = ag__thread_min_work;
    for (int threads = 1; threads <= 2; threads++) {
        ag_set_threads(threads);
        ag__thread_min_work = threads == 1 ? min_work : 1;
        ag_tensor *right = ag_add(g, x, bias), *left = ag_add(g, bias, x);
        cr_assert_not_null(left, "%s", ag_graph_error(g));
        expect_shape(left, R, C);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                ag_real want = (ag_real)(0.25 * (r * C + c) - 40 + (1.5 * c + 0.125)); /* exact in binary */
                cr_assert(right->data[r * C + c] == want && left->data[r * C + c] == want,
                          "%d threads, [%d, %d]: %g and %g, want %g", threads, r, c, (double)right->data[r * C + c],
                          (double)left->data[r * C + c], (double)want);
            }
    }
    ag_set_threads(1);
    ag__thread_min_work = min_work;
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 3, 4)), *b = ag_tensor_new(g, AG_SHAPE(3, 4));
    for (int i = 0; i < 24; i++) a->data[i] = (ag_real)(100 * (i / 12));
    for (int i = 0; i < 12; i++) b->data[i] = (ag_real)i;
    ag_tensor *y = ag_add(g, a, b);
    for (int i = 0; i < 24; i++) cr_assert_eq(y->data[i], (ag_real)(100 * (i / 12) + i % 12), "y[%d]", i);
    ag_graph_free(g);
}

Test(elementwise, sub_of_a_tensor_from_itself_has_zero_gradient)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(2), (ag_real[]){3, -7});
    ag_tensor *y = ag_sub(g, x, x);
    expect_close(y->data, ((double[]){0, 0}), 2, 0, 0, "y");
    backward_sum(g, y); /* +1 from a, -1 from b: both contributions accumulate */
    expect_close(x->grad, ((double[]){0, 0}), 2, 0, 0, "dx");
    ag_graph_free(g);
}

Test(elementwise, sub_shapes_that_do_not_broadcast)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 3));
    ag_tensor *b = ag_tensor_new(g, AG_SHAPE(4));
    cr_assert_null(ag_sub(g, a, b));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "sub: shapes do not broadcast: [2, 3] and [4] (axis -1: 3 vs 4)");
    ag_graph_free(g);
}

/* ---- div ----------------------------------------------------------------- */

Test(elementwise, div_forward_and_backward_broadcast)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = leaf(g, AG_SHAPE(2, 1), (ag_real[]){3, -1.5});
    ag_tensor *b = leaf(g, AG_SHAPE(3), (ag_real[]){2, -4, 0.5});
    ag_tensor *y = ag_div(g, a, b); /* [2, 1] / [3] -> [2, 3]: both stretch */
    expect_shape(y, 2, 3);
    cr_assert_eq(y->op, AG_OP_DIV);
    expect_close(y->data, ((double[]){1.5, -0.75, 6, -0.75, 0.375, -3}), 6, TOL(1e-15, 1e-6), 0, "y");
    backward_sum(g, y);
    /* da_i = sum_j 1/b_j = 0.5 - 0.25 + 2;  db_j = -sum_i a_i / b_j^2 = -1.5 / b_j^2 */
    expect_close(a->grad, ((double[]){2.25, 2.25}), 2, TOL(1e-15, 1e-6), 0, "da");
    expect_close(b->grad, ((double[]){-0.375, -0.09375, -6}), 3, TOL(1e-15, 1e-6), 0, "db");
    ag_graph_free(g);
}

Test(elementwise, div_by_zero_follows_ieee)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(3), (ag_real[]){1, -1, 0});
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(1), (ag_real[]){0});
    ag_tensor *y = ag_div(g, a, b);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    cr_assert(isinf(y->data[0]) && y->data[0] > 0);
    cr_assert(isinf(y->data[1]) && y->data[1] < 0);
    cr_assert(isnan(y->data[2]));
    cr_assert_eq(ag_graph_status(g), AG_OK, "division by zero is not an error");
    ag_graph_free(g);
}

Test(elementwise, div_shapes_that_do_not_broadcast)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(3, 2));
    ag_tensor *b = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_null(ag_div(g, a, b));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "div: shapes do not broadcast: [3, 2] and [2, 3] (axis -2: 3 vs 2)");
    ag_graph_free(g);
}

/* ---- unary ops: forward and derivative on six chosen points -------------- */

typedef ag_tensor *(*unary_fn)(ag_graph *g, ag_tensor *x);

/* x [2, 3] -> y = f(x); y must equal want_y, and with L = sum(y) the
 * gradient must equal want_dx (the derivative of f at each x). */
static void check_unary(unary_fn f, int op, const ag_real *x, const double *want_y, const double *want_dx,
                        double tol)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *xt = leaf(g, AG_SHAPE(2, 3), x);
    ag_tensor *y = f(g, xt);
    expect_shape(y, 2, 3);
    cr_assert_eq(y->op, op, "op %d, want %s", y->op, ag_op_name(op));
    expect_close(y->data, want_y, 6, tol, tol, "y");
    backward_sum(g, y);
    expect_close(xt->grad, want_dx, 6, tol, tol, "dx");
    ag_graph_free(g);
}

static ag_tensor *scale_by_minus_half(ag_graph *g, ag_tensor *x) { return ag_scale(g, x, -0.5); }
static ag_tensor *shift_by_three_quarters(ag_graph *g, ag_tensor *x) { return ag_shift(g, x, 0.75); }

Test(elementwise, scale_forward_and_backward)
{
    check_unary(scale_by_minus_half, AG_OP_SCALE, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2},
                (double[]){0.75, 0.25, 0, -0.25, -0.5, -1}, (double[]){-0.5, -0.5, -0.5, -0.5, -0.5, -0.5},
                TOL(1e-15, 1e-7));
}

Test(elementwise, shift_forward_and_backward)
{
    check_unary(shift_by_three_quarters, AG_OP_SHIFT, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2},
                (double[]){-0.75, 0.25, 0.75, 1.25, 1.75, 2.75}, (double[]){1, 1, 1, 1, 1, 1}, TOL(1e-15, 1e-7));
}

Test(elementwise, neg_forward_and_backward)
{
    check_unary(ag_neg, AG_OP_NEG, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2}, (double[]){1.5, 0.5, 0, -0.5, -1, -2},
                (double[]){-1, -1, -1, -1, -1, -1}, TOL(1e-15, 1e-7));
}

Test(elementwise, exp_forward_and_backward)
{
    /* d exp(x) / dx = exp(x) */
    static const double e[] = {0.22313016014842982, 0.6065306597126334, 1.0,
                               1.6487212707001282,  2.718281828459045,  7.38905609893065};
    check_unary(ag_exp, AG_OP_EXP, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2}, e, e, TOL(1e-14, 1e-6));
}

Test(elementwise, log_forward_and_backward)
{
    check_unary(ag_log, AG_OP_LOG, (ag_real[]){0.5, 1, 2, 2.718281828459045, 10, 0.1},
                (double[]){-0.6931471805599453, 0, 0.6931471805599453, 1, 2.302585092994046, -2.3025850929940455},
                (double[]){2, 1, 0.5, 0.36787944117144233, 0.1, 10}, TOL(1e-14, 1e-6));
}

Test(elementwise, log_outside_its_domain_is_libm)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag_log(g, ag_tensor_from(g, AG_SHAPE(2), (ag_real[]){0, -1}));
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    cr_assert(isinf(y->data[0]) && y->data[0] < 0, "log(0) = %g, want -inf", (double)y->data[0]);
    cr_assert(isnan(y->data[1]), "log(-1) = %g, want NaN", (double)y->data[1]);
    cr_assert_eq(ag_graph_status(g), AG_OK);
    ag_graph_free(g);
}

Test(elementwise, sqrt_forward_and_backward)
{
    check_unary(ag_sqrt, AG_OP_SQRT, (ag_real[]){0.25, 1, 2, 4, 9, 0.5},
                (double[]){0.5, 1, 1.4142135623730951, 2, 3, 0.7071067811865476},
                (double[]){1, 0.5, 0.35355339059327373, 0.25, 0.16666666666666666, 0.7071067811865475},
                TOL(1e-14, 1e-6));
}

Test(elementwise, sqrt_gradient_at_zero_is_infinite)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = leaf(g, AG_SHAPE(1), (ag_real[]){0});
    ag_tensor *y = ag_sqrt(g, x);
    cr_assert_eq(y->data[0], 0);
    backward_sum(g, y);
    cr_assert(isinf(x->grad[0]) && x->grad[0] > 0, "dx = %g, want +inf", (double)x->grad[0]);
    ag_graph_free(g);
}

Test(elementwise, tanh_forward_and_backward)
{
    check_unary(ag_tanh, AG_OP_TANH, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2},
                (double[]){-0.9051482536448664, -0.46211715726000974, 0, 0.46211715726000974, 0.7615941559557649,
                           0.9640275800758169},
                (double[]){0.18070663892364858, 0.7864477329659274, 1, 0.7864477329659274, 0.41997434161402614,
                           0.07065082485316443},
                TOL(1e-14, 1e-6));
}

Test(elementwise, relu_forward_and_backward)
{
    /* the gradient at exactly 0 is 0, as in PyTorch */
    check_unary(ag_relu, AG_OP_RELU, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2}, (double[]){0, 0, 0, 0.5, 1, 2},
                (double[]){0, 0, 0, 1, 1, 1}, 0);
}

Test(elementwise, relu_keeps_nan)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag_relu(g, ag_tensor_from(g, AG_SHAPE(1), (ag_real[]){NAN}));
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    cr_assert(isnan(y->data[0]));
    ag_graph_free(g);
}

Test(elementwise, gelu_forward_and_backward)
{
    /* y = x Phi(x), dy/dx = Phi(x) + x phi(x) (the erf form, nn.GELU()) */
    check_unary(ag_gelu, AG_OP_GELU, (ag_real[]){-1.5, -0.5, 0, 0.5, 1, 2},
                (double[]){-0.10021080190328713, -0.15426876936299344, 0, 0.34573123063700656, 0.8413447460685429,
                           1.9544997361036416},
                (double[]){-0.12746919222997954, 0.13250487534383712, 0.5, 0.8674951246561629, 1.0833154705876864,
                           1.085231801078197},
                TOL(1e-14, 1e-6));
}

/* ---- NULL inputs --------------------------------------------------------- */

Test(elementwise, null_input_gives_null_and_names_the_op)
{
    static const struct {
        unary_fn f;
        const char *msg;
    } unary[] = {
        {scale_by_minus_half, "scale: input 0 is NULL"},
        {shift_by_three_quarters, "shift: input 0 is NULL"},
        {ag_neg, "neg: input 0 is NULL"},
        {ag_exp, "exp: input 0 is NULL"},
        {ag_log, "log: input 0 is NULL"},
        {ag_sqrt, "sqrt: input 0 is NULL"},
        {ag_tanh, "tanh: input 0 is NULL"},
        {ag_relu, "relu: input 0 is NULL"},
        {ag_gelu, "gelu: input 0 is NULL"},
    };
    ag_graph *g = ag_graph_new();
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
        ag_graph_reset(g);
        cr_assert_null(unary[i].f(g, NULL));
        cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
        cr_assert_str_eq(ag_graph_error(g), unary[i].msg);
    }
    ag_graph_reset(g);
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2));
    cr_assert_null(ag_sub(g, a, NULL));
    cr_assert_str_eq(ag_graph_error(g), "sub: input 1 is NULL");
    ag_graph_reset(g);
    a = ag_tensor_new(g, AG_SHAPE(2));
    cr_assert_null(ag_div(g, NULL, a));
    cr_assert_str_eq(ag_graph_error(g), "div: input 0 is NULL");
    /* on a graph already in error, a valid input also gives NULL */
    cr_assert_null(ag_exp(g, a));
    cr_assert_str_eq(ag_graph_error(g), "div: input 0 is NULL");
    ag_graph_free(g);
}

/* ---- finite-difference gradient checks (double only) --------------------- */

#ifdef AG_DOUBLE
Test(elementwise, sub_gradcheck) { expect_op_gradcheck("sub"); }
Test(elementwise, div_gradcheck) { expect_op_gradcheck("div"); }
Test(elementwise, scale_gradcheck) { expect_op_gradcheck("scale"); }
Test(elementwise, shift_gradcheck) { expect_op_gradcheck("shift"); }
Test(elementwise, neg_gradcheck) { expect_op_gradcheck("neg"); }
Test(elementwise, exp_gradcheck) { expect_op_gradcheck("exp"); }
Test(elementwise, log_gradcheck) { expect_op_gradcheck("log"); }
Test(elementwise, sqrt_gradcheck) { expect_op_gradcheck("sqrt"); }
Test(elementwise, tanh_gradcheck) { expect_op_gradcheck("tanh"); }
Test(elementwise, relu_gradcheck) { expect_op_gradcheck("relu"); }
Test(elementwise, gelu_gradcheck) { expect_op_gradcheck("gelu"); }
#endif
