/* tests/test_linear_gelu.c: linear_gelu = gelu(linear(x, W, b)) as one op
 * (ops/linear_gelu.c): its values by hand, the pair's values and gradients
 * to the bit (gradients kept or dropped, on every instruction set), its
 * finite-difference check, and the memory it does not keep. */
#include "common.h"
#include "core/internal.h"

#include <string.h>

Test(linear_gelu, by_hand)
{
    /* h = x W^T + b = [1 * 1 + 0, -(2) + 0.5] = [1, -1.5];
     * gelu(h) = h Phi(h): Phi(1) = 0.8413447460685429, Phi(-1.5) =
     * 0.0668072012688581 (python3: 0.5 * math.erfc(-h / math.sqrt(2))) */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 2), (const ag_real[]){1, 2});
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 2), (const ag_real[]){1, 0, 0, -1});
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2), (const ag_real[]){0, 0.5});
    ag_tensor *y = ag__linear_gelu(g, x, w, b);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    expect_shape(y, 1, 2);
    cr_assert_eq(y->op, AG_OP_LINEAR_GELU);
    expect_close(y->data, ((const double[]){0.8413447460685429, -1.5 * 0.0668072012688581}), 2, TOL(1e-15, 1e-7),
                 TOL(1e-14, 1e-6), "y");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(linear_gelu, passes_its_gradient_check) { expect_op_gradcheck("linear_gelu"); }
#endif

/* L = sum(y * w) + sum(x^2), x = tanh(x0) an intermediate that also feeds
 * a consumer made before y; fused or linear then gelu. */
static ag_tensor *build(ag_graph *g, ag_store *s, int fused, ag_tensor **y)
{
    ag_tensor *x = ag_tanh(g, ag_store_find(s, "x")), *w = ag_store_find(s, "w"), *b = ag_store_find(s, "b");
    ag_tensor *before = ag_sum_all(g, ag_mul(g, x, x));
    *y = fused ? ag__linear_gelu(g, x, w, b) : ag_gelu(g, ag__linear(g, x, w, b));
    ag_tensor *wt = ag_tensor_new(g, (*y)->ndim, (*y)->shape);
    for (size_t i = 0; i < wt->size; i++) wt->data[i] = (ag_real)(((int)(i * 7 % 11) - 5) * 0.1);
    return ag_add(g, ag_sum_all(g, ag_mul(g, *y, wt)), before);
}

static void same_as_the_pair(int ndim, const int *xshape, int O, int bias)
{
    int I = xshape[ndim - 1];
    ag_store *s = ag_store_new();
    ag_init_uniform(ag_param(s, "x", ndim, xshape), -2, 2, 1);
    ag_init_uniform(ag_param(s, "w", AG_SHAPE(O, I)), -1, 1, 2);
    if (bias) ag_init_uniform(ag_param(s, "b", AG_SHAPE(O)), -1, 1, 3);
    size_t n0, n1, b0, b1;
    for (int keep = 0; keep < 2; keep++) {
        ag_real *pair = fused_outcome(s, build, 0, keep, &n0, &b0), *fused = fused_outcome(s, build, 1, keep, &n1, &b1);
        cr_assert_eq(n0, n1);
        for (size_t i = 0; i < n0; i++)
            cr_assert(memcmp(&pair[i], &fused[i], sizeof *pair) == 0, "keep %d: value %zu of %zu: %a, the pair %a",
                      keep, i, n0, (double)fused[i], (double)pair[i]);
        /* the fast pair keeps h, y and the slope, the reference pair h and
         * y; the fused op y and the slope */
        size_t h = (n0 - ag_store_numel(s)) * sizeof(ag_real);
        if (ag_get_kernels() == AG_KERNELS_FAST) cr_assert_leq(b1 + h, b0, "bytes: fused %zu, the pair %zu, h %zu", b1, b0, h);
        else cr_assert_leq(b1, b0, "forward bytes: fused %zu, the pair %zu", b1, b0);
        free(pair), free(fused);
    }
    ag_store_free(s);
}

Test(linear_gelu, equals_linear_then_gelu_to_the_bit)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        same_as_the_pair(AG_SHAPE(3, 4), 5, 1);
        same_as_the_pair(AG_SHAPE(2, 5, 7), 3, 0);   /* batch axes, no bias */
        same_as_the_pair(AG_SHAPE(1, 1), 1, 1);      /* size 1 */
        same_as_the_pair(AG_SHAPE(2, 37, 64), 96, 1); /* the packed kernel, edge tiles */
        same_as_the_pair(AG_SHAPE(64, 64), 700, 1);  /* several blocks of the in-place GELU */
    }
    ag__isa_force(NULL);
}

Test(linear_gelu, reports_bad_shapes_by_its_name)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 3)), *w = ag_tensor_new(g, AG_SHAPE(4, 5));
    cr_assert_null(ag__linear_gelu(g, x, w, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE, "%s", ag_graph_error(g));
    cr_assert(strstr(ag_graph_error(g), "linear_gelu"), "%s", ag_graph_error(g));
    ag_graph_free(g);
}
