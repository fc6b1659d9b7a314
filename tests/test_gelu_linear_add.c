/* tests/test_gelu_linear_add.c: gelu_linear_add = add(r, linear(gelu(h),
 * W, b)) as one op (ops/gelu_linear_add.c): its values by hand, the
 * three ops' values and gradients to the bit (gradients kept or dropped,
 * on every instruction set), its finite-difference check, and the memory
 * it does not keep. */
#include "common.h"
#include "core/internal.h"

#include <string.h>

Test(gelu_linear_add, by_hand)
{
    /* a = gelu(h) = h Phi(h): Phi(1) = 0.8413447460685429, Phi(-1.5) =
     * 0.0668072012688581 (python3: 0.5 * math.erfc(-h / math.sqrt(2)));
     * y = r + a W^T + b, W = [[1, 0], [0, -1]], b = [0, 0.5], r = [2, 3]:
     * y0 = 2 + 0.8413447460685429, y1 = 3 + 1.5 * 0.0668072012688581 + 0.5 */
    ag_graph *g = ag_graph_new();
    ag_tensor *h = ag_tensor_from(g, AG_SHAPE(1, 2), (const ag_real[]){1, -1.5});
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 2), (const ag_real[]){1, 0, 0, -1});
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2), (const ag_real[]){0, 0.5});
    ag_tensor *r = ag_tensor_from(g, AG_SHAPE(1, 2), (const ag_real[]){2, 3});
    ag_tensor *y = ag__gelu_linear_add(g, h, w, b, r);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    expect_shape(y, 1, 2);
    cr_assert_eq(y->op, AG_OP_GELU_LINEAR_ADD);
    expect_close(y->data, ((const double[]){2.8413447460685429, 3.5 + 1.5 * 0.0668072012688581}), 2,
                 TOL(1e-15, 1e-7), TOL(1e-14, 1e-6), "y");
    ag_graph_free(g);
}

Test(gelu_linear_add, backward_by_hand)
{
    /* h = [1], W = [[2]], no b, r = [0], L = y:  dL/dh = W gelu'(1) =
     * 2 (Phi(1) + phi(1)) = 2 (0.8413447460685429 + 0.24197072451914337),
     * dL/dW = gelu(1) = 0.8413447460685429, dL/dr = 1 */
    ag_graph *g = ag_graph_new();
    ag_tensor *h = ag_tensor_from(g, AG_SHAPE(1, 1), (const ag_real[]){1});
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(1, 1), (const ag_real[]){2});
    ag_tensor *r = ag_tensor_from(g, AG_SHAPE(1, 1), (const ag_real[]){0});
    ag_set_requires_grad(h, 1), ag_set_requires_grad(w, 1), ag_set_requires_grad(r, 1);
    ag_tensor *y = ag__gelu_linear_add(g, h, w, NULL, r);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK, "%s", ag_graph_error(g));
    expect_close(h->grad, ((const double[]){2 * (0.8413447460685429 + 0.24197072451914337)}), 1, TOL(1e-15, 1e-7),
                 TOL(1e-14, 1e-6), "dh");
    expect_close(w->grad, ((const double[]){0.8413447460685429}), 1, TOL(1e-15, 1e-7), TOL(1e-14, 1e-6), "dW");
    expect_close(r->grad, ((const double[]){1}), 1, TOL(0, 0), TOL(0, 0), "dr");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(gelu_linear_add, passes_its_gradient_check) { expect_op_gradcheck("gelu_linear_add"); }
#endif

/* L = sum(y * wt) + sum(x^2), h = linear(x) (what the MLP's first half
 * makes) and r = x, which also feeds a consumer made before y; fused or
 * gelu, linear_add. */
static ag_tensor *build(ag_graph *g, ag_store *s, int fused, ag_tensor **y)
{
    ag_tensor *x = ag_tanh(g, ag_store_find(s, "x")), *w1 = ag_store_find(s, "w1"), *w = ag_store_find(s, "w");
    ag_tensor *b = ag_store_find(s, "b"), *before = ag_sum_all(g, ag_mul(g, x, x));
    ag_tensor *h = ag__linear(g, x, w1, NULL);
    *y = fused ? ag__gelu_linear_add(g, h, w, b, x) : ag__linear_add(g, ag_gelu(g, h), w, b, x);
    ag_tensor *wt = ag_tensor_new(g, (*y)->ndim, (*y)->shape);
    for (size_t i = 0; i < wt->size; i++) wt->data[i] = (ag_real)(((int)(i * 7 % 11) - 5) * 0.1);
    return ag_add(g, ag_sum_all(g, ag_mul(g, *y, wt)), before);
}

static void same_as_the_three(int ndim, const int *xshape, int I, int bias)
{
    int C = xshape[ndim - 1];
    ag_store *s = ag_store_new();
    ag_init_uniform(ag_param(s, "x", ndim, xshape), -2, 2, 1);
    ag_init_uniform(ag_param(s, "w1", AG_SHAPE(I, C)), -1, 1, 4);
    ag_init_uniform(ag_param(s, "w", AG_SHAPE(C, I)), -1, 1, 2);
    if (bias) ag_init_uniform(ag_param(s, "b", AG_SHAPE(C)), -1, 1, 3);
    size_t n0, n1, b0, b1;
    for (int keep = 0; keep < 2; keep++) {
        ag_real *three = fused_outcome(s, build, 0, keep, &n0, &b0), *fused = fused_outcome(s, build, 1, keep, &n1, &b1);
        cr_assert_eq(n0, n1);
        for (size_t i = 0; i < n0; i++)
            cr_assert(memcmp(&three[i], &fused[i], sizeof *three) == 0, "keep %d: value %zu of %zu: %a, the three %a",
                      keep, i, n0, (double)fused[i], (double)three[i]);
        /* gelu keeps its value a (and, fast, its slope s), each of h's
         * size; the fused op neither */
        size_t a = ag__numel(ndim - 1, xshape) * (size_t)I * sizeof(ag_real);
        cr_assert_leq(b1 + a, b0, "forward bytes: fused %zu, the three %zu, a %zu", b1, b0, a);
        if (ag_get_kernels() == AG_KERNELS_FAST)
            cr_assert_leq(b1 + 2 * a, b0, "forward bytes: fused %zu, the three %zu, a %zu", b1, b0, a);
        free(three), free(fused);
    }
    ag_store_free(s);
}

Test(gelu_linear_add, equals_gelu_linear_add_to_the_bit)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        same_as_the_three(AG_SHAPE(3, 4), 16, 1);
        same_as_the_three(AG_SHAPE(2, 5, 7), 28, 0);   /* batch axes, no bias */
        same_as_the_three(AG_SHAPE(1, 1), 4, 1);       /* size 1 */
        same_as_the_three(AG_SHAPE(2, 37, 64), 256, 1); /* the packed kernel, edge tiles */
        same_as_the_three(AG_SHAPE(64, 48), 700, 1);   /* several blocks of GELU */
    }
    ag__isa_force(NULL);
}

Test(gelu_linear_add, reports_bad_shapes_by_its_name)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *h = ag_tensor_new(g, AG_SHAPE(2, 3)), *w = ag_tensor_new(g, AG_SHAPE(4, 5));
    ag_tensor *r = ag_tensor_new(g, AG_SHAPE(2, 4));
    cr_assert_null(ag__gelu_linear_add(g, h, w, NULL, r));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE, "%s", ag_graph_error(g));
    cr_assert(strstr(ag_graph_error(g), "gelu_linear_add"), "%s", ag_graph_error(g));
    ag_graph_free(g);
}
