/* tests/test_gelu.c: GELU's erf form (ops/gelu.c) in a graph: the slope
 * Phi(x) + x phi(x) that its forward keeps for backward, only when y will
 * be differentiated, and the gradient buffer that backward may give to
 * both y and its input, which GELU's backward turns from dy into dx in
 * place.
 *
 * Expected values by hand with Python's math module, e.g. for
 * L = sum(gelu(h)) + sum(h h), h = 2 x:
 *   python3 -c "import math; Phi=lambda x: math.erfc(-x/math.sqrt(2))/2;
 *     phi=lambda x: math.exp(-x*x/2)/math.sqrt(2*math.pi);
 *     print([2*(Phi(h)+h*phi(h)+2*h) for h in (-3,-1,0.5,2,5)])"
 * The op's values and gradient on their own are in
 * tests/test_elementwise.c, the float kernel's error bounds in
 * tests/test_fastmath.c. */
#include "common.h"

#include <string.h>

enum { N = 5 };
static const ag_real xs[N] = {-1.5, -0.5, 0.25, 1, 2.5};
/* dL/dh = gelu'(h) + 2 h and dL/dx = 2 dL/dh, at h = 2 x */
static const double want_dh[N] = {-6.011945647204184, -2.0833154705876864, 1.8674951246561629, 5.085231801078197,
                                  11.000007146946002};
static const double want_dx[N] = {-12.023891294408369, -4.166630941175373, 3.7349902493123257, 10.170463602156394,
                                  22.000014293892004};

/* L = sum(gelu(h)) + sum(h h), h = 2 x: h has two consumers, the gelu the
 * newer one when gelu_last. */
static ag_tensor *build(ag_graph *g, bool gelu_last, ag_tensor **x, ag_tensor **h, ag_tensor **y)
{
    *x = ag_tensor_from(g, AG_SHAPE(N), xs);
    ag_set_requires_grad(*x, 1);
    *h = ag_scale(g, *x, 2);
    ag_tensor *sq = gelu_last ? ag_mul(g, *h, *h) : NULL;
    *y = ag_gelu(g, *h);
    if (!gelu_last) sq = ag_mul(g, *h, *h);
    return ag_add(g, ag_sum_all(g, *y), ag_sum_all(g, sq));
}

/* Newest consumer of h, the gelu turns dy into dh in y's buffer, which
 * then is h's (y shows no gradient of its own, as a reshape that passed
 * its buffer on); built first, it adds into h's own buffer.  The same
 * gradients either way, and twice them after a second backward. */
Test(gelu, backward_in_its_output_buffer_or_into_its_input)
{
    for (int last = 0; last <= 1; last++) {
        ag_graph *g = ag_graph_new();
        ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
        ag_tensor *x, *h, *y, *loss = build(g, last, &x, &h, &y);
        cr_assert_not_null(loss, "%s", ag_graph_error(g));
        cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
        expect_close(h->grad, want_dh, N, TOL(1e-13, 1e-5), TOL(1e-14, 1e-6), last ? "dh (gelu last)" : "dh");
        expect_close(x->grad, want_dx, N, TOL(1e-13, 1e-5), TOL(1e-14, 1e-6), last ? "dx (gelu last)" : "dx");
        if (last) cr_assert_null(y->grad, "y's buffer went to h: y->grad should read NULL");
        else
            for (int i = 0; i < N; i++) cr_assert_eq(y->grad[i], 1, "dL/dy[%d] = %g", i, (double)y->grad[i]);
        cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
        double twice[N];
        for (int i = 0; i < N; i++) twice[i] = 2 * want_dx[i];
        expect_close(x->grad, twice, N, TOL(1e-13, 1e-5), TOL(1e-14, 1e-6), "dx after two calls");
        expect_close(h->grad, want_dh, N, TOL(1e-13, 1e-5), TOL(1e-14, 1e-6), "dh of the second call");
        ag_graph_free(g);
    }
}

/* ag_retain_grad on y keeps dL/dy = 1 although y's buffer turns into h's. */
Test(gelu, retained_output_gradient_survives_the_in_place_backward)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x, *h, *y, *loss = build(g, true, &x, &h, &y);
    cr_assert_not_null(loss, "%s", ag_graph_error(g));
    ag_retain_grad(y);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    cr_assert_not_null(y->grad);
    for (int i = 0; i < N; i++) cr_assert_eq(y->grad[i], 1, "retained dL/dy[%d] = %g", i, (double)y->grad[i]);
    expect_close(x->grad, want_dx, N, TOL(1e-13, 1e-5), TOL(1e-14, 1e-6), "dx");
    ag_graph_free(g);
}

/* The arena bytes one gelu of n values takes, and its output's values. */
static size_t gelu_bytes(ag_graph *g, const ag_real *v, size_t n, bool requires_grad, ag_real *out)
{
    ag_graph_reset(g);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE((int)n), v);
    cr_assert_not_null(x, "%s", ag_graph_error(g));
    ag_set_requires_grad(x, requires_grad);
    size_t before = ag_graph_arena_used(g);
    ag_tensor *y = ag_gelu(g, x);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    memcpy(out, y->data, n * sizeof *out);
    return ag_graph_arena_used(g) - before;
}

/* The slope costs n values of the arena where y will be differentiated,
 * nothing where it will not (x without requires_grad, or no-grad mode);
 * y has the same bits in every case. */
Test(gelu, keeps_its_slope_only_for_backward)
{
    enum { M = 4096 };
    ag_real *v = malloc(M * sizeof *v), *y0 = malloc(M * sizeof *v), *y1 = malloc(M * sizeof *v),
            *y2 = malloc(M * sizeof *v);
    cr_assert(v && y0 && y1 && y2);
    for (int i = 0; i < M; i++) v[i] = (ag_real)(-16 + 24.0 * i / M);
    ag_graph *g = ag_graph_new();
    size_t train = gelu_bytes(g, v, M, true, y0), plain = gelu_bytes(g, v, M, false, y1);
    ag_graph_set_grad(g, 0);
    size_t infer = gelu_bytes(g, v, M, true, y2);
    if (ag_get_kernels() == AG_KERNELS_FAST) /* the kernel room's GELU keeps its slope for backward */
        cr_assert_geq(train, plain + M * sizeof(ag_real), "with grad %zu bytes, without %zu", train, plain);
    else /* the reference recomputes dy/dx in backward: nothing kept */
        cr_assert_eq(train, plain, "with grad %zu bytes, without %zu", train, plain);
    cr_assert_lt(plain, M * sizeof(ag_real) * 2, "no slope to keep, yet %zu bytes", plain);
    cr_assert_leq(infer, plain, "no-grad mode took %zu bytes, a gelu without grad %zu", infer, plain);
    cr_assert(memcmp(y0, y1, M * sizeof *y0) == 0 && memcmp(y0, y2, M * sizeof *y0) == 0,
              "y differs with and without its slope");
    ag_graph_free(g);
    free(v), free(y0), free(y1), free(y2);
}
