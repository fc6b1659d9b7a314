/* tests/test_layer_norm.c: layer normalisation over the last axis. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/internal.h"

Test(layer_norm, normalises_1_2_3_4)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 4), ((ag_real[]){1, 2, 3, 4}));
    ag_tensor *y = ag_layer_norm(g, x, NULL, NULL, 1e-5);
    expect_shape(y, 1, 4);
    /* mean 2.5, biased var 1.25: (x - 2.5) / sqrt(1.25 + 1e-5) */
    double r = 1 / sqrt(1.25 + 1e-5);
    const double want[] = {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r};
    expect_close(y->data, want, 4, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "y");
    expect_close(y->data, ((double[]){-1.3416354199689269, -0.447211806656309, 0.447211806656309,
                                      1.3416354199689269}),
                 4, TOL(1e-14, 1e-6), TOL(1e-13, 1e-6), "y");
    ag_graph_free(g);
}

Test(layer_norm, gain_and_bias)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){1, 2, 3, 4}));
    ag_tensor *gain = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){2, 1, 0.5, -1}));
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){0, 1, 0, 1}));
    double r = 1 / sqrt(1.25 + 1e-5);
    ag_tensor *y = ag_layer_norm(g, x, gain, bias, 1e-5);
    expect_close(y->data, ((double[]){-3 * r, 1 - 0.5 * r, 0.25 * r, 1 - 1.5 * r}), 4, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "y");
    /* gain only, bias only */
    y = ag_layer_norm(g, x, gain, NULL, 1e-5);
    expect_close(y->data, ((double[]){-3 * r, -0.5 * r, 0.25 * r, -1.5 * r}), 4, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "y gain only");
    y = ag_layer_norm(g, x, NULL, bias, 1e-5);
    expect_close(y->data, ((double[]){-1.5 * r, 1 - 0.5 * r, 0.5 * r, 1 + 1.5 * r}), 4, TOL(1e-14, 1e-6),
                 TOL(1e-13, 1e-6), "y bias only");
    ag_graph_free(g);
}

Test(layer_norm, backward_matches_the_jacobian)
{
    /* dx from the explicit Jacobian
     *   d xhat_j / d x_i = rstd (delta_ij - 1/C - xhat_i xhat_j / C)
     * summed by Python over j with weights w_j gain_j; dgain = sum_rows w xhat,
     * dbias = sum_rows w. */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 4), ((ag_real[]){1, 2, 3, 4, 0, -1, 0, 3}));
    ag_tensor *gain = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){2, 1, 0.5, -1}));
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(4), ((ag_real[]){0, 1, 0, 1}));
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 4), ((ag_real[]){0.5, -1, 2, 0.25, 1, 1, -2, 0}));
    ag_set_requires_grad(x, 1);
    ag_set_requires_grad(gain, 1);
    ag_set_requires_grad(bias, 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, ag_layer_norm(g, x, gain, bias, 1e-5), w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    const double dx[] = {0.49193486559650174, -1.1403894808820674, 0.8049806258898358, -0.15652601060426996,
                         0.9259241975355281,  0.11111185184609057, -1.0740713580348422, 0.03703530865322348};
    const double dgain[] = {-1.004150302579525, -0.5527859711288762, 1.5610887985027415, 0.3354088549922317};
    expect_close(x->grad, dx, 8, TOL(1e-12, 1e-5), TOL(1e-10, 1e-5), "dx");
    expect_close(gain->grad, dgain, 4, TOL(1e-12, 1e-5), TOL(1e-10, 1e-5), "dgain");
    expect_close(bias->grad, ((double[]){1.5, 0, 0, 0.25}), 4, TOL(1e-15, 1e-6), 0, "dbias");
    ag_graph_free(g);
}

Test(layer_norm, gradient_sums_to_zero_over_a_row)
{
    /* y does not change when a constant is added to a row, so sum_i dx_i = 0 */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(3, 5), ((ag_real[]){1, -2, 0.5, 4, 3, 0, 0, 1, 0, 0, 7, 7.5, 6, 8, 7}));
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(3, 5), ((ag_real[]){1, 2, 3, 4, 5, -1, 0, 1, 0, -1, 3, -3, 2, -2, 1}));
    ag_set_requires_grad(x, 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, ag_layer_norm(g, x, NULL, NULL, 1e-5), w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    for (int r = 0; r < 3; r++) {
        double s = 0, a = 0;
        for (int i = 0; i < 5; i++) s += x->grad[r * 5 + i], a += fabs(x->grad[r * 5 + i]);
        cr_assert_gt(a, 0.1, "row %d has no gradient", r);
        cr_assert_lt(fabs(s), TOL(1e-12, 1e-5), "row %d: sum dx = %g", r, s);
    }
    ag_graph_free(g);
}

Test(layer_norm, constant_row_gives_bias_and_finite_gradients)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){5, 5, 5, 1, 2, 3}));
    ag_tensor *bias = ag_tensor_from(g, AG_SHAPE(3), ((ag_real[]){0.5, -1, 2}));
    ag_set_requires_grad(x, 1);
    ag_tensor *y = ag_layer_norm(g, x, NULL, bias, 1e-5);
    expect_close(y->data, ((double[]){0.5, -1, 2}), 3, TOL(1e-15, 1e-6), 0, "y of constant row");
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 1, 2, 3}));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, w))), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 6; i++) cr_assert(isfinite(x->grad[i]), "dx[%d] = %g", i, (double)x->grad[i]);
    ag_graph_free(g);
}

Test(layer_norm, bad_shapes_are_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2, 4));
    ag_tensor *g3 = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_null(ag_layer_norm(g, x, g3, NULL, 1e-5));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: gain must be [4] for x [2, 4], got [3]");

    ag_graph_reset(g);
    x = ag_tensor_new(g, AG_SHAPE(2, 4));
    ag_tensor *b14 = ag_tensor_new(g, AG_SHAPE(1, 4));
    cr_assert_null(ag_layer_norm(g, x, NULL, b14, 1e-5));
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: bias must be [4] for x [2, 4], got [1, 4]");

    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm(g, ag_scalar(g, 1), NULL, NULL, 1e-5));
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: x must have at least 1 axis, got []");

    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm(g, NULL, NULL, NULL, 1e-5));
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: input 0 is NULL");

    ag_graph_reset(g);
    cr_assert_null(ag_layer_norm(g, ag_tensor_new(g, AG_SHAPE(2)), NULL, NULL, -1));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "layer_norm: eps = -1 must be >= 0");
    ag_graph_free(g);
}

/* ---- rows as long as a model's, on every instruction set --------------------
 *
 * The gradient checks use rows of a few values; the kernels take a row in
 * pieces of a 16-byte vector (4 floats, 2 doubles) with the rest after
 * them, and rows in blocks of 16 (for y and dx, and for the column sums
 * dgain and dbias), a block whose rows are whole 64-byte quads by a path
 * of its own, and rows of 64 (the GPT's width) by the same code with C a
 * constant.  These shapes take every path: rows shorter than a piece,
 * whole pieces, pieces and a rest; one, three or four quads a row; a last
 * block of rows that is not full, of fewer than four rows or more. */
static const int long_shapes[][2] = {{1, 1},   {3, 5},   {6, 7},   {17, 16}, {33, 70},
                                     {40, 64}, {19, 64}, {35, 48}, {2, 300}};
enum { NSHAPES = sizeof long_shapes / sizeof long_shapes[0] };
static const char *const levels[] = {"baseline", "avx2", "avx512"};

static ag_real *filled(size_t n, uint64_t seed, double scale, double shift)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    ag_real *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (ag_real)(shift + scale * (2 * ag_rng_uniform(&r) - 1));
    return v;
}

/* out = {y, dx, dgain, dbias} of z = layer_norm(x, gain, bias) +
 * layer_norm(x) seeded with dz (the second adds into the dx that the first
 * stored), x and dz [rows, C], gv and bv [C]. */
static void run_norm_on(int rows, int C, const ag_real *x, const ag_real *dz, const ag_real *gv, const ag_real *bv,
                        ag_real *out[4])
{
    size_t n = (size_t)rows * (size_t)C;
    ag_graph *g = ag_graph_new();
    ag_tensor *xt = ag_tensor_from(g, AG_SHAPE(rows, C), x);
    ag_tensor *gain = ag_tensor_from(g, AG_SHAPE(C), gv), *bias = ag_tensor_from(g, AG_SHAPE(C), bv);
    ag_set_requires_grad(xt, 1), ag_set_requires_grad(gain, 1), ag_set_requires_grad(bias, 1);
    ag_tensor *y = ag_layer_norm(g, xt, gain, bias, 1e-5);
    ag_tensor *z = ag_add(g, y, ag_layer_norm(g, xt, NULL, NULL, 1e-5));
    cr_assert(z && ag_backward_from(g, z, dz) == AG_OK, "%s", ag_graph_error(g));
    const ag_real *src[4] = {y->data, xt->grad, gain->grad, bias->grad};
    const size_t len[4] = {n, n, (size_t)C, (size_t)C};
    for (int k = 0; k < 4; k++) {
        out[k] = malloc(len[k] * sizeof(ag_real));
        memcpy(out[k], src[k], len[k] * sizeof(ag_real));
    }
    ag_graph_free(g);
}

/* run_norm_on with data from fixed seeds; x's rows sit away from 0, so
 * that the mean matters. */
static void run_norm(int rows, int C, ag_real *out[4])
{
    size_t n = (size_t)rows * (size_t)C;
    ag_real *x = filled(n, 1 + n, 2, 3), *dz = filled(n, 2 + n, 1, 0);
    ag_real *gv = filled((size_t)C, 3, 0.5, 1), *bv = filled((size_t)C, 4, 0.5, 0);
    run_norm_on(rows, C, x, dz, gv, bv, out);
    free(x), free(dz), free(gv), free(bv);
}

/* The same in double, written out plainly: want = {y, dx, dgain, dbias}. */
static void reference_norm(int rows, int C, double *want[4])
{
    size_t n = (size_t)rows * (size_t)C;
    ag_real *x = filled(n, 1 + n, 2, 3), *dz = filled(n, 2 + n, 1, 0);
    ag_real *gv = filled((size_t)C, 3, 0.5, 1), *bv = filled((size_t)C, 4, 0.5, 0);
    double *xhat = malloc((size_t)C * sizeof *xhat);
    for (int k = 0; k < 4; k++) want[k] = calloc(k < 2 ? n : (size_t)C, sizeof(double));
    for (int r = 0; r < rows; r++) {
        const ag_real *xr = x + (size_t)r * C, *dzr = dz + (size_t)r * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += xr[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        double s = 1 / sqrt(v / C + 1e-5);
        for (int i = 0; i < C; i++) xhat[i] = (xr[i] - m) * s;
        /* the affine norm and the plain one see the same dz */
        for (int pass = 0; pass < 2; pass++) {
            double a = 0, b = 0;
            for (int i = 0; i < C; i++) {
                double dxhat = dzr[i] * (pass ? 1.0 : (double)gv[i]);
                a += dxhat, b += dxhat * xhat[i];
            }
            for (int i = 0; i < C; i++) {
                double dxhat = dzr[i] * (pass ? 1.0 : (double)gv[i]);
                want[1][(size_t)r * C + i] += s * (dxhat - a / C - xhat[i] * b / C);
            }
        }
        for (int i = 0; i < C; i++) {
            want[0][(size_t)r * C + i] = xhat[i] * gv[i] + bv[i];
            want[2][i] += dzr[i] * xhat[i];
            want[3][i] += dzr[i];
        }
    }
    free(x), free(dz), free(gv), free(bv), free(xhat);
}

Test(layer_norm, long_rows_match_a_plain_double_loop_on_every_level)
{
    static const char *const what[4] = {"y", "dx", "dgain", "dbias"};
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        for (int sh = 0; sh < NSHAPES; sh++) {
            int rows = long_shapes[sh][0], C = long_shapes[sh][1];
            ag_real *got[4];
            double *want[4];
            run_norm(rows, C, got);
            reference_norm(rows, C, want);
            /* dgain and dbias add up `rows` terms of size ~1 */
            for (int k = 0; k < 4; k++) {
                char label[64];
                snprintf(label, sizeof label, "%s [%d, %d] %s", levels[l], rows, C, what[k]);
                double tol = k < 2 ? TOL(1e-12, 2e-5) : TOL(1e-12, 2e-6) * rows;
                expect_close(got[k], want[k], k < 2 ? (size_t)rows * C : (size_t)C, tol, tol, label);
                free(got[k]), free(want[k]);
            }
        }
    }
    ag__isa_force(NULL);
}

/* Every row's sums go to a 16-byte vector's partial sums added up in one
 * fixed order, and dgain, dbias to one sum per column in row order: each
 * instruction set's kernels give the baseline's bits. */
Test(layer_norm, every_level_gives_the_baselines_bits)
{
    for (int sh = 0; sh < NSHAPES; sh++) {
        int rows = long_shapes[sh][0], C = long_shapes[sh][1];
        const size_t len[4] = {(size_t)rows * C, (size_t)rows * C, (size_t)C, (size_t)C};
        ag_real *base[4], *got[4];
        cr_assert_str_eq(ag__isa_force("baseline"), "baseline");
        run_norm(rows, C, base);
        for (int l = 1; l < 3; l++) {
            if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue;
            run_norm(rows, C, got);
            for (int k = 0; k < 4; k++) {
                for (size_t i = 0; i < len[k]; i++)
                    cr_assert(memcmp(&got[k][i], &base[k][i], sizeof(ag_real)) == 0,
                              "%s [%d, %d]: output %d [%zu] = %a, baseline %a", levels[l], rows, C, k, i,
                              (double)got[k][i], (double)base[k][i]);
                free(got[k]);
            }
        }
        for (int k = 0; k < 4; k++) free(base[k]);
    }
    ag__isa_force(NULL);
}

/* A row's y and dx are its own: made alone, as a tensor of one row, they
 * have the bits they have among other rows, where the kernels take rows
 * four or sixteen at a time by other paths. */
Test(layer_norm, a_row_alone_gives_the_bits_it_gives_among_others)
{
    for (int sh = 0; sh < NSHAPES; sh++) {
        int rows = long_shapes[sh][0], C = long_shapes[sh][1];
        size_t n = (size_t)rows * (size_t)C;
        ag_real *x = filled(n, 1 + n, 2, 3), *dz = filled(n, 2 + n, 1, 0);
        ag_real *gv = filled((size_t)C, 3, 0.5, 1), *bv = filled((size_t)C, 4, 0.5, 0);
        ag_real *all[4], *one[4];
        run_norm_on(rows, C, x, dz, gv, bv, all);
        for (int r = 0; r < rows; r++) {
            size_t o = (size_t)r * (size_t)C;
            run_norm_on(1, C, x + o, dz + o, gv, bv, one);
            for (int k = 0; k < 2; k++) { /* y, dx */
                for (int i = 0; i < C; i++)
                    cr_assert(memcmp(&one[k][i], &all[k][o + (size_t)i], sizeof(ag_real)) == 0,
                              "[%d, %d] row %d: output %d [%d] = %a alone, %a among the rows", rows, C, r, k, i,
                              (double)one[k][i], (double)all[k][o + (size_t)i]);
            }
            for (int k = 0; k < 4; k++) free(one[k]);
        }
        for (int k = 0; k < 4; k++) free(all[k]);
        free(x), free(dz), free(gv), free(bv);
    }
}

/* One thread makes dgain and dbias in the dx sweep, more threads in a sweep
 * by columns: each column is summed in row order either way, so the
 * thread count changes no bit. */
Test(layer_norm, one_thread_and_two_give_the_same_bits)
{
    size_t min_work = ag__thread_min_work;
    for (int sh = 0; sh < NSHAPES; sh++) {
        int rows = long_shapes[sh][0], C = long_shapes[sh][1];
        const size_t len[4] = {(size_t)rows * C, (size_t)rows * C, (size_t)C, (size_t)C};
        ag_real *one[4], *two[4];
        ag_set_threads(1);
        run_norm(rows, C, one);
        ag_set_threads(2), ag__thread_min_work = 1; /* two threads however small the rows */
        run_norm(rows, C, two);
        ag_set_threads(1), ag__thread_min_work = min_work;
        for (int k = 0; k < 4; k++) {
            for (size_t i = 0; i < len[k]; i++)
                cr_assert(memcmp(&two[k][i], &one[k][i], sizeof(ag_real)) == 0,
                          "[%d, %d]: output %d [%zu] = %a on two threads, %a on one", rows, C, k, i,
                          (double)two[k][i], (double)one[k][i]);
            free(one[k]), free(two[k]);
        }
    }
}

#ifdef AG_DOUBLE
Test(layer_norm, gradcheck) { expect_op_gradcheck("layer_norm"); }
#endif
