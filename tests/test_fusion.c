/* tests/test_fusion.c: each fused op against the composition of primitive
 * ops it replaces (values and gradients), and its finite-difference check.
 *
 *   linear          = reshape(add(matmul(reshape(x), transpose(W)), b))
 *   linear_add      = add(r, linear(x, W, b))
 *   masked_softmax  = softmax(masked_fill(scale(x, s), mask, fill))
 *   matmul_bt       = matmul(a, transpose(b, -1, -2))
 *   attention       = matmul_heads(masked_softmax(matmul_heads(q, k^T)), v) */
#include "common.h"
#include "core/internal.h"
#include "kernels/kernels.h"

#include <string.h>

/* L = sum(y * w), w fixed random: every output element weighed differently. */
static ag_tensor *weigh(ag_graph *g, ag_tensor *y, uint64_t seed)
{
    if (!y) return NULL;
    ag_tensor *w = ag_tensor_new(g, y->ndim, y->shape);
    if (!w) return NULL;
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < w->size; i++) w->data[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    return ag_sum_all(g, ag_mul(g, y, w));
}

static ag_tensor *param(ag_store *s, const char *name, int ndim, const int *shape, uint64_t seed)
{
    ag_tensor *t = ag_param(s, name, ndim, shape);
    cr_assert_not_null(t);
    ag_init_uniform(t, -1, 1, seed);
    return t;
}

/* Values (n of them) kept as doubles, to compare two computations. */
static double *keep(const ag_real *v, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = (double)v[i];
    return d;
}

/* Every store tensor's gradient, kept; freed by drop_all. */
typedef struct grads {
    int n;
    double *g[16];
} grads;

static grads keep_grads(const ag_store *s)
{
    grads k = {ag_store_count(s), {0}};
    cr_assert_leq(k.n, 16);
    for (int i = 0; i < k.n; i++) k.g[i] = keep(ag_store_at(s, i)->grad, ag_store_at(s, i)->size);
    return k;
}

static void expect_grads(const ag_store *s, const grads *k, double tol, const char *what)
{
    for (int i = 0; i < k->n; i++) {
        const ag_tensor *t = ag_store_at(s, i);
        char label[128];
        snprintf(label, sizeof label, "%s: d%s", what, t->name);
        expect_close(t->grad, k->g[i], t->size, tol, tol, label);
        free(k->g[i]);
    }
}

/* ---- linear --------------------------------------------------------------- */

static void linear_case(int ndim, const int *xshape, int O, int bias)
{
    int I = xshape[ndim - 1];
    ag_store *s = ag_store_new();
    ag_tensor *x = param(s, "x", ndim, xshape, 1), *w = param(s, "w", AG_SHAPE(O, I), 2);
    ag_tensor *b = bias ? param(s, "b", AG_SHAPE(O), 3) : NULL;
    ag_graph *g = ag_graph_new();
    /* composed: how ag_linear_layer_forward used to build it */
    int shape[AG_MAX_DIMS];
    for (int i = 0; i < ndim; i++) shape[i] = xshape[i];
    shape[ndim - 1] = O;
    ag_tensor *z = ag_matmul(g, ag_reshape(g, x, AG_SHAPE(-1, I)), ag_transpose(g, w, 0, 1));
    if (b) z = ag_add(g, z, b);
    z = ag_reshape(g, z, ndim, shape);
    cr_assert_eq(ag_backward(g, weigh(g, z, 9)), AG_OK, "%s", ag_graph_error(g));
    double *want = keep(z->data, z->size);
    grads k = keep_grads(s);
    /* fused */
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    ag_tensor *y = ag__linear(g, x, w, b);
    cr_assert_eq(ag_backward(g, weigh(g, y, 9)), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(y->ndim, ndim);
    for (int i = 0; i < ndim; i++) cr_assert_eq(y->shape[i], shape[i]);
    expect_close(y->data, want, y->size, TOL(1e-12, 1e-6), TOL(1e-12, 1e-6), "linear y");
    expect_grads(s, &k, TOL(1e-12, 1e-5), "linear");
    free(want);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(fusion, linear_equals_reshape_matmul_transpose_add)
{
    linear_case(AG_SHAPE(3, 4), 2, 1);
    linear_case(AG_SHAPE(2, 5, 7), 3, 1);  /* batch axes */
    linear_case(AG_SHAPE(4, 3), 5, 0);     /* no bias */
    linear_case(AG_SHAPE(1, 1), 1, 1);     /* size 1 */
    linear_case(AG_SHAPE(2, 37, 64), 96, 1); /* the packed kernel, edge tiles */
    linear_case(AG_SHAPE(3, 64), 70, 1);     /* a few rows: y^T = W x^T */
}

/* db = the sum of dy over the rows, in row order: on every instruction set
 * the bits of a plain loop (the kernel sums 8, 4, 2 and 1 vectors of
 * columns at a time, then single columns: 253 of them take each path, in
 * float and in double). */
Test(fusion, linear_bias_gradient_is_the_plain_row_sum_on_every_level)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    enum { N = 37, I = 8, O = 253 };
    ag_rng r;
    ag_rng_seed(&r, 9);
    ag_real dy[N * O], want[O];
    for (int i = 0; i < N * O; i++) dy[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    for (int o = 0; o < O; o++) {
        want[o] = 0;
        for (int n = 0; n < N; n++) want[o] += dy[n * O + o];
    }
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        ag_store *s = ag_store_new();
        ag_tensor *w = param(s, "w", AG_SHAPE(O, I), 1), *b = param(s, "b", AG_SHAPE(O), 2);
        ag_graph *g = ag_graph_new();
        ag_tensor *x = ag_tensor_new(g, AG_SHAPE(N, I));
        ag_tensor *y = ag__linear(g, x, w, b);
        cr_assert(y && ag_backward_from(g, y, dy) == AG_OK, "%s", ag_graph_error(g));
        for (int o = 0; o < O; o++)
            cr_assert(memcmp(&b->grad[o], &want[o], sizeof want[o]) == 0, "%s: db[%d] = %a, the loop gives %a",
                      levels[l], o, (double)b->grad[o], (double)want[o]);
        ag_graph_free(g);
        ag_store_free(s);
    }
    ag__isa_force(NULL);
}

Test(fusion, linear_reports_bad_shapes)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param(s, "w", AG_SHAPE(2, 4), 1), *b = param(s, "b", AG_SHAPE(3), 2);
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag__linear(g, ag_tensor_new(g, AG_SHAPE(3, 5)), w, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g),
                     "linear: x [3, 5], weight [2, 4] and bias none do not fit x [..., I], W [O, I], b [O]");
    ag_graph_reset(g);
    cr_assert_null(ag__linear(g, ag_tensor_new(g, AG_SHAPE(3, 4)), w, b));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    ag_graph_free(g);
    ag_store_free(s);
}

/* ---- linear_add ------------------------------------------------------------ */

Test(fusion, linear_add_by_hand)
{
    /* y = x W^T + b + r, the products worked out:
     *   row 0: (1 - 3) + 0.5 + 10 = 8.5,   (2 + 2) - 1 + 20 = 23
     *   row 1: (4 - 6) + 0.5 + 30 = 28.5,  (8 + 5) - 1 + 40 = 52 */
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 3), (const ag_real[]){1, 2, 3, 4, 5, 6});
    ag_tensor *w = ag_tensor_from(g, AG_SHAPE(2, 3), (const ag_real[]){1, 0, -1, 2, 1, 0});
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2), (const ag_real[]){0.5, -1});
    ag_tensor *r = ag_tensor_from(g, AG_SHAPE(2, 2), (const ag_real[]){10, 20, 30, 40});
    ag_tensor *y = ag__linear_add(g, x, w, b, r);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    expect_shape(y, 2, 2);
    cr_assert_eq(y->op, AG_OP_LINEAR_ADD);
    expect_close(y->data, ((const double[]){8.5, 23, 28.5, 52}), 4, 0, 0, "y");
    ag_graph_free(g);
}

/* The residual is its own tensor, the layer's input x, or its weight W. */
enum { RES_OWN, RES_X, RES_W };

/* x, W, r (and the loss) on g: the fused op, or linear then add(r, y) as
 * a block wrote it.  x, W and r are intermediates (tanh of store tensors),
 * so that r may take dy's buffer as its gradient; r also feeds a consumer
 * made before y (sum of r^2), whose backward runs after y's and adds to
 * the buffer. */
static ag_tensor *linear_add_build(ag_graph *g, ag_store *s, int fused, int res, ag_tensor **y)
{
    ag_tensor *x = ag_tanh(g, ag_store_find(s, "x")), *w = ag_tanh(g, ag_store_find(s, "w"));
    ag_tensor *b = ag_store_find(s, "b");
    ag_tensor *r = res == RES_X ? x : res == RES_W ? w : ag_tanh(g, ag_store_find(s, "r"));
    ag_tensor *before = ag_sum_all(g, ag_mul(g, r, r));
    *y = fused ? ag__linear_add(g, x, w, b, r) : ag_add(g, r, ag__linear(g, x, w, b));
    return ag_add(g, weigh(g, *y, 9), before);
}

/* The fused op gives the pair's values and gradients to the last bit. */
static void linear_add_case(int ndim, const int *xshape, int O, int bias, int res)
{
    int I = xshape[ndim - 1], rshape[AG_MAX_DIMS];
    for (int d = 0; d < ndim; d++) rshape[d] = xshape[d];
    rshape[ndim - 1] = O;
    ag_store *s = ag_store_new();
    param(s, "x", ndim, xshape, 1);
    param(s, "w", AG_SHAPE(O, I), 2);
    if (bias) param(s, "b", AG_SHAPE(O), 3);
    if (res == RES_OWN) param(s, "r", ndim, rshape, 4);
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    ag_tensor *y;
    /* the pair */
    cr_assert_eq(ag_backward(g, linear_add_build(g, s, 0, res, &y)), AG_OK, "%s", ag_graph_error(g));
    size_t n = y->size;
    ag_real *want = malloc(n * sizeof *want);
    memcpy(want, y->data, n * sizeof *want);
    ag_real *want_grad[4] = {0};
    for (int i = 0; i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        want_grad[i] = malloc(t->size * sizeof(ag_real));
        memcpy(want_grad[i], t->grad, t->size * sizeof(ag_real));
    }
    /* fused */
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    cr_assert_eq(ag_backward(g, linear_add_build(g, s, 1, res, &y)), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(y->op, AG_OP_LINEAR_ADD);
    /* r took dy's buffer (y then shows no gradient of its own) unless r is
     * also x or W */
    cr_assert_eq(y->grad == NULL, res == RES_OWN, "residual %d: y's gradient buffer %s", res,
                 y->grad ? "kept" : "lent");
    cr_assert(memcmp(y->data, want, n * sizeof *want) == 0, "linear_add y differs from linear + add");
    for (int i = 0; i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        for (size_t j = 0; j < t->size; j++)
            cr_assert(memcmp(&t->grad[j], &want_grad[i][j], sizeof(ag_real)) == 0,
                      "residual %d: d%s[%zu] = %a, linear + add gives %a", res, t->name, j, (double)t->grad[j],
                      (double)want_grad[i][j]);
        free(want_grad[i]);
    }
    free(want);
    ag_graph_free(g);
    ag_store_free(s);
}

static void linear_add_cases(void)
{
    linear_add_case(AG_SHAPE(3, 4), 2, 1, RES_OWN);
    linear_add_case(AG_SHAPE(2, 5, 7), 3, 1, RES_OWN);    /* batch axes */
    linear_add_case(AG_SHAPE(4, 3), 5, 0, RES_OWN);       /* no bias */
    linear_add_case(AG_SHAPE(1, 1), 1, 1, RES_OWN);       /* size 1 */
    linear_add_case(AG_SHAPE(2, 1, 6), 6, 1, RES_X);      /* r is x */
    linear_add_case(AG_SHAPE(5, 5), 5, 1, RES_W);         /* r is W */
    linear_add_case(AG_SHAPE(3, 64), 70, 1, RES_OWN);     /* a few rows: y^T = W x^T */
    linear_add_case(AG_SHAPE(2, 37, 64), 96, 1, RES_OWN); /* the packed kernel, edge tiles */
    linear_add_case(AG_SHAPE(4, 32, 64), 64, 1, RES_OWN); /* a GPT block's projection */
    linear_add_case(AG_SHAPE(300, 400), 40, 1, RES_OWN);  /* depth over one block: b and r after the last */
    linear_add_case(AG_SHAPE(12, 8), 8, 1, RES_X);        /* a small product (the plain loops), r is x */
}

/* on every instruction set the CPU has (each adds R to a tile with its own
 * vectors) */
Test(fusion, linear_add_equals_linear_then_add_to_the_bit)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        linear_add_cases();
    }
    ag__isa_force(NULL);
}

Test(fusion, linear_add_reports_bad_shapes)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = param(s, "w", AG_SHAPE(2, 4), 1);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(3, 4));
    cr_assert_null(ag__linear_add(g, x, w, NULL, ag_tensor_new(g, AG_SHAPE(3, 4))));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "linear_add: the residual [3, 4] is not the shape of x [3, 4] times W^T [2, 4]");
    ag_graph_reset(g);
    cr_assert_null(ag__linear_add(g, ag_tensor_new(g, AG_SHAPE(3, 5)), w, NULL, ag_tensor_new(g, AG_SHAPE(3, 2))));
    cr_assert_str_eq(ag_graph_error(g),
                     "linear_add: x [3, 5], weight [2, 4] and bias none do not fit x [..., I], W [O, I], b [O]");
    ag_graph_reset(g);
    cr_assert_null(ag__linear_add(g, ag_tensor_new(g, AG_SHAPE(3, 4)), w, NULL, NULL));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    ag_graph_free(g);
    ag_store_free(s);
}

/* ---- masked_softmax -------------------------------------------------------- */

static void masked_softmax_case(int ndim, const int *shape, ag_tensor *(*mask_of)(ag_graph *), double scale,
                                double fill, const char *what)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = param(s, "x", ndim, shape, 4);
    ag_graph *g = ag_graph_new();
    ag_tensor *mask = mask_of ? mask_of(g) : NULL;
    ag_tensor *z = ag_scale(g, x, scale);
    if (mask) z = ag_masked_fill(g, z, mask, fill);
    z = ag_softmax(g, z);
    cr_assert_eq(ag_backward(g, weigh(g, z, 5)), AG_OK, "%s", ag_graph_error(g));
    double *want = keep(z->data, z->size);
    grads k = keep_grads(s);
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    mask = mask_of ? mask_of(g) : NULL;
    ag_tensor *y = ag__masked_softmax(g, x, scale, mask, fill);
    cr_assert_eq(ag_backward(g, weigh(g, y, 5)), AG_OK, "%s", ag_graph_error(g));
    expect_close(y->data, want, y->size, TOL(1e-12, 1e-6), TOL(1e-12, 1e-5), what);
    expect_grads(s, &k, TOL(1e-12, 1e-5), what);
    free(want);
    ag_graph_free(g);
    ag_store_free(s);
}

static ag_tensor *causal4(ag_graph *g) { return ag_causal_mask(g, 4, 4); }
static ag_tensor *padding(ag_graph *g)
{
    /* [B, 1, 1, S] = [2, 1, 1, 4]: batch 1 masks every key */
    return ag_tensor_from(g, AG_SHAPE(2, 1, 1, 4), (ag_real[]){1, 1, 0, 1, 0, 0, 0, 0});
}

Test(fusion, masked_softmax_equals_scale_masked_fill_softmax)
{
    masked_softmax_case(AG_SHAPE(2, 3, 4, 4), causal4, 0.5, -1e9, "causal, fill -1e9");
    masked_softmax_case(AG_SHAPE(2, 3, 4, 4), causal4, 0.25, -INFINITY, "causal, fill -inf");
    masked_softmax_case(AG_SHAPE(2, 3, 5, 4), padding, 1.5, -INFINITY, "padding, a row all -inf");
    masked_softmax_case(AG_SHAPE(2, 3, 5, 4), padding, 1.5, -1e9, "padding, a row all -1e9 (uniform)");
    masked_softmax_case(AG_SHAPE(3, 1), NULL, 2.0, 0, "no mask, size-1 rows");
    masked_softmax_case(AG_SHAPE(2, 100), NULL, 0.1, 0, "no mask, long rows");
}

/* ---- matmul_bt -------------------------------------------------------------- */

Test(fusion, matmul_bt_on_hand_computed_values)
{
    ag_graph *g = ag_graph_new();
    /* a [2, 3], b [2, 3]: y = a b^T, y[i][j] = a_i . b_j */
    ag_tensor *a = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 2, 3, 4, 5, 6}));
    ag_tensor *b = ag_tensor_from(g, AG_SHAPE(2, 3), ((ag_real[]){1, 0, -1, 2, 1, 0}));
    ag_set_requires_grad(a, 1), ag_set_requires_grad(b, 1);
    ag_tensor *y = ag_matmul_bt(g, a, b);
    cr_assert_eq(y->ndim, 2);
    cr_assert(y->shape[0] == 2 && y->shape[1] == 2);
    /* [1-3, 2+2; 4-6, 8+5] */
    expect_close(y->data, ((double[]){-2, 4, -2, 13}), 4, 0, 0, "y");
    /* L = sum(y): da_i = sum_j b_j = [3, 1, -1]; db_j = sum_i a_i = [5, 7, 9] */
    cr_assert_eq(ag_backward(g, ag_sum_all(g, y)), AG_OK);
    expect_close(a->grad, ((double[]){3, 1, -1, 3, 1, -1}), 6, 0, 0, "da");
    expect_close(b->grad, ((double[]){5, 7, 9, 5, 7, 9}), 6, 0, 0, "db");
    /* inner sizes that differ name both shapes, the second transposed */
    ag_graph_reset(g);
    cr_assert_null(ag_matmul_bt(g, ag_tensor_new(g, AG_SHAPE(2, 3)), ag_tensor_new(g, AG_SHAPE(3, 2))));
    cr_assert_str_eq(ag_graph_error(g), "matmul_bt: inner dims differ: [2, 3] x [3, 2]^T");
    ag_graph_free(g);
}

static void matmul_bt_case(int na, const int *ashape, int nb, const int *bshape)
{
    ag_store *s = ag_store_new();
    ag_tensor *a = param(s, "a", na, ashape, 4), *b = param(s, "b", nb, bshape, 5);
    ag_graph *g = ag_graph_new();
    ag_tensor *z = ag_matmul(g, a, ag_transpose(g, b, -1, -2));
    cr_assert_eq(ag_backward(g, weigh(g, z, 7)), AG_OK, "%s", ag_graph_error(g));
    double *want = keep(z->data, z->size);
    int zndim = z->ndim, zshape[AG_MAX_DIMS]; /* z goes with the reset */
    memcpy(zshape, z->shape, sizeof zshape);
    grads k = keep_grads(s);
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    ag_tensor *y = ag_matmul_bt(g, a, b);
    cr_assert_eq(ag_backward(g, weigh(g, y, 7)), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(y->ndim, zndim);
    for (int i = 0; i < y->ndim; i++) cr_assert_eq(y->shape[i], zshape[i]);
    expect_close(y->data, want, y->size, TOL(1e-12, 1e-6), TOL(1e-12, 1e-6), "matmul_bt y");
    expect_grads(s, &k, TOL(1e-12, 1e-5), "matmul_bt");
    free(want);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(fusion, matmul_bt_equals_matmul_of_the_transpose)
{
    matmul_bt_case(AG_SHAPE(3, 4), AG_SHAPE(5, 4));
    matmul_bt_case(AG_SHAPE(2, 4, 10, 16), AG_SHAPE(2, 4, 9, 16));   /* a toy head: the tiny path */
    matmul_bt_case(AG_SHAPE(2, 1, 33, 40), AG_SHAPE(3, 70, 40));     /* broadcast batch, packed kernel */
    matmul_bt_case(AG_SHAPE(1, 1), AG_SHAPE(1, 1));                  /* size 1 */
}

/* ---- products per head, in place --------------------------------------------- */

/* softmax-free attention through the heads layout against the same with
 * split heads copied out by permute: scores = Q K^T, y = scores V, for q
 * [B, T, H, D] and k, v [B, S, H, D]; values and every gradient. */
static void heads_case(int B, int T, int S, int H, int D)
{
    ag_store *s = ag_store_new();
    ag_tensor *q = param(s, "q", AG_SHAPE(B, T, H, D), 11), *k = param(s, "k", AG_SHAPE(B, S, H, D), 12);
    ag_tensor *v = param(s, "v", AG_SHAPE(B, S, H, D), 13);
    ag_graph *g = ag_graph_new();
    const int *swap = (const int[]){0, 2, 1, 3};
    ag_tensor *sc = ag_matmul(g, ag_permute(g, q, swap), ag_transpose(g, ag_permute(g, k, swap), -1, -2));
    ag_tensor *z = ag_permute(g, ag_matmul(g, sc, ag_permute(g, v, swap)), swap); /* [B, T, H, D] */
    cr_assert_eq(ag_backward(g, ag_add(g, weigh(g, z, 5), weigh(g, sc, 6))), AG_OK, "%s", ag_graph_error(g));
    double *want = keep(z->data, z->size), *want_sc = keep(sc->data, sc->size);
    size_t nz = z->size, nsc = sc->size;
    grads kg = keep_grads(s);
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    ag_tensor *sc2 = ag__matmul_heads(g, q, k, 1, AG__MM_A | AG__MM_B);
    ag_tensor *y = ag__matmul_heads(g, sc2, v, 0, AG__MM_B | AG__MM_Y);
    cr_assert_eq(ag_backward(g, ag_add(g, weigh(g, y, 5), weigh(g, sc2, 6))), AG_OK, "%s", ag_graph_error(g));
    cr_assert(sc2->ndim == 4 && sc2->shape[0] == B && sc2->shape[1] == H && sc2->shape[2] == T && sc2->shape[3] == S);
    cr_assert(y->ndim == 4 && y->shape[0] == B && y->shape[1] == T && y->shape[2] == H && y->shape[3] == D);
    cr_assert_eq(y->size, nz);
    cr_assert_eq(sc2->size, nsc);
    expect_close(sc2->data, want_sc, nsc, TOL(1e-12, 1e-6), TOL(1e-12, 1e-6), "scores per head");
    expect_close(y->data, want, nz, TOL(1e-12, 1e-6), TOL(1e-12, 1e-6), "y per head");
    expect_grads(s, &kg, TOL(1e-12, 1e-5), "per head");
    free(want), free(want_sc);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(fusion, products_per_head_equal_the_permuted_copies)
{
    heads_case(2, 4, 6, 8, 8);    /* the tutorial's heads (D = 8): the small path */
    heads_case(3, 10, 9, 4, 16);  /* the translator's */
    heads_case(2, 33, 40, 2, 24); /* the packed kernel, edge tiles */
    heads_case(1, 1, 1, 1, 1);
}

Test(fusion, products_per_head_refuse_mismatched_heads)
{
    ag_graph *g = ag_graph_new();
    cr_assert_null(ag__matmul_heads(g, ag_tensor_new(g, AG_SHAPE(2, 3, 4, 8)), ag_tensor_new(g, AG_SHAPE(2, 5, 2, 8)),
                                    1, AG__MM_A | AG__MM_B));
    cr_assert_str_eq(ag_graph_error(g), "matmul_heads: batch axes do not match: [2, 3, 4, 8] x [2, 5, 2, 8]");
    ag_graph_reset(g);
    cr_assert_null(ag__matmul_heads(g, ag_tensor_new(g, AG_SHAPE(3, 4, 8)), ag_tensor_new(g, AG_SHAPE(2, 5, 2, 8)), 1,
                                    AG__MM_A | AG__MM_B));
    cr_assert_str_eq(ag_graph_error(g), "matmul_heads: both inputs need 4 axes: [3, 4, 8] x [2, 5, 2, 8]");
    ag_graph_free(g);
}

/* ---- attention over every head in one node ---------------------------------- */

/* ag__attention_heads against the three nodes it replaces: values, and
 * every gradient, to the last bit when `exact` (each element the same chain
 * of products, each row the same softmax), else within rounding (a row cut
 * short may take another of softmax's summation orders). */
static void attention_compare(ag_store *s, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *(*mask_of)(ag_graph *),
                              double fill, bool exact, const char *what)
{
    int B = q->shape[0], T = q->shape[1], H = q->shape[2], D = q->shape[3], Dv = v->shape[3];
    ag_store_zero_grad(s);
    ag_graph *g = ag_graph_new();
    double scale = 1 / sqrt((double)D);
    ag_tensor *mask = mask_of ? mask_of(g) : NULL;
    ag_tensor *p = ag__masked_softmax(g, ag__matmul_heads(g, q, k, 1, AG__MM_A | AG__MM_B), scale, mask, fill);
    ag_tensor *z = ag__matmul_heads(g, p, v, 0, AG__MM_B | AG__MM_Y);
    cr_assert_eq(ag_backward(g, weigh(g, z, 7)), AG_OK, "%s", ag_graph_error(g));
    double *want = keep(z->data, z->size);
    size_t nz = z->size;
    grads kg = keep_grads(s);
    ag_store_zero_grad(s);
    ag_graph_reset(g);
    mask = mask_of ? mask_of(g) : NULL;
    ag_tensor *y = ag__attention_heads(g, q, k, v, scale, mask, fill);
    cr_assert_eq(ag_backward(g, weigh(g, y, 7)), AG_OK, "%s", ag_graph_error(g));
    cr_assert(y->ndim == 4 && y->shape[0] == B && y->shape[1] == T && y->shape[2] == H && y->shape[3] == Dv, "%s",
              what);
    cr_assert_eq(y->size, nz);
    /* The fast kernels make both in the same order, to the bit; the
     * references (AG_KERNELS=reference) take orders of their own, so there
     * the stated tolerance holds instead. */
    exact = exact && ag_get_kernels() == AG_KERNELS_FAST;
    expect_close(y->data, want, nz, exact ? 0 : TOL(1e-12, 1e-6), exact ? 0 : TOL(1e-12, 1e-6), what);
    expect_grads(s, &kg, exact ? 0 : TOL(1e-12, 1e-5), what);
    free(want);
    ag_graph_free(g);
}

static void attention_case(int B, int T, int S, int H, int D, int Dv, ag_tensor *(*mask_of)(ag_graph *),
                           double fill, bool exact, const char *what)
{
    ag_store *s = ag_store_new();
    ag_tensor *q = param(s, "q", AG_SHAPE(B, T, H, D), 21), *k = param(s, "k", AG_SHAPE(B, S, H, D), 22);
    ag_tensor *v = param(s, "v", AG_SHAPE(B, S, H, Dv), 23);
    attention_compare(s, q, k, v, mask_of, fill, exact, what);
    ag_store_free(s);
}

static ag_tensor *causal24(ag_graph *g) { return ag_causal_mask(g, 24, 24); }
static ag_tensor *causal32(ag_graph *g) { return ag_causal_mask(g, 32, 32); }
static ag_tensor *causal100(ag_graph *g) { return ag_causal_mask(g, 100, 100); }
static ag_tensor *padding_5(ag_graph *g)
{
    /* [B, 1, 1, S] = [2, 1, 1, 5]: sentence 1 masks every key */
    return ag_tensor_from(g, AG_SHAPE(2, 1, 1, 5), (ag_real[]){1, 1, 1, 0, 1, 0, 0, 0, 0, 0});
}

/* [B, 1, 1, S] = [3, 1, 1, 16]: sentences of 16, 5 and no keys */
static ag_tensor *padding_16(ag_graph *g)
{
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(3, 1, 1, 16));
    for (int s = 0; s < 16; s++) m->data[s] = 1, m->data[16 + s] = s < 5;
    return m;
}

/* Query t of 20 sees keys s <= t + 17 of 40 (a cached decoding step's
 * mask): blocks of queries see different numbers of keys. */
static ag_tensor *shifted(ag_graph *g)
{
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(20, 40));
    for (int t = 0; t < 20; t++)
        for (int s = 0; s <= t + 17; s++) m->data[t * 40 + s] = 1;
    return m;
}

/* Query t of 40 sees keys s <= t - 18 of 24: queries 0..17 see none (their
 * rows of P are 0), and no query before 18 sees a key. */
static ag_tensor *late(ag_graph *g)
{
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(40, 24));
    for (int t = 18; t < 40; t++)
        for (int s = 0; s <= t - 18 && s < 24; s++) m->data[t * 24 + s] = 1;
    return m;
}

/* Masks of scattered 0s, 1s and NaNs (a NaN is not 0: kept), in every
 * row a different pattern, and rows 3 and 17 all 0: one [T, S] = [24, 32]
 * for every head (the toy-head kernel reads it as bits made once), and
 * one [B, H, T, S] = [2, 3, 24, 32] that differs per head. */
static ag_tensor *scattered_mask(ag_graph *g, int ndim, const int *shape)
{
    ag_tensor *m = ag_tensor_new(g, ndim, shape);
    ag_rng r;
    ag_rng_seed(&r, 31);
    for (size_t i = 0; i < m->size; i++) {
        uint64_t x = ag_rng_next(&r) % 16;
        size_t t = i / 32 % 24;
        m->data[i] = t == 3 || t == 17 ? 0 : x < 7 ? 0 : x == 7 ? NAN : 1;
    }
    return m;
}
static ag_tensor *scattered(ag_graph *g) { return scattered_mask(g, AG_SHAPE(24, 32)); }
static ag_tensor *scattered_per_head(ag_graph *g) { return scattered_mask(g, AG_SHAPE(2, 3, 24, 32)); }

Test(fusion, attention_equals_products_per_head_and_masked_softmax)
{
    attention_case(2, 24, 32, 3, 16, 16, scattered, -INFINITY, true, "scattered mask, one for all heads");
    attention_case(2, 24, 32, 3, 16, 16, scattered, -1e9, true, "scattered mask, one for all heads, fill -1e9");
    attention_case(2, 24, 32, 3, 16, 16, scattered_per_head, -INFINITY, true, "scattered mask, per head");
    attention_case(2, 24, 32, 3, 16, 16, scattered_per_head, -1e9, true, "scattered mask, per head, fill -1e9");
    attention_case(32, 32, 32, 4, 16, 16, causal32, -INFINITY, true, "the GPT's heads, causal");
    attention_case(32, 32, 32, 4, 16, 16, causal32, -1e9, true, "the GPT's heads, causal, fill -1e9");
    attention_case(2, 24, 24, 2, 16, 16, causal24, -INFINITY, true, "causal, 24 keys");
    attention_case(3, 20, 16, 2, 16, 16, padding_16, -INFINITY, true, "padding of 16 keys, a sentence all -inf");
    attention_case(3, 20, 16, 2, 16, 16, padding_16, -1e9, true, "padding of 16 keys, fill -1e9");
    attention_case(2, 20, 32, 3, 12, 7, NULL, 0, true, "no mask, D 12, Dv 7, 20 queries");
    attention_case(1, 100, 100, 2, 8, 8, causal100, -INFINITY, false, "causal, blocks of 64 rows");
    attention_case(2, 20, 40, 3, 16, 8, shifted, -INFINITY, true, "keys up to t + 17");
    attention_case(2, 40, 24, 2, 8, 8, late, -INFINITY, true, "queries that see no key");
    attention_case(2, 40, 24, 2, 8, 8, late, -1e9, true, "queries that see no key, fill -1e9");
    attention_case(2, 3, 5, 2, 4, 3, padding_5, -INFINITY, true, "padding, a sentence all -inf");
    attention_case(2, 3, 5, 2, 4, 3, padding_5, -1e9, true, "padding, fill -1e9 (a uniform row)");
    attention_case(2, 33, 40, 2, 24, 24, NULL, 0, true, "no mask, the packed kernel");
    attention_case(1, 1, 1, 1, 1, 1, NULL, 0, true, "size 1");
}

/* One tensor as q, k and v (self-attention on x itself): its gradient
 * gathers three contributions, added in the same order either way. */
Test(fusion, attention_of_one_tensor_thrice_equals_the_composition)
{
    ag_store *s = ag_store_new();
    ag_tensor *x = param(s, "x", AG_SHAPE(4, 32, 4, 16), 24);
    attention_compare(s, x, x, x, causal32, -INFINITY, true, "x as q, k and v, causal");
    attention_compare(s, x, x, x, NULL, 0, true, "x as q, k and v, no mask");
    ag_store_free(s);
}

/* A NaN in query 5 of head 0 (causal, the GPT's sizes): that query's
 * output is NaN, and so the gradients of the keys it sees (P's row is
 * NaN there); every other output is a number, and with the fast kernels
 * keys 16 and up, beyond the NaN row's block of queries, keep finite
 * gradients. */
Test(fusion, attention_keeps_a_nan_query_to_its_row)
{
    enum { B = 2, T = 32, H = 2, D = 16 };
    ag_store *s = ag_store_new();
    ag_tensor *q = param(s, "q", AG_SHAPE(B, T, H, D), 31), *k = param(s, "k", AG_SHAPE(B, T, H, D), 32);
    ag_tensor *v = param(s, "v", AG_SHAPE(B, T, H, D), 33);
    q->data[(5 * H + 0) * D + 3] = NAN;
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag__attention_heads(g, q, k, v, 0.25, ag_causal_mask(g, T, T), -INFINITY);
    cr_assert_eq(ag_backward(g, weigh(g, y, 7)), AG_OK, "%s", ag_graph_error(g));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    size_t i = (((size_t)b * T + t) * H + h) * D + d;
                    bool nan_row = b == 0 && t == 5 && h == 0;
                    cr_assert(nan_row ? isnan(y->data[i]) : isfinite(y->data[i]), "y[%d, %d, %d, %d] = %g", b, t,
                              h, d, y->data[i]);
                    if (b == 0 && h == 0 && t <= 5) /* keys query 5 sees */
                        cr_assert(isnan(v->grad[i]), "dv[0, %d, 0, %d] = %g", t, d, v->grad[i]);
                    /* keys past the row's block: the fast kernel's blocks keep
                     * the NaN from them; the reference (AG_KERNELS=reference),
                     * as the three nodes, spreads it over the row's S keys */
                    bool past_block = t >= 16 && ag_get_kernels() == AG_KERNELS_FAST;
                    if (past_block || b > 0 || h > 0)
                        cr_assert(isfinite(v->grad[i]) && isfinite(k->grad[i]), "dv, dk [%d, %d, %d, %d]", b, t, h, d);
                }
    ag_graph_free(g);
    ag_store_free(s);
}

/* The op decides by the rows' length: up to AG__FLASH_KEYS keys it keeps
 * P [B, H, T, S] (and, with the kernels and no mask, equals the three
 * nodes to the bit); past it, with the kernels, it keeps a max and a sum
 * per row and equals them within rounding.  The reference mode keeps P at
 * any length.  Returns the bytes the node took of the arena, at one
 * thread: besides P or the rows' two values, the output and a tile's
 * scratch. */
static size_t attention_saves(int T, int S, ag_tensor *(*mask_of)(ag_graph *), double fill)
{
    enum { B = 1, H = 2, D = 8 };
    ag_store *s = ag_store_new();
    ag_tensor *q = param(s, "q", AG_SHAPE(B, T, H, D), 41), *k = param(s, "k", AG_SHAPE(B, S, H, D), 42);
    ag_tensor *v = param(s, "v", AG_SHAPE(B, S, H, D), 43);
    bool below = S <= AG__FLASH_KEYS;
    attention_compare(s, q, k, v, mask_of, fill, below && !mask_of, below ? "at the seam" : "past it");
    int threads = ag_get_threads();
    ag_set_threads(1);
    ag_graph *g = ag_graph_new();
    ag_tensor *mask = mask_of ? mask_of(g) : NULL;
    size_t before = ag_graph_arena_used(g);
    cr_assert_not_null(ag__attention_heads(g, q, k, v, 0.3, mask, fill), "%s", ag_graph_error(g));
    size_t used = ag_graph_arena_used(g) - before;
    ag_set_threads(threads);
    ag_graph_free(g);
    ag_store_free(s);
    return used;
}
static ag_tensor *causal_seam(ag_graph *g) { return ag_causal_mask(g, AG__FLASH_KEYS, AG__FLASH_KEYS); }
static ag_tensor *causal_past(ag_graph *g) { return ag_causal_mask(g, AG__FLASH_KEYS + 1, AG__FLASH_KEYS + 1); }
static ag_tensor *causal_600(ag_graph *g) { return ag_causal_mask(g, 600, 600); }

Test(fusion, attention_keeps_p_up_to_the_seam_and_not_past_it)
{
    enum { K = AG__FLASH_KEYS, B = 1, H = 2 };
    bool fast = ag_get_kernels() == AG_KERNELS_FAST;
    size_t p_at = B * H * (size_t)K * K * sizeof(ag_real);
    size_t p_past = B * H * (size_t)(K + 1) * (K + 1) * sizeof(ag_real);
    size_t at = attention_saves(K, K, causal_seam, -INFINITY);
    size_t past = attention_saves(K + 1, K + 1, causal_past, -INFINITY);
    cr_assert_geq(at, p_at, "causal, S = %d: %zu bytes, P alone is %zu", K, at, p_at);
    if (fast) cr_assert_lt(past, p_past / 2, "causal, S = %d: %zu bytes, P would be %zu", K + 1, past, p_past);
    else cr_assert_geq(past, p_past, "reference, causal, S = %d: %zu bytes", K + 1, past);
    at = attention_saves(40, K, NULL, 0); /* no mask, T < S: P's bits; and past the seam within rounding */
    cr_assert_geq(at, p_at * 40 / K, "no mask, S = %d: %zu bytes", K, at);
    attention_saves(40, K + 1, NULL, 0);
    size_t p_600 = B * H * (size_t)600 * 600 * sizeof(ag_real);
    size_t long_rows = attention_saves(600, 600, causal_600, -INFINITY);
    if (fast) cr_assert_lt(long_rows, p_600 / 8, "causal, S = 600: %zu bytes, P would be %zu", long_rows, p_600);
}

/* A causal mask's tiles above the diagonal are never computed, forward or
 * backward: NaNs where only such a tile would read them stay out of the
 * results, which any product over the tile would spread (0 * NaN is
 * NaN).  late: NaN keys and values from 64 on, which the first block of
 * 64 queries may not see: its outputs and dQ stay finite.  Otherwise: NaN
 * queries and output gradients in that block: the later keys' dK and dV
 * stay finite. */
static void causal_skips(int T, bool late)
{
    enum { B = 1, H = 2, D = 8, QB = 64 };
    ag_store *s = ag_store_new();
    ag_tensor *q = param(s, "q", AG_SHAPE(B, T, H, D), 51), *k = param(s, "k", AG_SHAPE(B, T, H, D), 52);
    ag_tensor *v = param(s, "v", AG_SHAPE(B, T, H, D), 53);
    ag_real *dy = malloc((size_t)T * H * D * sizeof *dy);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H * D; i++) {
            size_t at = (size_t)t * H * D + (size_t)i;
            dy[at] = 1;
            if (late && t >= QB) k->data[at] = v->data[at] = NAN;
            if (!late && t < QB) q->data[at] = dy[at] = NAN;
        }
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag__attention_heads(g, q, k, v, 0.3, ag_causal_mask(g, T, T), -INFINITY);
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    cr_assert_eq(ag_backward_from(g, y, dy), AG_OK, "%s", ag_graph_error(g));
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H * D; i++) {
            size_t at = (size_t)t * H * D + (size_t)i;
            if (late && t < QB)
                cr_assert(isfinite(y->data[at]) && isfinite(q->grad[at]), "T %d: y, dq [%d, %d] = %g, %g", T, t, i,
                          y->data[at], q->grad[at]);
            if (!late && t >= QB)
                cr_assert(isfinite(k->grad[at]) && isfinite(v->grad[at]), "T %d: dk, dv [%d, %d] = %g, %g", T, t, i,
                          k->grad[at], v->grad[at]);
        }
    free(dy);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(fusion, attention_never_computes_the_tiles_above_a_causal_diagonal)
{
    if (ag_get_kernels() != AG_KERNELS_FAST) return; /* the reference computes every score, as its math says */
    for (int late = 0; late < 2; late++) {
        causal_skips(AG__FLASH_KEYS + 44, late); /* the flash kernel */
        causal_skips(200, late);                 /* P kept */
    }
}

Test(fusion, attention_reports_bad_shapes)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(2, 3, 4, 8)), *k = ag_tensor_new(g, AG_SHAPE(2, 5, 4, 8));
    cr_assert_null(ag__attention_heads(g, q, k, ag_tensor_new(g, AG_SHAPE(2, 6, 4, 8)), 1, NULL, 0));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "attention: q [2, 3, 4, 8], k [2, 5, 4, 8], v [2, 6, 4, 8] do not fit "
                                        "[B, T, H, D], [B, S, Hkv, D], [B, S, Hkv, Dv]");
    ag_graph_reset(g);
    q = ag_tensor_new(g, AG_SHAPE(2, 3, 4, 8)), k = ag_tensor_new(g, AG_SHAPE(2, 5, 4, 8));
    cr_assert_null(ag__attention_heads(g, q, k, k, 1, ag_tensor_new(g, AG_SHAPE(4, 5)), 0));
    cr_assert_str_eq(ag_graph_error(g),
                     "attention: mask [4, 5] does not broadcast to the scores' [B, H, T, S] = [2, 4, 3, 5]");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(fusion, linear_passes_gradcheck) { expect_op_gradcheck("linear"); }
Test(fusion, linear_add_passes_gradcheck) { expect_op_gradcheck("linear_add"); }
Test(fusion, masked_softmax_passes_gradcheck) { expect_op_gradcheck("masked_softmax"); }
Test(fusion, attention_passes_gradcheck) { expect_op_gradcheck("attention"); }
#endif
